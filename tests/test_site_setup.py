"""docs/site-setup.md, step by step on the site template (configs/example-cluster.py, partition hdr)."""

import json
import re

import yaml

from conftest import ROOT, SHORT_IMB, broken_nightly_checkout, output
from ibrepro import paths

DOC = ROOT / 'docs' / 'site-setup.md'
SITE = ['--system', 'example-cluster:hdr']
EXAMPLE = {'config': 'configs/example-cluster.py'}


def test_what_the_guide_names_exists():
    text = DOC.read_text()
    for path in sorted(set(re.findall(r'`((?:tests|configs|docs|ci|scripts)/[\w./-]+)`', text))):
        assert (ROOT / path).exists() or '<' in path, path


def test_the_nightly_subset_is_current_and_is_what_nightly_mode_selects(reframe):
    import runpy
    generator = runpy.run_path(str(ROOT / 'scripts' / 'nightly_subset.py'))
    committed = yaml.safe_load((paths.REFERENCE_DATA / 'nightly.yaml').read_text())
    assert generator['build']() == committed                     # scripts/nightly_subset.py was run
    assert committed['uncovered_figures'] == [] and committed['estimate']['two_nodes']['minutes'] <= 30

    # the whole system: the template holds the site's partition only, so every case runs there
    proc = reframe('-lC', '--mode', 'nightly', '--system', 'example-cluster', **EXAMPLE)
    assert proc.returncode == 0, output(proc)
    cases = re.findall(r'^- .+ @(\S+)$', proc.stdout, re.M)
    assert cases and {c.split('+')[0] for c in cases} == {'example-cluster:hdr'}
    listed = re.findall(r'^- (.+?) /[0-9a-f]{8} @example-cluster:hdr\+(\w+)$', proc.stdout, re.M)
    assert len(listed) == len(cases)
    system = [n for n, _ in listed if n in ('SoftwareVersions', 'RdmaTopology')]
    assert len(listed) - len(system) == committed['estimate']['all']['cases']
    assert {n for n, _ in listed} - set(system) == {c['case'] for c in committed['cases']}


def test_nothing_is_listed_only_to_be_skipped_and_the_rest_is_explained(reframe):
    proc = reframe('--dry-run', '--nocolor', '-t', 'nightly', *SITE, **EXAMPLE)
    assert proc.returncode == 0, output(proc)
    assert ' 0 skipped' in proc.stdout and 'SKIP' not in proc.stdout
    proc = reframe.ibrepro('catalog', '-C', 'configs/example-cluster.py', '--system', 'example-cluster:hdr',
                           '--not-run')
    assert proc.returncode == 0, output(proc)
    # two single-port adapters per node, no GPU: the dual-port HCA and GPU families have no case, and it says why
    not_run = re.findall(r'^  (\w+) +\d+  (.+)$', proc.stdout, re.M)
    assert [family for family, _ in not_run] == ['GpuDirectRdma', 'GpuHostDevice', 'NcclBusBandwidth',
                                                 'OSUDevicePointToPoint', 'PerftestDualPort'], proc.stdout
    assert 'no GPUDirect RDMA; no environment built for GPU memory' in not_run[0][1] == not_run[3][1]
    assert 'no GPU;' in not_run[1][1] and 'needs a dual-port HCA' in not_run[4][1]
    assert 'no GPU; no nccl-tests; no environment built for GPU memory' in not_run[2][1]


def test_a_verbs_job_script_reads_as_the_guide_says(reframe):
    proc = reframe('--dry-run', '-n', 'PerftestBinding%case=bidir-2proc', *SITE, **EXAMPLE)
    assert proc.returncode == 0, output(proc)
    (script,) = reframe.home.rglob('PerftestBinding_*/rfm_job.sh')
    text = script.read_text()
    assert '#SBATCH --exclusive' in text and '#SBATCH --nodes=2' in text and '#SBATCH --ntasks-per-node=1' in text
    # the step gets the node's CPUs (no -c N: it implies --exact, a cpuset the runner could only choose within)
    assert text.splitlines()[-1] == ('srun --kill-on-bad-exit=1 --whole --cpu-bind=none python3 '
                                     'ibrepro_pair.py flows.json')
    assert '--cpus-per-task' not in text
    assert (script.parent / 'ibrepro_pair.py').read_text() == (ROOT / 'src' / 'ibrepro' / 'pair.py').read_text()


def test_the_two_port_case_with_two_processes_asks_a_cpu_for_each(reframe):
    """VerbsTwoPort with 2 processes: each side forks two busy pollers, each to get its own CPU near the HCA."""
    proc = reframe('--dry-run', '-n', 'VerbsTwoPort%case=bind-bi-2proc', *SITE, **EXAMPLE)
    assert proc.returncode == 0, output(proc)
    (spec,) = reframe.home.rglob('VerbsTwoPort_*/flows.json')
    (flow,) = json.loads(spec.read_text())['flows']
    assert flow['server']['processes'] == flow['client']['processes'] == 2
    assert '-P 2' in ' '.join(flow['client']['argv'])
    assert json.loads(spec.read_text())['cpu_sharing'] is False     # a real partition: no CPU is shared


def test_a_broken_nightly_subset_fails_the_night_and_the_run(reframe, tmp_path):
    """A typo that breaks reference-data/nightly.yaml once cut `--mode nightly` from 41 checks to 2 without a word."""
    root = broken_nightly_checkout(tmp_path)
    env = {'IBREPRO_ROOT': str(root), 'IBREPRO_DEPS': str(paths.DEPS_DIR)}
    proc = reframe('-lC', '--mode', 'nightly', *SITE, env=env, **EXAMPLE)
    assert proc.returncode != 0 and 'the nightly subset cannot be read: nightly.yaml:14: malformed YAML' \
        in proc.stdout + proc.stderr, output(proc)
    proc = reframe('-r', '-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', *SHORT_IMB, env=env)
    assert proc.returncode == 1 and 'the nightly subset cannot be read' in proc.stdout, output(proc)

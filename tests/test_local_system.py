"""The embedded default system end to end: real ReFrame sessions running the IMB families on this machine."""

import collections
import json
import math
import shutil
import statistics
import subprocess

import pytest
import yaml

from conftest import ROOT, SHORT_IMB, needs_impi, output
from ibrepro import results, rfmconfig, stats
from ibrepro.rfm.imb import expected_sizes

PINGPONG = ['-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2']
ALLREDUCE = ['-n', 'IMBCollective%benchmark=Allreduce%layout=1x2']


def stored_values(db):
    return [pv for report in results.stored_sessions(db) for pv in results.perf_values(report)]


def test_every_check_file_loads_and_only_what_runs_here_is_listed(reframe):
    proc = reframe('-l')        # --warn-as-error: a check file that does not load fails this
    assert proc.returncode == 0, output(proc)
    for check in ('IMBPointToPoint %benchmark=PingPong %layout=1x2', 'IMBCollective %benchmark=Allreduce %layout=1x2',
                  'HostOverhead %layout=1x2', 'RdmaTopology', 'SoftwareVersions'):
        assert check in proc.stdout
    # hard requirements this one-node machine lacks select nothing (nodes, an RDMA port): no case only to skip
    for check in ('IMBPointToPoint %benchmark=Biband %layout=2x1', 'IMBCollective %benchmark=Alltoall %layout=4x1'):
        assert check not in proc.stdout
    rdma = {'ib', 'roce'} & set(rfmconfig.local_partition()[0])
    assert ('PerftestLatency %operation=send' in proc.stdout) == bool(rdma and shutil.which('ib_write_lat'))


def test_make_run_says_what_did_not_run_here_and_why(reframe):
    proc = reframe.ibrepro('catalog', '--not-run')
    assert proc.returncode == 0, output(proc)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith('Not run on local, and why')
    row = next(line for line in lines if line.split()[:1] == ['IMBPointToPoint'])
    assert row.split()[1] == '5' and 'needs 2 nodes (has 1)' in row       # the papers' 2x1 layouts
    step = row.split()[-1].strip('[]')
    assert f'  [{step}] a Slurm partition with that many nodes (docs/site-setup.md)' in lines
    if not shutil.which('osu_latency'):
        osu = next(line for line in lines if line.split()[:1] == ['OSUIntraNode'])
        assert 'no OSU Micro-Benchmarks' in osu
        assert any('IBREPRO_PREFIXES=<your OSU install>' in line for line in lines)


def test_local_system_describes_this_machine(reframe):
    proc = reframe('--show-config=systems/0')
    assert proc.returncode == 0, output(proc)
    system = json.loads(proc.stdout[proc.stdout.index('{'):proc.stdout.rindex('}') + 1])
    assert system['name'] == 'local' and system['hostnames'] == ['.*']
    part, = system['partitions']
    assert {'mpi', 'shm'} <= set(part['features'])
    assert 'ib' not in part['features']       # no RDMA device here
    # the make setup wheels; `system` only where PATH has an MPI launcher or a benchmark
    has_system = rfmconfig.system_environment() is not None
    assert part['environs'] == ['impi', 'mpich'] + (['system'] if has_system else [])


def test_selection_by_paper_figure(reframe):
    """Tags name the papers' figures; on the papers' testbeds every family of a figure is there."""
    proc = reframe('-l', '-t', '^s002-fig11$', '--system', 'testbeds', config='configs/testbeds.py')
    assert proc.returncode == 0, output(proc)
    assert 'IMBCollective %benchmark=Alltoall %layout=8x1' in proc.stdout
    assert 'OSUCollective %case=osu_alltoall-8x1' in proc.stdout
    assert 'BenchIMB %case=Alltoall-8x1' in proc.stdout      # IMB's method in our own program (ibrepro_imb)
    assert 'Found 3 check(s)' in proc.stdout


@needs_impi
@pytest.mark.integration
def test_two_runs_store_two_sessions_with_one_value_per_size(reframe):
    for _ in range(2):
        proc = reframe('-r', *PINGPONG, *ALLREDUCE, *SHORT_IMB)
        assert proc.returncode == 0, output(proc)
        assert 'Current session stored with UUID' in proc.stdout

    reports = results.stored_sessions(reframe.db)
    assert len(reports) == 2
    assert len(list(reframe.home.glob('run-reports/run-report-*.json'))) == 2

    values = list(results.perf_values(reports[-1]))
    pingpong = [v for v in values if v.params == (('benchmark', 'PingPong'), ('layout', '1x2'))]
    allreduce = [v for v in values if v.params == (('benchmark', 'Allreduce'), ('layout', '1x2'))]
    sizes = expected_sizes('0:6', 'PingPong')
    assert sorted(v.variable for v in pingpong) == sorted(
        [f'lat_{s}' for s in sizes] + [f'bw_{s}' for s in sizes if s] + ['bw_peak'])
    assert sorted(v.variable for v in allreduce) == sorted(
        f'lat_{s}' for s in expected_sizes('0:6', 'Allreduce'))
    assert all(v.environ == 'impi' and v.system == 'local' for v in pingpong)
    # IMB prints 2 decimals: a 1-byte bandwidth can round to 0.00 on a busy machine; latency cannot
    assert all(v.value > 0 if v.variable.startswith('lat') else v.value >= 0 for v in pingpong)
    assert {v.unit for v in pingpong} == {'us', 'MB/s'}

    where = reframe.ibrepro('where')
    assert 'stored sessions:    2' in where.stdout, output(where)


@needs_impi
@pytest.mark.integration
def test_references_from_own_runs_judge_later_runs(reframe, tmp_path):
    """`ibrepro baseline` turns this machine's sessions into $ref references that ReFrame then applies."""
    for _ in range(3):
        assert reframe('-r', *PINGPONG, *SHORT_IMB).returncode == 0

    refdir = tmp_path / 'refs'
    proc = reframe.ibrepro('baseline', '--output', str(refdir / 'references.yaml'))
    assert proc.returncode == 0, output(proc)
    refs = yaml.safe_load((refdir / 'references.yaml').read_text())
    assert refs['IMBPointToPoint']['$index'] == ['$partition', '$environ', 'benchmark', 'layout']
    pingpong = refs['IMBPointToPoint']['local:default']['impi']['PingPong']['1x2']

    # value = median of the 3 sessions, tolerance = max(floor 0.1, 3 x robust CV), one-sided by direction
    samples = collections.defaultdict(list)
    for pv in stored_values(reframe.db):
        samples[pv.variable].append(pv.value)
    # only the variables the case judges (its reference_variables) get one; the rest of the curve stays stored
    stored = results.stored_sessions(reframe.db)[-1]
    chosen = next(c['reference_variables'] for c in results.testcases(stored)
                  if c['name'].startswith('IMBPointToPoint %benchmark=PingPong'))
    assert 'lat_1' in chosen and 'bw_peak' in chosen and set(pingpong) <= set(chosen)
    assert set(samples) - set(chosen) and not (set(samples) - set(chosen)) & set(pingpong)
    for var in pingpong:
        value, lower, upper, unit = pingpong[var]
        tol = round(min(0.9, max(0.1, 3 * stats.robust_cv(samples[var]))), 3)
        assert value == pytest.approx(statistics.median(samples[var]), rel=1e-3)
        if var.startswith('lat'):
            assert (lower, upper, unit) == (None, tol, 'us')
        else:
            assert (lower, upper, unit) == (-min(tol, 0.99), None, 'MB/s')

    # ReFrame applies exactly these references: every stored value carries its reference and bounds,
    # and its verdict is pass exactly when it lies inside them.
    proc = reframe('-r', *PINGPONG, *SHORT_IMB, env={'RFM_REFERENCE_PREFIX': str(refdir)})
    assert proc.returncode in (0, 1), output(proc)
    assert '(r:' in proc.stdout
    judged = [pv for pv in results.perf_values(results.stored_sessions(reframe.db)[-1])
              if pv.variable in pingpong]
    assert len(judged) == len(pingpong)
    for pv in judged:
        value, lower, upper, _ = pingpong[pv.variable]
        assert (pv.ref, pv.lower, pv.upper) == (value, lower, upper)
        inside = value * (1 + (lower or -math.inf)) <= pv.value <= value * (1 + (upper or math.inf))
        assert pv.result == ('pass' if inside else 'fail'), pv

    # ... and against references it cannot meet (latency 1000x lower, bandwidth 1000x higher) it fails,
    # naming the variables, while every earlier session stays stored.
    for var, entry in pingpong.items():
        entry[0] = entry[0] / 1000 if var.startswith('lat') else entry[0] * 1000
    (refdir / 'references.yaml').write_text(yaml.safe_dump(refs))
    proc = reframe('-r', *PINGPONG, *SHORT_IMB, env={'RFM_REFERENCE_PREFIX': str(refdir)})
    assert proc.returncode == 1, output(proc)
    assert 'performance error' in proc.stdout and 'failed to meet reference(s)' in proc.stdout
    assert 'lat_1=' in proc.stdout and 'bw_peak=' in proc.stdout
    assert len(results.stored_sessions(reframe.db)) == 5


@needs_impi
@pytest.mark.integration
def test_a_program_the_environment_lacks_is_skipped_with_the_reason(reframe):
    proc = reframe('-r', *SHORT_IMB, *PINGPONG, '-S', 'imb_binary=IMB-MPI1-missing')
    assert proc.returncode == 0, output(proc)
    assert "'IMB-MPI1-missing' is not installed in environment 'impi' (its imb programs: IMB-MPI1" in proc.stdout


@needs_impi
@pytest.mark.integration
@pytest.mark.parametrize('args, reason', [
    (['-n', 'IMBPointToPoint', '-P', 'benchmark=PingPongX', '-P', 'layout=1x2'],
     "invalid-benchmark: IMB: invalid benchmark name(s) 'pingpongx'"),
    (['-n', 'IMBPointToPoint', '-P', 'benchmark=PingPong', '-P', 'layout=1x1'],
     'invalid-ranks: IMB: benchmark invalid: PingPong with 1 processes'),
    ([*PINGPONG, '-S', 'time_per_sample=0.000001', '-S', 'message_sizes=1:64K'], 'timeout: IMB PingPong: time-out at'),
])
def test_failures_are_diagnosed(reframe, args, reason):
    proc = reframe('-r', *SHORT_IMB, *args)
    assert proc.returncode == 1, output(proc)
    assert reason in proc.stdout, output(proc)
    # the failed session is stored too: a failure is a result
    (report,) = results.stored_sessions(reframe.db)
    assert report['session_info']['num_failures'] >= 1


@needs_impi
@pytest.mark.integration
def test_a_session_reframe_could_not_store_fails_the_run(reframe):
    """A corrupted results database (ReFrame itself would only warn and lose the night): `make run`
    (scripts/run-checks.sh) refuses it before anything runs, in one line naming it, exits non-zero, and leaves the
    file as it was."""
    reframe.home.mkdir(parents=True)
    corrupted = b'\x00not a database' * 1000
    reframe.db.write_bytes(corrupted)
    proc = subprocess.run([str(ROOT / 'scripts' / 'run-checks.sh'), 'configs/local.py', *PINGPONG, *SHORT_IMB],
                          cwd=ROOT, env=reframe.env, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0, output(proc)
    assert f'{reframe.db}: cannot read the results database' in proc.stdout, output(proc)
    assert 'ReFrame did not store this session in the results database' in proc.stderr
    assert 'test case(s)' not in proc.stdout and not (reframe.home / 'rfm' / 'stage').exists()    # none ran
    assert reframe.db.read_bytes() == corrupted


@needs_impi
@pytest.mark.integration
@pytest.mark.parametrize('text, reason', [
    ('IMBPointToPoint:\n  $index: [$partition\n', ':3: malformed YAML'),                 # a typo: unclosed list
    ('x: !!python/object/apply:os.system ["true"]\n', "could not determine a constructor for the tag"),
    ('a: &a [1, 2]\nb: *a\n', ':1: YAML anchors and aliases are not accepted (&a)'),
    # what ReFrame itself refuses (it would warn, drop the benchmark and pass): refused by ibrepro first
    ('IMBPointToPoint:\n  <<: {local:default: {lat_1: [1.0, null, 0.1, us]}}\n', ':2: YAML merge keys (<<)'),
    ('IMBPointToPoint:\n  $index: 7\n  local:default: {}\n', 'IMBPointToPoint.$index: $index: 7 is not of type'),
    ('IMBPointToPoint: ' + '[' * 100_000 + ']' * 100_000 + '\n', ':1: nested deeper than 64 levels'),
], ids=['typo', 'tag', 'alias', 'merge-key', 'index-7', 'deep'])
def test_a_references_file_that_cannot_be_read_fails_the_run(reframe, tmp_path, text, reason):
    """ReFrame itself would warn and skip every benchmark: the regression test would switch itself off."""
    (tmp_path / 'references.yaml').write_text(text)
    proc = reframe('-r', *PINGPONG, *SHORT_IMB, env={'RFM_REFERENCE_PREFIX': str(tmp_path)})
    assert proc.returncode == 1, output(proc)
    assert f'references file {tmp_path}/references.yaml' in proc.stdout and reason in proc.stdout, output(proc)


def test_a_references_file_behind_a_symbolic_link_is_not_followed(reframe, tmp_path):
    """A link planted where the references are read (a shared prefix) would judge the night by another file."""
    real = tmp_path / 'elsewhere.yaml'
    real.write_text('IMBPointToPoint:\n  local:default: {lat_1: [1000.0, null, 0.1, us]}\n')
    (tmp_path / 'references.yaml').symlink_to(real)
    proc = reframe('-r', *PINGPONG, *SHORT_IMB, env={'RFM_REFERENCE_PREFIX': str(tmp_path)})
    assert proc.returncode == 1, output(proc)
    assert f'references file {tmp_path}/references.yaml: cannot read: a symbolic link (not followed)' \
        in proc.stdout, output(proc)


def test_one_name_for_one_knob_across_families(reframe):
    """message_sizes / iterations / warmup mean the same in every family; each maps them to its tool."""
    proc = reframe('--describe', '-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-n', 'HostOverhead%layout=1x2',
                   '-S', 'message_sizes=4:4K', '-S', 'iterations=77', '-S', 'HostOverhead.warmup=5')
    assert proc.returncode == 0, output(proc)
    described = {d['display_name']: d for d in json.loads(proc.stdout[proc.stdout.index('['):])}
    for case in described.values():
        assert (case['message_sizes'], case['iterations']) == ('4:4K', 77)
    assert described['HostOverhead %layout=1x2']['warmup'] == 5
    from ibrepro.rfm import expand_sizes
    assert expand_sizes('4:4K') == [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert expand_sizes('0:4') == [0, 1, 2, 4] and expand_sizes('8,64K') == [8, 65536]


@needs_impi
@pytest.mark.integration
def test_the_knobs_reach_the_tools(reframe):
    proc = reframe('-r', '-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-n', 'HostOverhead%layout=1x2',
                   '-S', 'message_sizes=4:64', '-S', 'iterations=20', '-S', 'IMBPointToPoint.time_per_sample=60')
    assert proc.returncode == 0, output(proc)
    (report,) = results.stored_sessions(reframe.db)
    cases = {c['display_name'].split()[0]: c for c in report['runs'][0]['testcases']}
    assert cases['IMBPointToPoint']['executable_opts'][:3] == ['PingPong', '-msglog', '2:6']
    assert '-iter' in cases['IMBPointToPoint']['executable_opts']
    assert cases['HostOverhead']['executable_opts'][:4] == ['-m', '4:64', '-i', '20']
    sizes = {pv.variable for pv in results.perf_values(report) if pv.check == 'HostOverhead'}
    assert {'lat_4', 'lat_64', 'overhead_4', 'overhead_64'} <= sizes and 'lat_128' not in sizes
    # what the MPI really sent over, as UCX said it (MPICH's ch4:ucx; shared memory on one node)
    transports = cases['HostOverhead']['mpi_transports']
    assert transports.get('intra-node') and all(t.endswith('/memory') for t in transports['intra-node']), transports


@pytest.mark.parametrize('args, name', [
    (['-S', 'IMBPointToPoint.imb_binary=IMB-MPI1;touch pwned'], 'imb_binary'),
    (['-S', 'IMBPointToPoint.imb_binary=$(touch pwned)'], 'imb_binary'),
    (['-S', 'HostOverhead.program=ibrepro_overhead\ntouch pwned'], 'program'),
])
def test_names_that_reach_job_scripts_refuse_shell_syntax(reframe, tmp_path, args, name):
    proc = reframe('--dry-run', '--nocolor', '-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2',
                   '-n', 'HostOverhead%layout=1x2', *args)
    assert f'{name}=' in proc.stdout and 'a program or directory name may not contain' in proc.stdout, output(proc)
    assert not list(reframe.home.rglob('pwned')) and not (ROOT / 'pwned').exists()


@pytest.mark.parametrize('args, refused', [
    (['-S', 'inject_library=/tmp/$(touch pwned).so'], "inject_library='/tmp/$(touch pwned).so': a value that reaches "
                                                       "an environment variable may not contain '$'"),
    (['-S', 'inject_library=/tmp/`touch pwned`.so'], "may not contain '`'"),
    (['-S', 'inject_sizes=8:8\ntouch pwned'], "inject_sizes='8:8\\ntouch pwned'"),
    (['-S', 'inject_us=nan'], 'inject_us=nan: must be a finite number from 0 to 1e+06'),
    (['-S', 'inject_us=inf'], 'inject_us=inf: must be a finite number from 0 to 1e+06'),
    (['-S', 'inject_pct=1e308'], 'inject_pct=1e+308: must be a finite number from 0 to 10000'),
    (['-S', 'time_per_sample=nan'], 'time_per_sample=nan: must be a finite number from 1e-09 to 86400'),
])
def test_knobs_are_refused_by_name_before_anything_runs(reframe, args, refused):
    """A knob that reaches an environment variable with shell syntax (ReFrame would run it), or a number that is
    not finite or out of its range (inject_us=inf busy-waits every MPI call until the job is killed)."""
    proc = reframe('--dry-run', '--nocolor', *PINGPONG, '-p', rfmconfig.local_environments()[0]['name'], *args)
    assert proc.returncode == 1 and refused in proc.stdout, output(proc)
    assert not list(reframe.home.rglob('pwned')) and not (ROOT / 'pwned').exists()


def test_options_reach_job_scripts_as_single_words(reframe):
    proc = reframe('--dry-run', '--nocolor', '-n', 'HostOverhead%layout=1x2',
                   '-S', 'HostOverhead.extra_options=-v,$(touch pwned) `id`')
    assert proc.returncode == 0, output(proc)
    (script,) = reframe.home.rglob('HostOverhead_*/rfm_job.sh')
    assert script.read_text().splitlines()[-1].endswith("ibrepro_overhead -v '$(touch pwned) `id`'")


@needs_impi
@pytest.mark.integration
def test_skip_sanity_check_still_measures(reframe):
    """Performance variables come from the performance stage (parsed once, shared with sanity): with
    --skip-sanity-check they are still produced, without a traceback."""
    proc = reframe('-r', '--skip-sanity-check', *PINGPONG, *SHORT_IMB)
    assert proc.returncode == 0 and 'Traceback' not in proc.stdout + proc.stderr, output(proc)
    assert 'P: lat_1: ' in proc.stdout, output(proc)

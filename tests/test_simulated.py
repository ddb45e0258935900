"""The simulated testbeds (ibrepro.simulated): models with provenance, the smpirun launcher, the catalog's limits,
the paper-vs-model table, and, with SimGrid installed, real simulations: the calibration holds, two runs give
identical values. Without SimGrid (Debian libsimgrid-dev) those tests skip saying so; `make simulated-test` and
`.ci/run` install it."""

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ibrepro import catalog, references, results, rfmconfig
from ibrepro.simulated import build, launch, platform, table
from ibrepro.simulated import config as simulated_config

from conftest import ROOT, output

RUN_REPORT = ROOT / 'tests' / 'data' / 'run-reports' / 'run-report.simulated_ci.json'

needs_simgrid = pytest.mark.skipif(bool(build.missing_reason()), reason=build.missing_reason() or 'SimGrid present')
needs_built = pytest.mark.skipif(not (build.BIN_DIR / 'ibrepro_imb').exists(),
                                 reason=f'{build.BIN_DIR}/ibrepro_imb missing: make simulated-build')


# -- models ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize('name', list(platform.TESTBEDS))
def test_every_parameter_says_where_it_comes_from(name):
    params = platform.model(name)
    entries = {e['id']: e for e in references.entries()}
    for prm in params.values():
        assert prm.source in platform.SOURCES, prm
        assert prm.why.strip(), prm
        for entry_id in prm.entries:
            assert entry_id in entries, f'{name} {prm.name}: {entry_id} is not in reference-data'


def _edited_data(tmp_path, old, new):
    """A copy of reference-data/ whose simulated.yaml has ``old`` replaced by ``new``; its path."""
    root = tmp_path / 'reference-data'
    shutil.copytree(references.data_root(), root)
    text = (root / 'simulated.yaml').read_text()
    assert old in text
    (root / 'simulated.yaml').write_text(text.replace(old, new, 1))
    return root


def test_the_models_data_is_valid_and_a_broken_one_is_refused(tmp_path):
    """reference-data/simulated.yaml: every quantity of every testbed names paper entries in its unit; a missing
    shared source, a field the schema lacks or an entry in another unit is an error that names it."""
    assert references.validate([references.data_root() / 'simulated.yaml']) == []
    root = _edited_data(tmp_path, '  overhead: overhead-002', '  overhead: overhead-999')
    with pytest.raises(platform.ModelError, match="pcie-sdr.overhead: no shared source 'overhead-999'"):
        platform.load(root / 'simulated.yaml')
    assert any("no shared source 'overhead-999'" in str(p) for p in references.validate(root=root))
    root = _edited_data(tmp_path / 'b', "    unit: us\n    source: calibrated\n    why: '000 Fig. 12",
                        "    unit: MB/s\n    source: calibrated\n    why: '000 Fig. 12")
    assert any("entry '000-fig12-mpi-lat-pcie' is in us, not MB/s" in str(p) for p in references.validate(root=root))
    root = _edited_data(tmp_path / 'c', '    source: assumed\n', '    source: guessed\n')
    with pytest.raises(platform.ModelError, match='simulated.yaml: shared/overhead-002/source:'):
        platform.load(root / 'simulated.yaml')


@pytest.mark.parametrize('name', list(platform.TESTBEDS))
def test_calibrated_only_on_latency_and_bandwidth_of_the_testbed_itself(name):
    """The brief of the model: fit the small-message latency and the one-way peak bandwidth per testbed, nothing
    else (002 also states its intra-node pair); every other number of the papers is a prediction."""
    t = platform.TESTBEDS[name]
    entries = {e['id']: e for e in references.entries()}
    calibrated = {k: p for k, p in platform.model(name).items() if p.source == platform.CALIBRATED}
    assert set(calibrated) <= {'hca_latency', 'hca_bandwidth', 'intra_node_latency', 'intra_node_bandwidth'}
    assert {'hca_latency', 'hca_bandwidth'} <= set(calibrated) or name == 'connectx-sdr-11' \
        or name == 'connectx-ddr-20'   # 001 states no SDR-1.1 bandwidth, no DDR-2.0 latency: assumed, saying so
    for key, prm in calibrated.items():
        about_this = []
        for entry_id in prm.entries:
            entry = entries[entry_id]
            assert entry['metric'] in ('latency', 'bandwidth', 'latency increase', 'latency reduction'), entry_id
            about_this.append(entry['testbed'] in t.configurations
                              or entry.get('baseline_testbed') in t.configurations
                              or bool(set(table.BASELINES.get(entry_id, ())) & set(t.configurations)))
        # a sum (a value plus a stated increase) needs one term that speaks of this testbed
        assert any(about_this), f'{name} {key} calibrated on {prm.entries}, none of which is about {t.configurations}'


def test_the_latency_budget_adds_up_to_the_papers_number():
    params = platform.model('pcix-sdr')
    target = references.entry('000-fig12-mpi-lat-pcix')['value_si']
    bw = params['hca_bandwidth'].value
    total = params['host_overhead'].value + 2 * params['hca_latency'].value + \
        (platform.SMALL_MESSAGE + platform.ENVELOPE_BYTES) / bw
    assert total == pytest.approx(target, abs=1e-5)
    assert bw == references.entry('000-fig13-mpi-uni-bw-pcix')['value_si']
    assert params['bus_bandwidth'].value == pytest.approx(1066.667, abs=1e-3)   # PCI-X 64 bit/133 MHz, physical


def test_platform_file_is_deterministic_and_routes_every_pair(tmp_path):
    params = platform.model('pcix-sdr')
    text = platform.render(params)
    assert text == platform.render(platform.model('pcix-sdr'))
    root = ET.fromstring(text.split('\n', 2)[2])    # past the XML declaration and DOCTYPE
    zone = root.find('zone')
    hosts = zone.findall('host')
    assert [h.get('id') for h in hosts] == [f'node{i}' for i in range(8)]
    assert all(h.get('core') == '2' for h in hosts)
    assert len(zone.findall('route')) == 64
    buses = [link for link in zone.findall('link') if link.get('id').endswith('-bus')]
    assert all(link.get('sharing_policy') == 'SHARED' for link in buses)   # PCI-X: one half-duplex bus
    pcie = ET.fromstring(platform.render(platform.model('pcie-sdr')).split('\n', 2)[2])
    assert {link.get('sharing_policy') for link in pcie.find('zone').findall('link')
            if link.get('id').endswith('-bus')} == {'SPLITDUPLEX'}

    path = platform.materialize('pcix-sdr', tmp_path)
    assert path.read_text() == text
    assert platform.describe('pcix-sdr')['platform_sha256'][:16] in path.name
    assert platform.materialize('pcix-sdr', tmp_path) == path


def test_options_name_the_mpich_122_collectives_and_switch_computation_off():
    opts = platform.options(platform.model('ib-pcix-8node'))
    for coll, (algorithm, _) in platform.COLLECTIVES.items():
        assert f'--cfg=smpi/{coll}:{algorithm}' in opts
    assert '--cfg=smpi/simulate-computation:no' in opts
    assert '--cfg=smpi/send-is-detached-thresh:2048' in opts       # 002: eager below 2 KB
    assert '--cfg=smpi/lat-factor:0:1;2063:3' in opts              # rendezvous from 2048 B + 16 B envelope


def test_unknown_testbed_and_impossible_bandwidth_are_errors(monkeypatch):
    with pytest.raises(platform.ModelError, match='no simulated testbed'):
        platform.model('nope')
    real = platform._entries()
    broken = {**real, '000-fig13-mpi-uni-bw-pcie': {**real['000-fig13-mpi-uni-bw-pcie'], 'value_si': 2500.0}}
    monkeypatch.setattr(platform, '_entries', lambda: broken)
    with pytest.raises(platform.ModelError, match='exceeds the physical limit'):
        platform.model('pcie-sdr')


# -- the ReFrame system, the launcher ----------------------------------------------------------------------

def test_simulated_system_has_a_labelled_partition_per_testbed():
    system = simulated_config.system()
    assert system['name'] == 'simulated'
    parts = {p['name']: p for p in system['partitions']}
    assert set(parts) == set(platform.TESTBEDS)
    pcie = parts['pcie-sdr']
    assert 'simulated' in pcie['features'] and 'ib' not in pcie['features'] and 'nodes8' in pcie['features']
    assert pcie['launcher'] == 'smpirun' and pcie['access'] == ['--smpi-testbed=pcie-sdr']
    sim = pcie['extras']['simulation']
    assert sim['platform_sha256'] == platform.describe('pcie-sdr')['platform_sha256']
    assert sim['parameters']['hca_bandwidth'] == {'value': 971.0, 'unit': 'MB/s', 'source': 'calibrated',
                                                  'entries': ['000-fig13-mpi-uni-bw-pcie']}
    assert sim['simgrid'] == build.simgrid_version()
    assert 'not a measurement' in pcie['descr']


def test_smpi_environment_says_why_without_simgrid(monkeypatch):
    monkeypatch.setattr(shutil, 'which', lambda name, *a, **k: None)
    env = rfmconfig.smpi_environment()
    assert env['features'] == [] and env['target_systems'] == ['simulated']
    assert 'libsimgrid-dev' in env['extras']['about']


def test_host_file_maps_ranks_in_blocks():
    assert launch.host_lines(8, 2) == ['node0', 'node0', 'node1', 'node1', 'node2', 'node2', 'node3', 'node3']
    assert launch.host_lines(4, 1) == ['node0', 'node1', 'node2', 'node3']


def _launch(*args, cwd, env=None):
    return subprocess.run([sys.executable, '-m', 'ibrepro.simulated.launch', *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def test_launcher_names_a_missing_program_and_runs_other_programs_directly(tmp_path):
    done = _launch('--platform', 'x.xml', '-np', '2', 'no_such_program_here', cwd=tmp_path)
    assert done.returncode == 127 and 'no_such_program_here: command not found' in done.stderr
    done = _launch('--platform', 'x.xml', '-np', '1', sys.executable, '-c', 'print("direct")', cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == 'direct'     # not an SMPI program: no smpirun
    done = _launch('-np', '2', 'true', cwd=tmp_path)
    assert done.returncode == 2 and 'usage' in done.stderr


# -- the catalog: what cannot be modelled is skipped with the reason -------------------------------------

def test_catalog_says_what_smpi_cannot_model():
    assert catalog.cannot_model('BenchIMB %case=PingPong-2x1', [11, 16, 22]) == []
    [reason] = catalog.cannot_model('HostOverhead %layout=2x1', [24])
    assert 'cannot be modelled (#24)' in reason and 'input of the model' in reason
    assert 'two HCA ports' in catalog.cannot_model('MVAPICH2MultiRail %benchmark=osu_bw %ports=2', [12])[0]
    assert 'verbs' in catalog.cannot_model('PerftestLatency %operation=send', [1])[0]
    assert catalog.cannot_model('NPB %case=is.B-4x1', [15]) == []      # partial: communication time only
    assert catalog.validate() == []


# -- the paper-vs-model table (a real session of the CI set, tests/data/run-reports) -----------------------

@pytest.fixture(scope='module')
def ci_table():
    cases = table.cases_of([results.load_report(RUN_REPORT)])
    return {r.entry['id']: r for r in table.rows(cases)}


def test_table_roles(ci_table):
    assert ci_table['000-fig12-mpi-lat-pcie'].role == 'calibrated'
    assert ci_table['000-fig12-mpi-lat-pcie'].model == pytest.approx(4.1, abs=0.01)
    assert ci_table['000-fig13-mpi-uni-bw-pcix'].role == 'calibrated'
    assert ci_table['003-fig12-mpi-lat-pcie'].role == 'calibration quantity'
    assert ci_table['000-fig12-mpi-lat-reduction'].role == 'follows from calibration'
    assert ci_table['000-fig18-is-run-time-improvement'].role == 'not comparable'
    assert 'computation is not simulated' in ci_table['000-fig18-is-run-time-improvement'].note
    assert ci_table['000-fig13-mpi-uni-bw-pcie-2port'].role == 'not comparable'
    assert ci_table['002-fig3-overhead-ib'].role == 'input'


def test_table_predictions_and_their_errors(ci_table):
    bibw = ci_table['000-fig14-mpi-bi-bw-pcie']
    assert bibw.role == 'predicted' and bibw.model == pytest.approx(2 * 971, rel=0.002)   # two full-duplex links
    assert bibw.error == pytest.approx(bibw.model / 1927 - 1)
    pcix = ci_table['000-fig14-mpi-bi-bw-pcix']
    assert pcix.model == pytest.approx(1066.7, rel=0.002)      # the shared PCI-X bus at its theoretical rate
    alltoall = ci_table['000-fig15-alltoall-improvement']
    assert alltoall.role == 'predicted' and 30 < alltoall.model < 60 and 'best over' in alltoall.how
    is_comm = ci_table['000-fig18-is-comm-time-reduction']
    assert is_comm.role == 'predicted' and 30 < is_comm.model < 60
    ft = ci_table['000-fig19-ft-comm-time-reduction']
    assert ft.model is None and ft.how.startswith('not run')    # no NPB FT built with SMPI here


def test_table_summary_and_markdown(ci_table):
    rows = list(ci_table.values())
    s = table.summary(rows)
    errors = sorted(abs(r.error) for r in rows if r.role == 'predicted' and r.error is not None)
    assert s['predictions'] == len(errors) > 5
    assert s['median_abs_error'] == pytest.approx(errors[len(errors) // 2] if len(errors) % 2 else
                                                  (errors[len(errors) // 2 - 1] + errors[len(errors) // 2]) / 2)
    assert abs(s['worst'][0]['error']) == errors[-1]
    text = table.markdown(rows)
    assert '| 000 | Sec. IV.C.1, Fig. 14 |' in text and 'median absolute error' in text


def test_report_has_the_paper_vs_model_section_and_the_label(tmp_path):
    proc = subprocess.run([str(Path(sys.executable).parent / 'ibrepro'), 'report', '--report', str(RUN_REPORT),
                           '--output-dir', str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'IBREPRO_HOME': str(tmp_path / 'home')})
    assert proc.returncode == 0, output(proc)
    html = next(tmp_path.glob('simulated/*/index.html')).read_text()
    assert 'The papers beside the model' in html and 'paper-vs-model-table' in html
    assert 'not measurements' in html
    md = next(tmp_path.glob('simulated/*/summary.md')).read_text()
    assert 'median absolute error' in md and 'simulated: SimGrid SMPI models' in md
    # the headline sets each number beside the model of its own testbed: 000's PCI-X latency beside pcix-sdr only
    assert md.count('| 000-fig12-mpi-lat-pcix |') == 1 and 'myrinet' not in md and 'not an RDMA network' not in md


def test_a_real_system_report_has_no_simulated_section():
    assert table.report_section('local', {}) is None


# -- with SimGrid: the calibration holds, and two runs are identical -------------------------------------

def _imb(tmp_path, name, ranks, per_node, *args):
    params = platform.model(name)
    done = _launch('--platform', str(platform.materialize(name, tmp_path)), '--per-node', str(per_node),
                   '-np', str(ranks), *platform.options(params), str(build.BIN_DIR / 'ibrepro_imb'), *args,
                   cwd=tmp_path)
    assert done.returncode == 0, output(done)
    from ibrepro.parsers import parse_text
    return parse_text(done.stdout, source=f'{name} {args}').tables[0]


@needs_simgrid
@needs_built
@pytest.mark.parametrize('name', list(platform.TESTBEDS))
def test_simulation_reproduces_the_calibration(tmp_path, name):
    params = platform.model(name)
    latency = _imb(tmp_path, name, 2, 1, '-b', 'PingPong', '-m', '1:1', '-i', '20')
    target = sum(references.entry(e)['value_si'] for e in platform.TESTBEDS[name].latency.entries)
    assert latency.rows[0]['lat'] == pytest.approx(target, abs=0.006)     # the output has 2 decimals
    bandwidth = _imb(tmp_path, name, 2, 1, '-b', 'Uniband', '-m', '4M:4M', '-i', '5')
    assert bandwidth.rows[0]['bw'] == pytest.approx(params['hca_bandwidth'].value, rel=0.001)
    assert (tmp_path / launch.HOSTFILE).read_text() == 'node0\nnode1\n'


@needs_simgrid
@needs_built
def test_launcher_refuses_arguments_smpirun_would_change(tmp_path):
    done = _launch('--platform', str(platform.materialize('pcie-sdr', tmp_path)), '-np', '2',
                   str(build.BIN_DIR / 'ibrepro_imb'), '-b', 'Ping Pong', cwd=tmp_path)
    assert done.returncode == 2 and "argument 'Ping Pong'" in done.stderr


@needs_simgrid
@needs_built
def test_two_runs_give_identical_values(reframe):
    """Determinism through ReFrame: the same cases twice, every performance value equal."""
    cases = ['-n', 'BenchIMB%case=(PingPong-2x1|Alltoall-4x2)$', '-n', 'NPB%case=is.B-4x1$',
             '-S', 'BenchIMB.iterations=10', '-S', 'BenchIMB.message_sizes=0:64K', '--system', 'simulated:pcix-sdr']
    values = []
    for _ in range(2):
        done = reframe('-r', *cases, config='configs/simulated.py', timeout=900)
        assert done.returncode == 0, output(done)
        [session] = results.stored_sessions(reframe.db, last=1)
        values.append(sorted((pv.name, pv.variable, pv.value) for pv in results.perf_values(session)))
        cases_run = {c['name'] for c in results.testcases(session) if c['result'] == 'pass'}
        assert len(cases_run) == 3, cases_run
        assert all(c['simulation']['platform_sha256'] == platform.describe('pcix-sdr')['platform_sha256']
                   for c in results.testcases(session))
    assert values[0] == values[1] and len(values[0]) > 30


@needs_simgrid
@needs_built
def test_unmodelled_families_are_skipped_with_the_catalogs_reason(reframe):
    done = reframe('-r', '-n', 'HostOverhead%layout=2x1', '-n', 'MemoryUsage%layout=4x1', '-n', 'NPB%case=ft.A-4x1$',
                   '--system', 'simulated:pcie-sdr', config='configs/simulated.py')
    assert done.returncode == 0, output(done)
    [session] = results.stored_sessions(reframe.db, last=1)
    reasons = {c['name']: c['skip_reason'] for c in results.testcases(session)}
    assert 'cannot be modelled (#24)' in reasons['HostOverhead %layout=2x1']
    assert 'cannot be modelled (#31)' in reasons['MemoryUsage %layout=4x1']
    assert "'ft.A.4' is not installed in environment 'smpi'" in reasons['NPB %case=ft.A-4x1']   # IS only here

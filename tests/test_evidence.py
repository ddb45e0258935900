"""``ibrepro charts`` (ibrepro.evidence) on real stored nights of IMB PingPong as the nightly mode measures them
(its bands, three rounds; the control off, see NIGHT): a frozen baseline of stated nights, then a night 200x slower (the
injector's 200 us per MPI call on sub-microsecond latencies) alarms, and a night whose case failed is excluded,
never clean. The verdict reads what the cases measured, never what was injected."""

import json
import os

import pytest

from conftest import ReFrameRunner, needs_impi, output
from ibrepro import charts, evidence, ledger

# without the control: on a busy or slow-state machine it would (rightly) exclude the test's nights, and what this
# file tests is the verdict's flow (the control's exclusion: test_charts.py, test_repeat.py)
NIGHT = ['-r', '--mode', 'nightly', '-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-p', '^impi$',
         '-S', 'iterations=200', '-S', 'time_per_sample=300', '-S', 'control=false']
CHECKS = 'reframe-checks/mpi/pt2pt_collectives.py'
PHASE1 = 6



@pytest.fixture(scope='module')
def stored(tmp_path_factory):
    runner = ReFrameRunner(tmp_path_factory.mktemp('charts') / 'home')
    for k in range(PHASE1):
        proc = runner(*NIGHT, checks=CHECKS, env={'IBREPRO_NIGHTLY': f'clean{k}'})
        assert proc.returncode == 0, output(proc)
    return runner


@pytest.mark.integration
@pytest.mark.long
@needs_impi
def test_a_baseline_of_stated_nights_then_a_regression_alarms(stored, tmp_path, monkeypatch):
    env = {'IBREPRO_HOME': str(stored.home)}
    early = stored.ibrepro('charts', 'status', env=env)
    assert early.returncode == evidence.EXIT_NOT_YET and 'not judged yet' in early.stdout
    too_few = stored.ibrepro('charts', 'baseline', '--nights', str(PHASE1 + 1), '--series', '20', env=env)
    assert too_few.returncode == evidence.EXIT_NOT_YET, too_few.stderr
    made = stored.ibrepro('charts', 'baseline', '--nights', str(PHASE1), '--series', '20', env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    doc = json.loads((stored.home / 'charts' / 'local.json').read_text())
    assert doc['nights'] == [f'clean{k}' for k in range(PHASE1)]
    assert {c['band'] for c in doc['charts']} == {'latency', 'protocol', 'bandwidth'}
    again = stored.ibrepro('charts', 'baseline', '--nights', str(PHASE1), env=env)
    assert again.returncode == evidence.EXIT_UNJUDGED and '--replace' in again.stderr     # frozen

    # a night whose case could not run measured nothing: could not judge, never clean
    broken = stored(*NIGHT, '-S', 'inject_us=-1', checks=CHECKS, env={'IBREPRO_NIGHTLY': 'broken'})
    assert broken.returncode != 0
    monkeypatch.setenv('IBREPRO_HOME', str(stored.home))
    status, lines = evidence.judge('local', db=stored.db, night='broken')
    assert status == evidence.EXIT_UNJUDGED and any('no chart measured it' in line for line in lines), lines
    assert evidence.judge('local', db=stored.db, night='never')[0] is None

    slow = stored(*NIGHT, '-S', 'inject_us=200', checks=CHECKS, env={'IBREPRO_NIGHTLY': 'slow'})
    assert slow.returncode == 0, output(slow)
    judged = stored.ibrepro('charts', 'status', env=env)
    assert judged.returncode == evidence.EXIT_ALARM, judged.stdout + judged.stderr
    assert 'REGRESSION IMBPointToPoint %benchmark=PingPong %layout=1x2 @default+impi | latency: since slow (one ' \
        'night beyond the limit)' in judged.stdout

    # ibrepro nightly judges the night with the charts too: the history test has too few nights, the charts do not
    nightly = stored.ibrepro('nightly', '--no-run', '--night', 'slow', '--output-dir', str(tmp_path / 'report'),
                             env=env)
    assert nightly.returncode == 1, nightly.stdout + nightly.stderr
    assert 'the charts across nights' in nightly.stdout and 'REGRESSION' in nightly.stdout
    (summary,) = (tmp_path / 'report').rglob('summary.md')
    text = summary.read_text()
    assert 'Charts across nights' in text and 'REGRESSION' in text
    (page,) = (tmp_path / 'report').rglob('index.html')
    assert '<h2 id="charts">Charts across nights</h2>' in page.read_text()
    status, lines = evidence.judge('local', db=stored.db)
    assert status == evidence.EXIT_ALARM and not any('could not judge' in line for line in lines), lines

    # the same nights with the injection fields stripped: the same verdict (it never reads them)
    nights = evidence.stored_nights('local', db=stored.db)
    assert [n['night'] for n in nights] == [*doc['nights'], 'broken', 'slow']
    baseline, designs = charts.Baseline.from_json(doc)
    for night in nights:
        for case in night['cases'].values():
            case['injected'], case['inject_added'] = '', {}
    zs = baseline.z_scores([n for n in nights if n['night'] == 'slow'])
    assert max(z[0] - designs[key].z_big for key, z in zs.items()) >= 0


@pytest.mark.integration
@needs_impi
def test_a_night_whose_case_failed_is_excluded_not_clean(stored):
    nights = evidence.stored_nights('local', db=stored.db)
    baseline = charts.Baseline.fit(nights[:PHASE1])
    failed = json.loads(json.dumps(nights[0]))
    (case,) = failed['cases'].values()
    case['result'], case['reason'] = 'fail', 'MPI could not start'
    values = baseline.series([failed])
    assert all(v[0].value is None and 'did not pass' in v[0].excluded for v in values.values())


def test_accepting_a_change_makes_the_nights_from_it_the_new_phase1(tmp_path):
    """``--accept NIGHT``: a person accepts the change that started at that night; on the ledger of real nights."""
    import subprocess
    import sys

    from conftest import ROOT
    from ibrepro import paths
    path = paths.REFERENCE_DATA / 'ledger' / 'vm-impi-1x2.jsonl'
    ids = [n['night'] for n in ledger.read(path) if n['schedule']['kind'] == 'clean']   # not the paired jobs
    env = {**os.environ, 'IBREPRO_HOME': str(tmp_path)}
    run = [sys.executable, '-m', 'ibrepro', 'charts', 'baseline', '--ledger', str(path), '--nights', '5',
           '--series', '10']
    first = subprocess.run(run, capture_output=True, text=True, env=env, cwd=ROOT)
    assert first.returncode == 0, first.stdout + first.stderr
    assert json.loads((tmp_path / 'charts' / 'local.json').read_text())['nights'] == ids[-5:]
    accepted = subprocess.run([*run, '--accept', ids[2]], capture_output=True, text=True, env=env, cwd=ROOT)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    doc = json.loads((tmp_path / 'charts' / 'local.json').read_text())
    assert doc['nights'] == ids[2:7] and set(doc['mde']) == {f'{c["case"]}|{c["band"]}' for c in doc['charts']}
    unknown = subprocess.run([*run, '--accept', 'no-such-night'], capture_output=True, text=True, env=env, cwd=ROOT)
    assert unknown.returncode == evidence.EXIT_UNJUDGED and 'no such night' in unknown.stderr


def test_a_system_name_that_names_another_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv('IBREPRO_HOME', str(tmp_path))
    for bad in ('../../etc/passwd', '.hidden', 'a b', ''):
        with pytest.raises(ValueError, match='not a system name'):
            evidence.baseline_path(bad)
        status, lines = evidence.judge(bad)
        assert status == evidence.EXIT_UNJUDGED and 'not a system name' in lines[0]


def test_a_baseline_file_that_is_not_one_is_refused():
    good = {'shift': 0.1, 'h': 5.0, 'z_big': 6.0}
    chart = {'case': 'c', 'band': 'b', 'm0': 0, 's0': 0.01, 'design': good}
    empty = {'nights': [], 'levels': {}, 'control': {'center': {}, 'limit': {}}}
    _, designs = charts.Baseline.from_json({'v': 2, **empty, 'charts': [chart]})
    assert designs == {('c', 'b'): charts.Design(**good)}
    # format 1: one design for every chart
    _, designs = charts.Baseline.from_json({'v': 1, **empty, 'design': good, 'charts': [chart]})
    assert designs == {('c', 'b'): charts.Design(**good)}
    for doc in ({'v': 2}, {'v': 3, **empty, 'charts': []}, {'v': 1, **empty, 'charts': [chart]},
                {'v': 2, **empty, 'charts': [chart | {'s0': 0}]},
                {'v': 2, **empty, 'charts': [chart | {'s0': float('inf')}]},      # never an alarm: refused
                {'v': 2, **empty, 'charts': [chart | {'design': good | {'h': float('inf')}}]},
                {'v': 2, **empty, 'charts': [chart | {'design': good | {'z_big': -1}}]},
                {'v': 2, **empty, 'charts': [chart | {'design': good | {'alpha': 1}}]}):
        with pytest.raises(ValueError):
            charts.Baseline.from_json(doc)
    assert ledger.VERSION == 1


# -- a night on other hardware -------------------------------------------------------------------------------------

def _on_its_machine(night, rename=''):
    """A real ledger night whose cases carry the hardware its ``machine`` record says it ran on (the ledger's nights
    predate the control's hardware lines; the machine record is the same /proc/cpuinfo fields)."""
    hardware = {field: str(night['machine'][key]) for field, key in
                (('cpu', 'cpu'), ('cpu_model', 'cpu_model'), ('cache', 'cache'))}
    return {**night, 'night': rename + night['night'],
            'cases': {case: {**rec, 'hardware': hardware} for case, rec in night['cases'].items()}}


def test_a_night_on_other_hardware_is_not_judged_against_the_baseline():
    """Real nights: the second study's Phase I (an Intel Xeon VM), then nights of the third study's (the same VM
    name moved to an AMD EPYC host): those are "could not judge", never a regression or clean, and the way out
    names the first night on the new hardware; back on the baseline's hardware the charts judge again."""
    from ibrepro import paths
    folder = paths.REFERENCE_DATA / 'ledger'
    intel = [n for n in ledger.read(folder / 'vm2-impi-1x2.jsonl') if n['phase'] == 'tuning'
             and ledger.measured_alone(n)]
    amd = [n for n in ledger.read(folder / 'vm3-impi-1x2.jsonl') if ledger.measured_alone(n)]
    assert len({n['machine']['cpu_model'] for n in intel + amd}) == 2       # one machine each
    phase1 = [_on_its_machine(n) for n in intel[:30]]
    moved = [_on_its_machine(n, 'amd-') for n in amd[:3]]
    doc = charts.freeze(phase1, series=20)
    baseline, designs = charts.Baseline.from_json(json.loads(json.dumps(doc)))
    assert baseline.hardware and all(len(kinds) == 1 for kinds in baseline.hardware.values())

    status, lines = evidence.judge_nights('local', baseline, designs, phase1 + moved)
    assert status == evidence.EXIT_UNJUDGED, lines
    told = [line for line in lines if line.startswith('other hardware')]
    assert len(told) == len(baseline.levels)        # each case, once
    assert all(f"cpu_model {amd[0]['machine']['cpu_model']!r}" in line and '--accept amd-' + amd[0]['night'] in line
               and '--nights 30' in line for line in told), told
    assert not any(line.startswith(('REGRESSION', 'ok ')) for line in lines), lines

    # the same nights without their hardware: the charts judge them (what they did before they knew it)
    blind = [{**n, 'cases': {c: {k: v for k, v in r.items() if k != 'hardware'} for c, r in n['cases'].items()}}
             for n in moved]
    status, lines = evidence.judge_nights('local', baseline, designs, phase1 + blind)
    assert status != evidence.EXIT_UNJUDGED and not any(line.startswith('other hardware') for line in lines)

    # back on the baseline's hardware: judged again
    back = [_on_its_machine(n, 'back-') for n in intel[30:31]]
    status, lines = evidence.judge_nights('local', baseline, designs, phase1 + moved + back)
    assert not any(line.startswith('other hardware') for line in lines)
    assert any(line.startswith('ok ') for line in lines), lines


def test_hostile_hardware_in_a_stored_night_or_a_baseline_is_dropped():
    found = {'cpu': 'AMD EPYC', 'cpu_model': '2', 'cache; rm -rf /': 'x', 'hca:mlx5_0': 'MT_0000000223',
             'evil': 'a\nb', 'long': 'x' * 101, 'num': 7}
    assert ledger.hardware_of(found) == {'cpu': 'AMD EPYC', 'cpu_model': '2', 'hca:mlx5_0': 'MT_0000000223'}
    assert ledger.hardware_of(['not', 'a', 'dict']) == {}
    empty = {'v': 2, 'nights': [], 'levels': {}, 'control': {'center': {}, 'limit': {}}, 'charts': []}
    baseline, _ = charts.Baseline.from_json({**empty, 'hardware': {'c': [found, {'<b>': '</b>'}]}})
    assert baseline.hardware == {'c': [ledger.hardware_of(found)]}
    assert baseline.other_hardware('c', {'hardware': {'cpu': 'AMD EPYC', 'cpu_model': '17'}}).startswith(
        "cpu_model '17' (Phase I: '2')")
    assert baseline.other_hardware('c', {}) == ''           # a night stored before the control printed it

"""The fleet's pair rounds on the 8-node namespace fat tree (issue 28, item 6a): each single fault named, in one night.

The cluster: ``make fleet-up`` (ci/cluster/up.sh with IBREPRO_CLUSTER_NODES=8, IBREPRO_CLUSTER_FABRIC=fattree and
its own names, ports and work directory): node1..node8 on leaves leaf1/leaf2, spines spine0/spine1, every link
direction shaped by tbf. A night is one ReFrame session of ``reframe-checks/system/fleet_pairs.py`` (one Slurm job:
three rounds and the confirmation of its suspects). Faults are ``ci/cluster/fabric.sh degrade LINK PERCENT`` (the
tbf of that link direction at a lower rate), restored after the night whatever happened.

Asserted: a night with one slowed link (a node's cable, an uplink, a downlink; by 10 % and by 25 %) names exactly
the component holding that link (with two leaves an uplink ``leaf1>spine1`` and the downlink ``spine1>leaf2`` carry
the same flows: one hypothesis, named together) and nothing else; a fault-free night names nothing
(``IBREPRO_FLEET_NIGHTS`` of them, default 20: the issue's), each judged against the history of the nights
before. Needs root and the cluster; skipped otherwise (failed under
``make fleet-test``, which brings it up). Each night's figures are printed (``-s``).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ibrepro.fleet import history as fleet_history

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_DIR = Path(os.environ.get('IBREPRO_CLUSTER_DIR', '/tmp/ibrepro-fattree'))
SLURM_CONF = CLUSTER_DIR / 'etc' / 'slurm.conf'
TOPOLOGY = CLUSTER_DIR / 'etc' / 'topology.conf'
REFRAME = Path(sys.executable).with_name('reframe')
FABRIC = ROOT / 'ci' / 'cluster' / 'fabric.sh'
NIGHTS = int(os.environ.get('IBREPRO_FLEET_NIGHTS', '20'))
pytestmark = pytest.mark.integration


def _env(**extra):
    return {**os.environ, 'SLURM_CONF': str(SLURM_CONF), 'IBREPRO_CLUSTER_DIR': str(CLUSTER_DIR),
            'IBREPRO_FLEET_TOPOLOGY': str(TOPOLOGY), **extra}


def _unusable():
    if os.geteuid() != 0:
        return 'needs root (tc and the namespace cluster)'
    if not TOPOLOGY.exists() or not SLURM_CONF.exists():
        return f'no fat-tree cluster at {CLUSTER_DIR} (make fleet-up)'
    try:
        done = subprocess.run(['sinfo', '-h', '-N', '-t', 'idle,alloc,mix', '-o', '%N'], env=_env(),
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return 'sinfo did not answer'
    if done.returncode or len(set(done.stdout.split())) < 8:
        return f'the fat-tree cluster at {CLUSTER_DIR} is not up (make fleet-up): {done.stdout} {done.stderr}'
    return None


UNUSABLE = _unusable()
REQUIRED = os.environ.get('IBREPRO_CLUSTER_FABRIC') == 'fattree'


@pytest.fixture(scope='module')
def cluster():
    if UNUSABLE and REQUIRED:
        pytest.fail(f'{UNUSABLE}; IBREPRO_CLUSTER_FABRIC=fattree says it should be')
    if UNUSABLE:
        pytest.skip(UNUSABLE)


def _fabric(*args):
    done = subprocess.run(['bash', str(FABRIC), *args], env=_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def night(name, tmp_path):
    """One night: a ReFrame session of the pair-round check. Returns (named, the case's fleet.json, seconds)."""
    report = tmp_path / f'{name}.json'
    start = time.monotonic()
    done = subprocess.run(
        [str(REFRAME), '-C', str(ROOT / 'configs' / 'fattree-cluster.py'), '-c',
         str(ROOT / 'reframe-checks' / 'system' / 'fleet_pairs.py'), '--report-file', str(report),
         '--keep-stage-files', '-r'],
        env=_env(IBREPRO_HOME=str(tmp_path / 'home')), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    seconds = time.monotonic() - start
    data = json.loads(report.read_text())
    cases = [c for run in data['runs'] for c in run['testcases']]
    assert len(cases) == 1, done.stdout[-3000:]
    case = cases[0]
    fleet = Path(case['stagedir']) / 'fleet.json'
    assert fleet.exists(), f"no {fleet}: {case.get('fail_reason')}\n{done.stdout[-3000:]}"
    result = json.loads(fleet.read_text())
    named = case['fleet_named']        # the loggable variable, as the session stores it
    assert named == [s['name'] for s in result['result']['named']]
    assert (case['result'] == 'pass') == (not named), case.get('fail_reason')
    print(f"night {name}: {seconds:.0f} s; named {named}; suspects "
          f"{[(s['name'], round(s['effect'], 3), s['confirmed']) for s in result['result']['suspects']]}; "
          f"noise {result['result']['noise_scale']:.2%}; {len(result['flows'])} flows, "
          f"{len(result['confirmation'])} confirmation flows")
    return named, result, seconds


#: (the link slowed, how the localiser names the component holding it)
FAULTS = [('cable node3 up', 'cable node3:fab0/1 up'),
          ('uplink leaf1>spine1', 'uplink leaf1>spine1'),
          ('downlink spine0>leaf2', 'downlink spine0>leaf2')]


@pytest.mark.parametrize('percent', [25, 10])
@pytest.mark.parametrize('link,component', FAULTS)
def test_a_single_slow_link_is_named_exactly_in_one_night(cluster, tmp_path, link, component, percent):
    _fabric('degrade', link, str(percent))
    try:
        named, result, _ = night(f'{link.replace(" ", "-").replace(">", "-")}-{percent}', tmp_path)
    finally:
        _fabric('restore')
    assert len(named) == 1, f'{link} -{percent} %: named {named}'
    assert component in named[0].split(' = '), f'{link} -{percent} %: named {named}'
    assert len(result['flows']) == 24 and all('bw' in f for f in result['flows'])


def test_fault_free_nights_name_nothing(cluster, tmp_path):
    """The nights share one results database (one IBREPRO_HOME): from the fourth on, each component is judged
    against its history of the nights before (at most 14)."""
    _fabric('restore')
    alarms, history = [], []
    for n in range(NIGHTS):
        named, result, _ = night(f'clean-{n}', tmp_path)
        history.append(len(result['history_from']))
        if named:
            alarms.append((n, named))
    print(f'fault-free nights: {NIGHTS}, with an alarm: {len(alarms)} {alarms}; history nights {history}')
    assert not alarms
    assert history == [min(n, fleet_history.HISTORY_NIGHTS) for n in range(NIGHTS)]


#: The same eight nodes as four leaves of two (each physical leaf's halves) with at most one node per job's budget:
#: a night of several Slurm jobs (two per leaf-shift round, round 0 in round 1's) and its confirmation job, as a
#: fabric of more than 16 nodes runs (fleet_plan.slurm_jobs).
SPLIT_TOPOLOGY = {'leaves': {'leaf1a': ['node1', 'node2'], 'leaf1b': ['node3', 'node4'],
                             'leaf2a': ['node5', 'node6'], 'leaf2b': ['node7', 'node8']}, 'spines': 2}


def several_jobs_night(tmp_path):
    """One night of the split topology: (its test cases as the run report holds them, ReFrame's output, report)."""
    topology = tmp_path / 'split.json'
    topology.write_text(json.dumps(SPLIT_TOPOLOGY))
    report = tmp_path / 'night.json'
    done = subprocess.run(
        [str(REFRAME), '-C', str(ROOT / 'configs' / 'fattree-cluster.py'), '-c',
         str(ROOT / 'reframe-checks' / 'system' / 'fleet_pairs.py'), '--report-file', str(report), '-r'],
        env=_env(IBREPRO_HOME=str(tmp_path / 'home'), IBREPRO_FLEET_TOPOLOGY=str(topology),
                 IBREPRO_FLEET_JOB_NODES='1'), capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    print(done.stdout[-2500:])
    data = json.loads(report.read_text())
    cases = [c for run in data['runs'] for c in run['testcases']]
    pairs = [c for c in cases if c['name'].startswith('FleetPairs')]
    assert len(pairs) == 4 and all(c['result'] == 'pass' and not c['fleet_named'] for c in pairs), done.stdout
    assert sum(len(c['fleet_flows']) for c in pairs) == 24
    (confirmation,) = [c for c in cases if c['name'].startswith('FleetConfirmation')]
    return confirmation, done.stdout, report


def test_a_night_of_several_jobs_confirms_its_suspects_in_one_more_job(cluster, tmp_path):
    """Four pair-round jobs (one case each, naming nothing themselves) and, after them all, FleetConfirmation: the
    night's flows localised together, the suspect node cable re-tested with known-good partners in a job of its
    own, and named there alone. The stored session, analysed again, names the same."""
    _fabric('degrade', 'cable node3 up', '25')
    try:
        confirmation, out, report = several_jobs_night(tmp_path)
    finally:
        _fabric('restore')
    assert confirmation['result'] == 'fail', out[-3000:]
    assert confirmation['fleet_named'] == ['cable node3:fab0/1 up'], confirmation['fail_reason']
    assert not confirmation['fleet_flows'] and confirmation['fleet_confirmation']
    assert all('node3' in (f['host'], f['peer']) for f in confirmation['fleet_confirmation'])
    again = subprocess.run([str(REFRAME.with_name('ibrepro')), 'fleet', 'analyse', str(report)],
                           env=_env(IBREPRO_HOME=str(tmp_path / 'home')), capture_output=True, text=True, timeout=120)
    assert 'cable node3:fab0/1 up' in again.stdout, again.stdout + again.stderr


def test_a_fault_free_night_of_several_jobs_names_nothing(cluster, tmp_path):
    """Nothing slowed: the confirmation job has no suspect to re-test (skipped, saying so) or clears what it
    re-tests; nothing is named."""
    _fabric('restore')
    confirmation, out, _ = several_jobs_night(tmp_path)
    assert confirmation['result'] in ('skip', 'pass') and not confirmation['fleet_named'], out[-3000:]


def test_a_drained_node_is_left_out_and_the_rest_of_the_night_runs(cluster, tmp_path):
    """A node Slurm cannot give the night's job (drained here, with scontrol) is left out with its state; its pairs
    are dropped, every other flow runs on its planned route, and nothing is named for what was not tested."""
    subprocess.run(['scontrol', 'update', 'NodeName=node8', 'State=DRAIN', 'Reason=ibrepro fleet test'], env=_env(),
                   check=True, timeout=60)
    try:
        named, result, _ = night('node8-drained', tmp_path)
    finally:
        subprocess.run(['scontrol', 'update', 'NodeName=node8', 'State=RESUME'], env=_env(), timeout=60)
        for _ in range(30):
            state = subprocess.run(['sinfo', '-h', '-n', 'node8', '-o', '%t'], env=_env(), capture_output=True,
                                   text=True, timeout=30).stdout.strip()
            if state.startswith('idle'):
                break
            time.sleep(1)
    assert list(result['left_out']) == ['node8'] and result['left_out']['node8'].startswith('state drain'), result
    assert result['flows'] and not [f for f in result['flows'] if 'node8' in (f['host'], f['peer'])]
    assert named == []

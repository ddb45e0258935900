"""Faults on the Slurm cluster of soft-RoCE guests (ci/softroce/slurm-up.sh, configs/softroce-slurm.py): the
verbs families through sbatch and srun, Slurm choosing the nodes among three; a wrong device name, a node taken
out while a case runs on it; and the cluster's secrets (agent key, munge key, accounting password).

Each fault hits one ReFrame test case of a session: the victim fails with its reason, the others pass, and the
results database keeps every session stored before. One results database serves the whole module, in order.

Needs the cluster: ``make softroce-slurm-up`` (root). Skipped otherwise. Slow: TCG guests.
"""

import json
import os
import re
import secrets
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ibrepro.softroce import config as softroce_config
from ibrepro.softroce import fabric, guestexec, guests

REPO = Path(__file__).resolve().parents[1]
CLUSTER_DIR = Path(os.environ.get('IBREPRO_SOFTROCE_CLUSTER_DIR', '/tmp/ibrepro-softroce'))
GUESTS = CLUSTER_DIR / 'guests'
CONFIG = REPO / 'configs' / 'softroce-slurm.py'
WRONG_DEVICE = REPO / 'tests' / 'softroce_slurm' / 'config_wrong_device.py'
REFRAME = Path(sys.executable).with_name('reframe')
NODES = [fabric.node_name(i) for i in (1, 2, 3)]
# one small size, few iterations: seconds per case under TCG
SMALL = ['-S', 'message_sizes=2', '-S', 'iterations=100', '-S', 'pair_timeout=240']


def _slurm_env():
    return dict(os.environ, SLURM_CONF=str(CLUSTER_DIR / 'etc' / 'slurm.conf'))


def _slurm(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, env=_slurm_env(), timeout=60)


def _cluster_up():
    if not (CLUSTER_DIR / 'env.sh').exists():
        return False
    try:
        out = _slurm('sinfo', '-h', '-N', '-p', 'rxe', '-t', 'idle,mix,alloc', '-o', '%N').stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return False
    return set(NODES) <= set(out)


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not _cluster_up(), reason='soft-RoCE Slurm cluster not up (make softroce-slurm-up)'),
]


@pytest.fixture(scope='module')
def home(tmp_path_factory):
    """IBREPRO_HOME of this module: one results database for all its sessions."""
    return tmp_path_factory.mktemp('softroce-slurm-home')


@pytest.fixture(scope='module')
def stored():
    """UUIDs of the sessions the tests stored so far, in order."""
    return []


def _start_reframe(home, name, selection, *options, config=CONFIG):
    cmd = [str(REFRAME), '-C', str(config), '-c', str(REPO / 'reframe-checks'), '--exec-policy=serial', '-r',
           '--report-file', str(home / 'reports' / f'{name}.json'), *selection, *options]
    log = open(home / f'{name}.out', 'w')
    env = dict(_slurm_env(), IBREPRO_HOME=str(home))
    env.pop('RFM_SQLITE_DB_FILE', None)
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=home)


def _finish(home, name, proc, timeout=600):
    proc.wait(timeout=timeout)
    output = (home / f'{name}.out').read_text()
    report_file = home / 'reports' / f'{name}.json'
    report = json.loads(report_file.read_text()) if report_file.exists() else None
    print(f'--- reframe session {name}: exit code {proc.returncode}')
    print('\n'.join(line for line in output.splitlines() if 'Reason:' in line or 'stored with UUID' in line
                    or 'PASSED' in line or 'FAILED' in line))
    return proc.returncode, output, report


def _cases(report, run=None):
    """Display name -> test case, as the last run (--max-retries) left it, or as run ``run`` saw it."""
    runs = report['runs'] if run is None else [report['runs'][run]]
    return {tc['display_name']: tc for r in runs for tc in r['testcases']}


def _job(jobid):
    """sacct's record of a job: {'state', 'elapsed' (s), 'nodes' (names)}. The accounting database outlives the
    cluster while slurmctld restarts its job ids (-c), so an id may name jobs of earlier runs: the newest is ours."""
    lines = _slurm('sacct', '-n', '-X', '-P', '-j', str(jobid), '-o', 'submit,state,elapsedraw,nodelist').stdout
    submit, state, elapsed, nodelist = max(line.split('|') for line in lines.splitlines() if line.strip())
    nodes = _slurm('scontrol', 'show', 'hostnames', nodelist.strip()).stdout.split()
    return {'state': state.split()[0], 'elapsed': int(elapsed), 'nodes': nodes}


def _stored_uuids(home):
    if not (home / 'results.db').exists():
        return set()
    with sqlite3.connect(home / 'results.db') as db:
        return {uuid for (uuid,) in db.execute('SELECT uuid FROM sessions')}


def _assert_session_stored(home, stored, report):
    uuid = report['session_info']['uuid']
    uuids = _stored_uuids(home)
    assert uuid in uuids, f'session {uuid} is not in {home / "results.db"}'
    assert set(stored) <= uuids, f'earlier sessions lost: {set(stored) - uuids}'
    with sqlite3.connect(home / 'results.db') as db:
        assert db.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    stored.append(uuid)


def _resume(node):
    _slurm('scontrol', 'update', f'nodename={node}', 'state=resume')
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _slurm('sinfo', '-h', '-n', node, '-o', '%T').stdout.strip() == 'idle':
            return
        time.sleep(0.5)
    raise AssertionError(f'{node} did not return to idle')


# ---- the tests, in module order --------------------------------------------------------------------

def test_slurm_chooses_the_nodes_and_each_end_finds_its_peer(home, stored):
    """With rxnode1 drained, Slurm gives the case rxnode2 and rxnode3: the ends publish the addresses of the
    nodes they got (nothing static), and the latency and two-rail cases pass there."""
    assert _slurm('scontrol', 'update', 'nodename=rxnode1', 'state=drain', 'reason=ibrepro test').returncode == 0
    try:
        proc = _start_reframe(home, 'chosen', ['-n', 'PerftestLatency%operation=rdma_write',
                                               '-n', 'PerftestBinding%case=bidir-1proc'],
                              *SMALL, '-S', 'PerftestBinding.message_sizes=4096', '-S', 'min_overlap=0',
                              f'--max-retries={softroce_config.RETRIES}')
        rc, output, report = _finish(home, 'chosen', proc)
    finally:
        _resume('rxnode1')
    assert rc == 0, output
    for name, case in _cases(report).items():
        job = _job(case['jobid'])
        assert (case['result'], job['state'], job['nodes']) == ('pass', 'COMPLETED', ['rxnode2', 'rxnode3']), name
        runner = Path(case['outputdir'], 'rfm_job.out').read_text()
        assert re.search(r'^node \d on rxnode2: rxe0:1 198\.18\.1\.12, rxe1:1 198\.18\.2\.12$', runner, re.M), runner
        assert re.search(r'^node \d on rxnode3: rxe0:1 198\.18\.1\.13, rxe1:1 198\.18\.2\.13$', runner, re.M), runner
    binding = _cases(report)['PerftestBinding %case=bidir-1proc']
    assert {(w['host'], w['device']) for w in binding['flow_windows']} == {
        (h, d) for h in ('rxnode2', 'rxnode3') for d in ('rxe0', 'rxe1')}      # both rails of both nodes
    assert all(isinstance(w['cpu'], int) for w in binding['flow_windows'])      # each side pinned, recorded
    _assert_session_stored(home, stored, report)


def test_a_wrong_device_fails_both_ends_within_a_minute(home, stored):
    t0 = time.monotonic()
    rc, output, report = _finish(home, 'wrong-device', _start_reframe(
        home, 'wrong-device', ['-n', 'PerftestLatency%operation=rdma_write'], *SMALL, config=WRONG_DEVICE))
    assert rc == 1, output
    case = _cases(report)['PerftestLatency %operation=rdma_write']
    assert case['result'] == 'fail' and case['fail_phase'] == 'sanity'
    assert 'RDMA device rxe9 not found (it has: rxe0, rxe1' in case['fail_reason'], case['fail_reason']
    job = _job(case['jobid'])
    assert job['state'] == 'FAILED' and job['elapsed'] <= 60, job
    # each end stopped with the reason: the one whose server failed, and its peer, told within seconds
    reasons = {int(f.name.split('-')[1].split('.')[0]): json.loads(f.read_text())
               for f in Path(case['stagedir']).glob('failed-*.json')}
    # both ends name the wrong device, so which one fails first is a race (CI saw each): the first leaves a marker
    # naming the device; its peer, stopped by srun within the minute above, leaves one too unless srun stopped it
    # before its Python had started (a stop while it builds its runner is tested in test_pair.py)
    assert reasons, 'no end left a failure marker'
    assert all('rxe9' in r['reason'] for r in reasons.values()), reasons
    assert any(f"node {n} on {r['host']}" in case['fail_reason'] for n, r in reasons.items()), (reasons, case)
    assert time.monotonic() - t0 < 180
    _assert_session_stored(home, stored, report)


def test_a_node_taken_out_mid_run_fails_that_case_only(home, stored):
    """An administrator sets a node DOWN while a case runs on it: that case fails (its job NODE_FAIL), the
    next cases (latency, two concurrent pairs) run on the two nodes left, and every result stored before stays."""
    before = _stored_uuids(home)
    victim = {}

    def take_out():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            nodes = _slurm('squeue', '-h', '-t', 'R', '-n', 'rfm_PerftestBandwidth_a167c031', '-o', '%N').stdout.strip()
            if nodes:
                time.sleep(10)       # measuring by now
                victim['node'] = _slurm('scontrol', 'show', 'hostnames', nodes).stdout.split()[-1]
                _slurm('scontrol', 'update', f'nodename={victim["node"]}', 'state=down', 'reason=ibrepro fault test')
                return
            time.sleep(0.5)

    killer = threading.Thread(target=take_out)
    proc = _start_reframe(home, 'node-out', ['-n', 'PerftestBandwidth%direction=uni',
                                             '-n', 'PerftestLatency%operation=rdma_write',
                                             '-n', 'PerftestMultiPair%program=ib_write_bw%pairs=2'],
                          *SMALL, '-S', 'PerftestBandwidth.message_sizes=4096',
                          # the victim (uni) runs until the node goes; were it retried, it could not pass (its
                          # pair runner stops it at the time limit), so the retries that a bystander needs under
                          # TCG (perftest's clock calibration printing inf: refused) cannot hide the fault
                          '-S', 'PerftestBandwidth.iterations=100000000', '-S', 'PerftestBandwidth.pair_timeout=45',
                          '-S', 'PerftestMultiPair.message_sizes=4096', '-S', 'PerftestMultiPair.min_overlap=0',
                          # the victim first (by name), so the bystanders run after the node went
                          '--max-retries=2', '--exec-order=name')
    killer.start()
    try:
        rc, output, report = _finish(home, 'node-out', proc)
    finally:
        killer.join()
        if victim:
            _resume(victim['node'])
    assert victim, 'the bandwidth case never ran'
    assert rc == 1, output
    lost = _cases(report, run=0)['PerftestBandwidth %direction=uni']
    assert (lost['result'], lost['fail_phase']) == ('fail', 'sanity')
    assert _job(lost['jobid'])['state'] == 'NODE_FAIL'
    assert victim['node'] in _job(lost['jobid'])['nodes']
    assert 'DUE TO NODE FAILURE' in Path(lost['stagedir'], 'rfm_job.err').read_text()
    # the reason says what happened to the job first, then what the benchmark saw of it
    assert lost['fail_reason'].startswith(f'sanity error: a node of the job failed while it ran: Slurm cancelled '
                                          f'{lost["jobid"]}'), lost['fail_reason']
    for name in ('PerftestLatency %operation=rdma_write', 'PerftestMultiPair %program=ib_write_bw %pairs=2'):
        # the last run counts (a perftest clock-calibration failure or stall under TCG is retried)
        result = _cases(report)[name]
        assert result['result'] == 'pass', (name, result['fail_reason'])
        # serial: a job submitted after the victim's was submitted after the node went DOWN
        assert int(result['jobid']) > int(lost['jobid']), (name, result['jobid'], lost['jobid'])
        assert victim['node'] not in _job(result['jobid'])['nodes']
    _assert_session_stored(home, stored, report)
    assert before <= _stored_uuids(home)


def test_guest_agents_refuse_a_client_without_the_key(tmp_path):
    share = CLUSTER_DIR / 'share'
    marker = share / f'agent-test-{secrets.token_hex(4)}'
    for node in NODES:
        address, key = guests.agent(node, GUESTS)
        with pytest.raises(guestexec.GuestError, match="refused this run's key"):
            guestexec.run(address, ['touch', str(marker)], secrets.token_hex(32).encode(), cwd=str(share),
                          node=node, connect_timeout=10)
        assert not marker.exists()
        with open(os.devnull, 'wb') as null:
            assert guestexec.run(address, ['true'], key, cwd=str(share), stdout=null, node=node) == 0


def test_secrets_are_private_and_never_on_a_command_line():
    key = (GUESTS / guests.KEY_FILE).read_bytes().strip()
    assert stat.S_IMODE((GUESTS / guests.KEY_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE(GUESTS.stat().st_mode) == 0o700
    munge_key = CLUSTER_DIR / 'munge' / 'munge.key'
    assert stat.S_IMODE(munge_key.parent.stat().st_mode) == 0o700
    for guest in guests.read_state(GUESTS)['guests']:
        cmdline = Path(f'/proc/{guest["pid"]}/cmdline').read_bytes()
        assert key not in cmdline and munge_key.read_bytes() not in cmdline
        assert f'name=opt/org.ibrepro/agent.key,file={GUESTS}/agent.key'.encode() in cmdline   # by file, via fw_cfg
    dbd = CLUSTER_DIR / 'etc' / 'slurmdbd.conf'
    assert stat.S_IMODE(dbd.stat().st_mode) == 0o600
    password = re.search(r'^StoragePass=(.*)$', dbd.read_text(), re.M).group(1)
    assert len(password) >= 20 and password != 'ci'
    port = re.search(r'^StoragePort=(\d+)$', dbd.read_text(), re.M).group(1)
    root = subprocess.run(['mariadb', '-h', '127.0.0.1', '-P', port, '-u', 'root', '-e', 'select 1'],
                          capture_output=True, text=True)
    assert root.returncode != 0 and 'Access denied' in root.stderr     # no password-less root over TCP
    slurm = subprocess.run(['mariadb', '-h', '127.0.0.1', '-P', port, '-u', 'slurm', f'-p{password}', '-e', 'select 1'],
                           capture_output=True, text=True)
    assert slurm.returncode == 0, slurm.stderr


def test_results_db_holds_every_stored_session(home, stored):
    assert len(stored) == 3
    assert _stored_uuids(home) == set(stored)

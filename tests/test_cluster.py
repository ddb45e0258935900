"""Faults on the real CI cluster (ci/cluster/up.sh): each hits one ReFrame test of a session.

The victims (tests/cluster_checks/faults.py) must fail with a message that names the fault,
the bystanders in the same session must pass, and the results database must keep every
session stored before. One results database serves the whole module, in order.

Needs the cluster: ``make cluster-up`` (ci/cluster/up.sh), as root. Skipped otherwise.
"""

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SCRIPTS = REPO / 'ci' / 'cluster'
CLUSTER_DIR = Path(os.environ.get('IBREPRO_CLUSTER_DIR', '/tmp/ibrepro-cluster'))
CONFIG = REPO / 'configs' / 'ci-cluster.py'
FAULT_CHECKS = REPO / 'tests' / 'cluster_checks' / 'faults.py'
REFRAME = Path(sys.executable).with_name('reframe')
NODE2_NETNS = 'ibr-node2'        # ci/cluster/common.sh: ns_node 2


def _cluster_up():
    try:
        return subprocess.run([CLUSTER_SCRIPTS / 'status.sh', '-q'], timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not _cluster_up(), reason='cluster not up (make cluster-up)'),
]


# ---- helpers ---------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def home(tmp_path_factory):
    """IBREPRO_HOME of this module: one results database for all its sessions."""
    return tmp_path_factory.mktemp('cluster-home')


@pytest.fixture(scope='module')
def stored():
    """UUIDs of the sessions the tests stored so far, in order."""
    return []


def _env(home, **extra):
    env = dict(os.environ, IBREPRO_HOME=str(home), SLURM_CONF=str(CLUSTER_DIR / 'etc' / 'slurm.conf'))
    env.pop('RFM_SQLITE_DB_FILE', None)
    env.update(extra)
    return env


def _slurm_env():
    return dict(os.environ, SLURM_CONF=str(CLUSTER_DIR / 'etc' / 'slurm.conf'))


def _start_reframe(home, name, checks, *options, **env):
    """Start a ReFrame session on the cluster; its JSON report goes to <home>/reports/<name>.json."""
    cmd = [str(REFRAME), '-C', str(CONFIG), '-c', str(FAULT_CHECKS), '-n', f'^({"|".join(checks)})$',
           '-r', '--report-file', str(home / 'reports' / f'{name}.json'), *options]
    log = open(home / f'{name}.out', 'w')
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env(home, **env), cwd=home)


def _finish(home, name, proc, timeout=300):
    """Wait for the session; return (exit code, its output, the run report or None)."""
    proc.wait(timeout=timeout)
    output = (home / f'{name}.out').read_text()
    report_file = home / 'reports' / f'{name}.json'
    report = json.loads(report_file.read_text()) if report_file.exists() else None
    print(f'--- reframe session {name}: exit code {proc.returncode}')
    print('\n'.join(line for line in output.splitlines()
                    if 'Reason:' in line or 'WARNING' in line or 'ERROR' in line or 'PASSED' in line
                    or 'FAILED' in line or 'stored with UUID' in line))
    return proc.returncode, output, report


def _run_reframe(home, name, checks, *options, **env):
    return _finish(home, name, _start_reframe(home, name, checks, *options, **env))


def _cases(report):
    """Test name -> test case of the run report (the first run; no retries are used)."""
    return {tc['name']: tc for tc in report['runs'][0]['testcases']}


def _stored_uuids(home):
    with sqlite3.connect(home / 'results.db') as db:
        return {uuid for (uuid,) in db.execute('SELECT uuid FROM sessions')}


def _db_intact(home):
    with sqlite3.connect(home / 'results.db') as db:
        return db.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'


def _node2_pids(comm, timeout):
    """PIDs of processes named `comm` inside node2's network namespace, waiting up to `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(['ip', 'netns', 'pids', NODE2_NETNS], capture_output=True, text=True).stdout
        pids = []
        for pid in out.split():
            try:
                if Path(f'/proc/{pid}/comm').read_text().strip() == comm:
                    pids.append(int(pid))
            except OSError:
                continue

        if pids:
            return pids

        time.sleep(0.3)

    return []


def _node_state(node):
    return subprocess.run(['sinfo', '-h', '-n', node, '-o', '%T'], capture_output=True, text=True,
                          env=_slurm_env()).stdout.strip()


def _wait_node_state(node, prefix, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _node_state(node)
        if state.startswith(prefix):
            return state

        time.sleep(0.5)

    return _node_state(node)


def _assert_session_stored(home, stored, report):
    uuid = report['session_info']['uuid']
    uuids = _stored_uuids(home)
    assert uuid in uuids, f'session {uuid} is not in {home / "results.db"}'
    assert set(stored) <= uuids, f'earlier sessions lost: {set(stored) - uuids}'
    assert _db_intact(home)
    stored.append(uuid)


# ---- the tests, in module order --------------------------------------------------------------

def test_baseline_session_is_stored(home, stored):
    rc, output, report = _run_reframe(home, 'baseline', ['Bystander'])
    assert rc == 0, output
    assert _cases(report)['Bystander']['result'] == 'pass'
    _assert_session_stored(home, stored, report)


def test_killed_rank_and_time_limit_fail_bystander_passes(home, stored):
    proc = _start_reframe(home, 'rank-and-time', ['RankKilled', 'PastTimeLimit', 'Bystander'])
    killed = []

    def kill_rank_on_node2():
        # the rank's process carries the test's name; let the ping-pong get going first
        pids = _node2_pids('RankKilled', timeout=120)
        time.sleep(2)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill_rank_on_node2)
    killer.start()
    rc, output, report = _finish(home, 'rank-and-time', proc)
    killer.join()

    assert killed, 'the rank on node2 never appeared'
    assert rc == 1, output
    cases = _cases(report)
    assert cases['Bystander']['result'] == 'pass'

    rank = cases['RankKilled']
    assert (rank['result'], rank['fail_phase']) == ('fail', 'sanity')
    assert 'ended FAILED' in rank['fail_reason'], rank['fail_reason']
    job_err = Path(rank['stagedir'], 'rfm_job.err').read_text()
    assert 'node2: task 1: Killed' in job_err, job_err           # srun names the dead rank

    late = cases['PastTimeLimit']
    assert (late['result'], late['fail_phase']) == ('fail', 'sanity')
    assert 'ended TIMEOUT' in late['fail_reason'], late['fail_reason']
    assert 'DUE TO TIME LIMIT' in Path(late['stagedir'], 'rfm_job.err').read_text()
    _assert_session_stored(home, stored, report)


def test_slurmd_stopped_mid_run_fails_its_job_and_node_returns(home, stored):
    pidfile = CLUSTER_DIR / 'run' / 'slurmd-node2.pid'
    proc = _start_reframe(home, 'node-lost', ['NodeLost', 'Bystander'])
    try:
        assert _node2_pids('sleep', timeout=120), 'NodeLost never started on node2'
        os.kill(int(pidfile.read_text()), signal.SIGTERM)
        # slurmctld declares the node DOWN after SlurmdTimeout (20 s) and fails its jobs
        assert _wait_node_state('node2', 'down', timeout=90).startswith('down')
    finally:
        subprocess.run([CLUSTER_SCRIPTS / 'node-exec.sh', '2', 'slurmd'], env=_slurm_env(), check=True)

    rc, output, report = _finish(home, 'node-lost', proc)
    # ReturnToService=2: the node is back as soon as its slurmd registers
    assert _wait_node_state('node2', 'idle', timeout=60) == 'idle'
    assert rc == 1, output
    cases = _cases(report)
    assert cases['Bystander']['result'] == 'pass'
    lost = cases['NodeLost']
    assert (lost['result'], lost['fail_phase']) == ('fail', 'sanity')
    assert 'ended NODE_FAIL' in lost['fail_reason'], lost['fail_reason']
    assert 'DUE TO NODE FAILURE' in Path(lost['stagedir'], 'rfm_job.err').read_text()
    _assert_session_stored(home, stored, report)


class _SqliteLockHolder:
    """Another process holding an exclusive SQLite lock on the results DB until release()."""

    def __init__(self, db):
        self.proc = subprocess.Popen(
            [sys.executable, '-c',
             'import sqlite3, sys\n'
             f'db = sqlite3.connect({str(db)!r}, isolation_level=None)\n'
             'db.execute("BEGIN EXCLUSIVE")\n'
             'print("locked", flush=True)\n'
             'sys.stdin.read()\n'
             'db.execute("COMMIT")\n'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == 'locked'

    def release(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def test_db_locked_longer_than_timeout_session_lost_from_db_not_from_report(home, stored):
    before = _stored_uuids(home)
    holder = _SqliteLockHolder(home / 'results.db')
    try:
        # ReFrame waits sqlite_conn_timeout, warns, and still exits 0: the session is only in its
        # JSON report. With --warn-as-error the same warning fails the run.
        rc, output, report = _run_reframe(home, 'db-locked', ['Bystander'], RFM_SQLITE_CONN_TIMEOUT='3')
        rc_strict, output_strict, _ = _run_reframe(home, 'db-locked-strict', ['Bystander'], '--warn-as-error',
                                                   RFM_SQLITE_CONN_TIMEOUT='3')
    finally:
        holder.release()

    assert rc == 0, output
    assert 'WARNING: failed to store results in the database: database is locked' in output
    assert _cases(report)['Bystander']['result'] == 'pass'
    assert rc_strict == 1, output_strict
    assert ('ERROR: run session stopped: warning as error: failed to store results in the database: '
            'database is locked') in output_strict
    after = _stored_uuids(home)
    assert after == before, 'the locked database changed'
    assert report['session_info']['uuid'] not in after
    assert set(stored) <= after and _db_intact(home)


def test_db_lock_released_within_timeout_session_stored(home, stored):
    holder = _SqliteLockHolder(home / 'results.db')
    releaser = threading.Timer(3, holder.release)
    releaser.start()
    try:
        rc, output, report = _run_reframe(home, 'db-briefly-locked', ['Bystander'], RFM_SQLITE_CONN_TIMEOUT='60')
    finally:
        releaser.join()

    assert rc == 0, output
    assert 'WARNING' not in output
    _assert_session_stored(home, stored, report)


def test_db_lock_file_held_session_waits_without_timeout(home, stored):
    # ReFrame's own lock (<db dir>/.db.lock, fasteners) has no timeout: a session that ends
    # while another process holds it waits, silently, until it is released.
    holder = subprocess.Popen(
        [sys.executable, '-c',
         'import fasteners, sys\n'
         f'lock = fasteners.InterProcessReaderWriterLock({str(home / ".db.lock")!r})\n'
         'with lock.write_lock():\n'
         '    print("locked", flush=True)\n'
         '    sys.stdin.read()\n'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == 'locked'
    proc = _start_reframe(home, 'db-lockfile', ['Bystander'], RFM_SQLITE_CONN_TIMEOUT='3')
    try:
        report_file = home / 'reports' / 'db-lockfile.json'
        deadline = time.monotonic() + 120
        while not report_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)

        assert report_file.exists(), 'the session did not finish'
        time.sleep(8)      # well past sqlite_conn_timeout
        assert proc.poll() is None, 'ReFrame did not wait for .db.lock'
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)

    rc, output, report = _finish(home, 'db-lockfile', proc, timeout=60)
    assert rc == 0, output
    _assert_session_stored(home, stored, report)


def test_results_db_holds_every_stored_session(home, stored):
    assert len(stored) == 5
    assert _stored_uuids(home) == set(stored)
    assert _db_intact(home)


def _nightly(home, step, nightly, **env):
    environ = _env(home, IBREPRO_CHECKS='ci/cluster/checks', IBREPRO_NIGHTLY=nightly,
                   IBREPRO_REPORT_DIR=str(home / f'nightly-{nightly}'),
                   PATH=f'{REFRAME.parent}{os.pathsep}{os.environ["PATH"]}', **env)
    return subprocess.run([REPO / 'ci' / 'nightly.sh', step], env=environ, capture_output=True,
                          text=True, timeout=300)


def test_nightly_run_store_compare_report(tmp_path):
    # two nights of the smoke checks in a fresh history, then the report of the second
    for night in ('night1', 'night2'):
        run = _nightly(tmp_path, 'run', night)
        assert run.returncode == 0, run.stdout + run.stderr

    ok = _nightly(tmp_path, 'report', 'night2')
    assert ok.returncode == 3, ok.stdout + ok.stderr     # a new system: a warning every night, never clean
    (summary,) = (tmp_path / 'nightly-night2').glob('ci-cluster/*/summary.md')
    assert summary.read_text().startswith('## ibrepro report: ci-cluster') and 'History test' in summary.read_text()
    assert (summary.parent / 'index.html').exists()
    # two nights are too short a history to judge: the report says so instead of guessing
    assert 'not judged yet: 1 of 8 nights stored before this one' in ok.stdout

    missing = _nightly(tmp_path, 'report', 'night3')
    assert missing.returncode == 2      # could not judge: nothing of that night is stored (1 means a regression)
    assert 'session of nightly night3 is stored' in missing.stderr     # no (readable) session of it


def _short_night(tmp_path, night, *options, nightly=()):
    """``ibrepro nightly`` of one short IMB PingPong 2x1 case on the cluster (``options``: more ReFrame options;
    ``nightly``: options of ``ibrepro nightly``)."""
    env = _env(tmp_path, PATH=f'{REFRAME.parent}{os.pathsep}{os.environ["PATH"]}')
    proc = subprocess.run([REFRAME.with_name('ibrepro'), 'nightly', '-C', CONFIG, '--night', night,
                           '--output-dir', tmp_path / 'reports', *nightly, '--',
                           '-n', 'IMBPointToPoint%benchmark=PingPong%layout=2x1', '-p', '^impi$',
                           '-S', 'message_sizes=1:64', '-S', 'iterations=100', '-S', 'time_per_sample=5', *options],
                          env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    print(proc.stdout[-4000:], proc.stderr[-4000:])
    return proc


def test_a_night_whose_job_never_starts_could_not_be_judged_and_is_not_a_regression(tmp_path):
    """A job held in the queue past its max_pending_time is cancelled by ReFrame: its case measured nothing, so the
    night is "could not judge" (exit 2) with the case and why, not a regression (1) and not clean (0)."""
    proc = _short_night(tmp_path, 'held', '--job-option=--begin=now+1hour', '-S', 'max_pending_time=20s')
    assert proc.returncode == 2, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert re.search(r'IMBPointToPoint %benchmark=PingPong %layout=2x1 @ci-cluster:\S+ measured nothing: its job \d+ '
                     r'never started on a node', proc.stderr), proc.stderr
    assert 'could not judge 1 test case(s) of night held' in proc.stderr
    assert 'the night fails' not in proc.stderr
    queued = subprocess.run(['squeue', '-h', '-o', '%i %j'], env=_slurm_env(), capture_output=True, text=True)
    assert 'rfm_' not in queued.stdout, queued.stdout           # cancelled, not left in the queue


def test_a_night_whose_job_ran_in_another_partition_could_not_be_judged(tmp_path):
    """A case whose job lands in another Slurm partition than its partition's access names (a child job's allocation
    made apart from its case; here the job asks for it last) ends before it measures: the night is "could not
    judge" (exit 2) with the case and why, in the log and in summary.md, never a regression nor clean."""
    proc = _short_night(tmp_path, 'elsewhere', '--job-option=--partition=elsewhere')
    assert proc.returncode == 2, proc.stdout[-4000:] + proc.stderr[-4000:]
    why = "its job ran outside its partition (this job ran in Slurm partition 'elsewhere', its partition asks for ci)"
    assert re.search(r'IMBPointToPoint %benchmark=PingPong %layout=2x1 @ci-cluster:\S+ measured nothing: '
                     + re.escape(why), proc.stderr), proc.stderr
    assert 'the night fails' not in proc.stderr
    (summary,) = (tmp_path / 'reports').rglob('summary.md')
    text = summary.read_text()
    assert 'Failed in ReFrame: 1 test case(s)' in text and 'misplaced: this job ran in Slurm partition' in text, text


def test_a_night_while_slurm_is_down_could_not_be_judged(tmp_path):
    """slurmctld stopped (a maintenance, a crashed controller): sbatch cannot submit, no case measures anything. The
    night is "could not judge" (exit 2) with each case and why, in the log and in summary.md; nobody is paged for a
    regression (1) and it is never clean (0). The controller then comes back with its state."""
    pidfile = CLUSTER_DIR / 'run' / 'slurmctld.pid'
    pid = int(pidfile.read_text())
    os.kill(pid, signal.SIGTERM)
    try:
        deadline = time.monotonic() + 30
        while Path(f'/proc/{pid}').exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(f'/proc/{pid}').exists(), 'slurmctld did not stop'
        down = subprocess.run(['sinfo', '-h'], env=_slurm_env(), capture_output=True, text=True, timeout=60)
        assert down.returncode != 0, down.stdout                # Slurm really is down
        proc = _short_night(tmp_path, 'slurm-down')
    finally:
        # without -c: the controller resumes from its saved state, as after a real outage
        subprocess.run(['slurmctld', '-i'], env=_slurm_env(), check=True, timeout=60)
    assert _wait_node_state('node1', 'idle', timeout=90) == 'idle'
    assert _wait_node_state('node2', 'idle', timeout=90) == 'idle'
    assert proc.returncode == 2, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert re.search(r'IMBPointToPoint %benchmark=PingPong %layout=2x1 @ci-cluster:\S+ measured nothing: its job was '
                     r'never submitted', proc.stderr), proc.stderr
    assert 'could not judge 1 test case(s) of night slurm-down' in proc.stderr
    assert 'the night fails' not in proc.stderr
    (summary,) = (tmp_path / 'reports').rglob('summary.md')
    text = summary.read_text()
    assert 'Failed in ReFrame: 1 test case(s)' in text and 'Unable to contact slurm controller' in text, text
    assert 'History test: nothing judged' in text and 'no regression' not in text, text


#: A short history judges (3 earlier nights, not 8) and only changes beyond 10x count, whatever this machine's load:
#: the test's regression is the injector's 200 us per MPI call (about 40x the latency of these veth pairs)
JUDGED = ['--report-option=--min-history=3', '--report-option=--max-noise=1000',
          '--report-option=--max-pressure=1', '--report-option=--min-effect=9']
SLOW = ['-S', 'inject_us=200']
PINGPONG_2X1 = r'IMBPointToPoint %benchmark=PingPong %layout=2x1'


@pytest.fixture(scope='module')
def suspect(tmp_path_factory):
    """A history of three clean nights, then a night 200 us a call slower, unconfirmed (``--no-confirm``): a
    suspect to confirm. Each test judges it in a copy of this results database."""
    home = tmp_path_factory.mktemp('suspect')
    for night in ('before1', 'before2', 'before3'):
        assert _short_night(home, night, nightly=JUDGED).returncode == 3      # a new system: not judged yet
    slow = _short_night(home, 'slow', *SLOW, nightly=[*JUDGED, '--no-confirm'])
    assert slow.returncode == 1, slow.stdout[-4000:] + slow.stderr[-4000:]
    assert re.search(r'REGRESSION \(unconfirmed\) test case ' + PINGPONG_2X1, slow.stdout), slow.stdout
    return home


def _copy_of(suspect, tmp_path):
    home = tmp_path / 'home'
    home.mkdir()
    for db in suspect.glob('results.db*'):
        shutil.copy2(db, home / db.name)
    return home


def _not_cleared(proc, why):
    """Not confirmed, not cleared, and never clean: an alarm where the night alone crosses the one-night alarm
    limit (1), else could not judge (2). Which one depends on the three earlier nights' spread (a t test with two
    degrees of freedom); that each exit goes with its own words is what is tested here, the split in test_verdict."""
    assert proc.returncode in (1, 2), proc.stdout[-4000:] + proc.stderr[-4000:]
    assert 'confirming 1 test case(s)' in proc.stdout and not re.search(r'^\s*cleared:', proc.stdout, re.M)
    alone = ('the night alone crosses the alarm limit' if proc.returncode == 1 else
             'the night alone is below the alarm limit .*: could not judge')
    assert re.search(r'NOT CONFIRMED test case ' + PINGPONG_2X1 + '.*' + why + '.*not confirmed, not cleared; '
                     + alone, proc.stdout), proc.stdout


def test_a_confirmation_that_could_not_get_nodes_never_clears_its_night(suspect, tmp_path):
    """A night 200 us a call slower is a suspect; its confirmation (``ibrepro nightly --no-run``: the stored night
    judged again, its suspect re-run) cannot get nodes: the partition is down for maintenance, the job pends past its
    max_pending_time and ReFrame cancels it. The night is not cleared: not confirmed, not cleared, with why in the
    log and in summary.md: an alarm (1) where its own evidence crosses the one-night alarm limit, else "could not
    judge" (2); never clean (0)."""
    home = _copy_of(suspect, tmp_path)
    scontrol = ['scontrol', 'update', 'PartitionName=ci']
    subprocess.run([*scontrol, 'State=DOWN'], env=_slurm_env(), check=True, timeout=60)
    try:
        pending = _short_night(home, 'slow', *SLOW, '-S', 'max_pending_time=20s', nightly=[*JUDGED, '--no-run'])
    finally:
        subprocess.run([*scontrol, 'State=UP'], env=_slurm_env(), check=True, timeout=60)
    _not_cleared(pending, r'its confirmation measured nothing: its job \d+ never started on a node')
    summary = max((home / 'reports').rglob('summary.md'), key=lambda p: p.stat().st_mtime).read_text()
    assert '**Not confirmed, not cleared: 1 test case(s)' in summary and 'never started on a node' in summary
    queued = subprocess.run(['squeue', '-h', '-o', '%i %j'], env=_slurm_env(), capture_output=True, text=True)
    assert 'rfm_' not in queued.stdout, queued.stdout           # cancelled, not left in the queue


def test_a_confirmation_whose_rank_died_never_clears_its_night(suspect, tmp_path):
    """The same suspect; its confirmation starts and its rank on node2 is killed (each repetition's, at once): it
    failed in ReFrame and measured nothing, so the night is not confirmed, not cleared, and never clean."""
    home = _copy_of(suspect, tmp_path)
    killed, done = [], threading.Event()

    def kill_its_ranks_on_node2():      # every one, at once: each of its repetitions fails, none runs long
        while not done.is_set():
            out = subprocess.run(['ip', 'netns', 'pids', NODE2_NETNS], capture_output=True, text=True).stdout
            for pid in out.split():
                try:
                    if Path(f'/proc/{pid}/comm').read_text().strip() == 'IMB-MPI1':
                        os.kill(int(pid), signal.SIGKILL)
                        killed.append(pid)
                except OSError:
                    continue
            time.sleep(0.05)
    killer = threading.Thread(target=kill_its_ranks_on_node2)
    killer.start()
    try:
        failed = _short_night(home, 'slow', *SLOW, nightly=[*JUDGED, '--no-run'])
    finally:
        done.set()
        killer.join()
    assert killed, 'the confirmation\'s rank on node2 never appeared'
    _not_cleared(failed, r'its confirmation failed in ReFrame \(sanity: ')
    summary = max((home / 'reports').rglob('summary.md'), key=lambda p: p.stat().st_mtime).read_text()
    assert '**Not confirmed, not cleared: 1 test case(s)' in summary and 'failed in ReFrame' in summary


def test_fleet_verdict_drains_the_named_node_only_with_apply(tmp_path):
    sweep = tmp_path / 'sweep.json'
    sweep.write_text(json.dumps({'nodes': 2, 'skipped': [], 'faults': [
        {'component': 'node2:mlx5_0/1', 'fault': 'port width', 'evidence': 'a fault written by this test'}]}))
    cmd = [sys.executable, '-m', 'ibrepro.cli', 'fleet', 'verdict', '--sweep', str(sweep), '--night', 'drain-test',
           '--out', str(tmp_path / 'verdict.txt')]
    printed = subprocess.run(cmd, env=_slurm_env(), capture_output=True, text=True, timeout=60, cwd=REPO)
    assert printed.returncode == 1, printed.stdout + printed.stderr
    assert 'to drain: scontrol update NodeName=node2 State=DRAIN' in printed.stdout
    assert not _node_state('node2').startswith('drain')          # printed, not applied
    try:
        applied = subprocess.run([*cmd, '--apply'], env=_slurm_env(), capture_output=True, text=True, timeout=60,
                                 cwd=REPO)
        assert applied.returncode == 1, applied.stdout + applied.stderr
        assert _wait_node_state('node2', 'drain', timeout=30).startswith('drain')
        reason = subprocess.run(['sinfo', '-h', '-n', 'node2', '-o', '%E'], capture_output=True, text=True,
                                env=_slurm_env()).stdout
        assert 'ibrepro fleet: node2:mlx5_0/1: port width' in reason, reason
        assert not _node_state('node1').startswith('drain')
    finally:
        subprocess.run(['scontrol', 'update', 'NodeName=node2', 'State=RESUME'], env=_slurm_env(), timeout=60)
    assert _wait_node_state('node2', 'idle', timeout=30).startswith('idle')


def test_second_up_refuses_and_leaves_the_cluster_running():
    # up.sh clears the leftovers of a killed run, but must never touch a cluster that is alive
    proc = subprocess.run([CLUSTER_SCRIPTS / 'up.sh'], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'already up' in proc.stderr, proc.stderr
    assert 'clearing leftovers' not in proc.stdout
    assert _cluster_up()


def test_the_fleet_leaves_out_the_nodes_slurm_cannot_give_a_job(monkeypatch):
    """The pair rounds use only the nodes of the partition that can run a job now (sinfo on the real cluster): a
    drained node is left out with its state, a node of another partition or none as such; their pairs are dropped,
    the fabric and every other pair kept."""
    from ibrepro.fleet import rounds as fleet_rounds
    from ibrepro.fleet import night as fleet_night
    monkeypatch.setenv('SLURM_CONF', str(CLUSTER_DIR / 'etc' / 'slurm.conf'))
    assert set(fleet_night.node_states('ci')) == {'node1', 'node2'}
    subprocess.run(['scontrol', 'update', 'NodeName=node2', 'State=DRAIN', 'Reason=ibrepro test'], env=_slurm_env(),
                   timeout=60, check=True)
    try:
        assert _wait_node_state('node2', 'drain', timeout=30).startswith('drain')
        states = fleet_night.node_states('ci')
        gone = fleet_night.left_out(['node1', 'node2', 'node9'], states, 'ci')
        # (drain*: drained and, after the slurmd test above, maybe not responding yet: said too)
        assert set(gone) == {'node2', 'node9'} and gone['node2'].startswith(f'state {states["node2"]}') \
            and states['node2'].startswith('drain') and gone['node9'] == 'not in Slurm partition ci', states
        fabric, rounds, (job,) = fleet_night.night({'leaf1': ['node1', 'node2', 'node9', 'node3']})
        plan = fleet_night.without(fleet_rounds.plan(fabric, rounds, job), gone)
        assert plan['nodes'] == ['node1', 'node3'] and plan['left_out'] == gone
        assert [p for r in plan['rounds'] for p in r['pairs']] == [['node1', 'node3']]
        assert plan['leaves'] == {'leaf1': ['node1', 'node2', 'node9', 'node3']}     # routes as planned
    finally:
        subprocess.run(['scontrol', 'update', 'NodeName=node2', 'State=RESUME'], env=_slurm_env(), timeout=60)
    assert _wait_node_state('node2', 'idle', timeout=30).startswith('idle')

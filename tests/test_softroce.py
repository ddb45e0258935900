"""The soft-RoCE nodes for real: QEMU TCG guests with rdma_rxe ports, perftest through ReFrame
(configs/softroce.py, tests/softroce/checks.py: the verbs families' `ibrepro pair` machinery), results
in the ReFrame database, and the faults: a perftest server that never answers, a guest killed
mid-run, `softroce run` killed.

Slow (a guest boots in 10-30 s under TCG); the tests of one module share one dual-port guest.
"""

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ibrepro.paths import REPO_ROOT
from ibrepro.softroce import config as softroce_config
from ibrepro.softroce.image import missing_host_tools

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(missing_host_tools()) and os.geteuid() != 0,
                       reason=f'{", ".join(missing_host_tools())} not on PATH and not root to install them '
                              '(make softroce-test, as root, installs qemu-system-x86 kmod cpio)'),
]

BIN = Path(sys.executable).parent
CHECKS = Path(__file__).parent / 'softroce' / 'checks.py'
CONFIG = REPO_ROOT / 'configs' / 'softroce.py'
WRONG_DEVICE = Path(__file__).parent / 'softroce' / 'config_wrong_device.py'
# perftest's clock calibration fails now and then on busy emulated CPUs (its times print as inf)
RETRY = [f'--max-retries={softroce_config.RETRIES}']


def _env(home):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('RFM_', 'IBREPRO_SOFTROCE_RUN', 'IBREPRO_SOFTROCE_SHARE'))}
    env['IBREPRO_HOME'] = str(home)
    return env


def _ibrepro(env, *args, timeout=600, check=True):
    return subprocess.run([BIN / 'ibrepro', 'softroce', *args], env=env, text=True,
                          capture_output=True, timeout=timeout, check=check)


def _reframe(env, *args, config=CONFIG, timeout=600):
    return subprocess.run(
        [BIN / 'reframe', '-C', config, '-c', CHECKS, '--system', 'softroce:dualport',
         '--exec-policy=serial', '-r', *args],
        env=env, text=True, capture_output=True, timeout=timeout)


def _sessions(home):
    """The stored sessions, oldest first: [(uuid, {test case: (result, fail_reason, perfvalues)})],
    each case as its last run (--max-retries) left it."""
    if not (home / 'results.db').exists():
        return []

    with sqlite3.connect(home / 'results.db') as db:
        rows = db.execute('SELECT uuid, json_blob FROM sessions ORDER BY session_start_unix')
        return [(uuid, {f'{tc["display_name"]} @{tc["partition"]}':
                        (tc['result'], tc['fail_reason'], tc['perfvalues'])
                        for run in json.loads(blob)['runs'] for tc in run['testcases']})
                for uuid, blob in rows]


def _job_out(home, partition, test):
    """The job stdout of ``test``'s last run (a retry has its own output directory)."""
    outputs = home / 'softroce' / 'share' / 'reframe' / 'output' / 'softroce' / partition / 'rxe-guest'
    last = max(outputs.glob(f'{test}*/rfm_job.out'), key=lambda p: p.stat().st_mtime)
    return last.read_text()


def _qemu_pids(run_dir):
    state = json.loads((run_dir / 'state.json').read_text())
    return [g['pid'] for g in state['guests']]


def _alive(pid):
    try:
        return Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


@pytest.fixture(scope='module')
def extra(tmp_path_factory):
    """Extra binaries for the image: our verbs benchmark (benchmarks/verbs) and a verbs program linking a
    host-only library (OpenMP), if this machine compiles verbs programs."""
    if not shutil.which('gcc') or not Path('/usr/include/infiniband/verbs.h').exists():
        return None

    extra = tmp_path_factory.mktemp('extra')
    subprocess.run(['make', '-s', '-C', REPO_ROOT / 'benchmarks', 'verbs', f'BUILD={extra}'],
                   check=True, capture_output=True)
    subprocess.run(['gcc', '-O2', '-fopenmp', '-o', extra / 'bin' / 'rxe-list-devices',
                    Path(__file__).parent / 'softroce' / 'list_devices.c', '-libverbs'], check=True)
    return extra


@pytest.fixture(scope='module')
def guest(tmp_path_factory, extra):
    """One dual-port guest (n0: rxe0 <-> rxe1), its environment and its home."""
    home = tmp_path_factory.mktemp('home')
    env = _env(home)
    args = ['up'] + (['--extra', str(extra)] if extra else [])
    started = _ibrepro(env, *args, check=False)
    run_dir = home / 'softroce' / 'run'
    try:
        assert started.returncode == 0, started.stderr
        yield env, home, run_dir
    finally:
        pids = _qemu_pids(run_dir) if (run_dir / 'state.json').exists() else []
        _ibrepro(env, 'down')
        assert not (run_dir / 'state.json').exists()
        assert not [p for p in pids if _alive(p)], 'a QEMU survived `down`'


def _listener_inode(port):
    for line in Path('/proc/net/tcp').read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == '0A' and fields[1] == f'0100007F:{port:04X}':       # LISTEN on 127.0.0.1:port
            return fields[9]
    return None


def test_qemu_itself_holds_the_agents_port_and_the_run_dir_is_private(guest):
    """No free-then-bind race: the listening socket of the agent's forward belongs to the guest's QEMU."""
    _, _, run_dir = guest
    state = json.loads((run_dir / 'state.json').read_text())
    (n0,) = state['guests']
    host, port = n0['agent']
    assert host == '127.0.0.1'
    inode = _listener_inode(port)
    assert inode, f'nothing listens on 127.0.0.1:{port}'
    fds = {os.readlink(f) for f in Path(f'/proc/{n0["pid"]}/fd').iterdir()}
    assert f'socket:[{inode}]' in fds
    assert oct(run_dir.stat().st_mode & 0o777) == '0o700'
    assert oct((run_dir / 'agent.key').stat().st_mode & 0o777) == '0o600'
    key = (run_dir / 'agent.key').read_bytes()
    assert key not in Path(f'/proc/{n0["pid"]}/cmdline').read_bytes()


def test_guest_runs_commands_in_the_shared_directory(guest, extra):
    env, home, run_dir = guest
    share = home / 'softroce' / 'share'
    (share / 'from-host').write_text('hello guest\n')
    out = subprocess.run(
        [BIN / 'ibrepro', 'softroce', 'exec', '--', 'sh', '-c',
         'cat from-host; pwd; rdma link show; echo hi > from-guest; echo oops >&2; exit 5'],
        cwd=share, env=env, text=True, capture_output=True, timeout=60)
    assert out.returncode == 5
    assert out.stdout.startswith(f'hello guest\n{share}\n')
    assert 'link rxe0/1 state ACTIVE' in out.stdout and 'netdev veth0' in out.stdout
    assert 'link rxe1/1 state ACTIVE' in out.stdout and 'netdev veth1' in out.stdout
    assert out.stderr == 'oops\n'
    assert (share / 'from-guest').read_text() == 'hi\n'
    if extra:
        out = subprocess.run([BIN / 'ibrepro', 'softroce', 'exec', 'rxe-list-devices'], cwd=share,
                             env=env, text=True, capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[:2] == ['rxe0', 'rxe1']
        assert out.stdout.splitlines()[2] == 'omp threads 4'


def test_our_verbs_benchmark_runs_in_the_guest_across_the_cable(guest, extra):
    """ibrepro_rdma (benchmarks/verbs) from --extra: RDMA CM, both rails, striped over rxe0 and rxe1."""
    if not extra or not (extra / 'bin' / 'ibrepro_rdma').exists():
        pytest.skip('benchmarks/verbs not built here (needs gcc and rdma-core development files)')
    env, home, _ = guest
    tools = subprocess.run([sys.executable, '-c', 'from ibrepro.softroce import config; '
                            'print(config.environment()["features"])'],
                           env=env, text=True, capture_output=True, check=True).stdout
    assert tools.strip() == "['perftest', 'verbs', 'ibrepro-rdma']"
    share = home / 'softroce' / 'share'
    exec_ = [BIN / 'ibrepro', 'softroce', 'exec', '--', 'ibrepro_rdma', '-T', '60']
    server = subprocess.Popen(exec_, cwd=share, env=env, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    try:
        client = subprocess.run(exec_ + ['-t', 'bw', '-M', 'stripe', '-m', '2:16K', '-i', '5',
                                         '-x', '1', '-W', '4', '--source',
                                         '198.51.100.2,198.51.100.1', '198.51.100.1,198.51.100.2'],
                                cwd=share, env=env, text=True, capture_output=True, timeout=180)
        server_out, _ = server.communicate(timeout=60)
    finally:
        server.kill()
    assert client.returncode == 0, client.stdout + client.stderr
    assert server.returncode == 0, server_out
    assert '# devices: rxe1:1 rxe0:1' in client.stdout       # the client's end of each cable
    assert '# channels: 2' in client.stdout and client.stdout.rstrip().endswith('# done')
    rows = [line.split() for line in client.stdout.splitlines() if line[:1].isdigit()]
    assert [int(r[0]) for r in rows] == [2 ** k for k in range(1, 15)]
    assert all(float(r[1]) > 0 for r in rows)


def test_cached_image_is_reused(guest, extra):
    env, _, _ = guest
    args = ['build'] + (['--extra', str(extra)] if extra else [])
    t0 = time.monotonic()
    first = _ibrepro(env, *args).stdout.strip()
    assert _ibrepro(env, *args).stdout.strip() == first
    assert time.monotonic() - t0 < 30
    assert Path(first, 'manifest.txt').read_text().count('deb ') >= 20


def test_perftest_pairs_through_reframe_are_stored(guest):
    env, home, _ = guest
    out = _reframe(env, *RETRY)
    assert out.returncode == 0, out.stdout + out.stderr
    (uuid, cases), = _sessions(home)
    assert uuid in out.stdout
    assert cases['softroce_rdma_devices @dualport'][0] == 'pass'
    result, _, perf = cases['softroce_write_lat @dualport']
    value, *_, unit, _ = perf['softroce:dualport:lat_2']
    assert result == 'pass' and unit == 'us' and 0 < value < 1e6
    result, _, perf = cases['softroce_write_bw @dualport']
    value, *_, unit, _ = perf['softroce:dualport:bw_65536']
    assert result == 'pass' and unit == 'MB/s' and value > 0
    job = _job_out(home, 'dualport', 'softroce_write_lat')
    # the runner found each rail's address in the guest (nothing configured), and started each side there
    assert 'node 0 on n0: rxe0:1 198.51.100.1, rxe1:1 198.51.100.2\n' in job
    assert re.search(r'flow 0: server started on n0 cpu \d+: '
                     r'ib_write_lat -F -n 100 -u 20 -d rxe0 -i 1 -p 18515 -s 2\n', job)
    assert re.search(r'flow 0: client started on n0 cpu \d+: ib_write_lat -F -n 100 -u 20 -d rxe1 -i 1 -p 18515 -s 2 '
                     r'198\.51\.100\.1\n', job)


def test_wrong_device_fails_clearly_in_seconds_and_others_continue(guest):
    env, home, _ = guest
    before = _sessions(home)
    t0 = time.monotonic()
    out = _reframe(env, '-n', 'softroce_rdma_devices', '-n', 'softroce_write_lat', '-S', 'pair_timeout=60',
                   config=WRONG_DEVICE)
    assert out.returncode == 1, out.stdout + out.stderr
    assert time.monotonic() - t0 < 120
    sessions = _sessions(home)
    assert sessions[:-1] == before                          # stored results intact
    cases = sessions[-1][1]
    assert cases['softroce_rdma_devices @dualport'][:2] == ('pass', None)
    result, reason, _ = cases['softroce_write_lat @dualport']
    assert result == 'fail' and 'RDMA device rxe9 not found (it has: rxe0, rxe1' in reason, reason


def test_guest_killed_mid_run_fails_clearly_and_keeps_what_was_measured(guest):
    """Last test of the module: it kills the guest."""
    env, home, run_dir = guest
    before = _sessions(home)
    stage = home / 'softroce' / 'share' / 'reframe' / 'stage' / 'softroce' / 'dualport'
    rfm = subprocess.Popen(
        [BIN / 'reframe', '-C', CONFIG, '-c', CHECKS, '--system', 'softroce:dualport',
         '--exec-policy=serial', '-r', '-n', 'softroce_write_lat', '-n', 'softroce_write_bw',
         '-S', 'iterations=1000000'],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # a client's result header reached the host (streamed line by line): it is measuring
        deadline = time.monotonic() + 180
        while not any('#bytes' in f.read_text() for f in stage.glob('*/*/flow-0*.client.out')):
            assert rfm.poll() is None and time.monotonic() < deadline, 'the run never started'
            time.sleep(0.5)
        qemu, = _qemu_pids(run_dir)
        os.kill(qemu, signal.SIGKILL)
        t_kill = time.monotonic()
        output, _ = rfm.communicate(timeout=240)
    finally:
        rfm.kill()
    assert rfm.returncode == 1, output
    assert time.monotonic() - t_kill < 60                         # nothing waits for the dead guest
    sessions = _sessions(home)
    assert sessions[:-1] == before
    cases = sessions[-1][1]
    assert [r for r, _, _ in cases.values()] == ['fail', 'fail']
    killed, = [f for f in stage.glob('*/*/flow-0*.client.out') if '#bytes' in f.read_text()]
    text = killed.read_text()
    assert 'guest-exec: n0: lost the connection to the guest while running' in text
    assert text.index('#bytes') < text.index('guest-exec:')         # streamed before the kill
    reasons = ' '.join(reason for _, reason, _ in cases.values())
    assert 'n0: lost the connection to the guest' in reasons          # the run that was killed
    assert 'guest-exec: n0 is not running (nothing listens on 127.0.0.1:' in reasons   # the one after it


def test_two_guests_through_softroce_run(tmp_path):
    """`softroce run --nodes 2 -- reframe ...`: n0:rxe2 <-> n1:rxe2, then everything is down."""
    env = _env(tmp_path)
    cmd = [BIN / 'ibrepro', 'softroce', 'run', '--nodes', '2', '--', BIN / 'reframe', '-C', CONFIG,
           '-c', CHECKS, '--system', 'softroce:nodes2', '--exec-policy=serial', '-r', *RETRY]
    out = subprocess.run(cmd, env=env, text=True, capture_output=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert 'softroce: stopped n0' in out.stderr and 'softroce: stopped n1' in out.stderr
    assert not (tmp_path / 'softroce' / 'run' / 'state.json').exists()
    (_, cases), = _sessions(tmp_path)
    assert {name: result for name, (result, _, _) in cases.items()} == {
        'softroce_write_lat @nodes2': 'pass', 'softroce_write_bw @nodes2': 'pass'}
    perf = {k for _, _, p in cases.values() for k in p}
    assert {'softroce:nodes2:lat_2', 'softroce:nodes2:bw_65536', 'softroce:nodes2:bw_peak'} <= perf
    job = _job_out(tmp_path, 'nodes2', 'softroce_write_lat')
    assert 'node 0 on n0: rxe2:1 203.0.113.1\n' in job and 'node 1 on n1: rxe2:1 203.0.113.2\n' in job
    assert re.search(r'flow 0: server started on n1 cpu \d+: '
                     r'ib_write_lat -F -n 100 -u 20 -d rxe2 -i 1 -p 18515 -s 2\n', job)
    assert re.search(r'flow 0: client started on n0 cpu \d+: ib_write_lat -F -n 100 -u 20 -d rxe2 -i 1 -p 18515 -s 2 '
                     r'203\.0\.113\.2\n', job)


def test_a_boot_that_never_comes_up_is_tried_again_then_fails_clearly(tmp_path):
    """A guest that misses its boot time limit: every guest is stopped and booted once more, the first
    boot's console logs are kept, and when the second boot misses too `up` fails saying so, nothing left
    running. (No guest reaches its agent within a second under TCG.)"""
    env = _env(tmp_path)
    run_dir = tmp_path / 'softroce' / 'run'
    out = _ibrepro(env, 'up', '--nodes', '2', '--timeout', '1', timeout=300, check=False)
    assert out.returncode != 0
    assert 'softroce: boot 1 of 2 failed (its console logs are kept as <name>.boot1.console.log)' in out.stderr
    assert out.stderr.count('softroce: started n1') == 2
    assert 'did not come up in 1 s' in out.stderr and '(boot 2 of 2;' in out.stderr
    assert {p.name for p in run_dir.glob('*.console.log')} == {
        'n0.console.log', 'n1.console.log', 'n0.boot1.console.log', 'n1.boot1.console.log'}
    assert not (run_dir / 'state.json').exists()
    pids = {int(m) for m in re.findall(r'QEMU pid (\d+)', out.stderr)}
    assert len(pids) == 4 and not [p for p in pids if _alive(p)]


def test_softroce_run_killed_stops_its_guest(tmp_path):
    env = _env(tmp_path)
    run_dir = tmp_path / 'softroce' / 'run'
    proc = subprocess.Popen([BIN / 'ibrepro', 'softroce', 'run', '--', 'sleep', '600'], env=env,
                            text=True, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not (run_dir / 'n0.console.log').exists() or \
                'listening' not in (run_dir / 'n0.console.log').read_text():
            assert proc.poll() is None and time.monotonic() < deadline, 'the guest never came up'
            time.sleep(0.5)
        pids = _qemu_pids(run_dir)
        time.sleep(2)    # `run` is now in the command, past `up`
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert 'stopped (SIGTERM)' in err and 'softroce: stopped n0' in err
    assert not [p for p in pids if _alive(p)]
    assert not (run_dir / 'state.json').exists()

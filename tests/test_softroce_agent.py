"""The guest agent (ci/softroce/agent.py) and its client (ibrepro.softroce.guestexec), run on the
host: the same code the guests run, over a real TCP socket, without QEMU."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from ibrepro.paths import REPO_ROOT
from ibrepro.softroce import guestexec

AGENT = REPO_ROOT / 'ci' / 'softroce' / 'agent.py'


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _wait_listening(port, proc):
    for _ in range(100):
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return
        except OSError:
            assert proc.poll() is None, proc.stdout.read()
            time.sleep(0.05)
    raise AssertionError('agent did not listen')


@pytest.fixture
def agent(tmp_path):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(AGENT), '127.0.0.1', str(port), str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_listening(port, proc)
    yield port
    proc.kill()
    proc.wait()


class Captured:
    def __init__(self):
        self.chunks = []

    def write(self, data):
        self.chunks.append(data)

    def flush(self):
        pass

    @property
    def text(self):
        return b''.join(self.chunks).decode()


def run(port, argv, cwd, env=None):
    out, err = Captured(), Captured()
    code = guestexec.run(port, argv, cwd=str(cwd), env=env, stdout=out, stderr=err, node='n9')
    return code, out.text, err.text


def test_streams_stdout_stderr_and_exit_code(agent, tmp_path):
    code, out, err = run(agent, ['sh', '-c', 'echo out; echo err >&2; pwd; exit 3'], tmp_path)
    assert code == 3
    assert out == f'out\n{tmp_path}\n'
    assert err == 'err\n'


def test_environment_reaches_the_command(agent, tmp_path):
    code, out, _ = run(agent, ['sh', '-c', 'echo "$GREETING $PATH"'], tmp_path,
                       env={'GREETING': 'a b'})
    assert code == 0
    assert out.startswith('a b /usr/local/bin:')


def test_a_signal_gives_128_plus_its_number(agent, tmp_path):
    code, _, _ = run(agent, ['sh', '-c', 'kill -TERM $$'], tmp_path)
    assert code == 128 + signal.SIGTERM


def test_unknown_command_and_missing_directory_are_named(agent, tmp_path):
    code, _, err = run(agent, ['no-such-program-xyz'], tmp_path)
    assert code == 127
    assert 'guest-exec: n9: cannot run no-such-program-xyz' in err
    code, _, err = run(agent, ['true'], tmp_path / 'absent')
    assert code == 126
    assert f'working directory {tmp_path}/absent does not exist in the guest' in err
    assert f'shared from the host: {tmp_path}' in err


def test_commands_run_concurrently(agent, tmp_path):
    """A perftest server and its client run at the same time, one connection each."""
    results = []
    t0 = time.monotonic()
    threads = [threading.Thread(target=lambda: results.append(run(agent, ['sleep', '1'], tmp_path)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r[0] for r in results] == [0, 0, 0]
    assert time.monotonic() - t0 < 2.5


def test_killing_the_client_kills_the_command(agent, tmp_path):
    pidfile = tmp_path / 'pid'
    client = subprocess.Popen(
        [sys.executable, '-c', 'import sys; from ibrepro.softroce import guestexec; '
         f'sys.exit(guestexec.run({agent}, ["sh", "-c", "echo $$ > {pidfile}; exec sleep 60"], '
         f'cwd="{tmp_path}"))'])
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    remote = int(pidfile.read_text())
    os.kill(remote, 0)                 # running
    client.send_signal(signal.SIGTERM)
    client.wait()
    for _ in range(100):
        try:
            os.kill(remote, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f'remote command {remote} survived its client')


def test_no_agent_is_a_clear_error(tmp_path):
    with pytest.raises(guestexec.GuestError, match=r'n9 is not running \(nothing listens on '
                                                    r'127\.0\.0\.1:\d+'):
        run(_free_port(), ['true'], tmp_path)


def test_agent_dying_mid_command_is_a_clear_error(tmp_path):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(AGENT), '127.0.0.1', str(port)],
                            stdout=subprocess.DEVNULL, start_new_session=True)
    _wait_listening(port, proc)
    out = Captured()
    timer = threading.Timer(1.0, lambda: os.killpg(proc.pid, signal.SIGKILL))  # agent + handler
    timer.start()
    try:
        with pytest.raises(guestexec.GuestError, match='n9: lost the connection to the guest '
                                                       'while running "sh -c echo early; sleep 5"'):
            guestexec.run(port, ['sh', '-c', 'echo early; sleep 5'], cwd=str(tmp_path),
                          stdout=out, stderr=Captured(), node='n9')
    finally:
        timer.cancel()
        proc.wait()
    assert out.text == 'early\n'       # what came before the death is kept


def test_command_line_options():
    opts, cmd = guestexec._parse_args(['--node=n1', '--env', 'A=1', '--env=B=x=y', '--',
                                       'ib_write_lat', '--help'])
    assert opts == {'node': 'n1', 'run_dir': None, 'env': {'A': '1', 'B': 'x=y'}}
    assert cmd == ['ib_write_lat', '--help']
    opts, cmd = guestexec._parse_args(['ib_write_lat', '-d', 'rxe0', '--node=n5'])
    assert opts['node'] == 'n0' and cmd == ['ib_write_lat', '-d', 'rxe0', '--node=n5']
    with pytest.raises(SystemExit, match='unknown option --bogus'):
        guestexec._parse_args(['--bogus=1', 'true'])

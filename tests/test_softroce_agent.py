"""The guest agent (ci/softroce/agent.py) and its client (ibrepro.softroce.guestexec), run on the
host: the same code the guests run, over a real TCP socket, without QEMU; and the run directory's
privacy (ibrepro.softroce.guests)."""

import os
import re
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from ibrepro.paths import REPO_ROOT
from ibrepro.softroce import guestexec, guests

AGENT = REPO_ROOT / 'ci' / 'softroce' / 'agent.py'


def _start_agent(tmp_path, key):
    """An agent on 127.0.0.1, port chosen by the kernel (it binds port 0 itself); (process, address)."""
    key_file = tmp_path / 'agent.key'
    key_file.write_bytes(key)
    key_file.chmod(0o600)
    proc = subprocess.Popen([sys.executable, str(AGENT), '127.0.0.1', '0', str(key_file), str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    line = proc.stdout.readline()
    m = re.match(r'softroce agent: listening on 127\.0\.0\.1:(\d+)', line)
    assert m, line + proc.stdout.read()
    return proc, ('127.0.0.1', int(m.group(1)))


@pytest.fixture
def key():
    return secrets.token_hex(32).encode()


@pytest.fixture
def agent(tmp_path, key):
    proc, address = _start_agent(tmp_path, key)
    yield address
    os.killpg(proc.pid, signal.SIGKILL)
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


def run(address, argv, cwd, env=None, key=None):
    out, err = Captured(), Captured()
    code = guestexec.run(address, argv, key or KEY[0], cwd=str(cwd), env=env, stdout=out, stderr=err,
                         node='n9')
    return code, out.text, err.text


KEY = []


@pytest.fixture(autouse=True)
def _remember_key(key):
    """run() uses the agent fixture's key unless told otherwise."""
    KEY[:] = [key]


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


def test_killing_the_client_kills_the_command(agent, key, tmp_path):
    pidfile = tmp_path / 'pid'
    client = subprocess.Popen(
        [sys.executable, '-c', 'import sys; from ibrepro.softroce import guestexec; '
         f'sys.exit(guestexec.run({agent!r}, ["sh", "-c", "echo $$ > {pidfile}; exec sleep 60"], '
         f'{key!r}, cwd="{tmp_path}"))'])
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
    with socket.socket() as s:        # a port that nothing listens on: bound, never listening
        s.bind(('127.0.0.1', 0))
        with pytest.raises(guestexec.GuestError, match=r'n9 is not running \(nothing listens on '
                                                        r'127\.0\.0\.1:\d+'):
            run(s.getsockname(), ['true'], tmp_path)


def test_agent_dying_mid_command_is_a_clear_error(tmp_path, key):
    proc, address = _start_agent(tmp_path, key)
    out = Captured()
    timer = threading.Timer(1.0, lambda: os.killpg(proc.pid, signal.SIGKILL))  # agent + handler
    timer.start()
    try:
        with pytest.raises(guestexec.GuestError, match='n9: lost the connection to the guest '
                                                       'while running "sh -c echo early; sleep 5"'):
            guestexec.run(address, ['sh', '-c', 'echo early; sleep 5'], key, cwd=str(tmp_path),
                          stdout=out, stderr=Captured(), node='n9')
    finally:
        timer.cancel()
        proc.wait()
    assert out.text == 'early\n'       # what came before the death is kept


# ---- authentication: nothing runs, and nothing is sent, without the run's key ---------------------

def _frame(kind, payload=b''):
    return kind + struct.pack('>I', len(payload)) + payload


def _recv_all(sock):
    data = b''
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:    # closed with our unread frames in its buffer
        pass
    return data


def test_a_client_without_the_key_runs_nothing(agent, tmp_path):
    marker = tmp_path / 'ran'
    with pytest.raises(guestexec.GuestError,
                       match=r"n9: the agent on 127.0.0.1:\d+ refused this run's key.*nothing was sent"):
        run(agent, ['touch', str(marker)], tmp_path, key=secrets.token_hex(32).encode())
    assert not marker.exists()


def test_a_raw_connection_that_skips_the_handshake_is_closed_unheard(agent, tmp_path):
    """A local user who reaches the port and just sends a command: the agent reads the first frame as a
    proof, finds it wrong, and closes; the command never runs."""
    marker = tmp_path / 'ran'
    with socket.create_connection(agent, timeout=10) as sock:
        request = _frame(b'c', str(tmp_path).encode()) + _frame(b'a', b'touch') + \
            _frame(b'a', str(marker).encode()) + _frame(b'r')
        sock.sendall(request)
        received = _recv_all(sock)
    assert received[:1] == b'h' and len(received) == 5 + 16     # the challenge, then nothing
    time.sleep(0.5)
    assert not marker.exists()


def test_an_impostor_on_the_port_receives_no_command(tmp_path, key):
    """Something else listening where the client connects (a port taken first): it cannot prove the key,
    so the client stops before sending the working directory, the command or its environment."""
    got = []
    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen(1)

    def impostor():
        conn, _ = server.accept()
        with conn:
            conn.sendall(_frame(b'h', os.urandom(16)))
            conn.settimeout(5)
            try:
                header = conn.recv(5)
                got.append(header + conn.recv(struct.unpack('>I', header[1:])[0]))
                conn.sendall(_frame(b'h', os.urandom(32)))          # a made-up proof
                got.append(_recv_all(conn))
            except OSError:
                pass

    thread = threading.Thread(target=impostor)
    thread.start()
    try:
        with pytest.raises(guestexec.GuestError, match='does not hold this run\'s agent key.*nothing was sent'):
            run(server.getsockname(), ['echo', 'SECRET-ARGUMENT'], tmp_path, env={'TOKEN': 'SECRET-ENV'}, key=key)
    finally:
        thread.join(10)
        server.close()
    assert got[0][:1] == b'h' and len(got[0]) == 5 + 16 + 32      # the client's nonce and proof only
    assert got[1] == b''                                            # then the client hung up
    assert b'SECRET' not in b''.join(got) and str(tmp_path).encode() not in b''.join(got)


def test_agent_without_a_key_does_not_listen(tmp_path):
    (tmp_path / 'agent.key').write_text('short')
    proc = subprocess.Popen([sys.executable, str(AGENT), '127.0.0.1', '0', str(tmp_path / 'agent.key')],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
    finally:
        proc.kill()
        proc.wait()
    assert 'no usable key' in line and 'not listening' in line


def test_each_run_gets_a_new_private_key(tmp_path):
    first = guests._new_key(tmp_path)
    text = first.read_text()
    assert oct(first.stat().st_mode & 0o777) == '0o600' and re.fullmatch(r'[0-9a-f]{64}', text)
    assert guests._new_key(tmp_path).read_text() != text


def test_a_link_planted_at_the_key_name_is_replaced_not_followed(tmp_path):
    target = tmp_path / 'elsewhere'
    target.write_text('keep me')
    (tmp_path / 'run').mkdir()
    (tmp_path / 'run' / 'agent.key').symlink_to(target)
    guests._new_key(tmp_path / 'run')
    assert target.read_text() == 'keep me'
    assert not (tmp_path / 'run' / 'agent.key').is_symlink()


# ---- the run directory: private, or refused ---------------------------------------------------------

def test_run_directory_is_created_private(tmp_path):
    run_dir = guests.private_dir(tmp_path / 'a' / 'run')
    assert oct(run_dir.stat().st_mode & 0o777) == '0o700'


def test_own_run_directory_is_made_private(tmp_path):
    (tmp_path / 'run').mkdir(mode=0o755)
    assert oct(guests.private_dir(tmp_path / 'run').stat().st_mode & 0o777) == '0o700'


@pytest.mark.parametrize('hostile', ['world-writable', 'symlink', 'other-owner'])
def test_hostile_run_directory_is_refused(tmp_path, hostile):
    run_dir = tmp_path / 'run'
    if hostile == 'world-writable':
        run_dir.mkdir()
        run_dir.chmod(0o777)
    elif hostile == 'symlink':
        (tmp_path / 'theirs').mkdir(mode=0o700)
        run_dir.symlink_to(tmp_path / 'theirs')
    else:
        if os.geteuid() != 0:
            pytest.skip('needs root to give a directory to another user')
        run_dir.mkdir(mode=0o700)
        os.chown(run_dir, 65534, 65534)
    with pytest.raises(guests.SoftRoCEError, match='refusing the run directory'):
        guests.private_dir(run_dir)


def test_command_line_options():
    opts, cmd = guestexec._parse_args(['--node=n1', '--env', 'A=1', '--env=B=x=y', '--',
                                       'ib_write_lat', '--help'])
    assert opts == {'node': 'n1', 'run_dir': None, 'env': {'A': '1', 'B': 'x=y'}}
    assert cmd == ['ib_write_lat', '--help']
    opts, cmd = guestexec._parse_args(['ib_write_lat', '-d', 'rxe0', '--node=n5'])
    assert opts['node'] == 'n0' and cmd == ['ib_write_lat', '-d', 'rxe0', '--node=n5']
    with pytest.raises(SystemExit, match='unknown option --bogus'):
        guestexec._parse_args(['--bogus=1', 'true'])

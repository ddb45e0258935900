"""Guest agent of the soft-RoCE nodes: runs the commands `ibrepro softroce exec` sends from the host.

Runs inside the guest under Debian's python3.11 (the standard library only). One TCP connection per
command; the agent forks a handler per connection, so a perftest server and its client can run at
the same time.

Protocol: frames of one type byte, a 4-byte big-endian length and the payload.
Every connection starts with a mutual proof of the run's secret key (0600 in the host's run
directory, handed to the guest by QEMU fw_cfg, never on a command line), so neither a local user
who reaches the port nor a process that took the port first can run commands or forge outputs:
  guest -> host  b'h' nonce_a (16 random bytes)
  host -> guest  b'h' nonce_c + HMAC-SHA256(key, b'ibrepro-agent client' + nonce_a + nonce_c)
  guest -> host  b'h' HMAC-SHA256(key, b'ibrepro-agent agent' + nonce_c + nonce_a)
A wrong proof closes the connection before anything else is read or sent. Then:
  host -> guest  b'c' working directory, b'a' one argv element (repeated),
                 b'e' NAME=VALUE (repeated), b'r' run (empty; ends the request)
  guest -> host  b's' started (pid), b'o' stdout bytes, b'e' stderr bytes,
                 b'f' could not start (message), b'x' exit status (ASCII int; -N = signal N)
The host closing the connection kills the command's process group: a killed `exec` on the host
never leaves a perftest server spinning in the guest.

Usage: agent.py [HOST PORT KEYFILE [SHARE]]; without arguments (in the guest) the kernel command
line's ibr_agent (address:port) and ibr_share say where to listen and what is shared, and the key is
/run/softroce/agent.key (setup.sh copies it from fw_cfg).
"""

import hashlib
import hmac
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time

#: Environment of every command; the host adds its own NAME=VALUE pairs on top.
BASE_ENV = {
    'PATH': '/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin',
    'HOME': '/root',
    'LANG': 'C',
    # coreutils' stdbuf library: stdout is line buffered even into a pipe, so whatever a
    # benchmark printed reaches the host at once (perftest block-buffers into pipes)
    'LD_PRELOAD': '/usr/libexec/coreutils/libstdbuf.so',
    '_STDBUF_O': 'L',
}


#: Seconds a connection may take to prove the key.
HANDSHAKE_TIMEOUT = 10
NONCE = 16


def proof(key, role, first, second):
    """The HMAC one side sends to show it holds ``key`` (``role``: b'client' or b'agent')."""
    return hmac.new(key, b'ibrepro-agent ' + role + first + second, hashlib.sha256).digest()


def authenticate(conn, key):
    """The agent's side of the handshake; False (and nothing revealed) if the peer lacks the key."""
    conn.settimeout(HANDSHAKE_TIMEOUT)
    nonce_a = os.urandom(NONCE)
    send(conn, b'h', nonce_a)
    kind, payload = recv_frame(conn, limit=NONCE + 32)
    nonce_c, mac = payload[:NONCE], payload[NONCE:]
    if kind != b'h' or len(nonce_c) != NONCE or not hmac.compare_digest(mac, proof(key, b'client', nonce_a, nonce_c)):
        return False

    send(conn, b'h', proof(key, b'agent', nonce_c, nonce_a))
    conn.settimeout(None)
    return True


def send(conn, kind, payload=b''):
    conn.sendall(kind + struct.pack('>I', len(payload)) + payload)


def recv_exact(conn, size):
    data = b''
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk

    return data


def recv_frame(conn, limit=1 << 24):
    header = recv_exact(conn, 5)
    size = struct.unpack('>I', header[1:])[0]
    if size > limit:
        raise EOFError
    return header[:1], recv_exact(conn, size)


def read_request(conn):
    cwd, argv, env = None, [], {k.encode(): v.encode() for k, v in BASE_ENV.items()}
    if not os.path.exists(env[b'LD_PRELOAD']):   # e.g. the agent's own tests on the host
        del env[b'LD_PRELOAD'], env[b'_STDBUF_O']

    while True:
        kind, payload = recv_frame(conn)
        if kind == b'c':
            cwd = payload
        elif kind == b'a':
            argv.append(payload)
        elif kind == b'e':
            name, _, value = payload.partition(b'=')
            env[name] = value
        elif kind == b'r':
            return cwd, argv, env


def handle(conn, share, key):
    """Check the peer's key, run one command and stream its output to ``conn``."""
    if not authenticate(conn, key):
        return

    cwd, argv, env = read_request(conn)
    if not argv:
        send(conn, b'f', b'no command given')
        send(conn, b'x', b'127')
        return

    if cwd and not os.path.isdir(cwd):
        send(conn, b'f', b'working directory %s does not exist in the guest (shared from the '
                         b'host: %s)' % (cwd, share.encode()))
        send(conn, b'x', b'126')
        return

    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as err:
        send(conn, b'f', b'cannot run %s: %s' % (argv[0], (err.strerror or str(err)).encode()))
        send(conn, b'x', b'127' if isinstance(err, FileNotFoundError) else b'126')
        return

    try:
        send(conn, b's', str(proc.pid).encode())
        stream(conn, proc)
    except OSError:                        # the host went away: nobody wants the rest
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

        proc.wait()


def stream(conn, proc):
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, b'o')
    sel.register(proc.stderr, selectors.EVENT_READ, b'e')
    sel.register(conn, selectors.EVENT_READ, None)
    streams = 2
    while streams:
        for key, _ in sel.select():
            if key.data is None:           # the host sends nothing more: readable means closed
                if not conn.recv(4096):
                    raise ConnectionResetError('the host closed the connection')

                continue

            chunk = os.read(key.fd, 65536)
            if chunk:
                send(conn, key.data, chunk)
            else:
                sel.unregister(key.fileobj)
                streams -= 1

    send(conn, b'x', str(proc.wait()).encode())


def kernel_params():
    with open('/proc/cmdline') as f:
        return dict(kv.split('=', 1) for kv in f.read().split() if kv.startswith('ibr_') and '=' in kv)


def main(argv):
    if len(argv) > 3:
        host, port, key_file, share = argv[1], int(argv[2]), argv[3], argv[4] if len(argv) > 4 else '-'
    else:
        params = kernel_params()
        host, _, port = params['ibr_agent'].rpartition(':')
        port, key_file, share = int(port), '/run/softroce/agent.key', params.get('ibr_share', '-')
    try:
        with open(key_file, 'rb') as f:
            key = f.read().strip()
    except OSError as err:
        key = b''
        print(f'softroce agent: cannot read the key: {err}', flush=True)
    if len(key) < 32:
        print(f'softroce agent: no usable key in {key_file} (the host hands it over as fw_cfg '
              'opt/org.ibrepro/agent.key); not listening', flush=True)
        time.sleep(30)     # busybox init respawns the agent: not in a tight loop
        return 1

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # handlers are reaped by the kernel
    with open('/proc/uptime') as f:
        uptime = f.read().split()[0]
    host, port = server.getsockname()[:2]    # port 0 (tests): the one the kernel chose
    print(f'softroce agent: listening on {host}:{port} (uptime {uptime} s)', flush=True)
    while True:
        conn, _ = server.accept()
        if os.fork() == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)   # the handler waits for its command
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                handle(conn, share, key)
            except (EOFError, OSError):
                pass
            finally:
                os._exit(0)

        conn.close()


if __name__ == '__main__':
    sys.exit(main(sys.argv))

"""Run one command inside a soft-RoCE guest, streaming its stdout/stderr and returning its exit code.

This is the launcher of the `softroce` ReFrame partitions (``python -m ibrepro.softroce.guestexec
--node n0 CMD...``) and of ``ibrepro softroce exec``. It talks to ``ci/softroce/agent.py`` in the
guest over TCP (a port QEMU forwards from 127.0.0.1, or the guest's address on the management
network), after both sides proved they hold the run's key (protocol described there): nothing is
sent to a listener that cannot prove it. The command runs in the caller's working directory, which
must be under the directory shared into the guests.

Exit codes: the command's own; 128+N if a signal N killed it; 126/127 if it could not be
started; 255 if the guest could not be reached or died while the command ran.
"""

import hashlib
import hmac
import os
import socket
import struct
import sys

#: exit code when the guest is unreachable or dies (what ssh uses for its own failures)
GUEST_FAILED = 255


class GuestError(RuntimeError):
    """The guest could not be reached, or went away while a command ran."""


# The framing twins send/recv_exact/recv_frame of ci/softroce/agent.py: the agent runs in the guest's bare
# python3 and cannot import ibrepro.
def _send(sock, kind, payload=b''):
    sock.sendall(kind + struct.pack('>I', len(payload)) + payload)


def _recv_exact(sock, size):
    data = b''
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None

        data += chunk

    return data


def _recv_frame(sock, limit=1 << 24):
    header = _recv_exact(sock, 5)
    if header is None:
        return None, None

    size = struct.unpack('>I', header[1:])[0]
    if size > limit:
        return None, None

    payload = _recv_exact(sock, size)
    return (None, None) if payload is None else (header[:1], payload)


def _proof(key, role, first, second):
    return hmac.new(key, b'ibrepro-agent ' + role + first + second, hashlib.sha256).digest()


def _authenticate(sock, key, node, where):
    """The host's side of the agent's handshake: prove the key, and check that the agent holds it too."""
    kind, nonce_a = _recv_frame(sock, limit=64)
    if kind != b'h' or len(nonce_a) != 16:
        raise GuestError(f'{node}: {where} did not start the agent\'s handshake (the guest is still '
                         'booting, or something else took the port)')

    nonce_c = os.urandom(16)
    _send(sock, b'h', nonce_c + _proof(key, b'client', nonce_a, nonce_c))
    kind, mac = _recv_frame(sock, limit=64)
    if kind is None:
        raise GuestError(f'{node}: the agent on {where} refused this run\'s key (the guest was given '
                         'another one: a guest of another run?); nothing was sent')
    if kind != b'h' or not hmac.compare_digest(mac, _proof(key, b'agent', nonce_c, nonce_a)):
        raise GuestError(f'{node}: {where} does not hold this run\'s agent key: it is not the agent of '
                         'this run (another run\'s guest, or something else on the port); nothing was sent')


def run(address, argv, key, cwd=None, env=None, stdout=None, stderr=None, node='guest',
        connect_timeout=10):
    """Run ``argv`` in the guest whose agent listens on ``address`` ((host, port)); return its exit code.

    ``key`` is the run's agent key (bytes). Output goes to the binary streams ``stdout``/``stderr``
    (default: ours) as it arrives. Raises GuestError if the agent does not answer, fails the handshake,
    or the connection drops before the exit status.
    """
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr.buffer
    what = ' '.join(argv)
    where = f'{address[0]}:{address[1]}'
    try:
        sock = socket.create_connection(tuple(address), timeout=connect_timeout)
    except OSError as err:
        raise GuestError(f'{node} is not running (nothing listens on {where}: '
                         f'{err.strerror or err}); start it with `ibrepro softroce up`') from None

    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            _authenticate(sock, key, node, where)
        except OSError as err:
            raise GuestError(f'{node}: the agent on {where} did not answer ({err}): the guest is still '
                             'booting or has died; see its console log') from None
        sock.settimeout(None)
        try:
            _send(sock, b'c', os.fsencode(cwd or os.getcwd()))
            for arg in argv:
                _send(sock, b'a', os.fsencode(arg))
            for name, value in (env or {}).items():
                _send(sock, b'e', os.fsencode(f'{name}={value}'))
            _send(sock, b'r')
        except OSError as err:
            raise GuestError(f'{node}: cannot send the command: {err}') from None

        started = False
        while True:
            try:
                kind, payload = _recv_frame(sock)
            except OSError:
                kind = None

            if kind is None:
                if not started:
                    raise GuestError(f'{node}: the guest agent did not answer (the guest is '
                                     'still booting or has died; see its console log)')

                raise GuestError(f'{node}: lost the connection to the guest while running '
                                 f'"{what}": the guest or its agent died')
            if kind == b's':
                started = True
            elif kind in (b'o', b'e'):
                out = stdout if kind == b'o' else stderr
                out.write(payload)
                out.flush()
            elif kind == b'f':
                stderr.write(b'guest-exec: ' + node.encode() + b': ' + payload + b'\n')
                stderr.flush()
            elif kind == b'x':
                code = int(payload)
                return 128 - code if code < 0 else code


def _parse_args(argv):
    """``[--node NAME] [--run-dir DIR] [--env NAME=VALUE]... [--] CMD [ARG...]``.

    Hand-parsed: everything from the first non-option on is the command, dashes included.
    """
    opts = {'node': 'n0', 'run_dir': None, 'env': {}}
    i = 0
    while i < len(argv) and argv[i].startswith('--'):
        arg = argv[i]
        if arg == '--':
            i += 1
            break

        name, eq, value = arg[2:].partition('=')
        if not eq:
            if i + 1 >= len(argv):
                raise SystemExit(f'guest-exec: {arg} needs a value')

            i, value = i + 1, argv[i + 1]

        if name == 'node':
            opts['node'] = value
        elif name == 'run-dir':
            opts['run_dir'] = value
        elif name == 'env':
            key, _, val = value.partition('=')
            opts['env'][key] = val
        else:
            raise SystemExit(f'guest-exec: unknown option --{name}')

        i += 1

    if i >= len(argv):
        raise SystemExit('usage: guestexec [--node NAME] [--run-dir DIR] [--env NAME=VALUE]... '
                         '[--] CMD [ARG...]')

    return opts, argv[i:]


def main(argv=None):
    from . import guests   # here, not at the top: guests imports this module

    opts, command = _parse_args(sys.argv[1:] if argv is None else argv)
    try:
        address, key = guests.agent(opts['node'], opts['run_dir'])
        return run(address, command, key, env=opts['env'], node=opts['node'])
    except GuestError as err:
        print(f'guest-exec: {err}', file=sys.stderr)
        return GUEST_FAILED


if __name__ == '__main__':
    sys.exit(main())

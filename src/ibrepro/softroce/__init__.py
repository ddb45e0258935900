"""Soft-RoCE nodes: QEMU guests whose RDMA ports are Linux's rdma_rxe, to run the verbs checks
end to end on a machine without InfiniBand (CI). Their numbers are emulated, never performance data.

  image      Debian kernel + initramfs from .debs, cached by the exact package versions
  guests     start/stop the guests (one dual-port guest, two guests joined by a link, or N Slurm nodes)
  fabric     the Slurm nodes' network: host bridges and tap devices (management, two fabric planes)
  guestexec  run a command in a guest, streaming its output (the ReFrame launcher)
  config     the `softroce` ReFrame launcher, system and environment (configs/softroce.py)

``ibrepro softroce build|up|down|status|exec|run``; the guest's own files are in ``ci/softroce/``.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..paths import data_home


def cache_dir() -> Path:
    """Downloaded .debs and built images: ``$IBREPRO_SOFTROCE_CACHE`` or ``~/.cache/ibrepro/softroce``."""
    if os.environ.get('IBREPRO_SOFTROCE_CACHE'):
        return Path(os.environ['IBREPRO_SOFTROCE_CACHE']).expanduser()

    xdg = os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache'
    return Path(xdg).expanduser() / 'ibrepro' / 'softroce'


def run_dir() -> Path:
    """State and logs of the running guests: ``$IBREPRO_SOFTROCE_RUN`` or ``<data home>/softroce/run``."""
    return Path(os.environ.get('IBREPRO_SOFTROCE_RUN') or data_home() / 'softroce' / 'run')


def share_dir() -> Path:
    """The host directory mounted in the guests at the same path; the ReFrame prefix of the
    softroce system lives in it: ``$IBREPRO_SOFTROCE_SHARE`` or ``<data home>/softroce/share``."""
    return Path(os.environ.get('IBREPRO_SOFTROCE_SHARE') or data_home() / 'softroce' / 'share')


def add_cli(subparsers):
    p = subparsers.add_parser(
        'softroce', help='soft-RoCE QEMU guests for running the verbs checks without InfiniBand',
        description='Build the guest image, start/stop the guests (rdma_rxe ports rxe0<->rxe1 '
                    'in each guest, rxe2 linking two guests) and run commands in them. '
                    'Run as root: installs qemu-system-x86 from Debian if missing.')
    sub = p.add_subparsers(dest='action', metavar='ACTION', required=True)

    def common(q):
        q.add_argument('--run-dir', type=Path, default=None, help=f'default: {run_dir()}')

    def start_options(q):
        common(q)
        q.add_argument('--nodes', type=int, default=int(os.environ.get('NODES', 1)),
                       help='1: one dual-port guest; 2: two guests linked; with --slurm: N Slurm nodes '
                            '(default: $NODES or 1)')
        q.add_argument('--slurm', type=Path, metavar='MUNGE_KEY', default=None,
                       help='start Slurm nodes rxnode1..N on a tap fabric (root; ci/softroce/slurm-up.sh): '
                            'their munge key; writes <run dir>/slurm-nodes.conf for slurm.conf')
        q.add_argument('--share', type=Path, default=None, help=f'default: {share_dir()}')
        q.add_argument('--extra', type=Path, default=os.environ.get('IBREPRO_SOFTROCE_EXTRA') or None,
                       help='host directory copied into the guests\' /usr/local (bin/, lib/)')
        q.add_argument('--smp', type=int, default=4, help='vCPUs per guest (default 4: fewer '
                       'make busy-polling perftest pairs wait for each other)')
        q.add_argument('--memory', default='1G')
        q.add_argument('--timeout', type=float, default=240, help='boot time limit, s')

    q = sub.add_parser('build', help='build (or find cached) the guest image; print its directory')
    q.add_argument('--extra', type=Path, default=os.environ.get('IBREPRO_SOFTROCE_EXTRA') or None)
    q.set_defaults(func=_cli_build)
    q = sub.add_parser('up', help='start the guests and wait until they run commands')
    start_options(q)
    q.set_defaults(func=_cli_up)
    q = sub.add_parser('down', help='stop the guests started by `up` (only their recorded PIDs)')
    common(q)
    q.set_defaults(func=_cli_down)
    q = sub.add_parser('status', help='show the guests and whether their agents answer')
    common(q)
    q.set_defaults(func=_cli_status)
    q = sub.add_parser('exec', help='run a command in a guest (the ReFrame launcher)',
                       description='ibrepro softroce exec [--node n0] [--env NAME=VALUE]... '
                                   '[--] CMD [ARG...]', add_help=False, prefix_chars='\0')
    q.add_argument('args', nargs=argparse.REMAINDER)
    q.set_defaults(func=_cli_exec)
    q = sub.add_parser('run', help='up, run a command, down (also when it fails or is killed)')
    start_options(q)
    q.add_argument('command', nargs=argparse.REMAINDER, help='-- CMD [ARG...]')
    q.set_defaults(func=_cli_run)


def _dirs(args):
    rdir = args.run_dir or run_dir()
    share = getattr(args, 'share', None) or share_dir()
    return rdir, share


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


def _cli_build(args):
    from . import image

    try:
        print(image.build(cache_dir(), args.extra, log=_log))
    except image.ImageError as err:
        _log(f'ibrepro softroce build: {err}')
        return 1


def _up(args):
    from . import fabric, guests, image

    rdir, share = _dirs(args)
    slurm = None
    if args.slurm:
        if os.geteuid() != 0:
            raise guests.SoftRoCEError('--slurm makes bridges and tap devices: run as root')
        slurm = {'munge_key': args.slurm.resolve(), 'head_name': socket.gethostname().split('.')[0]}
    img = image.build(cache_dir(), args.extra, log=_log)
    t0 = time.monotonic()
    guests.up(img, rdir, share, nodes=args.nodes, smp=args.smp, memory=args.memory,
              timeout=args.timeout, log=_log, slurm=slurm)
    if slurm:
        (Path(rdir) / 'slurm-nodes.conf').write_text(fabric.slurm_nodes(args.nodes, args.smp))
    _log(f'softroce: {args.nodes} guest(s) up in {time.monotonic() - t0:.1f} s; shared '
         f'directory {Path(share).resolve()}; stop with `ibrepro softroce down`')


def _cli_up(args):
    from . import guests, image

    try:
        _up(args)
    except (guests.SoftRoCEError, image.ImageError) as err:
        _log(f'ibrepro softroce up: {err}')
        return 1


def _cli_down(args):
    from . import guests

    t0 = time.monotonic()
    try:
        stopped = guests.down(_dirs(args)[0], log=_log)
    except guests.SoftRoCEError as err:
        _log(f'ibrepro softroce down: {err}')
        return 1
    _log(f'softroce: down in {time.monotonic() - t0:.1f} s' if stopped else
         'softroce: no guests were up')


def _cli_status(args):
    from . import guestexec, guests

    rdir = _dirs(args)[0]
    state = guests.read_state(rdir)
    if not state:
        print(f'no guests up ({rdir})')
        return 1

    status = 0
    for guest in state['guests']:
        with open(os.devnull, 'wb') as null:
            try:
                address, key = guests.agent(guest['name'], rdir)
                guestexec.run(address, ['true'], key, cwd='/', stdout=null, stderr=null,
                              node=guest['name'], connect_timeout=2)
                answer = 'agent answers'
            except guestexec.GuestError as err:
                answer, status = str(err), 1
        where = ':'.join(map(str, guest.get('agent') or ['?']))
        print(f'{guest["name"]}: QEMU pid {guest["pid"]}, agent {where}: {answer}')

    return status


def _cli_exec(args):
    from . import guestexec

    return guestexec.main(args.args)


class _Stop(Exception):
    """SIGTERM/SIGHUP while `run` runs: unwind so that the guests go down."""


def _raise_stop(signum, frame):
    raise _Stop(signal.Signals(signum).name)


def _cli_run(args):
    from . import guests, image

    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    if not command:
        _log('ibrepro softroce run: no command given (ibrepro softroce run [OPTIONS] -- CMD ...)')
        return 2

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_stop)
    rdir = _dirs(args)[0]
    try:
        _up(args)
        return subprocess.run(command).returncode
    except (guests.SoftRoCEError, image.ImageError) as err:
        _log(f'ibrepro softroce run: {err}')
        return 1
    except (_Stop, KeyboardInterrupt) as err:
        _log(f'ibrepro softroce run: stopped ({err or "SIGINT"})')
        return 130
    finally:
        t0 = time.monotonic()
        guests.down(rdir, log=_log)
        _log(f'softroce: down in {time.monotonic() - t0:.1f} s')

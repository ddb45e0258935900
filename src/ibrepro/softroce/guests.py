"""Start, probe and stop the QEMU guests of the soft-RoCE nodes.

Every guest is the same (addresses from the documentation ranges, used only inside the guests):

  nI  rxe0 198.51.100.(10I+1) and rxe1 198.51.100.(10I+2) on the two ends of a veth pair:
        a dual-port HCA with a cable between its two ports
      rxe2 203.0.113.(I+1)/25 on link0, a virtio NIC joined to the other guest by a QEMU socket
        netdev on 127.0.0.1 (two-guest mode only)
      ctl0 203.0.113.200/25: QEMU user networking with restrict=on, so nothing leaves QEMU but
        the agent's port, forwarded from 127.0.0.1:<agent port> on the host
      the host's shared directory (9p) mounted at the same path

The guests run under TCG (this machine's /dev/kvm is kvm-pvm, which cannot boot a stock kernel):
their numbers are emulated-CPU numbers, never performance data.

State lives in the run directory: ``state.json`` (PIDs, ports, share), ``nI.console.log`` (the
guest's serial console), ``nI.qemu.log``. ``down`` stops exactly the recorded PIDs, after
checking that each still is the QEMU of this run directory.
"""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from . import guestexec

AGENT_PORT = 7000           # inside the guest
CTL_ADDRESS = '203.0.113.200/25'
DEVICES = ('rxe0', 'rxe1', 'rxe2')


def addresses(index):
    """{device: address/prefix} of guest ``index``'s rxe ports."""
    return {'rxe0': f'198.51.100.{10 * index + 1}/24', 'rxe1': f'198.51.100.{10 * index + 2}/24',
            'rxe2': f'203.0.113.{index + 1}/25'}


def address(node, device):
    """The IPv4 address of ``device`` on guest ``node`` ('n0', 'n1'), for perftest's server host."""
    return addresses(int(node.lstrip('n')))[device].split('/')[0]


class SoftRoCEError(RuntimeError):
    """The guests could not be started or stopped; the message says why and where to look."""


def _state_file(run_dir):
    return Path(run_dir) / 'state.json'


def read_state(run_dir):
    try:
        return json.loads(_state_file(run_dir).read_text())
    except FileNotFoundError:
        return None


def _write_state(run_dir, state):
    tmp = _state_file(run_dir).with_suffix('.tmp')
    tmp.write_text(json.dumps(state, indent=2))
    tmp.rename(_state_file(run_dir))


def agent_port(node, run_dir=None):
    """The host port forwarded to ``node``'s agent; GuestError if the guests are not up."""
    from . import run_dir as default_run_dir

    run_dir = Path(run_dir or default_run_dir())
    state = read_state(run_dir)
    if not state:
        raise guestexec.GuestError(f'no soft-RoCE guests are up ({_state_file(run_dir)} does not '
                                   'exist); start them with `ibrepro softroce up`')
    for guest in state['guests']:
        if guest['name'] == node:
            return guest['agent_port']

    names = ', '.join(g['name'] for g in state['guests'])
    raise guestexec.GuestError(f'no guest {node} (up: {names}; `ibrepro softroce up --nodes 2` '
                               'starts two)')


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _listening(port):
    """Whether something listens on TCP ``port`` (read from /proc: a probe would take the accept)."""
    for line in Path('/proc/net/tcp').read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == '0A' and int(local.split(':')[1], 16) == port:
            return True

    return False


def qemu_command(image, index, nodes, share, agent_port, link_port, run_dir, smp=4, memory='1G'):
    """The QEMU command line of guest ``index``."""
    name = f'n{index}'
    kernel = next(p for p in (Path(image) / 'vmlinux', Path(image) / 'vmlinuz') if p.exists())
    params = {'ibr_node': index, 'ibr_ctl': CTL_ADDRESS, 'ibr_agent_port': AGENT_PORT,
              'ibr_ctl_mac': f'52:54:00:00:ff:{index:02x}', 'ibr_share': share,
              **{f'ibr_{dev}': addr for dev, addr in addresses(index).items()}}
    ctl_net = ('user,id=ctl,restrict=on,net=203.0.113.128/25,host=203.0.113.130,'
               'dns=203.0.113.131,dhcpstart=203.0.113.200,'
               f'hostfwd=tcp:127.0.0.1:{agent_port}-{CTL_ADDRESS.split("/")[0]}:{AGENT_PORT}')
    cmd = ['qemu-system-x86_64', '-name', f'ibrepro-softroce-{name}',
           '-accel', 'tcg,thread=multi', '-cpu', 'max', '-smp', str(smp), '-m', memory,
           '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
           '-kernel', str(kernel), '-initrd', str(Path(image) / 'initramfs.cpio'),
           '-serial', f'file:{Path(run_dir) / f"{name}.console.log"}',
           '-netdev', ctl_net, '-device', f'virtio-net-pci,netdev=ctl,mac={params["ibr_ctl_mac"]}',
           '-virtfs', f'local,path={share},mount_tag=share,security_model=none,id=share']
    if nodes > 1:
        params['ibr_link_mac'] = f'52:54:00:00:01:{index:02x}'
        role = 'listen' if index == 0 else 'connect'
        cmd += ['-netdev', f'socket,id=link,{role}=127.0.0.1:{link_port}',
                '-device', f'virtio-net-pci,netdev=link,mac={params["ibr_link_mac"]}']

    append = 'console=ttyS0 panic=-1 quiet ' + ' '.join(f'{k}={v}' for k, v in params.items())
    return cmd + ['-append', append]


def _alive(pid):
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except FileNotFoundError:
        return False

    return stat.rsplit(')', 1)[1].split()[0] != 'Z'


def _ours(pid, run_dir):
    """Whether ``pid`` still is a QEMU started for ``run_dir`` (PIDs are reused)."""
    try:
        cmdline = Path(f'/proc/{pid}/cmdline').read_bytes().decode(errors='replace')
    except FileNotFoundError:
        return False

    return 'qemu-system' in cmdline and f'file:{Path(run_dir)}/' in cmdline


def _tail(path, lines=15):
    try:
        return '\n'.join(Path(path).read_text(errors='replace').splitlines()[-lines:])
    except FileNotFoundError:
        return '(no log)'


def _wait_ready(state, t_start, deadline, log):
    """Wait until every guest's agent runs a command; SoftRoCEError if a guest dies or times out."""
    pending = list(state['guests'])
    while pending:
        guest = pending[0]
        if not _alive(guest['pid']):
            raise SoftRoCEError(
                f'guest {guest["name"]} (QEMU pid {guest["pid"]}) exited during boot; '
                f'{guest["qemu_log"]}:\n{_tail(guest["qemu_log"])}\n'
                f'{guest["console_log"]}:\n{_tail(guest["console_log"])}')
        try:
            with open(os.devnull, 'wb') as null:
                guestexec.run(guest['agent_port'], ['true'], cwd='/', stdout=null, stderr=null,
                              node=guest['name'], connect_timeout=2)
            log(f'softroce: {guest["name"]} ready after {time.monotonic() - t_start:.1f} s')
            pending.pop(0)
            continue
        except guestexec.GuestError:
            pass

        if time.monotonic() > deadline:
            raise SoftRoCEError(f'guest {guest["name"]} did not come up in time; '
                                f'{guest["console_log"]}:\n{_tail(guest["console_log"])}')
        time.sleep(0.5)


def up(image, run_dir, share, nodes=1, smp=4, memory='1G', timeout=240, log=print):
    """Start ``nodes`` guests from ``image`` and wait for their agents; return the state.

    On any failure the guests started so far are stopped again before the error is raised.
    """
    run_dir, share = Path(run_dir), Path(share).resolve()
    if nodes not in (1, 2):
        raise SoftRoCEError(f'--nodes must be 1 or 2, not {nodes}')
    if any(c.isspace() for c in str(share)):
        raise SoftRoCEError(f'the shared directory {share} has white space in its path (it goes '
                            'on the kernel command line)')
    old = read_state(run_dir)
    if old and any(_alive(g['pid']) and _ours(g['pid'], run_dir) for g in old['guests']):
        raise SoftRoCEError(f'soft-RoCE guests are already up ({_state_file(run_dir)}); '
                            'stop them with `ibrepro softroce down`')

    run_dir.mkdir(parents=True, exist_ok=True)
    share.mkdir(parents=True, exist_ok=True)
    state = {'image': str(image), 'share': str(share), 'nodes': nodes, 'guests': [],
             'link_port': _free_port() if nodes > 1 else None}
    t_start = time.monotonic()
    try:
        for index in range(nodes):
            name = f'n{index}'
            guest = {'name': name, 'agent_port': _free_port(),
                     'console_log': str(run_dir / f'{name}.console.log'),
                     'qemu_log': str(run_dir / f'{name}.qemu.log')}
            cmd = qemu_command(image, index, nodes, share, guest['agent_port'], state['link_port'],
                               run_dir, smp, memory)
            with open(guest['qemu_log'], 'w') as qlog:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=qlog,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            guest['pid'] = proc.pid
            state['guests'].append(guest)
            _write_state(run_dir, state)    # recorded before anything else can fail
            log(f'softroce: started {name} (QEMU pid {proc.pid}, agent 127.0.0.1:'
                f'{guest["agent_port"]}, console {guest["console_log"]})')
            if index == 0 and nodes > 1:   # n1 connects to n0's end of the link
                deadline = time.monotonic() + 30
                while not _listening(state['link_port']):
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SoftRoCEError(f'n0 does not listen on the link port; '
                                            f'{guest["qemu_log"]}:\n{_tail(guest["qemu_log"])}')
                    time.sleep(0.1)

        _wait_ready(state, t_start, t_start + timeout, log)
    except BaseException:
        down(run_dir, log=log)
        raise

    return state


def down(run_dir, log=print, grace=10):
    """Stop the recorded guests (SIGTERM, then SIGKILL after ``grace`` s); return their names."""
    state = read_state(run_dir)
    if not state:
        return []

    stopped = [g for g in state['guests'] if _alive(g['pid']) and _ours(g['pid'], run_dir)]
    for guest in stopped:
        _signal(guest['pid'], signal.SIGTERM)   # QEMU exits at once; the guest is all in RAM

    deadline = time.monotonic() + grace
    for guest in stopped:
        if not _gone(guest['pid'], deadline):
            _signal(guest['pid'], signal.SIGKILL)
            _gone(guest['pid'], time.monotonic() + grace)
        log(f'softroce: stopped {guest["name"]} (QEMU pid {guest["pid"]})')

    _state_file(run_dir).unlink(missing_ok=True)
    return [g['name'] for g in stopped]


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _gone(pid, deadline):
    """Wait until ``pid`` has exited (reaping it if it is our child); False at ``deadline``."""
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        _reap(pid)
        time.sleep(0.05)
    _reap(pid)
    return True


def _reap(pid):
    """Collect ``pid``'s exit status if it is our child (else it is init's to reap)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass

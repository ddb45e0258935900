"""Start, probe and stop the QEMU guests of the soft-RoCE nodes.

Two kinds of set-up, from the same image:

* **Pair guests** (``up(nodes=1|2)``, any user): every guest is the same,

    nI  rxe0 198.51.100.(10I+1) and rxe1 198.51.100.(10I+2) on the two ends of a veth pair:
          a dual-port HCA with a cable between its two ports
        rxe2 203.0.113.(I+1)/25 on link0, a virtio NIC joined to the other guest by a QEMU stream
          netdev over a unix socket in the run directory (two-guest mode only)
        ctl0 203.0.113.200/25: QEMU user networking with restrict=on, so nothing leaves QEMU but the
          agent's port, which QEMU itself binds on 127.0.0.1 (port 0: the kernel picks a free one;
          we read it back over QMP, so no other process can take it between a probe and the bind)

* **Slurm nodes** (``up(slurm=...)``, root): rxnode1..N with a NIC on each network of
  :mod:`ibrepro.softroce.fabric` (tap devices on host bridges): mgmt0 (slurmd, srun, the agent),
  fab0 with rxe0 and fab1 with rxe1 (two rails); the cluster's munge key and /etc/hosts reach the
  guests as fw_cfg files.

Every guest mounts the host's shared directory (9p) at the same path. The guests run under TCG (this
machine's /dev/kvm is kvm-pvm, which cannot boot a stock kernel): their numbers are emulated-CPU
numbers, never performance data.

The run directory is private (0700, ours): ``state.json`` (PIDs, agent addresses, network),
``agent.key`` (0600, new for every ``up``: the agent and its clients prove it to each other; QEMU
hands it to the guests by fw_cfg), the QMP and link sockets, ``<name>.console.log``,
``<name>.qemu.log`` (and ``<name>.boot1.console.log`` when a first boot stalled). ``down`` stops
exactly the recorded PIDs, after checking that each still is a QEMU of this run directory, and removes
the recorded network devices.
"""

import json
import os
import re
import secrets
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

from . import fabric, guestexec

AGENT_PORT = 7000           # inside the guest
CTL_ADDRESS = '203.0.113.200/25'
DEVICES = ('rxe0', 'rxe1', 'rxe2')
KEY_FILE = 'agent.key'
#: fw_cfg names of the files handed to the guests (read in ci/softroce/setup.sh)
FW_CFG = 'opt/org.ibrepro'


def addresses(index):
    """{device: address/prefix} of pair guest ``index``'s rxe ports."""
    return {'rxe0': f'198.51.100.{10 * index + 1}/24', 'rxe1': f'198.51.100.{10 * index + 2}/24',
            'rxe2': f'203.0.113.{index + 1}/25'}


def address(node, device):
    """The IPv4 address of ``device`` on pair guest ``node`` ('n0', 'n1'), for perftest's server host."""
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


def private_dir(path):
    """Create ``path`` (mode 0700), or accept an existing one only if it is a real directory of ours that
    no one else can write (then made 0700): the run directory holds the agent key and QEMU's sockets."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
        return path
    except FileExistsError:
        pass

    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SoftRoCEError(f'refusing the run directory {path}: it is a symlink, not a directory, not '
                            'owned by us, or writable by others (another user may have made it)')
    os.chmod(path, 0o700)
    return path


def _new_key(run_dir):
    """A fresh agent key, created 0600 (never following a link planted at its name)."""
    path = Path(run_dir) / KEY_FILE
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, 'w') as f:
        f.write(secrets.token_hex(32))
    return path


def agent(node, run_dir=None):
    """(address, key) of ``node``'s agent; GuestError if the guests are not up."""
    from . import run_dir as default_run_dir

    run_dir = Path(run_dir or default_run_dir())
    state = read_state(run_dir)
    if not state:
        raise guestexec.GuestError(f'no soft-RoCE guests are up ({_state_file(run_dir)} does not '
                                   'exist); start them with `ibrepro softroce up`')
    for guest in state['guests']:
        if guest['name'] == node:
            try:
                key = (run_dir / KEY_FILE).read_bytes().strip()
            except OSError as err:
                raise guestexec.GuestError(f'cannot read the agent key of {run_dir}: {err.strerror}') from None
            return tuple(guest['agent']), key

    names = ', '.join(g['name'] for g in state['guests'])
    raise guestexec.GuestError(f'no guest {node} (up: {names})')


def _pair_guest(index, nodes, run_dir):
    """Name, QEMU network arguments and kernel parameters of pair guest ``index``."""
    name = f'n{index}'
    ctl_mac = f'52:54:00:00:ff:{index:02x}'
    ctl_net = ('user,id=ctl,restrict=on,net=203.0.113.128/25,host=203.0.113.130,'
               'dns=203.0.113.131,dhcpstart=203.0.113.200,'
               f'hostfwd=tcp:127.0.0.1:0-{CTL_ADDRESS.split("/")[0]}:{AGENT_PORT}')
    net = ['-netdev', ctl_net, '-device', f'virtio-net-pci,netdev=ctl,mac={ctl_mac}']
    own = addresses(index)
    params = {'ibr_nic0': f'{ctl_mac},ctl0,{CTL_ADDRESS}', 'ibr_cable': f'{own["rxe0"]},{own["rxe1"]}',
              'ibr_agent': f'{CTL_ADDRESS.split("/")[0]}:{AGENT_PORT}'}
    if nodes > 1:   # n0 serves the link's unix socket, n1 connects to it
        link_mac = f'52:54:00:00:01:{index:02x}'
        server = 'on' if index == 0 else 'off'
        net += ['-netdev', f'stream,id=link,server={server},addr.type=unix,addr.path={Path(run_dir) / "link.sock"}',
                '-device', f'virtio-net-pci,netdev=link,mac={link_mac}']
        params['ibr_nic1'] = f'{link_mac},link0,{own["rxe2"]},rxe2'
    return name, net, params


def _slurm_guest(index):
    """Name, QEMU network arguments and kernel parameters of Slurm node ``index`` (1-based)."""
    net, params = [], {'ibr_agent': f'{fabric.address(index, "mgmt")}:{AGENT_PORT}'}
    for k, (network, tap, mac, nic, addr, rxe) in enumerate(fabric.nics(index)):
        net += ['-netdev', f'tap,id={network},ifname={tap},script=no,downscript=no',
                '-device', f'virtio-net-pci,netdev={network},mac={mac}']
        params[f'ibr_nic{k}'] = ','.join([mac, nic, addr] + ([rxe] if rxe else []))
    return fabric.node_name(index), net, params


def qemu_command(image, name, net, params, share, run_dir, fw_cfg, smp=4, memory='1G'):
    """The QEMU command line of guest ``name``: its NICs (``net``), kernel parameters and fw_cfg files."""
    kernel = next(p for p in (Path(image) / 'vmlinux', Path(image) / 'vmlinuz') if p.exists())
    params = {'ibr_node': name, 'ibr_share': share, **params}
    cmd = ['qemu-system-x86_64', '-name', f'ibrepro-softroce-{name}',
           '-accel', 'tcg,thread=multi', '-cpu', 'max', '-smp', f'{smp},sockets=1,cores={smp},threads=1',
           '-m', memory, '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
           '-kernel', str(kernel), '-initrd', str(Path(image) / 'initramfs.cpio'),
           '-serial', f'file:{Path(run_dir) / f"{name}.console.log"}',
           '-qmp', f'unix:{Path(run_dir) / f"{name}.qmp"},server=on,wait=off',
           '-virtfs', f'local,path={share},mount_tag=share,security_model=none,id=share', *net]
    for fname, path in fw_cfg.items():
        cmd += ['-fw_cfg', f'name={FW_CFG}/{fname},file={path}']
    # no_timer_check: on a loaded host the kernel's IO-APIC timer test can miss its ticks under TCG, and the
    # boot panics ("IO-APIC + timer doesn't work!"; seen here with three guests booting at once).
    # cryptomgr.notests: the kernel's crypto self-tests are slow under TCG, and one of them held a vCPU for
    # over 200 s in CI (soft lockup in cryptomgr_test); nothing here uses the kernel's crypto API
    append = ('console=ttyS0 panic=-1 quiet no_timer_check cryptomgr.notests '
              + ' '.join(f'{k}={v}' for k, v in params.items()))
    return cmd + ['-append', append]


def _qmp(path, command, deadline):
    """Run one human monitor ``command`` over QEMU's QMP socket ``path``; return its text."""
    while True:
        try:
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(10)
            sock.connect(str(path))
            break
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise SoftRoCEError(f'QEMU did not open its monitor socket {path}') from None
            time.sleep(0.05)
    with sock, sock.makefile('rw') as f:
        f.readline()   # greeting
        for request in ({'execute': 'qmp_capabilities'},
                        {'execute': 'human-monitor-command', 'arguments': {'command-line': command}}):
            f.write(json.dumps(request) + '\n')
            f.flush()
            while True:   # skip asynchronous events
                reply = json.loads(f.readline())
                if 'return' in reply or 'error' in reply:
                    break
        return reply.get('return', '')


def _forwarded_port(qmp_path, deadline):
    """The host port QEMU bound for the agent's forward (it was asked for port 0)."""
    text = _qmp(qmp_path, 'info usernet', deadline)
    m = re.search(r'TCP\[HOST_FORWARD\]\s+\d+\s+127\.0\.0\.1\s+(\d+)', text)
    if not m:
        raise SoftRoCEError(f'QEMU did not report the agent\'s forwarded port: {text!r}')
    return int(m.group(1))


def _alive(pid):
    try:
        stat_line = Path(f'/proc/{pid}/stat').read_text()
    except FileNotFoundError:
        return False

    return stat_line.rsplit(')', 1)[1].split()[0] != 'Z'


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


class BootFailed(SoftRoCEError):
    """A guest's kernel or agent did not come up (a boot under TCG on a loaded host can stall)."""


def _wait_ready(state, key, t_start, deadline, log):
    """Wait until every guest's agent runs a command; BootFailed if a guest dies or times out."""
    pending = list(state['guests'])
    while pending:
        guest = pending[0]
        if not _alive(guest['pid']):
            raise BootFailed(
                f'guest {guest["name"]} (QEMU pid {guest["pid"]}) exited during boot; '
                f'{guest["qemu_log"]}:\n{_tail(guest["qemu_log"])}\n'
                f'{guest["console_log"]}:\n{_tail(guest["console_log"])}')
        try:
            with open(os.devnull, 'wb') as null:
                guestexec.run(guest['agent'], ['true'], key, cwd='/', stdout=null, stderr=null,
                              node=guest['name'], connect_timeout=2)
            log(f'softroce: {guest["name"]} ready after {time.monotonic() - t_start:.1f} s')
            pending.pop(0)
            continue
        except guestexec.GuestError:
            pass

        if time.monotonic() > deadline:
            raise BootFailed(f'guest {guest["name"]} did not come up in {deadline - t_start:.0f} s; '
                                f'{guest["console_log"]}:\n{_tail(guest["console_log"])}')
        time.sleep(0.5)


#: boots of the whole set before ``up`` gives up: a TCG guest on a loaded host now and then stalls in
#: its kernel (an RCU stall or soft lockup) and never reaches its agent; a fresh boot comes up
BOOT_ATTEMPTS = 2


def up(image, run_dir, share, nodes=1, smp=4, memory='1G', timeout=240, log=print, slurm=None):
    """Start ``nodes`` guests from ``image`` and wait for their agents; return the state.

    ``slurm``: None for pair guests (1 or 2), or {'munge_key': path, 'head_name': name} for Slurm
    nodes on the tap fabric (root). ``timeout``: seconds each boot may take. When a guest does not
    come up, every guest is stopped and booted once more (BOOT_ATTEMPTS); the failed boot's console
    logs are kept as ``<name>.boot<k>.console.log``. On any failure what was started so far is stopped
    again before the error is raised.
    """
    share = Path(share).resolve()
    if slurm is None and nodes not in (1, 2):
        raise SoftRoCEError(f'--nodes must be 1 or 2 for pair guests, not {nodes} (Slurm nodes: --slurm)')
    if any(c.isspace() for c in str(share)):
        raise SoftRoCEError(f'the shared directory {share} has white space in its path (it goes '
                            'on the kernel command line)')
    run_dir = private_dir(run_dir)
    old = read_state(run_dir)
    if old and any(_alive(g['pid']) and _ours(g['pid'], run_dir) for g in old['guests']):
        raise SoftRoCEError(f'soft-RoCE guests are already up ({_state_file(run_dir)}); '
                            'stop them with `ibrepro softroce down`')
    if old:
        down(run_dir, log=log)   # what a killed run left: its network devices

    share.mkdir(parents=True, exist_ok=True)
    for log_file in run_dir.glob('*.boot*.console.log'):
        log_file.unlink()   # an earlier up's failed boots
    key_file = _new_key(run_dir)
    fw_cfg = {'agent.key': key_file}
    if slurm:
        fw_cfg['munge.key'] = slurm['munge_key']
        fw_cfg['hosts'] = run_dir / 'hosts'
        fw_cfg['hosts'].write_text(fabric.hosts(nodes, slurm['head_name']))
    for attempt in range(1, BOOT_ATTEMPTS + 1):
        try:
            return _boot(image, run_dir, share, nodes, smp, memory, timeout, log, slurm, fw_cfg)
        except BootFailed as err:
            if attempt == BOOT_ATTEMPTS:
                raise BootFailed(f'{err}\n(boot {attempt} of {BOOT_ATTEMPTS}; the console logs of the earlier '
                                 f'boots are {run_dir}/<name>.boot<k>.console.log)') from None
            log(f'softroce: boot {attempt} of {BOOT_ATTEMPTS} failed (its console logs are kept as '
                f'<name>.boot{attempt}.console.log); booting every guest again: {err}')
            for console in run_dir.glob('*.console.log'):
                if '.boot' not in console.name:
                    console.rename(console.with_name(console.name.replace('.console', f'.boot{attempt}.console')))


def _boot(image, run_dir, share, nodes, smp, memory, timeout, log, slurm, fw_cfg):
    """One boot of the whole set: network, QEMU processes, wait for the agents; on any failure stop
    what was started and raise."""
    key = Path(fw_cfg['agent.key']).read_bytes()
    state = {'image': str(image), 'share': str(share), 'nodes': nodes, 'mode': 'slurm' if slurm else 'pair',
             'guests': [], 'network': []}
    _write_state(run_dir, state)
    (run_dir / 'link.sock').unlink(missing_ok=True)   # n1 waits for n0's new socket, not an old one
    t_start = time.monotonic()
    try:
        if slurm:
            try:
                fabric.up(nodes, state['network'], log=log)
            finally:
                _write_state(run_dir, state)
        plans = ([_slurm_guest(i) for i in range(1, nodes + 1)] if slurm else
                 [_pair_guest(i, nodes, run_dir) for i in range(nodes)])
        for index, (name, net, params) in enumerate(plans):
            guest = {'name': name, 'console_log': str(run_dir / f'{name}.console.log'),
                     'qemu_log': str(run_dir / f'{name}.qemu.log')}
            cmd = qemu_command(image, name, net, params, share, run_dir, fw_cfg, smp, memory)
            (run_dir / f'{name}.qmp').unlink(missing_ok=True)
            with open(guest['qemu_log'], 'w') as qlog:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=qlog,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            guest['pid'] = proc.pid
            state['guests'].append(guest)
            _write_state(run_dir, state)    # recorded before anything else can fail
            deadline = time.monotonic() + 30
            if slurm:
                guest['agent'] = [fabric.address(index + 1, 'mgmt'), AGENT_PORT]
            else:
                guest['agent'] = ['127.0.0.1', _forwarded_port(run_dir / f'{name}.qmp', deadline)]
            _write_state(run_dir, state)
            log(f'softroce: started {name} (QEMU pid {proc.pid}, agent {guest["agent"][0]}:'
                f'{guest["agent"][1]}, console {guest["console_log"]})')
            if not slurm and index == 0 and nodes > 1:   # n1 connects to n0's end of the link
                while not (run_dir / 'link.sock').exists():
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SoftRoCEError(f'n0 does not serve the link socket; '
                                            f'{guest["qemu_log"]}:\n{_tail(guest["qemu_log"])}')
                    time.sleep(0.1)

        _wait_ready(state, key, t_start, t_start + timeout, log)
    except BaseException:
        down(run_dir, log=log)
        raise

    return state


def down(run_dir, log=print, grace=10):
    """Stop the recorded guests (SIGTERM, then SIGKILL after ``grace`` s) and remove the recorded
    network devices; return the names of the guests stopped."""
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

    if state.get('network'):
        try:
            fabric.down(state['network'], log=log)
        except fabric.FabricError as err:
            raise SoftRoCEError(f'cannot remove the fabric: {err}') from None
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

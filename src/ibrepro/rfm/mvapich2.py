"""MVAPICH2 runtime parameters the papers' experiments set, and what MVAPICH2 prints when it ignores them.

Every name was read in the MVAPICH2 2.3.7 sources (``src/mpid/ch3/channels/mrail/src/gen2/ibv_param.c``,
release tarball import ``github:nmorey/mvapich`` tag v2.3.7; also present in 2.2-2.3.6) and the MVAPICH2 2.x
user guide; they apply to the OFA-IB-CH3 ("mrail") device only (Spack ``mvapich2 fabrics=mrail``), not to
MVAPICH 3.x/4.x (CH4). Notes for the striping runs:

* ``MV2_NUM_PORTS`` is capped at ``MAX_NUM_PORTS``: 2 in MVAPICH2 2.2-2.3.4, 1 in 2.3.5-2.3.7 unless built
  with ``-DMAX_NUM_PORTS=2``; MVAPICH2 then prints "Warning, max ports per hca is 1, ..." and runs on one port
  (:func:`ignored_setting` turns that into a sanity failure).
* With one process per node MVAPICH2 always shares (stripes over) all rails (``rdma_num_nodes_in_job ==
  pg_size``); the binding policy only differs with two or more processes per node.
* Large messages are striped when larger than ``MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD`` (the renamed
  ``MV2_STRIPING_THRESHOLD``, which 2.3.7 still parses but no longer uses to stripe); only rendezvous
  messages are striped, so sizes between 8 KiB and the eager threshold (``MV2_IBA_EAGER_THRESHOLD``,
  HCA dependent) go on one rail.

Rails. The papers' HCA (MT25208) was one device with two ports; ConnectX-4 and later (mlx5) show each port as a
device of its own, as do soft-RoCE ports. A partition's rails are its ``rdma_devices`` x ``ib_ports``, and
:func:`rail_settings` spells them for MVAPICH2: ``MV2_NUM_HCAS`` (devices), ``MV2_NUM_PORTS`` (ports per device)
and ``MV2_IBA_HCA`` (the devices, ``:``-separated, as ibv_param.c tokenizes it). Every policy names its devices:
an MVAPICH2 that must pick them itself fails ``MPI_Init`` on HCAs it does not know (rxe: "rdma_open_hca: Failed to
open HCA"). Naming them selects rail sharing (ibv_param.c 7672-7707, 2.3.7); binding is then spelt as sharing's
``FIXED_MAPPING``, which puts each local process on rail ``local_id % num_hcas`` (rdma_iba_init.c 280-287,
ibv_priv.c 57-75), with a striping threshold no message reaches (ibv_rndv.c 518: larger chunks are striped). That
binds processes to *devices*: on one dual-port device both ports are one device's rails, which fixed mapping
shares round robin, so there the binding policy names no device and lets MVAPICH2 bind (:data:`BINDING_UNNAMED`).

RoCE. A partition with feature ``roce`` runs with ``MV2_USE_RoCE=1`` (:data:`ROCE`): without it MVAPICH2 2.3.7
starts its RDMA-CM/UD connection path, which fails on rxe (issue 27).

Connection messages. ``-DMAX_NUM_PORTS=2`` doubles ``MAX_NUM_SUBRAILS`` (ibv_param.h 367: HCAs x ports x QPs per
port, 10 x 2 x 4 = 80), and the UD connection manager's ``cm_msg`` (common/src/cm/cm.c 88-105: 22 bytes per
subrail, plus a 256-byte pg_id and 128-byte ifname) grows from 1296 to 2176 bytes; ``MPICM_Init_UD_CM`` refuses
a message larger than the port MTU (cm.c 2086-2092). It runs only for on-demand connections
(``rdma/ch3_init.c`` 369-376: more processes than ``MV2_ON_DEMAND_THRESHOLD``, 64 by default, or XRC or UD
hybrid), so the papers' 2- and 4-process jobs do not reach it; one that does fails with the MTU named
(:func:`mtu_too_small`).

Inline. 001 Sec. 5.1: "at 128 bytes MVAPICH stops using ... inline". MVAPICH2 compares the whole packet with
``rdma_max_inline_size``, whose default is ``128 + INLINE_THRESHOLD_ADJUST`` (40 bytes of packet header,
ibv_param.c), so that 128 bytes of *payload* are inlined: ``MV2_MAX_INLINE_SIZE=128`` would inline only 88.
:data:`PAPER_INLINE_SIZE` is therefore set as 168, the default's value, made explicit so a site's own default
(some adapters use 64 or 96) does not change the experiment.
"""

import re

import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, variable
from reframe.core.exceptions import SanityError

from . import rails
from .osu import OSUBenchmark

#: Striping threshold of 000/003 Sec. IV.B.3: messages <= 8192 B are not striped.
PAPER_STRIPING_THRESHOLD = 8192

#: Inline threshold of 001 Sec. 5.1: MVAPICH inlines messages up to 128 B of payload.
PAPER_INLINE_PAYLOAD = 128

#: The packet header MVAPICH2 counts in its inline size (``INLINE_THRESHOLD_ADJUST``, ibv_param.c 2.3.7).
INLINE_HEADER = 40

#: ``MV2_MAX_INLINE_SIZE`` that inlines 128 B of payload, as 001's MVAPICH did (its default, made explicit).
PAPER_INLINE_SIZE = PAPER_INLINE_PAYLOAD + INLINE_HEADER

#: The rail policies of 000/003: one port, two rails striped, two rails bound to processes.
RAIL_POLICIES = ('1-port', '2-port-striping', '2-port-binding')

#: A rail-sharing threshold above any OMB message (4 MiB) and any chunk MVAPICH2 sends: no striping.
NO_STRIPING_THRESHOLD = 1 << 30

#: Why the binding policy names no device on one dual-port HCA (recorded with the case).
BINDING_UNNAMED = ('binding on the two ports of one device: naming the device (MV2_IBA_HCA) selects rail sharing, '
                   'whose fixed mapping binds processes to devices, not ports; MVAPICH2 binds by itself')

#: A broadcast that sends whole messages: MVAPICH2's inter-node binomial tree (``MV2_INTER_BCAST_TUNING`` 1,
#: bcast_tuning.c 2715-2718 in 2.3.7). With its tuned broadcast, osu_bcast 4x1 on two rails sent nothing on the
#: second from 4 KiB to 256 KiB; with this, both carried packets (measured, tests/fixtures/mvapich2). Our reading
#: of why: the tuned broadcast pipelines in ``bcast_segment_size`` pieces (8192 B, bcast_osu.c 2390 and 2781),
#: none above the striping threshold.
WHOLE_MESSAGE_BCAST = {'MV2_INTER_BCAST_TUNING': '1'}

#: MVAPICH2's switch for RoCE ports (ibv_param.c 7571, rdma/ch3_init.c 165-183), set on partitions with ``roce``.
ROCE = {'MV2_USE_RoCE': '1'}


def rail_settings(policy, devices, ports):
    """MVAPICH2 variables for ``policy`` on rails ``devices`` x ``ports`` (a partition's rdma_devices and
    ib_ports); ValueError if the partition has fewer rails than the policy needs."""
    devices, ports = [d for d in devices if d], int(ports)
    if policy == '1-port':
        env = {'MV2_NUM_HCAS': '1', 'MV2_NUM_PORTS': '1'}
        return {**env, 'MV2_IBA_HCA': devices[0]} if devices else env
    if len(devices or [None]) * ports < 2:
        raise ValueError(f'{policy} needs two rails; the partition has {len(devices or [None]) * ports} '
                         f'(rdma_devices {devices or "unnamed"} x ib_ports {ports})')
    if policy == '2-port-binding':
        if ports >= 2:      # one device's two ports: see BINDING_UNNAMED
            return {'MV2_NUM_PORTS': '2'}
        # two devices: fixed mapping binds local process i to device i % 2; nothing is striped
        return {'MV2_NUM_HCAS': '2', 'MV2_NUM_PORTS': '1', 'MV2_IBA_HCA': ':'.join(devices[:2]),
                'MV2_RAIL_SHARING_POLICY': 'FIXED_MAPPING',
                'MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD': str(NO_STRIPING_THRESHOLD)}
    if policy == '2-port-striping':
        # the paper's striping: large messages split evenly over both rails, smaller ones on the first rail
        # (USE_FIRST); setting the policy selects MVAPICH2's rail-sharing mode
        sharing = {'MV2_RAIL_SHARING_POLICY': 'USE_FIRST',
                   'MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD': str(PAPER_STRIPING_THRESHOLD)}
        if ports >= 2:      # one device, two ports (the papers' InfiniHost III, a ConnectX-3)
            rails = {'MV2_NUM_HCAS': '1', 'MV2_NUM_PORTS': '2'}
            return {**rails, **({'MV2_IBA_HCA': devices[0]} if devices else {}), **sharing}
        # two single-port devices (mlx5: each port of a ConnectX-4 and later is a device; soft-RoCE)
        return {'MV2_NUM_HCAS': '2', 'MV2_NUM_PORTS': '1', 'MV2_IBA_HCA': ':'.join(devices[:2]), **sharing}
    raise ValueError(f'unknown rail policy {policy!r}; known: {", ".join(RAIL_POLICIES)}')

#: 001's "No-SMP" mode: processes on one node talk through the HCA (network loopback).
NETWORK_LOOPBACK = {'MV2_USE_SHARED_MEM': '0'}

# MPL_usage_printf("Warning, max ports per hca is %d, change %s in ibv_param.h to override the option\n",
# ...) and its siblings in ibv_param.c (2.3.7): the run went on with fewer rails than asked for.
_CAPPED = re.compile(r'Warning, max (ports per hca|hca|qps per port) is (\d+)')


# PRINT_ERROR("sizeof cm_msg (%lu) >= rdma_default_mtu (%d).\n", ...) in common/src/cm/cm.c (2.3.7)
_CM_MSG = re.compile(r'sizeof cm_msg \((\d+)\) >= rdma_default_mtu \((\d+)\)')

# MPICH's error stack as MVAPICH2 prints it on stderr: "Fatal error in MPI_Init: ..., error stack:" and the
# call chain, one "function(line)...: message" per line
_FATAL = re.compile(r'Fatal error in (\w+):? ?(.*)')
_STACK_LINE = re.compile(r'^\s*(\w+)\(\d+\)\.*:\s*(.*?)\s*$')


def mtu_too_small(text):
    """A reason naming the MTU if MVAPICH2 refused its connection message for the port's MTU, else None."""
    m = _CM_MSG.search(text)
    if not m:
        return None
    size, mtu = m.groups()
    return (f'MVAPICH2\'s UD connection message ({size} B) does not fit the port MTU ({mtu} B): a -DMAX_NUM_PORTS=2 '
            'build needs an active MTU of 4096 for on-demand connections (MV2_USE_RoCE=1 does not avoid them); run '
            'at most MV2_ON_DEMAND_THRESHOLD processes, or with a ports=1 build')


def error_stack(text):
    """MVAPICH2's own words when an MPI call failed: ``Fatal error in MPI_Init: <class>: <deepest message>``
    (the last frame of its error stack), or None."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _FATAL.search(line)
        if not m:
            continue
        frames = []
        for follow in lines[i + 1:i + 40]:
            frame = _STACK_LINE.match(follow)
            if frame:
                frames.append(f'{frame.group(1)}: {frame.group(2)}' if frame.group(2) else frame.group(1))
            elif frames:
                break
        said = m.group(2)
        if not said.strip() and i + 1 < len(lines) and lines[i + 1].rstrip().endswith('error stack:'):
            said = lines[i + 1]        # MVAPICH2 2.3 puts the error class on a line of its own
        said = said.strip().removesuffix('error stack:').rstrip(', ')
        deepest = [f for f in frames if ': ' in f][-1:]
        return f'Fatal error in {m.group(1)}' + (f': {said}' if said else '') + \
            (f' ({deepest[0]})' if deepest else '')
    return None


def ignored_setting(text):
    """A reason if MVAPICH2 says it capped a rail setting (so the run did not use the rails asked for)."""
    m = _CAPPED.search(text)
    if not m:
        return None

    what, limit = m.groups()
    reason = f'MVAPICH2 capped the {what} at {limit} ("{m.group(0)}")'
    if what == 'ports per hca':
        reason += (': this build cannot use two ports of one HCA; build MVAPICH2 with -DMAX_NUM_PORTS=2 '
                   '(e.g. a Spack mvapich2 with that flag) or use 2.2-2.3.4')
    return reason


class MVAPICH2Benchmark(OSUBenchmark):
    """OMB under MVAPICH2 with its runtime parameters (``env_vars``), 2 processes on 2 nodes by default.

    Fails when MVAPICH2 says it ignored a rail setting: the run measured another configuration.
    """

    num_nodes = 2
    required_partition_features = ['ib']
    required_environ_features = ['osu', 'mvapich2']

    #: Messages in flight of osu_bw / osu_bibw / osu_mbw_mr (OMB ``-W``); None: OMB's 64.
    window = variable(int, type(None), value=None)

    #: How MVAPICH2 uses the node's rails (one of :data:`RAIL_POLICIES`); empty: MVAPICH2's defaults.
    rail_policy = variable(str, value='')

    #: The MVAPICH2 rail variables this case ran with, for the partition's rails (set before the run).
    rail_env = variable(typ.Dict[str, str], value={}, loggable=True)

    #: Why the rail variables name no device, when they do not.
    rail_note = variable(str, value='', loggable=True)

    #: Packets each rail (``device:port``) sent during the job, summed over its nodes (:mod:`ibrepro.rfm.rails`);
    #: empty when the counters were not read (a launcher other than srun, or no RDMA devices named).
    rail_packets = variable(typ.Dict[str, int], value={}, loggable=True)

    #: The packets unnamed rails sent during the job that were too few to be the case's (:func:`rails.background`):
    #: the node's own traffic on its other ports, named, not failed.
    rail_background = variable(str, value='', loggable=True)

    @run_before('run')
    def read_rail_counters(self):
        if self.job.launcher.registered_name == 'srun' and self.current_partition.extras.get('rdma_devices'):
            self.prerun_cmds = [*self.prerun_cmds, rails.commands(self.num_nodes, rails.BEFORE)]
            self.postrun_cmds = [rails.commands(self.num_nodes, rails.AFTER), *self.postrun_cmds]
            self.keep_files = [*self.keep_files, rails.BEFORE, rails.AFTER]

    @run_before('run')
    def set_rails(self):
        if 'roce' in self.current_partition.features:
            self.env_vars = {**self.env_vars, **ROCE}
        if not self.rail_policy:
            return            # one rail: ibrepro.rfm.launch.one_rail names it (MV2_IBA_HCA, ...)
        self.one_rail = False          # the policy's own rails, not the partition's one MPI rail
        extras = self.current_partition.extras
        self.rail_env = rail_settings(self.rail_policy, extras.get('rdma_devices') or [], extras.get('ib_ports', 1))
        self.rail_note = '' if 'MV2_IBA_HCA' in self.rail_env else BINDING_UNNAMED
        self.env_vars = {**self.env_vars, **self.rail_env}

    def diagnose(self):
        text = self._read(self.stdout.evaluate()) + self._read(self.stderr.evaluate())
        self.rail_packets = rails.traffic(self._read(rails.BEFORE), self._read(rails.AFTER))
        try:
            result = super().diagnose()
        except SanityError as err:
            # MVAPICH2's own words lead: the launcher's "Killed" or "empty output" only follow from them
            own = mtu_too_small(text) or error_stack(text)
            if own and own not in str(err):
                raise SanityError(f'{own} [{err}]') from None
            raise
        ignored = ignored_setting(text)
        if ignored:
            raise SanityError(ignored)
        named = [d for d in self.env_vars.get('MV2_IBA_HCA', '').split(':') if d]
        wrong = rails.unexpected(self.rail_packets, named) if self.rail_packets and named else ''
        self.rail_background = rails.background(self.rail_packets, named) if self.rail_packets and named else ''
        if wrong:
            raise SanityError(f'MVAPICH2 did not use the rails it was given (MV2_IBA_HCA={":".join(named)}): '
                              f'{wrong} (packets sent: {self.rail_packets})')

        return result

"""ReFrame pieces of the soft-RoCE nodes: the ``softroce`` launcher, the system and its environment.

``configs/softroce.py`` is ``rfmconfig.site_configuration(systems=[system()], environments=[environment()])``.
Importing this module registers the launcher.

Jobs run on the host (``local`` scheduler, ReFrame prefix inside the directory shared into the guests, so a
stage directory has the same path in the guests). Partitions:

* ``dualport``: one guest, rxe0 <-> rxe1 cabled back to back. Launcher ``softroce``: every command runs in
  guest n0 through its agent.
* ``nodes2``: two guests, n0:rxe2 <-> n1:rxe2. Launcher ``local``: the job (``ibrepro pair``) runs on the
  host and reaches each guest through ``node_exec``, as it reaches nodes through ``srun`` elsewhere.

Partition extras read by the perftest families (:mod:`ibrepro.rfm.perftest`): ``nodes``, ``rdma_devices``,
``perftest_addresses`` (per node index, the address the out-of-band exchange connects to), ``node_exec``
(prefix running one side on node ``{node}``); ``emulated`` (TCG: not performance data) and
``perftest_options`` (options every perftest run needs here: a QP timeout longer than an emulated round
trip, see ci/softroce/README.md); ``rdma_addresses`` (per node, the IP address of each rail, for RDMA CM:
ibrepro_rdma).
"""

import shlex
import sys
from pathlib import Path

from reframe.core.backends import register_launcher
from reframe.core.launchers import JobLauncher

from .. import rfmconfig
from . import guests, run_dir, share_dir

#: Tool features extra binaries can give the guests (`ibrepro softroce up --extra DIR`): those needing no MPI
GUEST_TOOLS = ['ibrepro-rdma']

#: rxe retransmits with perftest's default QP timeout (-u 14: 67 ms) when the emulated CPUs are busy, and a
#: latency test whose QP exhausts its retries waits forever; -u 20 is 4.3 s
PERFTEST_OPTIONS = ['-u', '20']

#: perftest 4.5's --perform_warm_up never returns over rxe (ib_write_bw -s 4096 -n 100 -t 64: the client
#: hangs after the result header, the same run without it takes 2 s in the guest): the BW families drop it here
PERFTEST_UNUSABLE = ['--perform_warm_up']


def guest_exec(node):
    """The argv prefix that runs a command in guest ``node`` ('n0', 'n1', or 'n{node}' for node_exec)."""
    return [sys.executable, '-m', 'ibrepro.softroce.guestexec', f'--run-dir={run_dir()}',
            f'--node={node}']


@register_launcher('softroce')
class SoftRoCELauncher(JobLauncher):
    """Runs each command in the guest named by the partition's ``access`` (``--node=n0``), as ReFrame's
    ssh launcher takes its host from ``access``; launcher ``env_vars`` reach the guest as ``--env``."""

    def command(self, job):
        node = next((a.split('=', 1)[1] for a in job.sched_access if a.startswith('--node=')), 'n0')
        env = [f'--env={k}={v}' for k, v in self.env_vars.items()]
        return [shlex.quote(arg) for arg in guest_exec(node) + env]


def _extras(**extras):
    return {'emulated': True, 'perftest_options': PERFTEST_OPTIONS, 'perftest_unusable_options': PERFTEST_UNUSABLE,
            'cores_per_node': 4,
            'topology_probe': 'ibv_devinfo',   # the guests have rdma-core's tools, not our Python
            'ib_ports': 1,   # each rxe device has one port: perftest's dual-port mode (-O) cannot run
            'interconnect': 'soft-RoCE (rdma_rxe, RoCE v2) in QEMU TCG guests', **extras}


def system():
    """The ``softroce`` system (start its guests with `ibrepro softroce up [--nodes 2]`)."""
    common = {'scheduler': 'local', 'environs': ['rxe-guest'], 'time_limit': '20m',
              'max_jobs': 1}   # TCG is CPU-hungry; perftest ports are per guest
    return {
        'name': 'softroce',
        'descr': 'soft-RoCE (rdma_rxe) in QEMU TCG guests: runs end to end, numbers are not performance data',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'prefix': str(share_dir() / 'reframe'),
        'partitions': [
            {**common, 'name': 'dualport', 'launcher': 'softroce', 'access': ['--node=n0'],
             'descr': 'one guest, rxe0 <-> rxe1 cabled back to back (veth)',
             'features': ['ib', 'roce', 'rxe', 'dual-port', 'nodes1'],
             'extras': _extras(nodes=1, rdma_devices=['rxe0', 'rxe1'],
                               perftest_addresses=[guests.address('n0', 'rxe0'),
                                                   guests.address('n0', 'rxe1')],
                               # RDMA CM: the server's rails, then the client's end of each cable
                               rdma_addresses=[[guests.address('n0', 'rxe0'),
                                                guests.address('n0', 'rxe1')],
                                               [guests.address('n0', 'rxe1'),
                                                guests.address('n0', 'rxe0')]],
                               node_exec=guest_exec('n0'))},
            {**common, 'name': 'nodes2', 'launcher': 'local',
             'descr': 'two guests, n0:rxe2 <-> n1:rxe2 (QEMU socket link on 127.0.0.1)',
             'features': ['ib', 'roce', 'rxe', 'nodes2'],
             'extras': _extras(nodes=2, rdma_devices=['rxe2'],
                               perftest_addresses=[guests.address('n0', 'rxe2'),
                                                   guests.address('n1', 'rxe2')],
                               rdma_addresses=[[guests.address('n0', 'rxe2')],
                                               [guests.address('n1', 'rxe2')]],
                               node_exec=guest_exec('n{node}'))},
        ],
    }


def guest_tools():
    """Tool features of the extra binaries in the running guests' image (none when no guest is up)."""
    state = guests.read_state(run_dir())
    manifest = Path(state['image'], 'manifest.txt') if state else None
    if not manifest or not manifest.exists():
        return []

    names = {line.split(' ', 1)[1] for line in manifest.read_text().splitlines() if line.startswith('extra-bin ')}
    return [tool for tool in GUEST_TOOLS if set(rfmconfig.TOOL_BINARIES[tool]) & names]


def environment():
    """What the guest image provides: perftest 4.5, rdma-core 44 (ibv_*), iproute2's rdma, and the tools
    of its extra binaries (`ibrepro softroce up --extra build/bench`: ibrepro_rdma)."""
    return {'name': 'rxe-guest', 'features': ['perftest', 'verbs', *guest_tools()],
            'target_systems': ['softroce'],
            'extras': {'about': 'the soft-RoCE guest image (ibrepro softroce build)'}}

"""ReFrame pieces of the soft-RoCE nodes: the ``softroce`` launcher, the systems and their environment.

``configs/softroce.py`` is ``rfmconfig.site_configuration(systems=[system()], environments=[environment()])``;
``configs/softroce-slurm.py`` the same with :func:`slurm_system`, the Slurm cluster of soft-RoCE guests
(ci/softroce/slurm-up.sh), shaped like a site's. Importing this module registers the launcher.

Jobs run on the host (``local`` scheduler, ReFrame prefix inside the directory shared into the guests, so a
stage directory has the same path in the guests). Partitions:

* ``dualport``: one guest, rxe0 <-> rxe1 cabled back to back. Launcher ``softroce``: every command runs in
  guest n0 through its agent.
* ``nodes2``: two guests, n0:rxe2 <-> n1:rxe2. Launcher ``local``: the job (the pair runner) runs on the
  host and reaches each guest through ``node_exec``, as it reaches nodes through ``srun`` elsewhere.

Partition extras read by the pair runner's families (:mod:`ibrepro.rfm.pair_runner`): ``nodes``, ``rdma_devices``,
``node_exec`` (prefix running one side, or the runner's probe of a node's rails, on node ``{node}``),
``python`` (the guests' interpreter for that probe; the host's python3 runs the runner itself);
``emulated`` (TCG: not performance data) and ``perftest_options`` (options every perftest run needs here:
a QP timeout longer than an emulated round trip, see ci/softroce/README.md). No address is configured:
the runner reads each rail's address in the guest at run time.
"""

import os
import re
import shlex
import sys
from pathlib import Path

from reframe.core.backends import register_launcher
from reframe.core.launchers import JobLauncher

from .. import rfmconfig
from . import fabric, guests, run_dir, share_dir

#: The guests' interpreter (python3.11 with the pure-Python standard library: ibrepro.softroce.image)
GUEST_PYTHON = '/usr/bin/python3'

#: Tool features extra binaries can give the guests (`ibrepro softroce up --extra DIR`): those needing no MPI
GUEST_TOOLS = ['ibrepro-rdma']

#: rxe retransmits with perftest's default QP timeout (-u 14: 67 ms) when the emulated CPUs are busy, and a
#: latency test whose QP exhausts its retries waits forever; -u 20 is 4.3 s
PERFTEST_OPTIONS = ['-u', '20']

#: ReFrame's --max-retries for runs on the emulated partitions: perftest calibrates its clock by a regression
#: against gettimeofday and, on busy emulated CPUs, the fit fails now and then (r^2 < 0.9: its times print as inf and
#: the case fails sanity, saying so). On the 2-core AMD EPYC host of 2026-12-01, ib_write_lat on the dualport
#: partition failed that way in 2 of its 3 attempts of one CI run (none in 6 on the earlier Intel host)
RETRIES = 4

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
    """The ``softroce`` system (start its guests with `ibrepro softroce up [--nodes 2]`).

    No partition declares ``mpi``: its launchers run one command in one guest (``dualport``) or the pair runner on
    the host (``nodes2``), neither starts MPI ranks; and the MPI families' layouts span two nodes, which
    ``dualport`` is not. The MVAPICH2 environment is there so `ibrepro catalog --not-run` says so.
    """
    common = {'scheduler': 'local', 'environs': ['rxe-guest', 'mvapich2'], 'time_limit': '20m',
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
             'features': ['ib', 'roce', 'rxe', 'dual-port', *rfmconfig.layout_features(1, 4)],
             'extras': _extras(nodes=1, rdma_devices=['rxe0', 'rxe1'], python=GUEST_PYTHON,
                               node_exec=guest_exec('n0'))},
            {**common, 'name': 'nodes2', 'launcher': 'local',
             'descr': 'two guests, n0:rxe2 <-> n1:rxe2 (a QEMU stream link over a private unix socket)',
             'features': ['ib', 'roce', 'rxe', *rfmconfig.layout_features(2, 4)],
             'extras': _extras(nodes=2, rdma_devices=['rxe2'], python=GUEST_PYTHON,
                               node_exec=guest_exec('n{node}'))},
        ],
    }


def slurm_nodes(cluster_dir):
    """(nodes, CPUs per node) of the cluster of ci/softroce/slurm-up.sh in ``cluster_dir``, from the node lines
    `ibrepro softroce up --slurm` wrote (the defaults of slurm-common.sh when it is not up)."""
    try:
        text = (Path(cluster_dir) / 'guests' / 'slurm-nodes.conf').read_text()
    except OSError:
        return 3, 2
    cpus = re.findall(r'^NodeName=\S+ .*\bCPUs=(\d+)', text, re.M)
    return len(cpus), int(cpus[0]) if cpus else 2


def slurm_system(cluster_dir):
    """The ``softroce-slurm`` system: Slurm over soft-RoCE guests, as a site has it.

    Slurm (slurmctld and slurmdbd on this machine) chooses the nodes among rxnode1..N; jobs are submitted
    with sbatch and run their steps with srun inside the guests, each node with two rails, rxe0 and rxe1 on
    two fabric planes. The ReFrame prefix is the directory the guests share, so stage directories have the
    same path everywhere; the guests' python3 runs the pair runner (extras ``python``).
    """
    nodes, cpus = slurm_nodes(cluster_dir)
    return {
        'name': 'softroce-slurm',
        'descr': f'Slurm over {nodes} soft-RoCE (rdma_rxe) QEMU TCG guests, two rails each: runs end to end, '
                 'numbers are not performance data',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'prefix': str(Path(cluster_dir) / 'share' / 'reframe'),
        'partitions': [{
            'name': 'rxe', 'descr': f'rxnode1..{nodes} (Slurm partition rxe): rxe0 on plane 0, rxe1 on plane 1',
            'scheduler': 'slurm', 'launcher': 'srun', 'access': ['--partition=rxe'],
            'environs': ['rxe-guest', 'mvapich2'], 'time_limit': '20m',
            'max_jobs': 1,     # TCG guests on two host cores: one case at a time
            # srun starts MPI ranks (the MPI environment says --mpi: SLURM_MPI_TYPE)
            'features': ['ib', 'roce', 'rxe', 'dual-port', 'mpi', *rfmconfig.layout_features(nodes, cpus)],
            'extras': _extras(nodes=nodes, cores_per_node=cpus, rdma_devices=fabric.rdma_devices(),
                              python=GUEST_PYTHON,
                              interconnect='soft-RoCE (rdma_rxe, RoCE v2) in QEMU TCG guests, two planes of '
                                           'Linux bridges')},
        ],
    }


def guest_tools(guests_run_dir=None):
    """Tool features of the extra binaries in the running guests' image (none when no guest is up)."""
    state = guests.read_state(guests_run_dir or run_dir())
    manifest = Path(state['image'], 'manifest.txt') if state else None
    if not manifest or not manifest.exists():
        return []

    names = {line.split(' ', 1)[1] for line in manifest.read_text().splitlines() if line.startswith('extra-bin ')}
    return [tool for tool in GUEST_TOOLS if set(rfmconfig.TOOL_BINARIES[tool]) & names]


def environment(guests_run_dir=None, systems=('softroce',)):
    """What the guest image provides: perftest 4.5, rdma-core 44 (ibv_*), iproute2's rdma, and the tools
    of its extra binaries (`ibrepro softroce up --extra build/bench`: ibrepro_rdma)."""
    return {'name': 'rxe-guest', 'features': ['perftest', 'verbs', *guest_tools(guests_run_dir)],
            'target_systems': list(systems),
            'extras': {'about': 'the soft-RoCE guest image (ibrepro softroce build)'}}


#: The MVAPICH2 install the MPI families run with on the soft-RoCE systems: a prefix the guests see at the same
#: path (under the directory they share), with OMB in it (MVAPICH2 installs its own); docs/spack.md.
MVAPICH2_PREFIX = 'IBREPRO_MVAPICH2_PREFIX'


def mvapich2_environment(systems, environ=os.environ):
    """Environment ``mvapich2``: the MVAPICH2 2.3 of ``$IBREPRO_MVAPICH2_PREFIX`` (srun --mpi=pmi2); featureless,
    saying why, when it is not set, missing, or not an MVAPICH2 (no ``bin/mpiname``)."""
    about = 'MVAPICH2 2.3 (mrail) + OMB from $IBREPRO_MVAPICH2_PREFIX'
    featureless = {'name': 'mvapich2', 'features': [], 'target_systems': list(systems), 'extras': {}}
    prefix = environ.get(MVAPICH2_PREFIX, '').strip()
    if not prefix:
        why = f'not set: {MVAPICH2_PREFIX}=<an MVAPICH2 2.3 install the guests see> (docs/spack.md)'
    else:
        rfmconfig.refuse_shell_syntax(prefix, MVAPICH2_PREFIX)
        bins = rfmconfig.prefix_bin_dirs(prefix)
        why = (f'{MVAPICH2_PREFIX}={prefix}: no such directory' if not Path(prefix).is_dir() else
               f'{MVAPICH2_PREFIX}={prefix}: not an MVAPICH2 (no bin/mpiname)'
               if rfmconfig.mpi_family(bins) != 'mvapich2' else None)
    if why:
        return {**featureless, 'extras': {'about': f'{about} [{why}]'}}
    return rfmconfig.site_environment('mvapich2', descr=f'{about}: {prefix}', tools=[], mpi='mvapich2',
                                      prefix=prefix, slurm_mpi_type='pmi2', target_systems=systems)

"""ReFrame configuration of the throw-away CI cluster started by ``ci/cluster/up.sh``.

Two Slurm nodes, node1 and node2, each a slurmd in its own network namespace on this machine,
joined by veth pairs to a bridge: real Slurm (sbatch, sacct through slurmdbd), real MPI across
two host names and two IP addresses, TCP on the wire, no RDMA. The nodes share the machine's
cores, so performance values here are smoke values, not measurements of a network.

    ci/cluster/up.sh
    reframe -C configs/ci-cluster.py -c reframe-checks -r

Environment: IBREPRO_CLUSTER_DIR (the cluster's work dir, default /tmp/ibrepro-cluster),
IBREPRO_HOME (results, reports, ReFrame scratch; default <cluster dir>/ibrepro-home, so a
throw-away cluster never writes into the user's own history), IBREPRO_NIGHTLY (ci/nightly.sh;
read by ibrepro.rfmconfig.site_configuration, like the in-allocation switch).
"""

import os
from pathlib import Path

CLUSTER_DIR = Path(os.environ.get('IBREPRO_CLUSTER_DIR', '/tmp/ibrepro-cluster'))
os.environ.setdefault('IBREPRO_HOME', str(CLUSTER_DIR / 'ibrepro-home'))
# ReFrame itself runs sbatch, squeue, sacct and scancel: they must reach this cluster,
# whatever SLURM_CONF the caller's shell had.
os.environ['SLURM_CONF'] = str(CLUSTER_DIR / 'etc' / 'slurm.conf')

from ibrepro import paths, rfmconfig  # noqa: E402  (reads IBREPRO_HOME)

# Between the namespace "nodes" every MPI must use TCP: they share one kernel, and a transport
# that notices (UCX, libfabric shm) would use shared memory and never touch the veth.
IMPI = rfmconfig.impi_environment(
    env_vars=[['SLURM_MPI_TYPE', 'pmi2'],        # srun --mpi=pmi2
              ['FI_PROVIDER', 'tcp']])
MPICH = rfmconfig.mpich_environment(
    env_vars=[['SLURM_MPI_TYPE', 'pmi2'],        # the wheel speaks PMI-1/2, not PMIx
              # OFI, not UCX: a UCX address needs PMI values of ~1 KiB, and Slurm 22.05's pmi2
              # plugin reads a PMI-1 request with one 1024-byte read(), so a longer `put` is cut
              # ("mpi/pmi2: invalid client request") and MPI_Init hangs. An OFI tcp address is a
              # 16-byte sockaddr. (UCX would also need UCX_TLS=tcp,self to leave shared memory.)
              ['MPIR_CVAR_CH4_NETMOD', 'ofi'],
              ['FI_PROVIDER', 'tcp']])
OPENMPI = {
    'name': 'openmpi',
    'cc': 'mpicc.openmpi',
    'cxx': 'mpicxx.openmpi',
    'features': ['mpi', 'openmpi', 'mpicc'],
    'env_vars': [['SLURM_MPI_TYPE', 'pmix'],     # Debian's Open MPI needs PMIx (pmi2 fails in MPI_Init)
                 ['OMPI_MCA_pml', 'ob1'],        # not UCX: the byte transfer layers below decide
                 ['OMPI_MCA_btl', 'tcp,self']],  # no vader (shared memory) between the "nodes"
    'extras': {'about': "Open MPI 4.1 of Debian (openmpi-bin, libopenmpi-dev; ci/cluster/up.sh)"},
}

SYSTEM = {
    'name': 'ci-cluster',
    'descr': 'Throw-away Slurm 22.05 cluster of ci/cluster/up.sh: 2 namespace nodes, TCP over veth',
    'hostnames': ['.*'],
    'modules_system': 'nomod',
    'prefix': str(paths.data_home() / 'rfm'),
    'partitions': [{
        'name': 'veth',
        'descr': 'node1 + node2 (Slurm partition ci): one slurmd per network namespace, '
                 'joined by veth to a bridge; no RDMA',
        # slurm: sbatch, then polls sacct (slurmdbd runs on the head); inside an allocation (a
        # CI batch job) rfmconfig runs the tests as its job steps. The PMI flavour comes from each
        # environment (SLURM_MPI_TYPE).
        'scheduler': 'slurm',
        'launcher': 'srun',
        'access': ['--partition=ci'],
        'time_limit': '10m',
        'max_jobs': 4,
        'environs': ['impi', 'mpich', 'openmpi'],
        'features': ['mpi', 'nodes2'],
        'extras': {
            'nodes': 2,
            'cores_per_node': os.cpu_count() or 1,
            'interconnect': 'namespace nodes, TCP over veth',
        },
    }],
}

site_configuration = rfmconfig.site_configuration(systems=[SYSTEM], environments=[IMPI, MPICH, OPENMPI])

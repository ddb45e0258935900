"""ReFrame site configuration of the throw-away CI cluster started by ``ci/cluster/up.sh``.

Two Slurm nodes, node1 and node2, each a slurmd in its own network namespace on this machine,
joined by veth pairs to a bridge: real Slurm (sbatch, sacct through slurmdbd), real MPI across
two host names and two IP addresses, TCP on the wire, no RDMA. The nodes share the machine's
cores, so performance values here are smoke values, not measurements of a network.

    ci/cluster/up.sh
    reframe -C configs/ci-cluster.py -c <checks> -r

Environment: IBREPRO_CLUSTER_DIR (the cluster's work dir, default /tmp/ibrepro-cluster),
IBREPRO_HOME (where results, reports and ReFrame scratch go; default <cluster dir>/ibrepro-home),
IBREPRO_DEPS (the MPI wheels' prefixes, default <checkout>/.deps).
"""

import os
import time
from pathlib import Path

from ibrepro import paths

CLUSTER_DIR = Path(os.environ.get('IBREPRO_CLUSTER_DIR', '/tmp/ibrepro-cluster'))
HOME = paths.data_home() if os.environ.get('IBREPRO_HOME') else CLUSTER_DIR / 'ibrepro-home'
RESULTS_DB = paths.results_db() if os.environ.get('RFM_SQLITE_DB_FILE') else HOME / 'results.db'

# ReFrame itself runs sbatch, squeue, sacct and scancel: they must reach this cluster,
# whatever SLURM_CONF the caller's shell had.
os.environ['SLURM_CONF'] = str(CLUSTER_DIR / 'etc' / 'slurm.conf')

# Inside a Slurm allocation (a Jacamar batch job made from SCHEDULER_PARAMETERS, salloc) the
# partition runs its tests as job steps of that allocation: a job submitted from inside would
# wait for the very nodes the allocation holds. Same partition name, so results stay comparable.
IN_ALLOCATION = 'SLURM_JOB_ID' in os.environ

# The nightly run this session belongs to (ci/nightly.sh sets it; GitLab child jobs inherit it)
NIGHTLY = os.environ.get('IBREPRO_NIGHTLY') or time.strftime('%Y%m%dT%H%M%S')

IMPI = paths.DEPS_DIR / 'impi'      # pip install --prefix .deps/impi impi-rt
MPICH = paths.DEPS_DIR / 'mpich'    # pip install --prefix .deps/mpich mpich

site_configuration = {
    'systems': [{
        'name': 'ci-cluster',
        'descr': 'Throw-away Slurm 22.05 cluster of ci/cluster/up.sh: 2 namespace nodes, TCP over veth',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'stagedir': str(HOME / 'stage'),
        'outputdir': str(HOME / 'output'),
        'partitions': [{
            'name': 'veth',
            'descr': 'node1 + node2 (Slurm partition ci): one slurmd per network namespace, '
                     'joined by veth to a bridge; no RDMA',
            # slurm: sbatch, then polls sacct (slurmdbd runs on the head); in an allocation:
            # srunalloc = srun with the test's task layout. The PMI flavour comes from each
            # environment (SLURM_MPI_TYPE).
            'scheduler': 'local' if IN_ALLOCATION else 'slurm',
            'launcher': 'srunalloc' if IN_ALLOCATION else 'srun',
            'access': ['--partition=ci'],
            'time_limit': '10m',
            'max_jobs': 4,
            'environs': ['builtin', 'impi', 'mpich', 'openmpi'],   # builtin: ReFrame's own (cc)
            'features': ['mpi', 'nodes2'],
            'extras': {
                'nodes': 2,
                'interconnect': 'namespace nodes, TCP over veth',
            },
        }],
    }],
    'environments': [
        {
            # Intel MPI + IMB from the impi-rt wheel (no compiler wrappers in it)
            'name': 'impi',
            'features': ['mpi', 'imb'],
            'env_vars': [
                ['PATH', f'{IMPI}/bin:$PATH'],
                ['LD_LIBRARY_PATH', f'{IMPI}/lib:{IMPI}/lib/libfabric'],
                ['FI_PROVIDER_PATH', f'{IMPI}/lib/libfabric/prov'],
                ['SLURM_MPI_TYPE', 'pmi2'],     # srun --mpi=pmi2
                # the nodes share one kernel: without this libfabric may pick shm
                ['FI_PROVIDER', 'tcp'],
            ],
        },
        {
            # MPICH 5 (ch4: UCX, OFI) from the mpich wheel; its mpicc sets an rpath to the prefix
            'name': 'mpich',
            'features': ['mpi'],
            'cc': str(MPICH / 'bin' / 'mpicc'),
            'cxx': str(MPICH / 'bin' / 'mpicxx'),
            'env_vars': [
                ['PATH', f'{MPICH}/bin:$PATH'],
                ['SLURM_MPI_TYPE', 'pmi2'],     # the wheel speaks PMI-1/2, not PMIx
                # OFI, not UCX: a UCX address needs PMI values of ~1 KiB, and Slurm 22.05's pmi2
                # plugin reads a PMI-1 request with one 1024-byte read(), so a longer `put` is cut
                # ("mpi/pmi2: invalid client request") and the job hangs in MPI_Init. An OFI tcp
                # address is a 16-byte sockaddr. (UCX would also pick shared memory between the
                # "nodes" unless UCX_TLS=tcp,self.)
                ['MPIR_CVAR_CH4_NETMOD', 'ofi'],
                ['FI_PROVIDER', 'tcp'],
            ],
        },
        {
            # Debian's Open MPI 4.1 (openmpi-bin, libopenmpi-dev)
            'name': 'openmpi',
            'features': ['mpi'],
            'cc': 'mpicc.openmpi',
            'cxx': 'mpicxx.openmpi',
            'env_vars': [
                ['SLURM_MPI_TYPE', 'pmix'],     # Debian's Open MPI needs PMIx (pmi2 fails in MPI_Init)
                ['OMPI_MCA_pml', 'ob1'],        # not UCX: the byte transfer layers below decide
                ['OMPI_MCA_btl', 'tcp,self'],   # no vader (shared memory) between the "nodes"
            ],
        },
    ],
    'modes': [{
        # ci/nightly.sh: reframe --mode=nightly (also carried into --ci-generate child jobs)
        'name': 'nightly',
        'options': [
            '--exec-policy=serial',                 # one job at a time: the nodes share cores
            f'--session-extras=nightly={NIGHTLY}',  # the report compares nightly runs
        ],
    }],
    'storage': [{
        'enable': True,
        'sqlite_db_file': str(RESULTS_DB),
    }],
    'general': [{
        'report_file': str(HOME / 'run-reports' / 'run-report-{sessionid}.json'),
    }],
}

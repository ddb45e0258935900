"""The words the checks, the catalog and the reports share: features, tools, and how to provide what is missing.

Partition features say what the hardware has, environment features which tools an environment really has (a check
selects ``+osu``; docs/site-setup.md). A check that cannot run names the missing feature with :data:`HINTS`: what it
is and the one step that provides it, the same words in a skip reason (:mod:`ibrepro.rfm.layout`) and in
``ibrepro catalog`` / ``make run``'s "not run here" table (:mod:`ibrepro.catalog`).
"""

#: Partition features.
IB, ROCE, DUAL_PORT, GPU, GPUDIRECT = 'ib', 'roce', 'dual-port', 'gpu', 'gpudirect'
#: Either RDMA partition feature (the catalog names their absence ``rdma``).
RDMA = (IB, ROCE)

#: Environment features: the tools a check runs (also the check's ``tool`` tag, where it is one of these).
TOOLS = ('perftest', 'osu', 'imb', 'npb', 'mvapich2', 'ibrepro-bench', 'ibrepro-rdma', 'nvbandwidth', 'nccl')

_BRING_YOUR_OWN = "IBREPRO_PREFIXES=<your {} install> (README: bring your own benchmarks)"

#: feature -> (what it is, the one step that provides it). ``nodes`` and ``cores`` are the layout's extras (their
#: "what" is formatted with ``n`` and ``have``); ``rdma`` stands for either RDMA partition feature.
HINTS = {
    'rdma': ('RDMA device', 'make softroce-test (emulated RDMA guests, root); on a cluster, a partition with '
                            'feature ib or roce (docs/site-setup.md)'),
    IB: ('InfiniBand HCA', 'a partition with feature ib (docs/site-setup.md)'),
    'nodes': ('{n} nodes (has {have})', 'a Slurm partition with that many nodes (docs/site-setup.md)'),
    'cores': ('{n} cores/node (has {have})', 'a partition with that many cores per node'),
    DUAL_PORT: ('two rails per node', 'a partition with two connected rails: two ports or two HCAs '
                                      '(feature dual-port)'),
    'ib_ports': ('dual-port HCA (perftest -O)', 'a partition of dual-port HCAs (extras ib_ports: 2)'),
    'osu': ('OSU Micro-Benchmarks', 'make spack SPACK_ENV=generic, or ' + _BRING_YOUR_OWN.format('OSU')),
    'npb': ('NPB', 'make spack SPACK_ENV=generic, or ' + _BRING_YOUR_OWN.format('NPB')),
    'imb': ('IMB', 'make setup (Intel MPI + IMB wheel)'),
    'perftest': ('perftest', 'apt-get install perftest, or make spack SPACK_ENV=generic'),
    'mvapich2': ('MVAPICH2', 'make spack SPACK_ENV=ib-mvapich, or IBREPRO_MVAPICH2_PREFIX=<an MVAPICH2 2.3 install> '
                             'on the soft-RoCE systems (docs/spack.md)'),
    'ibrepro-bench': ('our MPI benchmarks built', 'make setup'),
    'ibrepro-rdma': ('our verbs benchmark built', 'apt-get install libibverbs-dev librdmacm-dev, then make setup'),
    GPU: ('GPU', 'a partition of GPU nodes with feature gpu (configs/example-cluster.py: GPU_NODES)'),
    'nvbandwidth': ('nvbandwidth', "an environment with nvbandwidth: Spack's builtin package, a module or a prefix "
                                   "(configs/example-cluster.py: the gpu environment)"),
    'nccl': ('nccl-tests', "an environment with nccl-tests built with MPI and CUDA: make spack SPACK_ENV=gpu-mpi, a "
                           "module or a prefix (configs/example-cluster.py: the gpu-openmpi environment)"),
    GPUDIRECT: ('GPUDirect RDMA', 'a partition of GPU nodes and HCAs with feature gpudirect, where nvidia-peermem or '
                                  'DMA-BUF lets the HCA reach GPU memory (configs/example-cluster.py: the gpu '
                                  'partition)'),
    'cuda': ('environment built for GPU memory', 'an environment with feature cuda: perftest built with CUDA (make '
                                                 'spack SPACK_ENV=gpu), a CUDA-aware MPI with OSU +cuda (SPACK_ENV='
                                                 'gpu-mpi); configs/example-cluster.py: the GPU environments'),
}

#: How the catalog says a layout extra is short (the others: ``no <what>``).
_NEEDS = {'nodes': 'needs {what}', 'cores': 'needs {what}', DUAL_PORT: 'needs {what}', 'ib_ports': 'needs a {what}'}


def missing(feature, **numbers):
    """(why a check cannot run without ``feature``, the one step that provides it), or None for an unknown one."""
    if feature not in HINTS:
        return None
    what, how = HINTS[feature]
    what = what.format(**numbers) if numbers else what
    if feature in ('ibrepro-bench', 'ibrepro-rdma'):
        return what.replace(' built', ' not built'), how
    return _NEEDS.get(feature, 'no {what}').format(what=what), how

"""ReFrame configuration of ``example-cluster``: a Slurm + InfiniBand site, the template a site copies.

Its host names match no real host, so it is selected explicitly; with ``--dry-run`` ReFrame writes every job script
without submitting anything (no Slurm needed)::

    reframe -C configs/example-cluster.py --system example-cluster -c reframe-checks --dry-run

This is the template docs/site-setup.md walks through. A site copies it and changes what is marked SITE:

* ``name``: your system's name (``--system`` selects it; sessions, references.yaml and the report are keyed by it:
  keep it once nights are stored); ``hostnames``: your login nodes; ``access``: your Slurm partition (and account);
  ``time_limit``.
* per partition, what the checks read: ``nodes`` / ``cores_per_node`` (and the ``nodes<N>`` / ``cores<P>`` features
  :func:`ibrepro.rfmconfig.layout_features` derives from them: the papers' layouts select on them),
  ``rdma_devices`` x ``ib_ports`` (the rails of a node: ``['mlx5_0', 'mlx5_1']`` x 1 for two single-port
  ConnectX adapters or the two ports of one ConnectX-4 and later, which Linux shows as two devices;
  ``['mlx4_0']`` x 2 for a dual-port ConnectX-3), ``mpi_rail`` (optional: the one rail every MPI case runs on,
  ``'mlx5_1'`` or ``'mlx4_0:2'``; default the first of ``rdma_devices``, port 1), ``hca_numa_node`` (the NUMA node
  of the MPI rail's HCA: one rank per node is bound near it, and its job checks the node agrees; or ``{device:
  node}`` for each HCA, e.g. ``{'mlx5_0': 0, 'mlx5_1': 1}`` with one per socket: the fleet sweep judges each HCA
  against its own), ``python`` (the interpreter, Python >= 3.6, that runs
  the stdlib-only pair runner on compute nodes);
  features ``ib`` (or ``roce``) and ``dual-port`` (two connected rails per node); ``fleet`` (the fleet's pair-round
  check, cut by the Slurm topology.conf that ``IBREPRO_FLEET_TOPOLOGY`` names; docs/fleet.md) with ``fleet_netdev``
  (the interface its TCP flows cross: IPoIB ``ib0``) and, once calibrated on its stored nights (``ibrepro fleet
  calibrate``), ``fleet_alpha`` (the level its nights name at; default 0.01).
* per environment (:func:`ibrepro.rfmconfig.site_environment`): the install prefix (a Spack view from
  ``make spack``, or any prefix: its ``bin/`` and OSU's ``libexec/osu-micro-benchmarks/mpi/...`` directories, OMB 5
  and 7 layouts, go on PATH) and/or ``modules`` (with ``modules_system: 'lmod'`` or ``'tmod4'``), the MPI family
  (how ranks are bound), the tools it has, and ``slurm_mpi_type`` (``srun --mpi``).

Every feature declared here is read by something: ``mpi`` (the MPI families), ``ib``/``roce`` (the verbs families),
``dual-port`` (two-port families), ``fleet`` (the pair rounds), ``nodes<N>``/``cores<P>`` (layouts); environments:
the MPI family and the tools.

Partitions: ``hdr``, a site's partition of today, and with ``GPU_NODES = True`` ``gpu``, one of GPU nodes
(feature ``gpu``, extras ``gpus_per_node``): every partition of a site's configuration is run every night.
The papers' testbeds are in configs/testbeds.py (a dry-run target, judged against the papers' own
numbers).
"""

from ibrepro import paths, rfmconfig


SYSTEM = 'example-cluster'          # SITE: your system's name, here only (keep it once nights are stored)
GPU_NODES = False                   # SITE: True adds the `gpu` partition below (describe your GPU nodes there)


def _partition(name, descr, *, nodes, cores_per_node, rdma_devices, ib_ports, features=(), environs=(), **extras):
    return {
        'name': name,
        'descr': descr,
        'scheduler': 'slurm',
        'launcher': 'srun',
        'access': [f'--partition={name}'],                 # SITE: your Slurm partition (and --account=...)
        'sched_options': {'use_nodes_option': True},    # emit --nodes: layouts are nodes x processes
        'time_limit': '30m',
        'environs': ['openmpi', 'mvapich2', 'verbs', *environs],
        'max_jobs': 1,                                   # performance runs never share the fabric
        'features': ['mpi', 'ib', *features, *rfmconfig.layout_features(nodes, cores_per_node)],
        'extras': {'nodes': nodes, 'cores_per_node': cores_per_node, 'rdma_devices': rdma_devices,
                   'ib_ports': ib_ports, 'python': 'python3', **extras},
    }


# SITE: a partition of GPU nodes (with GPU_NODES = True; the GPU families run only where a partition has feature
# `gpu`, GPUDirect RDMA where it has `gpudirect`: drop it where nvidia-peermem or DMA-BUF is not set up): 4 GPUs
# per node (gpus_per_node: what its jobs ask Slurm for), one ConnectX-7 NDR per node; the nearest GPU sits behind
# the HCA's PCIe switch (gpu_hca_distance: the fleet sweep names a GPU whose nearest HCA is farther), the farthest
# on the other socket (gpu_far_distance: GPUDirect RDMA measures that GPU too; leave it out where none is farther);
# NCCL must send over its verbs transport, IB (InfiniBand or RoCE; nccl_network='...' names another NCCL network)
GPU_PARTITION = _partition(
    'gpu', 'site template: 2x Intel Xeon 48 cores, 4x NVIDIA H100 on PCIe 5.0 x16, ConnectX-7 NDR 400 Gb/s (mlx5_0) '
           'on PCIe 5.0 x16',
    nodes=4, cores_per_node=96, rdma_devices=['mlx5_0'], ib_ports=1, features=['gpu', 'gpudirect'],
    environs=['gpu', 'gpu-openmpi'], gpus_per_node=4, gpu_hca_distance='PIX', gpu_far_distance='SYS', hca_numa_node=0,
    link='4X NDR', bus='PCIe 5.0 x16')

EXAMPLE_CLUSTER = {
    'name': SYSTEM,
    'descr': 'a Slurm + InfiniBand site (template)',
    'hostnames': [r'^example-login\d+$'],                # SITE: your login nodes
    'modules_system': 'nomod',                           # SITE: 'lmod' or 'tmod4' if environments use modules
    'prefix': str(paths.data_home() / 'rfm'),
    'partitions': [
        # SITE: a partition of today's nodes: two single-port ConnectX-6 HDR adapters per node (two rails)
        _partition('hdr', 'site template: 2x AMD EPYC 64 cores, 2x ConnectX-6 HDR 200 Gb/s (mlx5_0, mlx5_1) on '
                          'PCIe 4.0 x16, one leaf switch',
                   nodes=16, cores_per_node=128, rdma_devices=['mlx5_0', 'mlx5_1'], ib_ports=1,
                   features=['dual-port', 'fleet'], hca_numa_node=1, link='4X HDR', bus='PCIe 4.0 x16',
                   fleet_netdev='ib0'),
        *([GPU_PARTITION] if GPU_NODES else []),
    ],
}

# SITE: where your builds are. `make spack SPACK_ENV=generic` / `ib-mvapich` build these views; any install
# prefix works the same way, and modules=[...] can provide (part of) an environment instead.
VIEWS = '/opt/ibrepro/views'

ENVIRONMENTS = [
    rfmconfig.site_environment(
        'openmpi', descr='Open MPI 5 with OSU Micro-Benchmarks, NPB, IMB, perftest and ibrepro-benchmarks '
                         '(the Spack view of configs/spack/generic)',
        prefix=f'{VIEWS}/generic', mpi='openmpi', slurm_mpi_type='pmix',
        tools=['osu', 'npb', 'imb', 'ibrepro-bench'], target_systems=[SYSTEM]),
    rfmconfig.site_environment(
        'mvapich2', descr='MVAPICH2 2.3.7 (mrail, two-port striping patch) with OSU Micro-Benchmarks, NPB, IMB, '
                          'perftest and ibrepro-benchmarks (the Spack view of configs/spack/ib-mvapich)',
        prefix=f'{VIEWS}/ib-mvapich', mpi='mvapich2', slurm_mpi_type='pmi2',
        tools=['osu', 'npb', 'imb', 'ibrepro-bench'], target_systems=[SYSTEM]),
    # the verbs-level tools need no MPI: one environment, so each verbs case runs once
    rfmconfig.site_environment(
        'verbs', descr='perftest (upstream, MOFED or DOCA) and ibrepro_rdma, run by the pair runner',
        prefix=f'{VIEWS}/generic', tools=['perftest', 'ibrepro-rdma'], target_systems=[SYSTEM]),
    # SITE: the GPU tools, the Spack view of configs/spack/gpu (nvbandwidth; perftest built with CUDA, feature
    # `cuda`: GPUDirect RDMA), or modules=['cuda', 'nvbandwidth', ...]
    rfmconfig.site_environment(
        'gpu', descr='nvbandwidth (CUDA host-device copies) and perftest +cuda (GPUDirect RDMA)',
        prefix=f'{VIEWS}/gpu', tools=['nvbandwidth', 'perftest'], features=['cuda'], target_systems=[SYSTEM]),
    # SITE: a CUDA-aware MPI with OSU built +cuda (the Spack view of configs/spack/gpu-mpi, feature `cuda`): MPI
    # between GPU memories
    rfmconfig.site_environment(
        'gpu-openmpi', descr='CUDA-aware Open MPI 5 (UCX +cuda) with OSU Micro-Benchmarks +cuda and nccl-tests',
        prefix=f'{VIEWS}/gpu-mpi', mpi='openmpi', slurm_mpi_type='pmix', tools=['osu', 'nccl'], features=['cuda'],
        target_systems=[SYSTEM]),
]

# --mode nightly: the `nightly` subset (every figure of the papers once, ~26 min on two nodes: nightly.yaml)
site_configuration = rfmconfig.site_configuration(systems=[EXAMPLE_CLUSTER], environments=ENVIRONMENTS,
                                                  nightly_subset=True)

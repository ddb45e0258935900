"""ReFrame configuration of ``example-cluster``: the papers' testbeds as Slurm partitions (a template for sites).

Its host names match no real host, so it is selected explicitly; with ``--dry-run`` ReFrame writes every job
script without submitting anything (no Slurm needed: srun's version probe fails quietly)::

    reframe -C configs/example-cluster.py --system example-cluster -c reframe-checks --dry-run

To adapt it: set ``hostnames`` to your login nodes, ``access`` to your Slurm partitions, the extras to your
nodes (the checks read ``nodes`` and ``cores_per_node`` to skip layouts that do not fit), and give each
environment what puts its MPI and benchmarks on PATH (``modules`` with ``modules_system: 'lmod'``, or
``env_vars``/``prepare_cmds`` for a Spack view). Features are what the checks select on:

* partitions: ``mpi``, ``shm``, ``ib``, ``ib-sdr``/``ib-qdr`` (link rate), ``dual-port`` (two connected ports
  per HCA, for the multi-rail runs), ``nodes<N>`` (at least N nodes), ``pcie``/``pcix``/``pci`` (HCA bus);
* environments: ``mpi``, the MPI library (``mvapich2``, ``openmpi``) and the benchmark tools installed with
  it (``osu``, ``npb``, ``imb``); ``perftest`` for the verbs-level families.

Extras the checks read: ``nodes``, ``cores_per_node`` (layouts), ``rdma_devices`` and ``ib_ports`` (verbs
families; ``mthca0`` is the Linux name of an InfiniHost/InfiniHost III HCA, ``mlx4_0`` of a ConnectX).

Testbeds (extras ``testbed`` names the paper): 000/003 Sec. IV.A, 001 Sec. 4, 002 Sec. 3 and 4.2/4.7.
"""

from ibrepro import paths, rfmconfig


def _partition(name, descr, *, nodes, cores_per_node, features, **extras):
    return {
        'name': name,
        'descr': descr,
        'scheduler': 'slurm',
        'launcher': 'srun',
        'access': [f'--partition={name}'],
        'sched_options': {'use_nodes_option': True},    # emit --nodes: layouts are nodes x processes
        'environs': ['mvapich2', 'openmpi', 'perftest'],
        'max_jobs': 1,                                   # performance runs never share the fabric
        'features': ['mpi', 'shm', *features] + [f'nodes{n}' for n in (2, 4, 8, 16) if n <= nodes],
        'extras': {'nodes': nodes, 'cores_per_node': cores_per_node, **extras},
    }


#: IPoIB addresses of the two ports of the first two nodes (ibrepro_rdma connects through RDMA CM);
#: documentation ranges here, your IPoIB subnets on a real cluster.
IPOIB = [['192.0.2.1', '198.51.100.1'], ['192.0.2.2', '198.51.100.2']]

EXAMPLE_CLUSTER = {
    'name': 'example-cluster',
    'descr': "the seed papers' testbeds as partitions of one Slurm cluster (template)",
    'hostnames': [r'^example-login\d+$'],
    'modules_system': 'nomod',
    'prefix': str(paths.data_home() / 'rfm'),
    'partitions': [
        _partition('pcie-sdr', '000/003: 4 nodes, 2 Xeon 3.4 GHz, MT25208 on PCIe x8, dual-port 4X SDR, '
                               'InfiniScale switch',
                   nodes=4, cores_per_node=2, features=['ib', 'ib-sdr', 'dual-port', 'pcie'],
                   hca='MT25208 InfiniHost III Ex', rdma_devices=['mthca0'], ib_ports=2, link='4X SDR',
                   bus='PCIe x8', testbed='000/003', rdma_addresses=IPOIB),
        _partition('pcix-sdr', '000/003: the same 4 nodes with MT23108 on PCI-X 64 bit/133 MHz, dual-port',
                   nodes=4, cores_per_node=2, features=['ib', 'ib-sdr', 'dual-port', 'pcix'],
                   hca='MT23108 InfiniHost', rdma_devices=['mthca0'], ib_ports=2, link='4X SDR',
                   bus='PCI-X 64 bit/133 MHz', testbed='000/003', rdma_addresses=IPOIB),
        _partition('connectx-qdr', '001: 2 nodes back to back, 2 quad-core Xeon 2.83 GHz, ConnectX QDR '
                                   'firmware on PCIe 2.0 x8',
                   nodes=2, cores_per_node=8, features=['ib', 'ib-qdr', 'dual-port', 'pcie'],
                   hca='ConnectX', rdma_devices=['mlx4_0'], ib_ports=2, link='4X QDR', bus='PCIe 2.0 x8',
                   testbed='001', rdma_addresses=IPOIB),
        _partition('ib-pcix-8node', '002: 8 nodes, 2 Xeon 2.4 GHz, MT23108 on PCI-X 64 bit/133 MHz, '
                                    'InfiniScale 8-port switch',
                   nodes=8, cores_per_node=2, features=['ib', 'ib-sdr', 'pcix'],
                   hca='MT23108 InfiniHost', rdma_devices=['mthca0'], ib_ports=1, link='4X SDR',
                   bus='PCI-X 64 bit/133 MHz', testbed='002'),
        _partition('ib-pci-8node', '002 Sec. 4.7: the same 8 nodes with the HCA forced to a 66 MHz PCI bus',
                   nodes=8, cores_per_node=2, features=['ib', 'ib-sdr', 'pci'],
                   hca='MT23108 InfiniHost', rdma_devices=['mthca0'], ib_ports=1, link='4X SDR',
                   bus='PCI 64 bit/66 MHz', testbed='002'),
    ],
}

ENVIRONMENTS = [
    {'name': 'mvapich2', 'cc': 'mpicc',
     'features': ['mpi', 'mvapich2', 'osu', 'npb', 'imb', 'ibrepro-bench', 'ibrepro-rdma'],
     'extras': {'about': 'MVAPICH2 (mrail) with OSU Micro-Benchmarks, NPB 3.4, IMB and ibrepro-benchmarks '
                         '(e.g. the Spack view of configs/spack/ib-mvapich)'},
     'target_systems': ['example-cluster']},
    {'name': 'openmpi', 'cc': 'mpicc', 'features': ['mpi', 'openmpi', 'osu', 'npb', 'imb'],
     'extras': {'about': 'Open MPI with OSU Micro-Benchmarks, NPB 3.4 and IMB'},
     'target_systems': ['example-cluster']},
    {'name': 'perftest', 'features': ['perftest'],
     'extras': {'about': 'perftest (rdma-core tools) for the verbs-level families, run by ibrepro pair'},
     'target_systems': ['example-cluster']},
]

site_configuration = rfmconfig.site_configuration(systems=[EXAMPLE_CLUSTER], environments=ENVIRONMENTS)

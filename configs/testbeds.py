"""ReFrame configuration of ``testbeds``: the seed papers' testbeds as partitions of a Slurm cluster.

000/003 Sec. IV.A, 001 Sec. 4, 002 Sec. 3 and 4.2/4.7 (extras ``testbed`` names the paper), judged against the
papers' own numbers (reference-data/systems/testbeds/references.yaml, scripts/testbed_references.py). No host is
one of them: this is the target of dry runs, named explicitly; ReFrame writes every job script without submitting
anything (no Slurm needed)::

    reframe -C configs/testbeds.py --system testbeds -c reframe-checks --dry-run

The partitions and environments are shaped as the site template's (configs/example-cluster.py), from which they are
built, so a dry run here reads as a site's job scripts would on the papers' hardware.
"""

import runpy
from pathlib import Path

from ibrepro import paths, rfmconfig

TEMPLATE = runpy.run_path(str(Path(__file__).with_name('example-cluster.py')))
_partition = TEMPLATE['_partition']

TESTBEDS = {
    'name': 'testbeds',
    'descr': 'the seed papers\' testbeds as partitions of a Slurm cluster (dry runs)',
    'hostnames': [r'(?!)'],                              # matches no host: named with --system testbeds
    'modules_system': 'nomod',
    'prefix': str(paths.data_home() / 'rfm'),
    'partitions': [
        _partition('pcie-sdr', '000/003: 4 nodes, 2 Xeon 3.4 GHz, MT25208 on PCIe x8, dual-port 4X SDR, '
                               'InfiniScale switch',
                   nodes=4, cores_per_node=2, rdma_devices=['mthca0'], ib_ports=2, features=['dual-port'],
                   hca='MT25208 InfiniHost III Ex', link='4X SDR', bus='PCIe x8', testbed='000/003'),
        _partition('pcix-sdr', '000/003: the same 4 nodes with MT23108 on PCI-X 64 bit/133 MHz, dual-port',
                   nodes=4, cores_per_node=2, rdma_devices=['mthca0'], ib_ports=2, features=['dual-port'],
                   hca='MT23108 InfiniHost', link='4X SDR', bus='PCI-X 64 bit/133 MHz', testbed='000/003'),
        _partition('connectx-qdr', '001: 2 nodes back to back, 2 quad-core Xeon 2.83 GHz, ConnectX QDR '
                                   'firmware on PCIe 2.0 x8',
                   nodes=2, cores_per_node=8, rdma_devices=['mlx4_0'], ib_ports=2, features=['dual-port'],
                   hca='ConnectX', link='4X QDR', bus='PCIe 2.0 x8', testbed='001'),
        _partition('ib-pcix-8node', '002: 8 nodes, 2 Xeon 2.4 GHz, MT23108 on PCI-X 64 bit/133 MHz, '
                                    'InfiniScale 8-port switch',
                   nodes=8, cores_per_node=2, rdma_devices=['mthca0'], ib_ports=1,
                   hca='MT23108 InfiniHost', link='4X SDR', bus='PCI-X 64 bit/133 MHz', testbed='002'),
        _partition('ib-pci-8node', '002 Sec. 4.7: the same 8 nodes with the HCA forced to a 66 MHz PCI bus',
                   nodes=8, cores_per_node=2, rdma_devices=['mthca0'], ib_ports=1,
                   hca='MT23108 InfiniHost', link='4X SDR', bus='PCI 64 bit/66 MHz', testbed='002'),
    ],
}

ENVIRONMENTS = [{**env, 'target_systems': ['testbeds']} for env in TEMPLATE['ENVIRONMENTS']]

site_configuration = rfmconfig.site_configuration(systems=[TESTBEDS], environments=ENVIRONMENTS)

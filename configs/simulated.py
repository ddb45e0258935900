"""ReFrame configuration of ``simulated``: the papers' testbeds as SimGrid SMPI models (docs/simulation.md).

    make simulated-build                 # SimGrid's compilers build our benchmarks and NAS IS
    reframe -C configs/simulated.py -c reframe-checks -r

One partition per testbed (000/003 PCIe x8 and PCI-X, 002's 8-node cluster on PCI-X and on PCI, 001's ConnectX on
PCIe 1.1/2.0 with SDR/DDR/QDR), launcher ``smpirun``, environment ``smpi``. The families run unmodified; what SMPI
cannot model (verbs, two ports, memory, registration, overlap) is skipped with the reason (``ibrepro catalog -C
configs/simulated.py``). Results are model values, stored under the system ``simulated``, never mixed with a
real system's history.
"""

from ibrepro import rfmconfig
from ibrepro.simulated import config as simulated   # registers the `smpirun` launcher

site_configuration = rfmconfig.site_configuration(systems=[simulated.system()],
                                                  environments=[rfmconfig.smpi_environment()])

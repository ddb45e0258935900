"""ReFrame configuration of the soft-RoCE nodes: QEMU guests whose RDMA ports are rdma_rxe.

    ibrepro softroce up [--nodes 2]
    reframe -C configs/softroce.py --system softroce -c reframe-checks/verbs --exec-policy=serial -r
    ibrepro softroce down

or ``ibrepro softroce run [--nodes 2] -- reframe ...`` (the guests go down whatever happens).
Partitions ``dualport`` (one guest, rxe0 <-> rxe1) and ``nodes2`` (two guests, needs ``--nodes 2``);
their numbers come from emulated CPUs (``extras: emulated``), never performance data.
See ci/softroce/README.md and ibrepro.softroce.config.
"""

from ibrepro import rfmconfig
from ibrepro.softroce import config as softroce   # registers the `softroce` launcher

site_configuration = rfmconfig.site_configuration(systems=[softroce.system()],
                                                  environments=[softroce.environment(),
                                                                softroce.mvapich2_environment(['softroce'])])

"""ReFrame configuration of the Slurm cluster of soft-RoCE guests started by ``ci/softroce/slurm-up.sh``.

    ci/softroce/slurm-up.sh                    # NODES=3: rxnode1..3, rxe0 + rxe1 each
    reframe -C configs/softroce-slurm.py -c reframe-checks -t verbs -r
    ci/softroce/slurm-down.sh

Shaped like a site's: scheduler ``slurm`` (sbatch, then sacct through slurmdbd), launcher ``srun``, access to
a Slurm partition, Slurm chooses the nodes; partition extras name the RDMA devices (``rxe0``, ``rxe1``: two
rails per node) and the compute nodes' interpreter. The numbers come from emulated CPUs (``extras:
emulated``), never performance data. See ci/softroce/README.md and ibrepro.softroce.config.

Environment: IBREPRO_SOFTROCE_CLUSTER_DIR (the cluster's work dir, default /tmp/ibrepro-softroce),
IBREPRO_HOME (results, reports; default <cluster dir>/ibrepro-home, so a throw-away cluster never writes
into the user's own history).
"""

import os
from pathlib import Path

CLUSTER_DIR = Path(os.environ.get('IBREPRO_SOFTROCE_CLUSTER_DIR', '/tmp/ibrepro-softroce'))
os.environ.setdefault('IBREPRO_HOME', str(CLUSTER_DIR / 'ibrepro-home'))
# ReFrame itself runs sbatch, squeue, sacct and scancel: they must reach this cluster, whatever SLURM_CONF the
# caller's shell had (the guests have this path too: slurm-node.sh links it to their configuration)
os.environ['SLURM_CONF'] = str(CLUSTER_DIR / 'etc' / 'slurm.conf')

from ibrepro import rfmconfig  # noqa: E402  (reads IBREPRO_HOME)
from ibrepro.softroce import config as softroce  # noqa: E402

site_configuration = rfmconfig.site_configuration(
    systems=[softroce.slurm_system(CLUSTER_DIR)],
    environments=[softroce.environment(CLUSTER_DIR / 'guests', systems=['softroce-slurm']),
                  softroce.mvapich2_environment(['softroce-slurm'])])

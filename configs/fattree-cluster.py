"""ReFrame configuration of the 8-node fat-tree cluster of ``ci/cluster/up.sh`` (the fleet's proving ground).

``IBREPRO_CLUSTER_NODES=8 IBREPRO_CLUSTER_FABRIC=fattree`` (``make fleet-up``): node1..node8 in network namespaces,
Slurm on the management bridge, and a data fabric of 2 leaf and 2 spine router namespaces (``fab0`` on each node,
every link shaped by tbf; ci/cluster/fabric.sh). The partition has the feature ``fleet``: the pair-round check
(``reframe-checks/system/fleet_pairs.py``) runs there, cut by ``IBREPRO_FLEET_TOPOLOGY`` (the cluster writes
``$IBREPRO_CLUSTER_DIR/etc/topology.conf``).

Environment: IBREPRO_CLUSTER_DIR (default /tmp/ibrepro-fattree), IBREPRO_HOME (default <cluster dir>/ibrepro-home).
"""

import os
from pathlib import Path

CLUSTER_DIR = Path(os.environ.get('IBREPRO_CLUSTER_DIR', '/tmp/ibrepro-fattree'))
os.environ.setdefault('IBREPRO_HOME', str(CLUSTER_DIR / 'ibrepro-home'))
os.environ['SLURM_CONF'] = str(CLUSTER_DIR / 'etc' / 'slurm.conf')
os.environ.setdefault('IBREPRO_FLEET_TOPOLOGY', str(CLUSTER_DIR / 'etc' / 'topology.conf'))

from ibrepro import paths, rfmconfig  # noqa: E402  (reads IBREPRO_HOME)

TCP = {'name': 'tcp', 'features': ['tcp'],
       'extras': {'about': 'TCP flows of iperf3 (Debian) over the fabric interface fab0'}}

SYSTEM = {
    'name': 'fattree-cluster',
    'descr': 'Throw-away Slurm 22.05 cluster of ci/cluster/up.sh: 8 namespace nodes on a tbf-shaped fat tree',
    'hostnames': ['.*'],
    'modules_system': 'nomod',
    'prefix': str(paths.data_home() / 'rfm'),
    'partitions': [{
        'name': 'fabric',
        'descr': 'node1..node8 (Slurm partition ci): leaves leaf1, leaf2; spines spine0, spine1 (D-mod-K)',
        'scheduler': 'slurm',
        'launcher': 'srun',
        'access': ['--partition=ci'],
        'time_limit': '10m',
        'max_jobs': 4,
        'environs': ['tcp'],
        'features': ['fleet'],
        'extras': {'nodes': 8, 'interconnect': 'namespace fat tree, TCP over tbf-shaped veths'},
    }],
}

site_configuration = rfmconfig.site_configuration(systems=[SYSTEM], environments=[TCP])

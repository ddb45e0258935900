"""Hardware provenance of every partition: its RDMA devices, links, host buses and their limits.

Runs ``ibrepro topology --json`` inside a job on each partition, so the stored session carries
what the nodes really have. The whole topology is the loggable variable ``topology`` of each test
case in the JSON run report (and in the results database); ``rdma_features`` lists the partition
features it supports (:func:`ibrepro.topology.partition_features`).
"""

import os

import reframe as rfm
from reframe.core.backends import getlauncher
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import performance_function, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from ibrepro import limits
from ibrepro import topology as ibtopology
from ibrepro.rfm.system import IbreproCommand


@rfm.simple_test
class RdmaTopology(IbreproCommand):
    descr = 'RDMA devices, links, host buses and theoretical limits of the node (ibrepro topology)'
    tags = {'system', 'topology', 'nightly'}

    #: sysfs root to read on the node (another root only for tests or containers)
    sysfs_root = variable(str, value='/sys')

    #: `ibrepro topology --json` of the node the job ran on (set after the run)
    topology = variable(dict, value={}, loggable=True)

    #: partition features the topology supports, e.g. ['ib', 'ib-edr'] (set after the run)
    rdma_features = variable(typ.List[str], value=[], loggable=True)

    #: How to read the node: ``ibrepro`` (sysfs, this Python on the node) or ``ibv_devinfo`` (rdma-core's
    #: tool, for nodes without our Python, e.g. soft-RoCE guests); partition extras ``topology_probe`` chooses.
    probe = variable(str, value='ibrepro')

    @run_before('run')
    def set_options(self):
        # one process on the job's node; no MPI launcher needed (the softroce launcher is what puts it in the guest)
        in_guest = self.current_partition.launcher_type.registered_name == 'softroce'
        if not in_guest:
            self.job.launcher = getlauncher('local')()
        self.probe = self.current_partition.extras.get('topology_probe', self.probe)
        if self.probe == 'ibv_devinfo':
            # a partition whose nodes are reached through a prefix (emulated nodes): from here, node 0; not
            # when the launcher already runs the command on the node (the prefix is a program of this host)
            node_exec = [] if in_guest else self.current_partition.extras.get('node_exec') or []
            prefix = [a.replace('{node}', '0') for a in node_exec]
            self.executable, *self.executable_opts = [*prefix, 'ibv_devinfo', '-v']
        else:
            self.executable_opts = ['-m', 'ibrepro.cli', 'topology', '--json', '--sysfs', self.sysfs_root]

    @sanity_function
    def topology_is_json(self):
        import json

        stdout = os.path.join(self.stagedir, sn.evaluate(self.stdout))
        stderr = os.path.join(self.stagedir, sn.evaluate(self.stderr))
        try:
            with open(stdout) as f:
                text = f.read()
            topo = (ibtopology.parse_ibv_devinfo(text, 'rfm_job.out') if self.probe == 'ibv_devinfo'
                    else json.loads(text))
        except (OSError, ValueError) as err:
            with open(stderr, errors='replace') as f:
                tail = f.read()[-500:].strip()
            raise SanityError(f'{self.probe} gave no topology ({err}); stderr: {tail or "empty"}')

        if not isinstance(topo, dict) or not isinstance(topo.get('devices'), list):
            raise SanityError('ibrepro topology --json: no "devices" list in the output')

        self.topology = topo
        self.rdma_features = ibtopology.partition_features(topo)
        return True

    @performance_function('devices')
    def rdma_devices(self):
        return len(self.topology['devices'])

    @performance_function('ports')
    def rdma_ports(self):
        return ibtopology.summary(self.topology)['ports']

    @run_before('performance')
    def add_limits(self):
        """Link and bound variables only where there is an active port to bound."""
        summary = ibtopology.summary(self.topology)
        if not summary['ports']:
            return

        per_direction, both = ibtopology.node_bound(self.topology)
        values = {'link_gbps': (summary['link_gbps'], 'Gb/s'),
                  'limit_uni': (limits.to_MBps(per_direction), 'MB/s'),
                  'limit_bi': (limits.to_MBps(both), 'MB/s')}
        for name, (value, unit) in values.items():
            self.perf_variables[name] = sn.make_performance_function(sn.defer(value), unit)

"""The base of the checks of the system itself (reframe-checks/system/): not a paper's experiment, a record."""

import shlex
import sys
from pathlib import Path

import reframe as rfm
from reframe.core.builtins import run_before

#: The directory that holds the ibrepro package: the node's Python imports it from there (the checkout, which the
#: nodes see as they see ReFrame's stage directories).
PACKAGE_DIR = Path(__file__).resolve().parents[2]


#: The modules ``python -m ibrepro.cli topology|software|fleet node`` imports on a node: 3.6 at the oldest
#: (tests/test_compat.py holds them to it, and runs both commands under 3.6 and 3.9).
NODE_MODULES = ('__init__.py', 'cli.py', 'trust.py', 'topology.py', 'pcie_distance.py', 'limits.py', 'software.py',
                'paths.py', 'rfmconfig.py', 'bands.py', 'compat.py', 'fleet/__init__.py', 'fleet/cli.py',
                'fleet/sweep.py', 'fleet/component.py', 'fleet/world.py')


def node_python(partition):
    """The Python a partition's jobs run ibrepro's node-side code with: its extras ``python`` (the nodes' own,
    3.6 at the oldest: EL8's platform Python), else the Python running ReFrame (a login node's virtual environment,
    which nodes of another OS release may not be able to run)."""
    return partition.extras.get('python') or sys.executable


class IbreproCommand(rfm.RunOnlyRegressionTest):
    """One task that runs ``python -m ibrepro.cli ...`` in the job: with the partition's Python
    (:func:`node_python`) and the package from this checkout (``PYTHONPATH``); the job gives it the node, the
    partition and the environment's paths."""

    valid_systems = ['*']
    valid_prog_environs = ['*']
    num_tasks = 1

    @run_before('run')
    def use_the_nodes_python(self):
        use_the_nodes_python(self)


def use_the_nodes_python(test):
    """Make ``test``'s job run ``python -m ibrepro...`` with its partition's Python and this checkout's package."""
    test.executable = shlex.quote(node_python(test.current_partition))   # a checkout path may have a space
    test.env_vars['PYTHONPATH'] = shlex.quote(str(PACKAGE_DIR)) + '${PYTHONPATH:+:$PYTHONPATH}'

"""The base of the checks of the system itself (reframe-checks/system/): not a paper's experiment, a record."""

import shlex
import sys

import reframe as rfm


class IbreproCommand(rfm.RunOnlyRegressionTest):
    """One task that runs ``python -m ibrepro.cli ...`` in the job: the interpreter running ReFrame has ibrepro
    installed, and the job gives it the node, the partition and the environment's paths."""

    valid_systems = ['*']
    valid_prog_environs = ['*']
    num_tasks = 1
    executable = shlex.quote(sys.executable)     # a checkout path may have a space

"""Victims and bystanders of the fault tests in tests/test_cluster.py (CI cluster only).

Each victim is hit by one fault while it runs: a rank killed, the Slurm time limit, a node's
slurmd stopped. The bystander must pass in the same session. Not part of the project's checks.
"""

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import sanity_function
from reframe.core.exceptions import SanityError

#: Slurm job states that mean the job did not end well (sacct's State column).
SLURM_FAILURE_STATES = {'BOOT_FAIL', 'CANCELLED', 'DEADLINE', 'FAILED', 'NODE_FAIL',
                        'OUT_OF_MEMORY', 'PREEMPTED', 'TIMEOUT'}

PINGPONG_SRC = os.path.join(os.path.dirname(__file__), '..', '..', 'ci', 'cluster', 'checks', 'src')


@sn.deferrable
def job_ended_well(job):
    """Slurm's verdict on the job, checked first so that the failure says TIMEOUT, NODE_FAIL..."""
    states = set((job.state or '').split(','))
    if states & SLURM_FAILURE_STATES:
        raise SanityError(f'Slurm job {job.jobid} ended {job.state} (exit code {job.exitcode})')

    if job.exitcode:
        raise SanityError(f'Slurm job {job.jobid} exited with code {job.exitcode}')

    return True


class _OnTwoNodes(rfm.RunOnlyRegressionTest):
    valid_systems = ['+mpi +nodes2']
    valid_prog_environs = ['mpich']
    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = '3m'
    tags = {'cluster', 'faults'}

    @sanity_function
    def validate(self):
        return job_ended_well(self.job)


@rfm.simple_test
class Bystander(_OnTwoNodes):
    """Runs beside the victims and must pass."""

    executable = 'hostname'

    @sanity_function
    def validate(self):
        hosts = sn.extractall(r'^(\S+)$', self.stdout, 1)
        return sn.all([job_ended_well(self.job),
                       sn.assert_eq(sn.count_uniq(hosts), 2, msg='ran on {0} host(s), expected 2')])


@rfm.simple_test
class PastTimeLimit(_OnTwoNodes):
    """Sleeps past its time limit (Slurm counts whole minutes: 10 s become 1 min)."""

    executable = 'sleep'
    executable_opts = ['300']
    time_limit = '10s'


@rfm.simple_test
class NodeLost(_OnTwoNodes):
    """Sleeps on both nodes while the test stops node2's slurmd."""

    executable = 'sleep'
    executable_opts = ['120']


@rfm.simple_test
class RankKilled(rfm.RegressionTest):
    """An MPI ping-pong running for a minute; the test kills the rank on node2."""

    valid_systems = ['+mpi +nodes2']
    valid_prog_environs = ['mpich']
    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = '3m'
    tags = {'cluster', 'faults'}
    sourcesdir = PINGPONG_SRC
    sourcepath = 'mpi_pingpong.c'
    build_system = 'SingleSource'
    executable_opts = ['60']

    @sanity_function
    def validate(self):
        return sn.all([job_ended_well(self.job),
                       sn.assert_found(r'^bandwidth 1048576 bytes', self.stdout)])

"""Smoke checks of a multi-node system: one MPI rank on each of two nodes, talking.

Written for the CI cluster of ci/cluster/up.sh (configs/ci-cluster.py), valid on any partition
with the features ``mpi`` and ``nodes2``. They prove the plumbing (Slurm allocation across
nodes, the PMI of each MPI stack, TCP between the nodes), not performance: the CI nodes share
the machine's cores.

    reframe -C configs/ci-cluster.py -c ci/cluster/checks -r
"""

import reframe as rfm
import reframe.utility.sanity as sn


# Why not self.job.nodelist: with Slurm 22.05 + slurmdbd, sacct briefly reports a finished job as
# COMPLETED with only the batch host as its node list, and ReFrame keeps the list of its first
# COMPLETED poll. The host names the tasks print are the evidence.


@rfm.simple_test
class ClusterPingPong(rfm.RegressionTest):
    """src/mpi_pingpong.c built with the environment's MPI compiler wrapper."""

    valid_systems = ['+mpi +nodes2']
    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = '2m'
    tags = {'cluster', 'smoke'}
    valid_prog_environs = ['+mpicc']
    sourcepath = 'mpi_pingpong.c'
    build_system = 'SingleSource'

    #: Keep the 1 MiB ping-pong going this long (s) before measuring, so that a fault can
    #: hit a running job (tests/test_cluster.py sets it with -S seconds=N).
    seconds = variable(int, value=0)

    @run_before('compile')
    def set_cflags(self):
        self.build_system.cflags = ['-O2']

    @run_before('run')
    def set_duration(self):
        if self.seconds:
            self.executable_opts = [str(self.seconds)]

    @sanity_function
    def validate(self):
        hosts = sn.extractall(r'^rank \d+ of 2 on (\S+)', self.stdout, 1)
        return sn.all([
            sn.assert_eq(sn.count_uniq(hosts), 2, msg='ranks ran on {0} host name(s), expected 2'),
            sn.assert_found(r'^allreduce sum of ranks 1 \(expected 1\)', self.stdout),
            sn.assert_found(r'^bandwidth 1048576 bytes', self.stdout),
        ])

    @performance_function('us')
    def lat_8(self):
        return sn.extractsingle(r'^latency 8 bytes: (\S+) us', self.stdout, 1, float)

    @performance_function('MB/s')
    def bw_1048576(self):
        return sn.extractsingle(r'^bandwidth 1048576 bytes: (\S+) MB/s', self.stdout, 1, float)


@rfm.simple_test
class ClusterImbPingPong(rfm.RunOnlyRegressionTest):
    """IMB-MPI1 PingPong as shipped with the MPI stack (impi-rt carries IMB)."""

    valid_systems = ['+mpi +nodes2']
    num_tasks = 2
    num_tasks_per_node = 1
    time_limit = '2m'
    tags = {'cluster', 'smoke'}
    valid_prog_environs = ['+imb']
    # IMB does not say where its ranks run: each task prints its host, then becomes IMB-MPI1
    # (exec keeps the process the launcher started, so PMI still finds its rank)
    executable = 'bash'
    executable_opts = ['-c', "'echo \"task on $(hostname)\"; exec IMB-MPI1 PingPong -msglog 0:20 -iter 100'"]

    @sanity_function
    def validate(self):
        hosts = sn.extractall(r'^task on (\S+)', self.stdout, 1)
        return sn.all([
            sn.assert_eq(sn.count_uniq(hosts), 2, msg='tasks ran on {0} host name(s), expected 2'),
            sn.assert_found(r'#processes = 2', self.stdout),
            sn.assert_found(r'^\s+1048576\s+\d+', self.stdout, msg='PingPong did not reach 1 MiB'),
        ])

    @performance_function('us')
    def lat_0(self):
        return sn.extractsingle(r'^\s+0\s+\d+\s+(\S+)', self.stdout, 1, float)

    @performance_function('MB/s')
    def bw_1048576(self):
        return sn.extractsingle(r'^\s+1048576\s+\d+\s+\S+\s+(\S+)', self.stdout, 1, float)

"""Smoke checks of the soft-RoCE partitions (configs/softroce.py), used by tests/test_softroce.py.

`softroce_rdma_devices` runs one command in the guest through the partition's `softroce` launcher and finds the
guest's two ports.
The perftest checks are the verbs families' own machinery (ibrepro.rfm.perftest.PerftestFlows: flows run
by `ibrepro pair`, placed through the partition's `node_exec`, parsed by ibrepro.parsers) with one message
size and few iterations, so that they take seconds under TCG (the partition's `perftest_options`, a QP
timeout for emulated nodes, apply as in every family).
"""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import sanity_function

from ibrepro.rfm.perftest import PerftestFlows
from ibrepro.softroce import guests


@rfm.simple_test
class softroce_rdma_devices(rfm.RunOnlyRegressionTest):
    valid_systems = ['+rxe +dual-port']
    valid_prog_environs = ['+verbs']
    executable = 'ibv_devices'
    tags = {'verbs', 'smoke'}

    @sanity_function
    def validate(self):
        # the guest's own ports (ibrepro.softroce.guests), whatever the partition's extras say
        return sn.all(sn.assert_found(rf'^\s+{dev}\s+[0-9a-f]{{16}}$', self.stdout,
                                      msg=f'RDMA device {dev} not listed')
                      for dev in guests.DEVICES[:2])


class _PerftestSmoke(PerftestFlows):
    valid_systems = ['+rxe']
    iterations = 100
    pair_timeout = 300
    tags = {'smoke'}


@rfm.simple_test
class softroce_write_lat(_PerftestSmoke):
    test = 'ib_write_lat'
    message_sizes = '2'
    report_metrics = ['lat']


@rfm.simple_test
class softroce_write_bw(_PerftestSmoke):
    test = 'ib_write_bw'
    message_sizes = '65536'
    report_metrics = ['bw']

"""MVAPICH2 runtime parameters the papers' experiments set, and what MVAPICH2 prints when it ignores them.

Every name was read in the MVAPICH2 2.3.7 sources (``src/mpid/ch3/channels/mrail/src/gen2/ibv_param.c``,
release tarball import ``github:nmorey/mvapich`` tag v2.3.7; also present in 2.2-2.3.6) and the MVAPICH2 2.x
user guide; they apply to the OFA-IB-CH3 ("mrail") device only (Spack ``mvapich2 fabrics=mrail``), not to
MVAPICH 3.x/4.x (CH4). Notes for the striping runs:

* ``MV2_NUM_PORTS`` is capped at ``MAX_NUM_PORTS``: 2 in MVAPICH2 2.2-2.3.4, 1 in 2.3.5-2.3.7 unless built
  with ``-DMAX_NUM_PORTS=2``; MVAPICH2 then prints "Warning, max ports per hca is 1, ..." and runs on one port
  (:func:`ignored_setting` turns that into a sanity failure).
* With one process per node MVAPICH2 always shares (stripes over) all rails (``rdma_num_nodes_in_job ==
  pg_size``); the binding policy only differs with two or more processes per node.
* Large messages are striped when larger than ``MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD`` (the renamed
  ``MV2_STRIPING_THRESHOLD``, which 2.3.7 still parses but no longer uses to stripe); only rendezvous
  messages are striped, so sizes between 8 KiB and the eager threshold (``MV2_IBA_EAGER_THRESHOLD``,
  HCA dependent) go on one rail.
"""

import re

from reframe.core.exceptions import SanityError

from .osu import OSUBenchmark

#: Striping threshold of 000/003 Sec. IV.B.3: messages <= 8192 B are not striped.
PAPER_STRIPING_THRESHOLD = 8192

#: Inline threshold of 001 Sec. 5.1: MVAPICH inlines messages up to 128 B.
PAPER_INLINE_SIZE = 128

#: Rail configurations of 000/003: one port, two ports striped, two ports bound to processes.
RAILS = {
    # one adapter, one port (2.3.5+ may list each port of a dual-port HCA as an adapter)
    '1-port': {'MV2_NUM_HCAS': '1', 'MV2_NUM_PORTS': '1'},
    # the paper's striping: large messages split evenly over both ports, smaller ones on the first port
    # (USE_FIRST); setting the policy selects MVAPICH2's rail-sharing mode
    '2-port-striping': {'MV2_NUM_HCAS': '1', 'MV2_NUM_PORTS': '2', 'MV2_RAIL_SHARING_POLICY': 'USE_FIRST',
                        'MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD': str(PAPER_STRIPING_THRESHOLD)},
    # MVAPICH2's default rail binding (each process on one port, round robin over a node's processes);
    # MV2_NUM_HCAS is not set because setting it selects rail sharing
    '2-port-binding': {'MV2_NUM_PORTS': '2'},
}

#: 001's "No-SMP" mode: processes on one node talk through the HCA (network loopback).
NETWORK_LOOPBACK = {'MV2_USE_SHARED_MEM': '0'}

# MPL_usage_printf("Warning, max ports per hca is %d, change %s in ibv_param.h to override the option\n",
# ...) and its siblings in ibv_param.c (2.3.7): the run went on with fewer rails than asked for.
_CAPPED = re.compile(r'Warning, max (ports per hca|hca|qps per port) is (\d+)')


def ignored_setting(text):
    """A reason if MVAPICH2 says it capped a rail setting (so the run did not use the rails asked for)."""
    m = _CAPPED.search(text)
    if not m:
        return None

    what, limit = m.groups()
    reason = f'MVAPICH2 capped the {what} at {limit} ("{m.group(0)}")'
    if what == 'ports per hca':
        reason += (': this build cannot use two ports of one HCA; build MVAPICH2 with -DMAX_NUM_PORTS=2 '
                   '(e.g. a Spack mvapich2 with that flag) or use 2.2-2.3.4')
    return reason


class MVAPICH2Benchmark(OSUBenchmark):
    """OMB under MVAPICH2 with its runtime parameters (``env_vars``), 2 processes on 2 nodes by default.

    Fails when MVAPICH2 says it ignored a rail setting: the run measured another configuration.
    """

    num_nodes = 2
    required_partition_features = ['ib']
    required_environ_features = ['osu', 'mvapich2']

    def diagnose(self):
        result = super().diagnose()
        ignored = ignored_setting(self._read(self.stdout.evaluate()) + self._read(self.stderr.evaluate()))
        if ignored:
            raise SanityError(ignored)

        return result

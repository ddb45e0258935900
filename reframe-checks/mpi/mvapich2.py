"""MVAPICH2 runs with the papers' runtime parameters: two-port striping (000/003), the inline size (001).

000/003 Sec. IV.C.1 (Figs. 12-14): osu_latency, osu_bw, osu_bibw with the original one-port MVAPICH and the
MVAPICH that stripes large messages over both ports of the HCA; striping threshold 8192 B (Sec. IV.B.3). (000
Sec. IV.C.2's collectives with one and two ports are ``MVAPICH2MultiRailCollective``, beside the other tools of
those figures in reframe-checks/mpi/pt2pt_collectives.py.) Today
this is MVAPICH2's multi-rail support over the partition's two rails, two ports of one HCA or two single-port
HCAs (``ibrepro.rfm.mvapich2.rail_settings``); with one process per node MVAPICH2
always spreads over its rails, so striping vs binding differs only with several processes per node:
``MVAPICH2RailPolicy`` runs osu_mbw_mr with 2 pairs (2 processes per node), the MPI-level counterpart of
000/003's Fig. 10 ("two processes", striping vs binding). The 2-port osu_bw/osu_bibw runs are likewise the
MPI-level counterparts of the two-port verbs tests of Figs. 8-9 (striping, one process per node), which no
public verbs tool can run; they carry those figures' tags too.

001 Sec. 5.1 (Fig. 2): MVAPICH inlines messages up to 128 B of payload in the latency and bandwidth tests of its
ConnectX configurations (MV2_MAX_INLINE_SIZE=168: MVAPICH2 counts its 40-byte packet header in it).

All need an environment with feature ``mvapich2`` (MVAPICH2's OFA-IB-CH3 device reads these variables; other
MPIs ignore them silently) and InfiniBand; the rail runs need two ports per HCA (``dual-port``). An MVAPICH2
that caps MV2_NUM_PORTS at 1 (2.3.5+ unless rebuilt) fails the 2-port runs with that reason.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from ibrepro.rfm import mvapich2
from ibrepro.rfm.mvapich2 import MVAPICH2Benchmark

# The figures are those of the papers' rows (the catalog's tags): each is drawn in the file of its section
# (reframe-checks/mpi/pt2pt_collectives.py, verbs/two_ports.py); here only which rows each run reproduces.
# OMB program -> catalog rows of 000/003 Sec. IV.C.1 (one port vs two), and with 2 ports also the MPI-level
# counterparts of the two-port verbs tests (Sec. IV.B.3: row 7 uni-directional, row 8 bi-directional striping)
RAIL_ROWS = {'osu_latency': [11], 'osu_bw': [12], 'osu_bibw': [13]}
TWO_PORT_ROWS = {'osu_bw': [7], 'osu_bibw': [8]}

# OMB program -> catalog rows of 001 Sec. 5.1 (its MVAPICH's inline size)
INLINE_ROWS = {'osu_latency': [16], 'osu_bw': [17], 'osu_bibw': [18]}


@rfm.simple_test
class MVAPICH2MultiRail(MVAPICH2Benchmark):
    """One port vs two ports striped, one process per node (000/003 Figs. 12-14)."""

    #: The OMB program.
    benchmark = parameter(list(RAIL_ROWS), type=str)

    #: HCA ports MVAPICH2 uses: 1 (the original MVAPICH) or 2 (striping above 8192 B).
    ports = parameter([1, 2], type=int)

    level = 'multirail'
    required_partition_features = ['ib', 'dual-port']

    @run_after('init')
    def describe(self):
        self.osu_benchmark = self.benchmark
        self.rail_policy = '1-port' if self.ports == 1 else '2-port-striping'
        self.experiments = RAIL_ROWS[self.benchmark] + (TWO_PORT_ROWS.get(self.benchmark, []) if self.ports == 2
                                                        else [])
        self.descr = f'MVAPICH2 {self.benchmark} on {self.ports} HCA port(s), 2 processes on 2 nodes'


@rfm.simple_test
class MVAPICH2RailPolicy(MVAPICH2Benchmark):
    """Two ports, two processes per node: striping every large message vs binding each process to a port."""

    #: How MVAPICH2 uses the two ports: ``striping`` (rail sharing, messages above 8192 B split over both)
    #: or ``binding`` (each process on one port).
    policy = parameter(['striping', 'binding'], type=str)

    level = 'multirail'
    osu_benchmark = 'osu_mbw_mr'
    ranks_per_node = 2
    required_partition_features = ['ib', 'dual-port']

    @run_after('init')
    def describe(self):
        self.rail_policy = f'2-port-{self.policy}'
        self.experiments = [9]
        self.descr = f'MVAPICH2 osu_mbw_mr, 2 ports by {self.policy}, 2 pairs on 2 nodes'


@rfm.simple_test
class MVAPICH2Inline(MVAPICH2Benchmark):
    """001's MVAPICH setting: messages up to 128 B inlined in the send request (Fig. 2)."""

    #: The OMB program.
    benchmark = parameter(list(INLINE_ROWS), type=str)

    #: MV2_MAX_INLINE_SIZE in bytes: 168, which inlines 128 B of payload as 001's MVAPICH did
    #: (MVAPICH2 counts a 40-byte header in it; see :mod:`ibrepro.rfm.mvapich2`).
    inline_size = variable(int, value=mvapich2.PAPER_INLINE_SIZE)

    @run_after('init')
    def describe(self):
        self.osu_benchmark = self.benchmark
        self.experiments = INLINE_ROWS[self.benchmark]
        self.env_vars = {**self.env_vars, 'MV2_MAX_INLINE_SIZE': str(self.inline_size)}
        self.descr = f'MVAPICH2 {self.benchmark}, inline size {self.inline_size} B, 2 processes on 2 nodes'

"""NAS Parallel Benchmarks (NPB-MPI) run time, in the papers' classes and layouts.

A case is ``<program>.<class>-<nodes>x<processes per node>[-loopback]`` (``is.B-4x1``): one run serves every
paper experiment with that layout. The papers' runs:

* 000 Sec. IV.C.3 (Figs. 18-19): IS class B and FT class A at 4x1 and 4x2.
* 001 Sec. 5.2 (Fig. 6): the class B suite, 16 processes on 2 nodes (2x8), with shared memory ("SMP") and
  with network loopback ("No-SMP"). Loopback cases set MVAPICH2's MV2_USE_SHARED_MEM=0 and run only in an
  environment with feature ``mvapich2`` on an InfiniBand partition: other MPIs have other switches (and
  would silently keep shared memory), so they skip, saying why.
* 002 Sec. 4.1 (Figs. 14-17): class B on 8 nodes (SP and BT need a square count: 4 nodes); Sec. 4.2
  (Table 2, Figs. 18-23): IS, CG, MG, LU at 2, 4, 8 nodes, FT at 4 and 8 ("FT does not run on 2 nodes"),
  one process per node; Sec. 4.6 (Fig. 25): 16 processes on 8 nodes, block mapping (8x2), the applications
  of Table 6; Sec. 4.7
  (Fig. 28): the 8-node runs with the HCA on a 66 MHz PCI bus (a partition with that hardware).

Other runs: ``-P case=lu.C-16x1,...`` (e.g. 002 Fig. 24, the 16-node Topspin cluster).
"""

import collections

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ibrepro.rfm.npb import NPBBenchmark, parse_case

SUITE = ['is', 'ft', 'sp', 'mg', 'cg', 'bt', 'ep', 'lu']

# case -> [catalog rows, figures]; a case several experiments share is run once and tagged with all
CASES = collections.defaultdict(lambda: [[], []])


def _add(rows, figures, cases):
    for case in cases:
        CASES[case][0].extend(r for r in rows if r not in CASES[case][0])
        CASES[case][1].extend(f for f in figures if f not in CASES[case][1])


_add([15], ['000-fig18'], ['is.B-4x1', 'is.B-4x2'])
_add([15], ['000-fig19'], ['ft.A-4x1', 'ft.A-4x2'])
_add([21], ['001-fig6'], [f'{p}.B-2x8{c}' for p in SUITE for c in ('', '-loopback')])
_add([32, 37], ['002-fig14', '002-fig28'], ['is.B-8x1', 'mg.B-8x1'])
_add([32, 37], ['002-fig15', '002-fig28'], ['sp.B-4x1', 'bt.B-4x1', 'lu.B-8x1'])
_add([32, 37], ['002-fig16', '002-fig28'], ['cg.B-8x1', 'ft.B-8x1'])
_add([34], ['002-tab2', '002-fig18'], ['is.B-2x1', 'is.B-4x1', 'is.B-8x1'])
_add([34], ['002-tab2', '002-fig19'], ['cg.B-2x1', 'cg.B-4x1', 'cg.B-8x1'])
_add([34], ['002-tab2', '002-fig20'], ['mg.B-2x1', 'mg.B-4x1', 'mg.B-8x1'])
_add([34], ['002-tab2', '002-fig21'], ['lu.B-2x1', 'lu.B-4x1', 'lu.B-8x1'])
_add([34], ['002-tab2'], ['ft.B-4x1', 'ft.B-8x1'])
_add([36], ['002-fig25'], [f'{p}.B-8x2' for p in ['is', 'cg', 'mg', 'lu', 'ft', 'sp', 'bt']])


@rfm.simple_test
class NPB(NPBBenchmark):
    #: The run: ``<program>.<class>-<nodes>x<processes per node>[-loopback]``.
    case = parameter(list(CASES), type=str)

    @run_after('init')
    def describe(self):
        self.npb_program, self.npb_class, self.num_nodes, self.ranks_per_node, self.channel = \
            parse_case(self.case)
        self.experiments, self.figures = CASES.get(self.case, ([], []))
        via = ', network loopback (MV2_USE_SHARED_MEM=0)' if self.channel == 'loopback' else ''
        self.descr = (f'NPB {self.npb_program.upper()} class {self.npb_class} at '
                      f'{self.num_nodes}x{self.ranks_per_node}{via}')

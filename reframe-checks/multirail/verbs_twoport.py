"""Two HCA ports at the verbs level: striping and binding with our own RDMA program (000/003 Sec. IV.B.3).

Striping splits every message above the threshold (8192 B) evenly across the ports and signals completion with a
send/recv control message on each port; binding pins each direction (or each process pair) to its own port. No
public verbs tool stripes one message across ports, hence ``ibrepro_rdma`` (benchmarks/verbs). Window 64,
10 warm-up + 100 timed iterations, as the papers' bandwidth tests.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from ibrepro.rfm.bench import BenchRDMA

# (mode, direction, processes per node) -> (catalog rows, figures)
CASES = {
    ('stripe', 'uni', 1): ([7], ['000-fig8', '003-fig8']),
    ('stripe', 'bi', 1): ([8], ['000-fig9', '003-fig9']),
    ('bind', 'bi', 1): ([8], ['000-fig9', '003-fig9']),
    ('stripe', 'uni', 2): ([9], ['000-fig10', '003-fig10']),
    ('bind', 'uni', 2): ([9], ['000-fig10', '003-fig10']),
    ('stripe', 'bi', 2): ([10], ['000-fig11', '003-fig11']),
    ('bind', 'bi', 2): ([10], ['000-fig11', '003-fig11']),
}


@rfm.simple_test
class VerbsTwoPort(BenchRDMA):
    #: ``mode-direction-processes per node``, the papers' cases (binding has no 1-process uni case).
    case = parameter([f'{m}-{d}-{p}proc' for m, d, p in CASES], type=str)

    #: Messages above this many bytes are striped.
    threshold = variable(int, value=8192)

    #: Messages per iteration, the papers' W.
    window = variable(int, value=64)

    required_partition_features = ['dual-port']

    @run_after('init')
    def describe(self):
        mode, direction, procs = self.case.split('-')
        self.pairs = int(procs[0])
        self.experiments, self.figures = CASES[(mode, direction, self.pairs)]
        self.client_options = ['-t', 'bw', '-M', mode, '-s', str(self.threshold), '-W', str(self.window)]
        if direction == 'bi':
            self.client_options.append('-b')
        self.report_metrics = ['bw', 'msgrate']
        self.descr = f'verbs two-port {mode}, {direction}-directional, {self.pairs} process(es) per node'

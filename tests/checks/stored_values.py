"""Sessions that store given performance values, as ReFrame stores them: for the tests of what is already stored.

The parsers refuse impossible values today (``invalid-value``), but results databases written before keep them: an
``inf`` latency is stored by ReFrame as ``Infinity`` in the session's JSON, which SQLite's JSON functions reject.
``StoredValues %kind=impossible`` stores such values for real; ``%kind=clean`` plausible ones (a history).
"""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_before, sanity_function

VALUES = {
    'clean': {'lat_8': (1.5, 'us'), 'bw_1024': (900.0, 'MB/s'), 'bw_0': (0.0, 'MB/s')},
    'impossible': {'lat_8': (float('inf'), 'us'), 'lat_16': (float('nan'), 'us'), 'bw_1024': (-5.0, 'MB/s'),
                   'bw_2048': (1e308, 'MB/s'), 'lat_32': (2.5, 'us')},
}


@rfm.simple_test
class StoredValues(rfm.RunOnlyRegressionTest):
    #: Which values the session stores.
    kind = parameter(list(VALUES))

    valid_systems = ['*']
    valid_prog_environs = ['*']
    executable = 'true'
    reference_index = ['kind']

    @sanity_function
    def ran(self):
        return sn.assert_eq(self.job.exitcode, 0)

    @run_before('performance')
    def set_values(self):
        for name, (value, unit) in VALUES[self.kind].items():
            self.perf_variables[name] = sn.make_performance_function(sn.defer(value), unit)

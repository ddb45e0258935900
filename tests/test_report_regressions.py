"""report/regressions.py: a variable's metric and size, and the headline variables a report trends without flags."""

import pytest

from ibrepro.report import regressions


@pytest.mark.parametrize('variable, metric, size', [
    ('lat_1024', 'lat', 1024), ('bw_4194304', 'bw', 4194304), ('msgrate_0', 'msgrate', 0),
    ('bw_peak', 'bw_peak', -1), ('overlap_potential_64', 'overlap_potential', 64), ('time', 'time', -1)])
def test_metric_and_size_of_a_variable(variable, metric, size):
    assert regressions.metric_of(variable) == metric and regressions.size_of(variable) == size


def _row(name, variable, value=1.0):
    return {'partition': 'default', 'environ': 'impi', 'name': name, 'variable': variable, 'value': value}


def test_headline_is_the_smallest_nonzero_latency_and_the_largest_bandwidth_of_each_case_and_nothing_else():
    rows = [_row('PingPong', v) for v in ('lat_0', 'lat_1024', 'lat_8', 'bw_8', 'bw_4194304', 'bw_65536', 'bw_peak')]
    rows += [_row('PingPong', 'bw_8388608', value=None)]          # not run tonight: not a headline
    rows += [_row('Uniband', 'bw_64'), _row('Uniband', 'msgrate_64')]
    chosen = {(r['name'], r['variable']) for r in regressions._headline_variables(rows)}
    assert chosen == {('PingPong', 'lat_8'), ('PingPong', 'bw_4194304'), ('Uniband', 'bw_64')}

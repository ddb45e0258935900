"""Golden tests of the regression statistics (ibrepro.stats) on synthetic series with known shifts.

Noise is multiplicative (log-normal) with a coefficient of variation of 5 % unless said otherwise, the history
has the default window of 30 sessions, alpha = 1 %. Random generators are seeded: the rates below are
reproducible, and the bounds leave several binomial standard errors of room.
"""

import math

import numpy as np
import pytest

from ibrepro import stats

METHOD = stats.Method()


def noise(rng, n, cv=0.05, level=10.0):
    return list(level * np.exp(rng.normal(0.0, cv, size=n)))


# -- building blocks -------------------------------------------------------------------------------

@pytest.mark.parametrize('df, t975', [(1, 12.706), (2, 4.303), (4, 2.776), (7, 2.365), (10, 2.228), (29, 2.045)])
def test_student_t_tail_matches_published_quantiles(df, t975):
    assert stats.t_sf(t975, df) == pytest.approx(0.025, abs=2e-5)
    assert stats.t_sf(-t975, df) == pytest.approx(0.975, abs=2e-5)
    assert stats.t_quantile(0.975, df) == pytest.approx(t975, abs=1e-3)


def test_benjamini_hochberg_adjusts_in_input_order():
    assert stats.benjamini_hochberg([0.01, 0.04, 0.03, 0.005, None]) == pytest.approx(
        [0.02, 0.04, 0.04, 0.02, None])
    assert stats.benjamini_hochberg([]) == []


def test_resolution_is_the_printing_step():
    assert stats.resolution([0.2, 0.21, 0.19]) == pytest.approx(0.01)
    assert stats.resolution([1234.0, 1250.5]) == pytest.approx(0.1)
    assert stats.resolution([3.0, 4.0]) == pytest.approx(1.0)


# -- one variable --------------------------------------------------------------------------------------

def detection_rate(rng, factor, better, trials=400, confirm=1, cv=0.05):
    method = stats.Method(confirm=confirm)
    hits = 0
    for _ in range(trials):
        history = noise(rng, METHOD.window, cv)
        tested = [v * factor for v in noise(rng, confirm, cv)]
        series = {'x': (history + tested, better, None)}
        hits += stats.history_tests(series, method).variables['x'].verdict == 'regression'
    return hits / trials


def test_detects_a_20_percent_slowdown_in_5_percent_noise():
    rng = np.random.default_rng(20)
    # one night, one value: a known-noise test could reach 90 %; ours reaches ~88 %
    assert detection_rate(rng, 1.20, 'lower') >= 0.80
    # bandwidth falling by the same factor
    assert detection_rate(rng, 1 / 1.20, 'higher') >= 0.80
    # three nights in a row (--confirm 3): practically certain
    assert detection_rate(rng, 1.20, 'lower', confirm=3) >= 0.97


def test_no_alarm_on_pure_noise_at_the_stated_rate():
    rng = np.random.default_rng(1)
    trials = 3000
    pvalues = [stats.shift_test(noise(rng, 30), noise(rng, 1), 'lower').p for _ in range(trials)]
    rate = sum(p <= METHOD.alpha for p in pvalues) / trials
    assert rate <= METHOD.alpha + 3 * math.sqrt(METHOD.alpha / trials)   # 1 % + 3 SE
    assert rate >= 0.002    # and not vacuous: the p-values are calibrated, not merely huge


def test_direction_is_respected():
    rng = np.random.default_rng(3)
    history = noise(rng, 30)
    faster = [10.0 * 0.7]
    slower = [10.0 * 1.4]
    assert stats.shift_test(history, slower, 'lower').p < 1e-4        # latency up: worse
    assert stats.shift_test(history, faster, 'higher').p < 1e-4       # bandwidth down: worse

    def verdict(tested, better):
        return stats.history_tests({'x': (history + tested, better, None)}).variables['x']

    assert verdict(slower, 'lower').verdict == 'regression'
    assert verdict(faster, 'lower').verdict == 'improvement'
    assert verdict(slower, 'higher').verdict == 'improvement'
    assert verdict(faster, 'higher').verdict == 'regression'
    assert verdict(slower, None).verdict == 'change'                  # no direction: two-sided
    assert verdict(faster, None).verdict == 'change'
    shift = verdict(slower, 'lower')
    assert shift.change == pytest.approx(0.4, abs=0.08) and shift.low < shift.change < shift.high
    assert shift.worse == shift.change and verdict(slower, 'higher').worse == -shift.change


def test_outliers_in_the_baseline_do_not_hide_a_shift():
    rng = np.random.default_rng(4)
    history = noise(rng, 30)
    history[5] *= 3.0       # two nights the machine was shared
    history[17] *= 2.5
    shift = stats.shift_test(history, [10.0 * 1.25], 'lower')
    assert shift.n == 28 and shift.p < 1e-3


def test_small_but_clear_drifts_are_not_flagged():
    rng = np.random.default_rng(5)
    history = noise(rng, 30, cv=0.001, level=1000.0)
    result = stats.history_tests({'x': (history + [1030.0], 'lower', None)}).variables['x']
    assert result.p < 1e-4 and result.change == pytest.approx(0.03, abs=0.005)
    assert result.verdict == 'ok'   # below min_effect (5 %)


def test_short_history_and_zeros_are_not_tested():
    short = stats.history_tests({'x': ([1.0] * 5 + [2.0], 'lower', None)}).variables['x']
    assert short.verdict == 'untested' and '5 baseline session(s), 8 needed' in short.reason
    zeros = stats.history_tests({'x': ([0.0] * 20 + [0.0], 'higher', None)}).variables['x']
    assert zeros.verdict == 'untested' and zeros.reason == 'printed as zero'


def test_quantised_values_need_more_than_one_printing_step():
    # IMB prints 2 decimals: 0.20 us every night, then 0.21 us is one step (5 %), not a 100-sigma event
    one_step = stats.history_tests({'x': ([0.2] * 30 + [0.21], 'lower', None)}).variables['x']
    assert one_step.verdict == 'ok'
    many_steps = stats.history_tests({'x': ([0.2] * 30 + [0.26], 'lower', None)}).variables['x']
    assert many_steps.verdict == 'regression'


# -- many variables: false discoveries and test cases ------------------------------------------------

def session_series(rng, factor=1.0, cases=15, sizes=20, shifted_cases=1, shared_cv=0.02):
    """``cases`` test cases of ``sizes`` variables; every session has a shared load factor (nights differ as a
    whole), the last session multiplies the first ``shifted_cases`` cases by ``factor``."""
    sessions = METHOD.window + 1
    night = np.exp(rng.normal(0.0, shared_cv, size=sessions))
    series = {}
    for c in range(cases):
        for s in range(sizes):
            values = [v * n for v, n in zip(noise(rng, sessions), night)]
            if c < shifted_cases:
                values[-1] *= factor
            series[(c, s)] = (values, 'lower', c)
    return series


def test_hundreds_of_variables_on_pure_noise_rarely_alarm():
    rng = np.random.default_rng(6)
    trials = 100
    alarms = sum(any(stats.history_tests(session_series(rng)).alarms) for _ in range(trials))
    # 300 variables and 15 test cases per session, alarm = any BH discovery at alpha = 1 % (plus min effect)
    assert alarms / trials <= 0.04


def test_a_whole_benchmark_slowing_by_15_percent_is_found_by_its_test_case():
    rng = np.random.default_rng(7)
    trials, found, single = 40, 0, 0
    for _ in range(trials):
        result = stats.history_tests(session_series(rng, factor=1.15))
        variables, groups = result.alarms
        found += groups == [0]
        single += any(key[0] == 0 and v.verdict == 'regression' for key, v in result.variables.items())
    assert found / trials >= 0.9            # the test case as a whole
    assert single / trials < found / trials  # where the single sizes mostly stay below the bar
    index = result.group_index[0]
    assert len(index) == METHOD.window + 1 and index[-1] == pytest.approx(math.log(1.15), abs=0.05)


def test_the_binomial_upper_tail_is_the_sum_over_every_outcome():
    from itertools import product
    for n, p in ((5, 0.3), (4, 1e-6)):
        for k in range(n + 2):
            brute = sum(p ** sum(o) * (1 - p) ** (n - sum(o)) for o in product((0, 1), repeat=n) if sum(o) >= k)
            assert math.isclose(stats.binomial_sf(k, n, p), brute, rel_tol=1e-9, abs_tol=1e-300)

"""ibrepro.verdict: a test case's verdict from its night, its noise and its confirmation, and the night's exit
status. The sessions behind these verdicts, real ones, are in test_nightly_verdict.py."""

import pytest

from ibrepro import stats, verdict


def shift(verdict_, change=0.3, p=1e-6):
    return stats.Shift(verdict_, 'lower', 20, change=change, p=p, q=p)


@pytest.mark.parametrize('night, noise, again, again_noise, expected', [
    ('ok', None, None, None, 'ok'),
    ('untested', None, None, None, 'untested'),
    ('regression', None, None, None, 'unconfirmed'),
    ('regression', None, 'regression', None, 'regression'),
    ('regression', None, 'ok', None, 'cleared'),
    ('regression', None, 'ok', 'noisy', 'inconclusive'),
    ('regression', 'noisy', 'regression', 'noisy', 'regression'),   # never hidden by noise
    ('ok', 'noisy', None, None, 'inconclusive'),
    ('ok', 'noisy', 'ok', None, 'ok'),                               # a quiet re-run judged the noisy night
    ('ok', 'noisy', 'regression', None, 'regression'),
    ('ok', 'noisy', 'ok', 'noisy', 'inconclusive'),
    ('ok', None, 'regression', None, 'ok'),                          # only suspects and noisy nights confirm
])
def test_verdict_of_a_test_case(night, noise, again, again_noise, expected):
    got = verdict.judge(shift(night), noise, shift(again) if again else None, again_noise)
    assert got.verdict == expected
    assert got.needs_confirmation == (again is None and expected in ('unconfirmed', 'inconclusive'))


def measured_nothing(reason='its confirmation failed in ReFrame (sanity: MPI could not start)'):
    return stats.Shift('untested', 'lower', 0, reason=reason)


@pytest.mark.parametrize('q, noise, expected, alarm, status', [
    (1e-6, None, 'unverified', True, verdict.EXIT_REGRESSION),     # the night alone crosses the alarm: 1
    (0.03, None, 'unverified', False, verdict.EXIT_UNJUDGED),      # flagged at nightly's 0.05 only: could not judge
    (1e-6, 'noisy', 'unverified', True, verdict.EXIT_REGRESSION),
])
def test_a_confirmation_that_measured_nothing_neither_confirms_nor_clears(q, noise, expected, alarm, status):
    night = stats.Shift('regression', 'lower', 20, change=4885.0, p=q, q=q)
    got = verdict.judge(night, noise, measured_nothing(), None)
    assert (got.verdict, got.alarm) == (expected, alarm)
    assert 'MPI could not start' in got.reason and not got.needs_confirmation
    assert verdict.exit_status([got]) == status
    assert verdict.exit_status([got, verdict.CaseVerdict('regression')]) == verdict.EXIT_REGRESSION
    # what measured nothing never clears, and judges nothing of a case that was not a suspect
    assert verdict.judge(shift('ok'), 'noisy', measured_nothing(), None).verdict == 'inconclusive'
    assert verdict.judge(shift('ok'), None, measured_nothing(), None).verdict == 'ok'


def test_a_stored_noise_of_the_wrong_type_is_named_not_taken_for_quiet():
    guard = verdict.Guard()
    assert verdict.noise_problem({'repetition_spread': 0.01, 'cpu_pressure': None}, guard) is None
    problem = verdict.noise_problem({'repetition_spread': 'huge', 'repetitions': 2}, guard)
    assert problem and "repetition_spread 'huge' is not a number" in problem
    assert 'cpu_pressure' in verdict.noise_problem({'cpu_pressure': [1]}, guard)


def test_exit_status_of_a_night():
    v = {k: verdict.CaseVerdict(k) for k in verdict.VERDICTS}
    assert verdict.exit_status([v['ok'], v['cleared'], v['untested']]) == verdict.EXIT_CLEAN
    assert verdict.exit_status([v['ok'], v['inconclusive']]) == verdict.EXIT_INCONCLUSIVE
    assert verdict.exit_status([v['inconclusive']], inconclusive_run=2) == verdict.EXIT_UNJUDGED
    assert verdict.exit_status([v['inconclusive'], v['regression']], inconclusive_run=2) == verdict.EXIT_REGRESSION
    assert verdict.exit_status([v['unconfirmed']]) == verdict.EXIT_REGRESSION
    assert verdict.exit_status([v['unverified'], v['inconclusive']]) == verdict.EXIT_UNJUDGED
    assert verdict.exit_status([verdict.CaseVerdict('unverified', alarm=True)]) == verdict.EXIT_REGRESSION
    assert verdict.ALARM_ALPHA == stats.Method().alpha
    assert verdict.combine([0, 3, 2]) == 2 and verdict.combine([3, 0]) == 3 and verdict.combine([2, 1]) == 1
    assert len({verdict.EXIT_CLEAN, verdict.EXIT_REGRESSION, verdict.EXIT_UNJUDGED, verdict.EXIT_INCONCLUSIVE}) == 4

"""report/model.py: which re-runs confirm a night, a run's value from its sessions, and each test case's verdict
from its night and its confirmation (what ``ibrepro nightly`` exits with). The nights are real: IMB PingPong 1x2
on this machine, the tuning nights of the verdict's ledger (reference-data/ledger, docs/verdict-protocol.md)."""

import collections
import statistics

import pytest

from conftest import ROOT
from ibrepro import ledger, stats, verdict
from ibrepro.report import model

LEDGER = ROOT / 'reference-data' / 'ledger' / 'vm-impi-1x2.jsonl'
PINGPONG = 'IMBPointToPoint %benchmark=PingPong %layout=1x2'
GROUP = ('default', 'impi', PINGPONG)

Row = collections.namedtuple('Row', 'uuid start run confirms')


def test_a_rerun_of_the_night_started_after_it_confirms_it():
    rows = [Row('a', 100, 'n1', None), Row('b', 200, 'n2', None), Row('c', 300, 'n2', 'n2')]
    assert model._counted_confirmations(rows, 'n2', [2]) == ({2}, [])


def test_a_confirmation_stored_before_its_night_or_of_another_run_confirms_nothing_and_is_named():
    rows = [Row('early', 150, 'n2', 'n2'), Row('night', 200, 'n2', None), Row('other', 300, 'n3', 'n2')]
    counted, ignored = model._counted_confirmations(rows, 'n2', [0, 2])
    why = dict(ignored)
    assert counted == set() and set(why) == {'early', 'other'}
    assert "before the night's own session" in why['early']
    assert why['other'] == "its nightly extra is 'n3', not 'n2': not a re-run of this night"
    assert model._counted_confirmations(rows[2:], 'n3', [0]) == (
        set(), [('other', 'no session of night n3 is stored: nothing to confirm')])


def test_a_run_is_the_median_of_its_sessions_and_a_confirmation_is_no_run():
    runs = model.Runs(keys={'series': 'key'}, run_of=[0, 0, 0, None, 1], count=2, confirming={3})
    values = {'series': ([0, 1, 2, 3, 4], [1.0, 3.0, 2.0, 100.0, 5.0])}
    assert runs.aligned(values) == {'key': [2.0, 5.0]}
    assert runs.aligned(values, first_run=1) == {'key': [5.0]}
    assert model.Runs(keys={'series': 'key'}, run_of=[0, 1], count=3, confirming=set()).aligned(
        {'series': ([1], [7.0])}) == {'key': [None, 7.0, None]}


def _nights():
    """{night: {variable: the night's median}} of PingPong's bandwidths in the ledger's tuning nights."""
    found = {}
    for night in ledger.read(LEDGER):
        case = night['cases'].get(PINGPONG)
        if night['phase'] == 'tuning' and night['night'].startswith('u') and case and case['result'] == 'pass':
            found[night['night']] = {v: statistics.median(xs) for v, xs in case['values'].items()
                                     if v.startswith('bw_') and xs}
    return found


@pytest.fixture(scope='module')
def halved():
    """The history test of 30 real nights, then a 31st whose bandwidths are halved (2x slower: the injected
    effect, far beyond these nights' noise); and two real nights after them, as a confirmation's values."""
    nights = list(_nights().values())
    assert len(nights) >= 33
    baseline, tonight, after = nights[:30], nights[30], nights[31]
    series = {('bw', v): ([n.get(v) for n in baseline] + [tonight[v] / 2], 'higher', GROUP) for v in tonight}
    result = stats.history_tests(series, stats.Method())
    assert result.groups[GROUP].alarm and result.groups[GROUP].change > 0.5
    return result, {('bw', v): x for v, x in after.items()}


def _verdict(result, again=None, values=None, missing=None):
    return model._verdicts(result, {GROUP: {'result': 'pass'}}, {GROUP: again} if again else {}, values or {},
                           verdict.Guard(), missing)[GROUP]


def test_a_regressed_night_whose_confirmation_failed_is_unverified_never_cleared(halved):
    result, _ = halved
    failed = {'result': 'fail', 'fail_phase': 'sanity', 'fail_reason': 'MPI could not start\nthe rest'}
    case = _verdict(result, failed)
    assert case.verdict == 'unverified' and case.alarm
    assert case.reason == 'its confirmation failed in ReFrame (sanity: MPI could not start): it measured nothing'
    pending = {'result': 'fail', 'fail_phase': 'run', 'fail_reason': 'maximum pending time exceeded',
               'scheduler': 'slurm', 'jobid': '42', 'job_nodelist': []}
    case = _verdict(result, pending)           # infrastructure: its job never got a node
    assert case.verdict == 'unverified' and case.alarm
    assert case.reason == ('its confirmation measured nothing: its job 42 never started on a node '
                           '(run: maximum pending time exceeded)')
    skipped = _verdict(result, {'result': 'skip', 'skip_reason': 'no IMB here'})
    assert skipped.verdict == 'unverified' and skipped.reason == 'its confirmation was skipped (no IMB here)'
    assert _verdict(result, {'result': 'pass'}).reason == (
        'its confirmation stored no value of this test case: it measured nothing')


def test_a_confirmation_that_regressed_again_confirms_and_one_back_at_the_baseline_clears(halved):
    result, after = halved
    assert _verdict(result, {'result': 'pass'}, {k: x / 2 for k, x in after.items()}).verdict == 'regression'
    assert _verdict(result, {'result': 'pass'}, after).verdict == 'cleared'


def test_a_suspect_no_confirmation_ran_for_is_unconfirmed_and_one_its_confirmation_left_out_unverified(halved):
    result, _ = halved
    assert _verdict(result).verdict == 'unconfirmed'
    left_out = _verdict(result, missing='its confirmation session(s) did not run it (skipped)')
    assert left_out.verdict == 'unverified' and left_out.reason.startswith('its confirmation session(s) did not')

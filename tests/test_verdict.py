"""ibrepro.verdict: a test case's verdict from its night, its noise and its confirmation, and the night's exit
status. The sessions behind these verdicts, real ones, are in test_nightly_verdict.py."""

import json
from pathlib import Path

import pytest

from ibrepro import stats, verdict

DATA = Path(__file__).resolve().parent / 'data'


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


# -- a failed test case: the fabric's failure, or a job that never ran -------------------------------------------

def _failed_on_slurm():
    """A real failed case: the fleet's pair rounds on the CI fat tree, a slow uplink (its job ran on 8 nodes)."""
    report = json.loads((DATA / 'fleet' / 'fattree-uplink-leaf1-spine1-25.report.json').read_text())
    return next(c for c in report['runs'][0]['testcases'] if c['result'] == 'fail')


def test_a_case_whose_job_ran_and_failed_is_the_fabrics_failure():
    case = _failed_on_slurm()
    assert case['scheduler'] == 'slurm' and case['jobid'] and case['job_nodelist'] and case['fail_phase'] == 'sanity'
    assert verdict.not_measured(case) is None
    assert verdict.not_measured({**case, 'fail_reason': 'job 36 ended TIMEOUT'}) is None     # ran out of time: ran
    assert verdict.not_measured({**case, 'result': 'pass'}) is None


@pytest.mark.parametrize('change, says', [
    ({'job_nodelist': []}, 'its job 36 never started on a node (sanity: '),
    ({'job_nodelist': None, 'fail_phase': 'run_wait'}, 'its job 36 never started on a node (run_wait: '),
    ({'jobid': None, 'job_nodelist': [], 'fail_phase': 'run', 'fail_reason': 'spawned process error: sbatch'},
     'its job was never submitted (run: spawned process error: sbatch)'),
    ({'fail_phase': 'setup', 'fail_reason': 'the rail mlx5_1 is not on NUMA node 0'},
     'failed in setup, before its job ran (the rail mlx5_1 is not on NUMA node 0)'),
    ({'fail_phase': 'compile_wait', 'scheduler': 'local'}, 'failed in compile_wait, before its job ran'),
])
def test_a_case_whose_job_never_ran_measured_nothing(change, says):
    assert verdict.not_measured({**_failed_on_slurm(), **change}).startswith(says)


@pytest.mark.parametrize('scheduler', ['slurm', 'local'])
def test_a_job_that_ran_outside_its_partition_measured_nothing(scheduler):
    # a real night on the CI Slurm cluster whose job ran in another Slurm partition: its first line ended it
    # (rfm.launch.placement_commands). In its own job or as a step of a child job's allocation (the local
    # scheduler), it measured another partition's nodes or nothing, never this one's
    report = json.loads((DATA / 'run-reports' / 'run-report.ci-cluster_ran_in_another_partition.json').read_text())
    cases = [c for run in report['runs'] for c in run['testcases']]
    assert [c['result'] for c in cases] == ['fail', 'fail'] and all(c['job_nodelist'] for c in cases)
    for case in cases:
        assert verdict.not_measured({**case, 'scheduler': scheduler}) == (
            "its job ran outside its partition (this job ran in Slurm partition 'elsewhere', its partition asks "
            "for ci)")


def test_on_the_local_scheduler_a_job_that_started_ran():
    # the local scheduler starts the job at once on this host: a failure there is the case's own
    assert verdict.not_measured({**_failed_on_slurm(), 'scheduler': 'local', 'job_nodelist': []}) is None


def test_a_job_cancelled_while_pending_measured_nothing():
    # a real night on the CI Slurm cluster whose job was held past its max_pending_time (both attempts)
    report = json.loads((DATA / 'run-reports' / 'run-report.ci-cluster_held_past_max_pending_time.json').read_text())
    cases = [c for run in report['runs'] for c in run['testcases']]
    assert [c['result'] for c in cases] == ['fail', 'fail']
    for case in cases:
        assert verdict.not_measured(case) == (f'its job {case["jobid"]} never started on a node (sanity: sanity '
                                              'error: control: no output of control(s) 1, 2, 3, 4, 5, 6 of 6)')

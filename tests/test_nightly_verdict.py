"""The nightly verdict (ibrepro.verdict, ibrepro nightly): repetitions inside one job, the confirmation re-run of a
night's suspects, the noise guard (inconclusive nights) and the exit status, on real ReFrame sessions of IMB
PingPong on this machine. A regression is the injector's 200 us more per MPI call (ibrepro.rfm.inject: 200x and more
on shared memory's sub-microsecond latency, and the tests count only changes beyond 10x); a noisy night is the same
slowdown in one of its three repetitions (a transient: the median takes it out, the spread shows it). Both are made
by the test, not by how fast or quiet this machine is."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, ReFrameRunner, needs_impi, output
from ibrepro import results, stats, verdict
from ibrepro.rfm import repeat

#: IMB's own time limit per message size raised to 300 s: an injected busy wait preempted on a loaded machine must
#: not end the benchmark (IMB's default is 10 s)
NIGHT = ['-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-p', 'impi', '-S', 'message_sizes=1:16',
         '-S', 'iterations=1000', '-S', 'repetitions=2', '-S', 'time_per_sample=300']
#: The regression: 200 us more per MPI call that completes a message
SLOW = ['-S', 'inject_us=200']
HISTORY = 8      # the history test's --min-history
#: The noise guard off, and only changes beyond 10x count: these tests judge injected regressions of 200x and more,
#: on whatever load this machine has
QUIET = ['--report-option=--max-noise=1000', '--report-option=--max-pressure=1', '--report-option=--min-effect=9']
QUIET_REPORT = ['--max-noise', '1000', '--max-pressure', '1', '--min-effect', '9']


# -- the pieces ----------------------------------------------------------------------------------------

def test_repetitions_knob_is_bounded_and_one_means_no_loop():
    assert repeat.job_commands(1) == ([], [])
    before, after = repeat.job_commands(3)
    assert 'for ibrepro_repetition in $(seq 1 3); do' in before and after[-1] == 'done'
    for bad in (0, -1, 51, 2.5, True, '3'):
        with pytest.raises(ValueError, match='repetitions='):
            repeat.check(bad)


def test_split_output_refuses_a_job_that_ended_early():
    text = f'{repeat.MARKER} 1 of 3\nfirst\n{repeat.MARKER} 2 of 3\nsecond\n'
    with pytest.raises(ValueError, match='only 2 of 3 repetitions started'):
        repeat.split_output(text, 3)
    assert repeat.split_output(text.replace('of 3', 'of 2'), 2) == ['\nfirst\n', '\nsecond\n']
    with pytest.raises(ValueError, match='out of order'):
        repeat.split_output(f'{repeat.MARKER} 2 of 2\nx\n', 2)


def test_spread_is_the_index_over_repetitions():
    # two variables, three repetitions: the second repetition 10 % worse in both, the others equal
    per_rep = {'lat_1': [1.0, 1.1, 1.0], 'bw_1': [100.0, 100 / 1.1, 100.0]}
    better = {'lat_1': 'lower', 'bw_1': 'higher'}
    expected = stats.statistics.stdev([0.0, 0.0953102, 0.0])
    assert repeat.spread(per_rep, better) == pytest.approx(expected, abs=1e-6)
    assert repeat.spread({'lat_1': [1.0]}, better) is None


def test_cpu_pressure_from_the_repetition_log():
    log = 'start 1 100.0 5000000\nend 1 102.0 5500000 0\nstart 2 102.0 5500000\nend 2 104.0 5500000 0\n'
    assert repeat.cpu_pressure(log) == pytest.approx(0.5 / 4)   # 0.5 s waited in 4 s
    assert repeat.cpu_pressure('start 1 100.0 -\nend 1 101.0 - 0\n') is None   # no PSI on this node


def test_clopper_pearson_interval():
    low, high = stats.clopper_pearson(0, 300)
    assert low == 0 and high == pytest.approx(1 - 0.025 ** (1 / 300))
    low, high = stats.clopper_pearson(9, 10)
    # the exact binomial tails at the ends of the interval
    assert sum(stats.math.comb(10, k) * low ** k * (1 - low) ** (10 - k) for k in range(9, 11)) == \
        pytest.approx(0.025, abs=1e-9)
    assert sum(stats.math.comb(10, k) * high ** k * (1 - high) ** (10 - k) for k in range(0, 10)) == \
        pytest.approx(0.025, abs=1e-9)
    assert stats.clopper_pearson(0, 0) == (None, None)


# -- real sessions ---------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def clean_history(tmp_path_factory):
    """Eight real nights of IMB PingPong over shared memory, one repetition each (no spread: never too noisy)."""
    runner = ReFrameRunner(tmp_path_factory.mktemp('verdict') / 'home')
    for k in range(HISTORY):
        proc = runner('-r', '--mode', 'nightly', f'--session-extras=nightly=clean{k}', *NIGHT, '-S', 'repetitions=1')
        assert proc.returncode == 0, output(proc)
    return runner.home


@pytest.fixture
def night(clean_history, tmp_path):
    """A copy of the clean history to add a night to."""
    home = tmp_path / 'home'
    shutil.copytree(clean_history, home)
    return ReFrameRunner(home)


def nightly(runner, *args, env=None):
    return subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'nightly', '--output-dir',
                           str(runner.home / 'reports'), *args], cwd=ROOT, env={**runner.env, **(env or {})},
                          capture_output=True, text=True, timeout=600)


def pages(proc):
    html = re.findall(r'^(\S+index\.html)$', proc.stdout, re.M)[-1]
    md = re.findall(r'^(\S+summary\.md)$', proc.stdout, re.M)[-1]
    return open(html).read(), open(md).read()


def stored_night(runner, night):
    return [r['session_info'] for r in results.stored_sessions(runner.db)
            if r['session_info'].get('nightly') == night]


@needs_impi
@pytest.mark.integration
def test_repetitions_run_in_one_job_and_report_the_median(night):
    proc = night('-r', *NIGHT)
    assert proc.returncode == 0, output(proc)
    report = results.stored_sessions(night.db, last=1)[0]
    case = report['runs'][0]['testcases'][0]
    assert case['repetitions'] == 2 and 'for ibrepro_repetition in $(seq 1 2); do' in case['prerun_cmds']
    values = {pv.variable: pv.value for pv in results.perf_values(report)}
    for name, reps in case['repetition_values'].items():
        assert len(reps) == 2 and values[name] == pytest.approx(stats.statistics.median(reps))
    assert isinstance(case['repetition_spread'], float) and case['repetition_spread'] >= 0
    assert case['cpu_pressure'] is None or 0 <= case['cpu_pressure'] <= 1
    log = open(f"{case['outputdir']}/{repeat.LOG_FILE}").read()
    assert re.findall(r'^(start|end) (\d) ', log, re.M) == [('start', '1'), ('end', '1'), ('start', '2'), ('end', '2')]


@needs_impi
@pytest.mark.integration
def test_repetitions_of_a_bandwidth_case_keep_its_message_rates(reframe):
    # IMB prints message rates as integers: the repetitions' values are stored as numbers all the same
    proc = reframe('-r', '-n', 'IMBPointToPoint%benchmark=Uniband%layout=1x2', '-p', 'impi', '-S',
                   'message_sizes=1:16', '-S', 'iterations=100', '-S', 'repetitions=2')
    assert proc.returncode == 0, output(proc)
    case, = results.testcases(results.stored_sessions(reframe.db, last=1)[0])
    assert len(case['repetition_values']['msgrate_1']) == 2 and len(case['repetition_values']['bw_16']) == 2


@needs_impi
@pytest.mark.integration
@pytest.mark.long
def test_a_confirmed_regression_fails_the_night_with_both_sessions_shown(night):
    proc = nightly(night, '--night', 'slow', *QUIET, '--', *NIGHT, *SLOW)
    assert proc.returncode == verdict.EXIT_REGRESSION, output(proc)
    assert re.search(r'^  REGRESSION test case IMBPointToPoint %benchmark=PingPong %layout=1x2 @default\+impi: .*'
                     r'confirmed by a re-run: \+[0-9.,]+ %', proc.stdout, re.M), output(proc)
    sessions = stored_night(night, 'slow')
    assert len(sessions) == 2 and [s.get('confirms') for s in sessions] == [None, 'slow']
    html, md = pages(proc)
    confirmation = sessions[1]['uuid']
    assert confirmation in html and confirmation in md
    assert re.search(r'<tr class="regression"><td>IMBPointToPoint %benchmark=PingPong %layout=1x2</td>', html)
    assert re.search(r'^\| IMBPointToPoint .*\| regression \| \+[0-9.,]+ % \| \+[0-9.,]+ % \|', md, re.M), md


@needs_impi
@pytest.mark.integration
def test_a_suspect_whose_rerun_is_clean_is_cleared(night):
    # the night's session slowed; the confirmation runs without it (a transient slowdown that passed)
    proc = night('-r', '--mode', 'nightly', '--session-extras=nightly=blip', *NIGHT, *SLOW)
    assert proc.returncode == 0, output(proc)
    proc = nightly(night, '--night', 'blip', '--no-run', *QUIET, '--', *NIGHT)
    assert proc.returncode == verdict.EXIT_CLEAN, output(proc)
    assert re.search(r'^  cleared: test case IMBPointToPoint .* its confirmation re-run moved', proc.stdout, re.M)
    html, md = pages(proc)
    assert '<td class="cleared"' in html and '| cleared |' in md
    assert len(stored_night(night, 'blip')) == 2


@needs_impi
@pytest.mark.integration
@pytest.mark.long
def test_noisy_nights_are_inconclusive_and_three_in_a_row_fail(night):
    # the slowdown in the second of three repetitions: their spread is far beyond the guard's 50 %, their median
    # is a clean repetition (and no change below 1000x counts: whatever else runs on this machine, nothing here
    # is a regression); the confirmation keeps the settings, so it is noisy again
    noisy = ['--report-option=--max-noise=0.5', '--report-option=--max-pressure=1',
             '--report-option=--min-effect=1000']
    transient = ['-S', 'repetitions=3', *SLOW, '-S', 'inject_repetitions=2']
    statuses = []
    for k in range(3):
        proc = nightly(night, '--night', f'noisy{k}', *noisy, '--', *NIGHT, *transient)
        statuses.append(proc.returncode)
        assert 'INCONCLUSIVE test case IMBPointToPoint' in proc.stdout, output(proc)
        assert len(stored_night(night, f'noisy{k}')) == 2    # the noisy case was re-run (and was noisy again)
    assert statuses == [verdict.EXIT_INCONCLUSIVE, verdict.EXIT_INCONCLUSIVE, verdict.EXIT_UNJUDGED]
    assert '3 inconclusive nights in a row' in proc.stdout
    html, md = pages(proc)
    assert 'id="status">Inconclusive: 1 test case(s)' in html and '<td class="inconclusive"' in html
    assert '**Inconclusive: 1 test case(s) too noisy to judge this night**' in md
    assert '| inconclusive |' in md and 'repetitions disagree by' in md

    # the same nights with the guard off: judged on their medians, the clean repetitions (no regression of 10x)
    proc = night.ibrepro('report', '--nightly', '--output-dir', str(night.home / 'r2'), *QUIET_REPORT)
    assert proc.returncode == verdict.EXIT_CLEAN, output(proc)


@needs_impi
@pytest.mark.integration
def test_the_night_judged_is_the_one_named_not_the_newest(night):
    """A night judged again later (GitLab's report job after a retry, or by hand) is that night against what was
    stored before it, whatever was stored since."""
    # only changes beyond 10x count (QUIET_REPORT): this asserts which history the night had, not that this machine
    # was quiet while its clean nights ran (a rehearsal's clean7 once ran 5x slower beside other jobs)
    proc = night.ibrepro('report', '--nightly', '--night', 'clean7', '--output-dir', str(night.home / 'r'),
                         '--min-history', '7', '--window', '7', *QUIET_REPORT)
    assert 'night clean7:' in proc.stdout, output(proc)
    assert 'tested variables' in proc.stdout, output(proc)       # clean0..clean6 were its history
    proc = night.ibrepro('report', '--nightly', '--night', 'clean0', '--output-dir', str(night.home / 'r'))
    assert 'night clean0:' in proc.stdout and 'nothing tested' in proc.stdout, output(proc)   # no history before it
    proc = night.ibrepro('report', '--nightly', '--night', 'never', '--output-dir', str(night.home / 'r'))
    assert proc.returncode == verdict.EXIT_UNJUDGED and 'no stored session of nightly run never' in proc.stderr


def test_a_crash_of_the_report_is_could_not_judge(capsys):
    # whatever breaks inside the report (here: options it was never given), the night reads "could not judge",
    # never "regression" (exit 1) nor a pass
    import argparse
    from ibrepro.report import cli
    assert cli._cli(argparse.Namespace(nightly=True)) == verdict.EXIT_UNJUDGED
    assert 'crashed (AttributeError' in capsys.readouterr().err


@needs_impi
@pytest.mark.integration
@pytest.mark.long
def test_suspects_file_names_the_hash_to_rerun(night, tmp_path):
    proc = night('-r', '--mode', 'nightly', '--session-extras=nightly=slow', *NIGHT, *SLOW)
    assert proc.returncode == 0, output(proc)
    suspects = tmp_path / 'suspects.json'
    proc = night.ibrepro('report', '--nightly', '--suspects', str(suspects), '--output-dir', str(tmp_path),
                         *QUIET_REPORT)
    assert proc.returncode == verdict.EXIT_REGRESSION, output(proc)
    found = json.loads(suspects.read_text())['suspects']
    stored = results.stored_sessions(night.db, last=1)[0]['runs'][0]['testcases'][0]
    assert found == [{'system': 'local', 'partition': 'default', 'environ': 'impi', 'name': stored['name'],
                      'hashcode': stored['hashcode'], 'night': 'slow', 'verdict': 'unconfirmed'}]


def case_nights(data):
    return [n for case in data['cases'] for n in case['nights']]


@needs_impi
@pytest.mark.integration
@pytest.mark.long
def test_power_harness_runs_nights_through_the_nightly_flow(tmp_path):
    # the smallest real run: 8 clean history nights, one level, one injected and one clean night
    out = tmp_path / 'power.json'
    proc = subprocess.run([sys.executable, ROOT / 'scripts' / 'detection_power.py',
                           '--cases', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '--history', str(HISTORY),
                           '--nights', '1', '--clean-nights', '1', '--levels', '50', '--calibration-tries', '2',
                           '--home', str(tmp_path / 'homes'), '--json', str(out), '--',
                           '-S', 'message_sizes=1:16', '-S', 'iterations=1000', '-S', 'time_per_sample=300'],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, output(proc)
    data = json.loads(out.read_text())
    level, = data['levels']
    assert level['level'] == 50 and level['nights'] == 1 and level['clean_nights'] == 1
    assert level['detected'] + level['inconclusive'] <= 1 and level['false_alarms'] <= 1
    harness_log = tmp_path / 'homes' / 'IMBPointToPoint_benchmark_PingPong_layout_1x2' / 'harness.log'
    assert level['injected_ratio'] is not None and level['night_wall_s'] > 0, \
        (json.dumps(case_nights(data)), proc.stdout[-3000:], harness_log.read_text()[-6000:])
    low, high = level['detection']['low95'], level['detection']['high95']
    assert 0 <= low <= high <= 1
    case, = data['cases']
    night_kinds = sorted(n['level'] or 0 for n in case['nights'])
    assert night_kinds == [0, 50] and all(n['status'] in (0, 1, 2, 3) for n in case['nights'])
    # the injected night's sessions were deleted: the history holds the clean nights only
    db = tmp_path / 'homes' / 'IMBPointToPoint_benchmark_PingPong_layout_1x2' / 'results.db'
    nights = {row[3] for row in results.session_index(db)}
    assert not any('L50' in n for n in nights) and any('clean' in n for n in nights)
    assert re.search(r'^50 % \| [0-9.]+ \| [01]/1 ', proc.stdout, re.M), proc.stdout


def test_a_case_that_passed_only_on_a_retry_is_flaky_not_clean(reframe, tmp_path):
    """The nightly mode retries a failed case once: a fault that shows every other night would pass unseen. The
    retry's pass is kept (the case ran), the night says FLAKY with the first attempt's reason, and is not clean."""
    marks = tmp_path / 'marks'
    marks.mkdir()
    proc = reframe('-r', '--max-retries=1', '--session-extras=nightly=flaky1', '-S', f'mark_dir={marks}',
                   '-p', 'mpich', checks='tests/checks/flaky.py')
    assert proc.returncode == 0, output(proc)             # ReFrame itself: passed (on the retry)
    proc = reframe.ibrepro('report', '--nightly', '--output-dir', str(tmp_path / 'report'))
    assert proc.returncode == verdict.EXIT_INCONCLUSIVE, output(proc)
    assert re.search(r'FLAKY test case FailsOnce @\S+: passed only on a retry, after sanity: sanity error: '
                     r'first attempt: the fault shows every other time', proc.stdout), output(proc)
    assert 'not a clean night: 1 test case(s) passed only on a retry' in proc.stdout, output(proc)
    html = next((tmp_path / 'report').rglob('index.html')).read_text()
    md = next((tmp_path / 'report').rglob('summary.md')).read_text()
    assert '<table id="flaky">' in html and 'first attempt: the fault shows every other time' in html
    assert '**Flaky: FailsOnce**' in md


# -- what a night must not be cleared by, and the data a night must survive --------------------------------

@needs_impi
@pytest.mark.integration
@pytest.mark.long
def test_a_confirmation_that_failed_leaves_the_regression_unverified_not_cleared(night):
    """A night 200 us slower whose confirmation measured nothing (here: refused at setup, as when MPI cannot start):
    not cleared, and the night alone (q far below 0.01, 200x) is an alarm."""
    proc = night('-r', '--mode', 'nightly', '--session-extras=nightly=slow', *NIGHT, *SLOW)
    assert proc.returncode == 0, output(proc)
    proc = night('-r', '--mode', 'nightly', '--session-extras=nightly=slow,confirms=slow', *NIGHT,
                 '-S', 'inject_us=-1')
    assert proc.returncode != 0, output(proc)           # the confirmation failed in ReFrame: nothing measured
    proc = nightly(night, '--night', 'slow', '--no-run', *QUIET, '--', *NIGHT)
    assert proc.returncode == verdict.EXIT_REGRESSION, output(proc)
    assert len(stored_night(night, 'slow')) == 2        # no re-run of its own: the stored confirmation is judged
    assert not re.search(r'^\s*cleared:', proc.stdout, re.M), output(proc)
    assert re.search(r'^  NOT CONFIRMED test case IMBPointToPoint .*its confirmation measured nothing: '
                     r'failed in setup, before its job ran \(.*inject_us=-1.*not confirmed, not cleared; '
                     r'the night alone crosses the alarm limit',
                     proc.stdout, re.M), output(proc)
    html, md = pages(proc)
    assert 'History test: no regression' not in md and 'no regression in' not in html
    assert '**Not confirmed, not cleared: 1 test case(s)' in md and '| unverified |' in md
    assert '<td class="unverified"' in html and 'NOT CONFIRMED, NOT CLEARED' in html


@needs_impi
@pytest.mark.integration
@pytest.mark.long
def test_a_confirmation_stored_before_its_night_is_ignored(night):
    """A reused night id (a re-run CI workflow's): a clean session claiming to confirm the night, stored before the
    night's own 200 us slower session, must not clear it."""
    proc = night('-r', '--mode', 'nightly', '--session-extras=nightly=reused,confirms=reused', *NIGHT)
    assert proc.returncode == 0, output(proc)
    early = stored_night(night, 'reused')[0]['uuid']
    proc = night('-r', '--mode', 'nightly', '--session-extras=nightly=reused', *NIGHT, *SLOW)
    assert proc.returncode == 0, output(proc)
    proc = night.ibrepro('report', '--nightly', '--night', 'reused', '--output-dir', str(night.home / 'r'),
                         *QUIET_REPORT)
    assert proc.returncode == verdict.EXIT_REGRESSION, output(proc)
    assert 'REGRESSION (unconfirmed) test case IMBPointToPoint' in proc.stdout, output(proc)
    assert not re.search(r'^\s*cleared:', proc.stdout, re.M), output(proc)
    assert re.search(rf'^  ignored confirmation session {early}: started .*before the night', proc.stdout, re.M), \
        output(proc)
    html, md = pages(proc)
    assert early in html and 'Ignored confirmation session' in md
    # the confirmation ibrepro nightly ran was not stored (run-checks.sh exit 3): not confirmed, not cleared
    proc = night.ibrepro('report', '--nightly', '--night', 'reused', '--output-dir', str(night.home / 'r'),
                         '--confirmation-problem', 'its confirmation ran but its ReFrame session was not stored',
                         *QUIET_REPORT)
    assert proc.returncode == verdict.EXIT_REGRESSION, output(proc)
    assert re.search(r'^  NOT CONFIRMED test case IMBPointToPoint .*its confirmation ran but its ReFrame session was '
                     r'not stored: not confirmed, not cleared; the night alone crosses', proc.stdout, re.M), \
        output(proc)


@pytest.mark.integration
def test_no_run_without_a_readable_database_could_not_judge(tmp_path, clean_history):
    runner = ReFrameRunner(tmp_path / 'empty')
    proc = nightly(runner, '--night', 'clean7', '--no-run')
    assert proc.returncode == verdict.EXIT_UNJUDGED, output(proc)
    assert 'could not judge night clean7: no results database at' in proc.stderr and 'Traceback' not in proc.stderr
    truncated = ReFrameRunner(tmp_path / 'truncated')
    truncated.home.mkdir()
    truncated.db.write_bytes((clean_history / 'results.db').read_bytes()[:20000])
    proc = nightly(truncated, '--night', 'clean7', '--no-run')
    assert proc.returncode == verdict.EXIT_UNJUDGED, output(proc)
    assert 'could not judge night clean7' in proc.stderr and 'Traceback' not in proc.stderr


def _break_session(db, uuid, keep=3000):
    """Truncate a stored run report (as a full disk would), and drop the values index that read it whole."""
    import sqlite3
    with sqlite3.connect(db) as conn:
        conn.execute('UPDATE sessions SET json_blob = substr(json_blob, 1, ?) WHERE uuid = ?', (keep, uuid))
    conn.close()
    for path in results._index_files(results.ValueIndex.default_path(db)):
        path.unlink(missing_ok=True)


@pytest.mark.integration
def test_an_unreadable_earlier_session_is_named_not_fatal_but_the_night_itself_is(night):
    sessions = {r['session_info']['nightly']: r['session_info']['uuid'] for r in results.stored_sessions(night.db)}
    _break_session(night.db, sessions['clean2'])
    # judged on the six readable nights before it
    proc = nightly(night, '--night', 'clean7', '--no-run', *QUIET, '--report-option=--min-history=6')
    assert proc.returncode == verdict.EXIT_CLEAN and 'tested variables' in proc.stdout, output(proc)
    assert f'skipped: session {sessions["clean2"]}: not a JSON run report' in proc.stderr, output(proc)
    _break_session(night.db, sessions['clean7'])
    proc = nightly(night, '--night', 'clean7', '--no-run', *QUIET)
    assert proc.returncode == verdict.EXIT_UNJUDGED, output(proc)
    assert 'could not judge night clean7: no readable session of it is stored (1 unreadable: session ' \
        f'{sessions["clean7"]}' in proc.stderr, output(proc)


def test_power_harness_never_counts_a_failed_check_as_detected():
    import importlib.util
    spec = importlib.util.spec_from_file_location('detection_power', ROOT / 'scripts' / 'detection_power.py')
    power = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(power)
    # the knob refused: nothing measured, ibrepro nightly exits 1 for the failed check
    assert power.outcome(verdict.EXIT_REGRESSION, None, True) == 'failed'
    assert power.outcome(verdict.EXIT_REGRESSION, 0.3, True) == 'failed'
    assert power.outcome(verdict.EXIT_CLEAN, None, False) == 'failed'
    assert power.outcome(verdict.EXIT_REGRESSION, 0.3, False) == 'detected'
    assert power.outcome(verdict.EXIT_CLEAN, 0.3, False) == 'missed'
    assert power.outcome(verdict.EXIT_INCONCLUSIVE, 0.3, False) == 'inconclusive'
    assert power.outcome(verdict.EXIT_UNJUDGED, 0.3, False) == 'unjudged'
    assert power.night_failed([]) and power.night_failed([{'runs': [{'testcases': [
        {'name': 'x', 'system': 's', 'partition': 'p', 'environ': 'e', 'result': 'fail'}]}]}])
    args = type('Args', (), {'levels': [50], 'environ': 'impi', 'history': 8, 'otava': False, 'inject': 'pct'})()
    nights = [{'level': 50, 'status': 1, 'slowdown': None, 'outcome': 'failed', 'wall_s': 1, 'confirmation': False,
               'inject_overshoot': None},
              {'level': None, 'status': 1, 'slowdown': None, 'outcome': 'failed', 'wall_s': 1, 'confirmation': False,
               'inject_overshoot': None}]
    entry = power.summarise(args, 'case', {}, {50: (1.0, None, [])}, nights, [], None)
    level, = entry['levels']
    assert (level['detected'], level['nights'], level['failed']) == (0, 1, 1)
    assert (entry['false_alarms'], entry['clean_failed']) == (0, 1)
    assert power.combined_levels([entry], [50])[0]['failed'] == 1


def _move(db, nights):
    """Make the stored ``nights`` as if measured on another machine: their cases' node hardware (what the control
    read on the node) names another CPU model. The nights and their values stay the real ones."""
    import sqlite3
    with sqlite3.connect(db) as conn:
        for uuid, blob in conn.execute('SELECT uuid, json_blob FROM sessions').fetchall():
            report = json.loads(blob)
            if report['session_info'].get('nightly') not in nights:
                continue
            for run in report['runs']:
                for case in run['testcases']:
                    case['node_hardware'] = {**case['node_hardware'], 'cpu_model': 'elsewhere'}
            conn.execute('UPDATE sessions SET json_blob = ? WHERE uuid = ?', (json.dumps(report), uuid))


@needs_impi
@pytest.mark.integration
def test_a_night_on_other_hardware_than_its_history_is_not_judged(night):
    """The history test compares a case's nights on one kind of hardware only: a night whose earlier nights ran on
    another CPU model has too few nights to test and is "could not judge" (exit 2), never clean or a regression."""
    case = results.stored_sessions(night.db, last=1)[0]['runs'][0]['testcases'][0]
    assert case['node_hardware']['cpu'], case.get('node_hardware')      # the nightly mode's control recorded it
    judge = ['report', '--nightly', '--night', 'clean7', '--min-history', '7', '--window', '7', *QUIET_REPORT]
    proc = night.ibrepro(*judge, '--output-dir', str(night.home / 'before'))
    assert proc.returncode == verdict.EXIT_CLEAN and 'tested variables' in proc.stdout, output(proc)

    _move(night.db, {f'clean{k}' for k in range(3)})
    night.db.with_name(night.db.name + '.values').unlink()     # the index holds what a session was when first read
    proc = night.ibrepro(*judge, '--output-dir', str(night.home / 'after'))
    assert proc.returncode == verdict.EXIT_UNJUDGED, output(proc)
    assert re.search(r"^  OTHER HARDWARE IMBPointToPoint .*: 3 earlier session\(s\) ran on other hardware "
                     r"\(cpu_model '[^']+' \(before: 'elsewhere'\)\)", proc.stdout, re.M), output(proc)
    assert 'could not judge: 1 test case(s) on other hardware than their history' in proc.stdout
    html, md = pages(proc)
    assert '**Could not judge IMBPointToPoint' in md and 'left out of its history test' in md
    assert 'class="status warn other-hardware">Could not judge IMBPointToPoint' in html

    # with enough nights on tonight's hardware left, it is judged on those
    proc = night.ibrepro('report', '--nightly', '--night', 'clean7', '--min-history', '4', '--window', '7',
                         *QUIET_REPORT, '--output-dir', str(night.home / 'four'))
    assert proc.returncode == verdict.EXIT_CLEAN and 'tested variables' in proc.stdout, output(proc)

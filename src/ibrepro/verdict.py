"""The nightly verdict: what a night says about each test case, and what the night exits with.

A night is judged in two stages (``ibrepro nightly`` runs both; docs/reports.md measures what they catch):

1. **The night.** Every test case of the night's sessions is tested against its history (:mod:`ibrepro.stats`:
   the test-case index, Benjamini-Hochberg across test cases). A flagged case is a *suspect*, not yet an alarm:
   on a shared or busy machine whole sessions are sometimes 30-40 % slower for minutes, which no history test
   can tell from a regression.
2. **The confirmation.** The suspects, and the cases whose night was too noisy to judge, run again at once (a
   second ReFrame session of the same night with the session extra ``confirms=<night>``). The re-run is tested
   against the same baseline (:func:`ibrepro.stats.confirmation_test`); only a suspect whose re-run regressed
   too raises the alarm. A passing transient slowdown does not survive the second run; a real one does.
   A confirmation that measured nothing (its case failed, was skipped, stored no value, or its session was not
   stored) neither confirms nor clears: the suspect is *unverified*, an alarm when the night alone crosses the
   one-night alarm limit (:data:`ALARM_ALPHA`), else "could not judge". Only a confirmation stored after its
   night's sessions and of the same night counts (a reused night id must not clear a night).

**The noise guard.** A night is too noisy to judge when its own repetitions (``-S repetitions=R``) disagree by
more than ``max_noise`` (the standard deviation of the case's index over them), or when some task of the node
waited for a CPU for more than ``max_pressure`` of the run (Linux pressure stall information: another job on the
machine). Such a case is *inconclusive*, unless its confirmation is quiet and judges it; a confirmed regression is
a regression however noisy. An inconclusive night is never a silent pass: it has its own exit status, and three
inconclusive nights in a row fail.

Per test case the verdict is one of :data:`VERDICTS`; the night's exit status (:func:`exit_status`) is the most
severe of its cases'.
"""

import dataclasses
import re

from . import stats

#: What a night says of one test case.
VERDICTS = {
    'regression': 'regressed, and its confirmation regressed too',
    'unconfirmed': 'regressed; no confirmation was run (ibrepro nightly runs one)',
    'unverified': 'flagged; its confirmation measured nothing (failed, skipped, no value, not stored): '
                  'not confirmed, not cleared',
    'cleared': 'flagged, and its confirmation did not regress: not an alarm',
    'inconclusive': 'too noisy to judge this night',
    'ok': 'no regression',
    'untested': 'not enough history to test',
    'other-hardware': 'ran on other hardware than its history (its node\'s CPU or HCA model): not judged until it '
                      'has enough nights there',
}

#: Exit status of ``ibrepro report --nightly``, ``ibrepro nightly``, ``make nightly`` and ``ci/nightly.sh``.
EXIT_CLEAN = 0          # judged, no regression
EXIT_REGRESSION = 1     # a test case regressed (confirmed, or unconfirmed where no confirmation ran, or unverified
                        # where its night alone crosses ALARM_ALPHA)
EXIT_UNJUDGED = 2       # could not judge: unreadable references or data, a crash, 3 inconclusive nights in a row,
                        # a suspect whose confirmation measured nothing and whose night alone is below the alarm,
                        # a case on other hardware than its history

#: The one-night alarm: a suspect whose confirmation measured nothing is an alarm when its night's test-case q is at
#: most this (the report's own false discovery rate, stats.Method().alpha; ``ibrepro nightly`` screens the night at
#: the looser nightly.NIGHT_ALPHA) and its change at least min_effect (what flagged it).
ALARM_ALPHA = stats.Method().alpha
EXIT_INCONCLUSIVE = 3   # this night was too noisy to judge some test case, and nothing regressed

#: Inconclusive nights in a row that fail (exit EXIT_UNJUDGED).
INCONCLUSIVE_LIMIT = 3


@dataclasses.dataclass(frozen=True)
class Guard:
    """Limits of the noise guard and the confirmation (``ibrepro report --help`` lists them)."""

    max_noise: float = 0.05          # a night's repetitions may disagree by this much (sd of the index, relative)
    max_pressure: float = 0.25       # share of the run's time some task of the node may wait for a CPU
    confirmation_alpha: float = 0.01  # p-value that confirms a suspect's re-run

    def __post_init__(self):
        if not self.max_noise > 0 or not 0 < self.max_pressure <= 1 or not 0 < self.confirmation_alpha < 1:
            raise ValueError('max-noise must be > 0, max-pressure in (0, 1], confirmation-alpha in (0, 1)')


def noise_problem(case, guard):
    """Why one stored test case (a run report's test case) was too noisy to judge, or None."""
    if not isinstance(case, dict):
        return None
    spread, pressure = case.get('repetition_spread'), case.get('cpu_pressure')
    reasons = [f'its stored {name} {value!r:.40} is not a number: its noise cannot be judged'
               for name, value in (('repetition_spread', spread), ('cpu_pressure', pressure))
               if value is not None and not _number(value)]
    if _number(spread) and spread > guard.max_noise:
        reasons.append(f'its {case.get("repetitions")} repetitions disagree by {spread:.1%} '
                       f'(at most {guard.max_noise:.1%})')
    if _number(pressure) and pressure > guard.max_pressure:
        reasons.append(f'tasks waited for a CPU {pressure:.0%} of the time (at most {guard.max_pressure:.0%}: '
                       'another job shared the node)')
    return '; '.join(reasons) or None


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


@dataclasses.dataclass
class CaseVerdict:
    verdict: str
    night: object = None           # stats.Shift of the night's index
    confirmation: object = None    # stats.Shift of the confirmation's index (None: no confirmation)
    noise: str | None = None       # why the night was too noisy (None: quiet enough)
    confirmation_noise: str | None = None
    reason: str | None = None      # unverified: why its confirmation judged nothing
    alarm: bool = False            # unverified: the night alone crosses the one-night alarm limit (ALARM_ALPHA)

    @property
    def needs_confirmation(self):
        """Whether ``ibrepro nightly`` re-runs this case: a suspect, or a night too noisy to judge."""
        return self.confirmation is None and self.verdict in ('unconfirmed', 'inconclusive')


def judge(night, noise=None, confirmation=None, confirmation_noise=None, alarm_alpha=ALARM_ALPHA):
    """The verdict of one test case from its night's test (a stats.Shift or None), the night's noise problem,
    and the confirmation's test and noise problem (None when no confirmation ran; a Shift whose verdict is
    'untested' when one ran and measured nothing: its ``reason`` says why)."""
    flagged = night is not None and night.alarm
    if confirmation is not None and confirmation.verdict == 'untested':   # measured nothing: judges nothing
        reason = confirmation.reason or 'its confirmation measured nothing'
        if flagged:
            crosses = night.q is not None and night.q <= alarm_alpha
            return CaseVerdict('unverified', night, confirmation, noise, None, reason, crosses)
        verdict = 'inconclusive' if noise else 'untested' if night is None or night.verdict == 'untested' else 'ok'
        return CaseVerdict(verdict, night, confirmation, noise, None, reason)
    if confirmation is not None:
        if confirmation.verdict == 'regression' and (flagged or noise):
            verdict = 'regression'
        elif confirmation_noise:
            verdict = 'inconclusive'
        elif flagged:
            verdict = 'cleared'
        else:
            verdict = 'ok'      # a noisy night judged by its quiet confirmation
    elif flagged:
        verdict = 'unconfirmed'
    elif noise:
        verdict = 'inconclusive'
    elif night is None or night.verdict == 'untested':
        verdict = 'untested'
    else:
        verdict = 'ok'
    return CaseVerdict(verdict, night, confirmation, noise, confirmation_noise)


def exit_status(verdicts, inconclusive_run=0):
    """The night's exit status from its cases' verdicts; ``inconclusive_run``: inconclusive nights in a row
    before this one."""
    kinds = {v.verdict for v in verdicts}
    if kinds & {'regression', 'unconfirmed'} or any(v.verdict == 'unverified' and v.alarm for v in verdicts):
        return EXIT_REGRESSION
    if kinds & {'unverified', 'other-hardware'}:   # flagged and neither confirmed nor cleared; or on hardware its
        return EXIT_UNJUDGED                        # history did not run on: never clean
    if 'inconclusive' in kinds:
        return EXIT_UNJUDGED if inconclusive_run + 1 >= INCONCLUSIVE_LIMIT else EXIT_INCONCLUSIVE
    return EXIT_CLEAN


#: How a case's job says it ran outside its partition's Slurm partition or account (its first lines,
#: ibrepro.rfm.launch.placement_commands; its sanity error starts with it).
MISPLACED = 'ibrepro: misplaced:'

#: ReFrame's pipeline stages before a test case's job runs: a case that failed in one measured nothing.
STAGES_BEFORE_THE_JOB = ('startup', 'setup', 'compile', 'compile_wait')


def reason_line(text, limit=200):
    """A failure's reason on one line: its first line and, for a command ReFrame ran that failed ("command 'sbatch
    rfm_job.sh' failed with exit code 1:", then the command's output between ``--- stdout ---`` and ``--- stderr
    ---`` markers), the first line the command wrote on stderr, where the cause is ("Unable to contact slurm
    controller"). '' when there is none."""
    lines = [' '.join(line.split()) for line in str(text or '').splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return ''
    said = lines[0]
    if '--- stderr ---' in lines:
        cause = [line for line in lines[lines.index('--- stderr ---') + 1:]
                 if not re.fullmatch(r'--- (stdout|stderr) ---', line)]
        said += f' {cause[0]}' if cause else ''
    return said[:limit]


def not_measured(case):
    """Why a test case that failed in ReFrame never ran its benchmark on a node, or None when its job ran and the
    case failed there (a check failure: the night fails as a regression).

    Not run: it failed before its job (setup, build: a configuration or build problem), its job was never
    submitted (no job id: sbatch refused it, Slurm down), or its job never started on a node (no node list: cancelled
    while pending, past its ``max_pending_time`` or blocked). That is infrastructure, not performance: the night
    could not be judged (exit 2), and no one is paged for a regression. A job that started and ran out of time, or
    whose MPI could not start on its nodes, did run: its failure is the fabric's until shown otherwise."""
    if case.get('result') != 'fail':
        return None
    phase = case.get('fail_phase') or '?'
    reason = reason_line(case.get('fail_reason'))
    if phase in STAGES_BEFORE_THE_JOB:
        return f'failed in {phase}, before its job ran ({reason or "no reason recorded"})'
    if MISPLACED in reason:     # its job ran outside its partition and measured nothing (ibrepro.rfm.launch)
        return f'its job ran outside its partition ({reason[reason.index(MISPLACED) + len(MISPLACED):].strip()})'
    if case.get('scheduler') in (None, 'local'):        # the local scheduler runs the job at once, where it is
        return None
    if not case.get('jobid'):
        return f'its job was never submitted ({phase}: {reason or "no job id"})'
    if not case.get('job_nodelist'):
        return f'its job {case["jobid"]} never started on a node ({phase}: {reason or "no node list"})'
    return None


def combine(statuses):
    """One exit status for several systems: a regression first, then could-not-judge, then inconclusive."""
    for status in (EXIT_REGRESSION, EXIT_UNJUDGED, EXIT_INCONCLUSIVE):
        if status in statuses:
            return status
    return EXIT_CLEAN


def night_inconclusive(night_cases, confirmation_cases, guard):
    """Whether a stored night was inconclusive: a test case too noisy (``night_cases``: key -> test case) that no
    quiet confirmation (``confirmation_cases``) judged. What the noise guard reads needs no baseline."""
    for key, case in night_cases.items():
        if noise_problem(case, guard):
            again = confirmation_cases.get(key)
            if again is None or noise_problem(again, guard):
                return True
    return False

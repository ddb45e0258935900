"""The model of one system's report (:func:`build`): what the templates show, as one dict."""

import array
import collections
import dataclasses
import datetime
import functools
import json
import statistics

from .. import ledger, parsers, plots, results, stats, verdict
from ..simulated import table as simulated_table
from . import fleet, papers, provenance, regressions
from ..results import run_id


def _when(start):
    return datetime.datetime.fromtimestamp(start, datetime.timezone.utc)


@dataclasses.dataclass
class Runs:
    """The runs of a history: a run is the sessions of one night (see run_id), oldest first."""

    keys: dict            # index series -> series key (system, partition, environ, check, params, variable)
    run_of: list          # per session (position in the history): its run, None for a confirmation session
    count: int            # runs
    confirming: set       # positions of the sessions that confirm the newest night
    ignored: list = dataclasses.field(default_factory=list)   # (uuid, why) of confirmations of it that do not count

    @classmethod
    def of(cls, history, night):
        runs, run_of, claims = {}, [], []
        for position, row in enumerate(history.sessions):
            if row.confirms:
                run_of.append(None)
                if row.confirms == night:
                    claims.append(position)
            else:
                run_of.append(runs.setdefault(row.run or row.uuid, len(runs)))
        keys = {series: (series.system, series.partition, series.environ, series.check, _params(series),
                         series.variable) for series in history.first}
        confirming, ignored = _counted_confirmations(history.sessions, night, claims)
        return cls(keys, run_of, len(runs), confirming, ignored)

    def aligned(self, values, first_run=0):
        """{series key: one value per run from ``first_run`` (the median of the run's sessions), None if none}."""
        per_run = collections.defaultdict(lambda: collections.defaultdict(list))
        for series, (positions, xs) in values.items():
            slot = per_run[self.keys[series]]
            for position, x in zip(positions, xs):
                if self.run_of[position] is not None and self.run_of[position] >= first_run:
                    slot[self.run_of[position]].append(x)
        found = {}
        for key, per in per_run.items():
            found[key] = row = [None] * (self.count - first_run)
            for j, xs in per.items():
                row[j - first_run] = xs[0] if len(xs) == 1 else statistics.median(xs)
        return found


def _counted_confirmations(sessions, night, claims):
    """``(positions, [(uuid, why)])``: which of the sessions at ``claims`` (their ``confirms`` extra names
    ``night``) count as its confirmation: a re-run of this night (its ``nightly`` extra is the night too) started
    at or after the night's newest session. A session stored before the night with a reused night id (a re-run
    CI workflow's), or of another run, confirms nothing: it is named, never read."""
    starts = [row.start for row in sessions if not row.confirms and (row.run or row.uuid) == night]
    newest = max(starts) if starts else None
    counted, ignored = set(), []
    for position in claims:
        row = sessions[position]
        if row.run != night:
            ignored.append((row.uuid, f'its nightly extra is {row.run!r}, not {night!r}: not a re-run of this night'))
        elif newest is None:
            ignored.append((row.uuid, f'no session of night {night} is stored: nothing to confirm'))
        elif row.start < newest:
            ignored.append((row.uuid, f'started {_when(row.start):%Y-%m-%d %H:%M:%S} UTC, before the night\'s own '
                                      f'session ({_when(newest):%Y-%m-%d %H:%M:%S} UTC): not a re-run of this night'))
        else:
            counted.add(position)
    return counted, ignored


@dataclasses.dataclass
class NightCase:
    """A test case of the night: its newest record, and every value of each variable in the night's sessions."""

    case: dict
    values: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(list))


def _params(series):
    return tuple(tuple(p) for p in json.loads(series.params))


def _perf_value(session, series, key, first):
    """The PerfValue of a series' oldest value (``first``: a results.FirstValue) in ``session``."""
    system, partition, environ, check, params, variable = key
    return results.PerfValue(
        session=session.uuid, session_start=session.start, system=system, partition=partition, environ=environ,
        check=check, name=series.name, params=params, variable=variable, value=first.value, unit=series.unit,
        ref=first.ref, lower=first.lower, upper=first.upper, result=first.result)


def _every_run(runs, history, wanted):
    """{series key: its value in every run} of the series keys ``wanted`` (the trends)."""
    return runs.aligned(history.values(series=[s for s, key in runs.keys.items() if key in wanted]))


def build(system, selected, history, method=stats.Method(), platforms_config=None, guard=verdict.Guard(),
          earlier=(), confirmation_problem=None):
    """Everything the templates show for one system (a dict).

    ``selected``: the checked run reports the report is about (their test cases are shown); ``history``: the
    system's results.History, oldest first, the selected sessions included (the values the history test and the
    trends read). ``platforms_config``: a ReFrame configuration given explicitly (``-C``) to say why families did
    not run; without it, the platforms the sessions recorded. Confirmation sessions (``confirms`` extra: the re-run
    of a night's suspects, :mod:`ibrepro.verdict`) are no point of the history: they judge their night only.
    ``earlier``: the run reports stored before the selected ones, whose pair-round nights the fleet section reads.
    ``confirmation_problem``: why a confirmation ``ibrepro nightly`` ran stored nothing (its session was not stored,
    a suspect had no ReFrame hash): the night's suspects without a confirmation are unverified, not unconfirmed.
    """
    problems = list(history.problems)
    sessions = history.sessions
    selected_ids = {r['session_info'].get('uuid') for r in selected}
    nights = [r for r in selected if not r['session_info'].get('confirms')]
    newest = (nights or selected)[-1]
    night = run_id(newest)

    runs = Runs.of(history, night)
    oldest = {}                              # series key -> (index series, results.FirstValue) of its oldest value
    for series, first in history.first.items():
        key = runs.keys[series]
        if key not in oldest or first.position < oldest[key][1].position:
            oldest[key] = (series, first)
    meta = {key: _perf_value(sessions[first.position], series, key, first)
            for key, (series, first) in oldest.items()}

    latest = {}                              # series key -> the PerfValue of the newest selected session
    cases_now = {}                           # (partition, environ, name) -> NightCase
    confirmed_cases = {}                     # (partition, environ, name) -> the confirmation's test case
    counted = {sessions[p].uuid for p in runs.confirming}
    for report in selected:
        info = report['session_info']
        for case in results.readable_cases(report, []):   # what is unreadable is in the history's problems
            if case['system'] != system:
                continue
            group = (case['partition'], case['environ'], case['name'])
            if info.get('confirms'):
                if info.get('uuid') in counted:
                    confirmed_cases[group] = case
                continue
            slot = cases_now.setdefault(group, NightCase(case))
            slot.case = case
            for pv in results.case_perf_values(info, case):
                latest[pv.series_key] = pv
                slot.values[pv.variable].append(pv.value)

    # the history test reads the newest window + confirm runs: only their values are read
    n = runs.count
    first_run = max(0, n - method.window - method.confirm)
    since = next((p for p, j in enumerate(runs.run_of) if j is not None and j >= first_run), len(runs.run_of))
    tonight = {group: ledger.hardware_of(c.case.get('node_hardware')) for group, c in cases_now.items()}
    values, other_hardware = _same_hardware(history.values(since=since), sessions, system, tonight)
    recent = runs.aligned(values, first_run)
    better = {key: parsers.METRIC_BETTER.get(regressions.metric_of(key[-1]).split('_')[0]) for key in meta}
    result = stats.history_tests(
        {key: (recent.get(key) or [None] * (n - first_run), better[key],
               (meta[key].partition, meta[key].environ, meta[key].name)) for key in meta}, method)

    current = {key: (c.case, {v: statistics.median(xs) for v, xs in c.values.items()}) for key, c in cases_now.items()}
    missing = confirmation_problem or (
        'its confirmation session(s) did not run it (skipped)' if runs.confirming else None)
    verdicts = _verdicts(result, {k: c.case for k, c in cases_now.items()}, confirmed_cases,
                         _confirmation_values(history, runs.keys, runs.confirming), guard, missing)
    for group, why in other_hardware.items():     # too few nights on tonight's hardware to test it: not clean
        if group in verdicts and verdicts[group].verdict == 'untested':
            verdicts[group] = dataclasses.replace(verdicts[group], verdict='other-hardware', reason=why)
    info = newest['session_info']
    model = {
        'system': system,
        'generated': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
        'sessions': [_session_row(row, row.uuid in selected_ids) for row in sessions],
        'selected': [_session_row(row, True) for row in sessions if row.uuid in selected_ids],
        'newest': info,
        'method': dataclasses.asdict(method),
        'problems': problems,
    }
    model.update(provenance.collect(system, selected, current, problems, platforms_config))
    model['labels'] = provenance.labels_of(system, model['platforms'])
    model['fleet'], unjudged = fleet.section(system, nights, earlier)
    problems.extend(unjudged)
    model['charts'] = _charts(system, night)
    model['simulated'] = simulated_table.report_section(system, current)   # the simulated system only
    if model['simulated']:
        model['labels'].insert(0, model['simulated']['label'])
    model.update(papers.section(current, model['topologies']))
    if model['simulated']:   # each paper number beside the model of its own testbed only
        model['headline'] = simulated_table.own_testbed(model['headline'])
    starts = {}
    for row, j in zip(sessions, runs.run_of):
        if j is not None:
            starts.setdefault(j, _when(row.start))
    model['runs'] = runs.count
    model['night'] = night
    model['confirmations'] = [_session_row(sessions[p], True) for p in sorted(runs.confirming)]
    model['ignored_confirmations'] = [{'uuid': uuid, 'why': why} for uuid, why in runs.ignored]
    model['alarm_alpha'] = verdict.ALARM_ALPHA
    every_run = functools.partial(_every_run, runs, history)
    dates = [starts[j] for j in range(runs.count)]
    model.update(regressions.section(every_run, meta, latest, result, dates, method))
    model.update(_verdict_lists(verdicts, model['groups']))
    model['guard'] = dataclasses.asdict(guard)
    return plots.draw_all(model)      # the figures, drawn together


def _same_hardware(values, sessions, system, tonight):
    """``(values, {group: why})``: the history's ``values`` (``{series: (positions, values)}``) without the
    sessions whose test case ran on other node hardware than tonight's (``tonight``: group -> hardware; either side
    unrecorded counts as the same), and per test case that lost some, what differed. A history test compares nights
    of one machine: a case moved to another CPU or HCA model shifts by more than the regressions it looks for."""
    parsed, kept, other = {}, {}, {}
    for series, (positions, xs) in values.items():
        group = (series.partition, series.environ, series.name)
        here = tonight.get(group)
        if not here:
            kept[series] = (positions, xs)
            continue
        keep = []
        for p, x in zip(positions, xs):
            if (p, group) not in parsed:        # a case's variables share its session's hardware: read it once
                parsed[p, group] = sessions[p].hardware_of(system, *group)
            there = parsed[p, group]
            if there and there != here:
                other.setdefault(group, {})[p] = there
            else:
                keep.append((p, x))
        if keep:
            kept[series] = (array.array('i', [p for p, _ in keep]), array.array('d', [x for _, x in keep]))
    why = {}
    for group, found in other.items():
        there = next(iter(found.values()))
        moved = ', '.join(f'{k} {tonight[group].get(k, "-")!r} (before: {there.get(k, "-")!r})'
                          for k in sorted(set(there) | set(tonight[group])) if there.get(k) != tonight[group].get(k))
        why[group] = f'{len(found)} earlier session(s) ran on other hardware ({moved}): left out of its history test'
    return kept, why


def _charts(system, night):
    """The charts across nights (``ibrepro charts``) of a system with a frozen chart baseline, as of ``night``:
    ``{'status': exit status, 'lines': [...]}``, or None without a baseline."""
    from .. import evidence
    try:
        if not evidence.baseline_path(system).exists():
            return None
    except ValueError:          # a stored system name that names no file of ours
        return None
    status, lines = evidence.judge(system, night=night)
    if status is None:
        status, lines = evidence.judge(system)
    return {'status': status, 'lines': lines}


def _confirmation_values(history, keys, positions):
    """{series key: median of its values in the confirmation sessions at ``positions``}."""
    if not positions:
        return {}
    found = collections.defaultdict(list)
    for series, (where, xs) in history.values(since=min(positions)).items():
        for position, x in zip(where, xs):
            if position in positions and series in keys:
                found[keys[series]].append(x)
    return {key: statistics.median(xs) for key, xs in found.items()}


def _verdicts(result, night_cases, confirmed_cases, confirmation_values, guard, missing=None):
    """{test case (partition, environ, name): verdict.CaseVerdict} of the newest night. ``missing``: why a case
    without a confirmation had none though one ran (None: no confirmation ran, e.g. ``--no-confirm``)."""
    verdicts = {}
    for group in sorted(set(result.groups) | set(night_cases)):
        again = confirmed_cases.get(group)
        shift = (stats.confirmation_test(result, group, confirmation_values, alpha=guard.confirmation_alpha)
                 if again is not None else None)
        if again is not None and (shift is None or shift.verdict == 'untested'):
            # the re-run measured nothing of this case: it neither confirms nor clears (verdict.judge)
            shift = stats.Shift('untested', 'lower', 0, reason=_measured_nothing(again, shift))
        night, noise = result.groups.get(group), verdict.noise_problem(night_cases.get(group), guard)
        if again is None and missing and ((night is not None and night.alarm) or noise):   # a suspect, not re-run
            shift = stats.Shift('untested', 'lower', 0, reason=missing)
        verdicts[group] = verdict.judge(night, noise, shift, verdict.noise_problem(again, guard))
    return verdicts


def _measured_nothing(case, shift):
    """Why a confirmation's test case judged nothing."""
    def first_line(text):
        return verdict.reason_line(text, 160) or 'no reason given'
    if case.get('result') == 'skip' or case.get('skip_reason'):
        return f'its confirmation was skipped ({first_line(case.get("skip_reason"))})'
    never_ran = verdict.not_measured(case)     # infrastructure: Slurm refused it, its job never started
    if never_ran:
        return f'its confirmation measured nothing: {never_ran}'
    if case.get('result') == 'fail':
        return (f'its confirmation failed in ReFrame ({case.get("fail_phase") or "?"}: '
                f'{first_line(case.get("fail_reason"))}): it measured nothing')
    if shift is not None and shift.reason:
        return f'its confirmation could not be tested ({shift.reason})'
    return 'its confirmation stored no value of this test case: it measured nothing'


def _verdict_lists(verdicts, groups):
    """The verdict of every test case, and the test cases the night's alarm is about."""
    rows = [{'partition': g[0], 'environ': g[1], 'name': g[2], 'verdict': v.verdict, 'shift': v.night,
             'confirmation': v.confirmation, 'noise': v.noise, 'confirmation_noise': v.confirmation_noise,
             'meaning': verdict.VERDICTS[v.verdict], 'needs_confirmation': v.needs_confirmation,
             'reason': v.reason, 'alarm': v.alarm}
            for g, v in verdicts.items()]
    for g in groups:   # the table of test cases shows each one's verdict
        v = verdicts.get((g['partition'], g['environ'], g['name']))
        g['verdict'] = v.verdict if v else g['shift'].verdict
    by_kind = collections.defaultdict(list)
    for row in rows:
        by_kind[row['verdict']].append(row)
    return {'case_verdicts': rows, 'verdict_objects': list(verdicts.values()),
            'group_alarms': by_kind['regression'] + by_kind['unconfirmed'],
            'cleared': by_kind['cleared'], 'inconclusive': by_kind['inconclusive'],
            'unverified': by_kind['unverified'], 'other_hardware': by_kind['other-hardware'],
            'suspects': [r for r in rows if r['needs_confirmation']]}


def _session_row(row, selected):
    return {'uuid': row.uuid, 'start': _when(row.start).strftime('%Y-%m-%d %H:%M'), 'run': row.run or '',
            'cases': row.cases, 'failures': row.failures, 'selected': selected}

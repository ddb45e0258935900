"""``ibrepro report``: this system beside the papers, its own history and its link limit.

Reads sessions from ReFrame's results database (default: the latest; ``--sessions``, ``--last``, ``--since``) or
JSON run reports (``--report``): the selected sessions' whole reports, and the history's values from the values
index beside the database (``ibrepro results``: each session extracted once). It writes, per system, ``reports/<system>/<timestamp>/index.html`` (one
self-contained page: inline CSS, PNG figures as data URIs, nothing fetched when viewed) and ``summary.md`` (for CI
job summaries and merge-request comments). The page has

* the papers: per figure with measured data, this system's curves on the papers' axes (message size, log2) with
  the numbers the papers state (by seed) and the link limits, then a headline table: paper value, measured value,
  ratio, and the fraction of the theoretical limit of the paper's testbed and of this system's links;
* regressions: ReFrame's verdict against the system's references, and the history test of every variable and
  test case (``ibrepro.stats``: the selected sessions against the ``--window`` sessions before them), with trends;
* provenance: system, partitions, environments, topology and limits, software versions, ibrepro commit, ReFrame
  version, dates, failures, and the check families this system did not run with the reason (from the platforms
  the sessions recorded, or the configuration given with ``-C``: never the file a session names).

What cannot be read (a session that is not a run report, a malformed test case or field, a value outside its
metric's domain such as a stored ``inf``) is left out with one line naming the session, test case and field.

``--nightly`` also prints the night's verdict (:mod:`ibrepro.verdict`: regressions with change, interval and q;
suspects a confirmation cleared; test cases too noisy to judge) and exits with its status:

  0  judged, no regression
  1  a test case regressed (confirmed by its re-run; or flagged where no confirmation ran)
  2  could not judge: nothing to report on, unreadable references or data, a crash of the report itself, or the
     third inconclusive night in a row
  3  inconclusive: a test case was too noisy to judge this night (and its confirmation too), nothing regressed

``ibrepro nightly`` runs the checks, this test, the confirmation of the suspects, and this test again.
"""

import argparse
import collections
import dataclasses
import datetime
import gc
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jinja2

from . import baseline, catalog, compare, parsers, paths, plots, references, results, software, stats, verdict
from . import topology as ibtopology
from .simulated import table as simulated_table

#: Runs shown in trends (and available as baseline) unless --history says otherwise.
DEFAULT_HISTORY = 90
#: At most this many trend plots (flagged variables first).
MAX_TRENDS = 12

LABEL_EMULATED = 'emulated hardware: not performance data'
LABEL_LOCAL = 'shared memory, one node: not an interconnect'


class ReportError(RuntimeError):
    pass


# -- choosing the sessions --------------------------------------------------------------------------

@dataclasses.dataclass
class Inputs:
    selected: list                                       # run reports the report is about, oldest first
    history: dict = dataclasses.field(default_factory=dict)   # system -> results.History, oldest first
    problems: list = dataclasses.field(default_factory=list)  # what could not be read, and why
    index: object = None                                 # the results.ValueIndex the histories read (open)

    def close(self):
        if self.index:
            self.index.close()


def _start(report):
    return float(report['session_info'].get('time_start_unix') or 0)


def _systems(report):
    return sorted({c['system'] for c in results.readable_cases(report, [])})


def parse_since(text, now=None):
    """Unix time of ``--since``: an ISO date/time (UTC unless it says) or ``<N>d`` / ``<N>h`` ago."""
    m = re.fullmatch(r'(\d+)([dh])', text.strip())
    if m:
        return (now or time.time()) - int(m.group(1)) * (86400 if m.group(2) == 'd' else 3600)
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ReportError(f'--since {text!r}: expected a date (2026-11-20), a date and time, or 7d / 12h') from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def select(*, db=None, sessions=None, last=None, since=None, report_files=None, history=DEFAULT_HISTORY,
           use_index=True, night=None):
    """The sessions to report on and the history of each of their systems (see the module doc).

    The history's values come from the values index (:class:`results.ValueIndex`); ``use_index=False`` decodes
    every session's stored report instead (the same content, slowly: what the index is checked against).
    """
    inputs = Inputs([])
    db = Path(db or paths.results_db())
    rows = []
    try:
        if db.is_file() or not report_files:
            inputs.index = results.open_index(db)
            readable, unreadable = inputs.index.sessions()
            rows = [row for row, _ in readable]
            inputs.problems += unreadable
        _select(inputs, db, rows, sessions, last, since, report_files, night)
        for system in sorted({s for r in inputs.selected for s in _systems(r)}):
            mine = [r for r in inputs.selected if system in _systems(r)]
            newest = max(_start(r) for r in mine)
            have = {r['session_info'].get('uuid') for r in mine}
            earlier = [row for row in rows if system in row.systems and row.start <= newest and row.uuid not in have]
            earlier = _last_runs(earlier, history)
            if not use_index:
                earlier = results.sessions_by_uuid([row.uuid for row in earlier], db, problems=inputs.problems)
            entries = sorted(earlier + mine, key=_order)
            inputs.history[system] = results.History.of(entries, inputs.index, system)
    except BaseException:
        inputs.close()
        raise
    return inputs


def _order(entry):
    """Sessions in time order (UUID order among sessions started at the same time), rows and reports alike."""
    if isinstance(entry, dict):
        return _start(entry), entry['session_info'].get('uuid') or ''
    return entry.start, entry.uuid


def _select(inputs, db, rows, sessions, last, since, report_files, night=None):
    if report_files:
        for path in report_files:
            try:
                report = results.load_report(path)
                _check_report(report, path)
                inputs.selected.append(report)
            except results.ResultsError as err:
                inputs.problems.append(str(err))
        inputs.selected.sort(key=_start)
        return

    if sessions:
        wanted = [s.lower() for s in sessions]
        chosen = [row.uuid for row in rows if any(row.uuid.startswith(w) for w in wanted)]
        missing = [w for w in wanted if not any(u.startswith(w) for u in chosen)]
        if missing:
            raise ReportError(f'no stored session with UUID {", ".join(missing)} in {db}')
    elif night:
        chosen = [row.uuid for row in rows if row.night == night]
        if not chosen:
            raise ReportError(f'no stored session of nightly run {night} in {db}')
    elif since is not None:
        chosen = [row.uuid for row in rows if row.start >= since]
    else:
        chosen = [row.uuid for row in _last_runs(rows, last or 1)]
    # a nightly run may be many sessions (one per test case): take all of its sessions
    chosen = set(chosen)
    runs = {row.night for row in rows if row.uuid in chosen}
    chosen = [row.uuid for row in rows if row.uuid in chosen or row.night in runs]
    inputs.selected = results.sessions_by_uuid(chosen, db, problems=inputs.problems)


def run_id(report):
    """The run a session belongs to: its ``nightly`` extra, else the session itself."""
    info = report['session_info']
    return info.get('nightly') or info.get('uuid')


def _last_runs(rows, count):
    """The session rows of the last ``count`` runs (sessions sharing a ``nightly`` extra are one run)."""
    runs = list(dict.fromkeys(row.night for row in rows))
    keep = set(runs[-count:])
    return [row for row in rows if row.night in keep]


def _check_report(report, path):
    """A run report good enough to read: every test case names its system, partition, environment and name."""
    for run in report.get('runs') or []:
        for i, case in enumerate(run.get('testcases') or []):
            missing = [k for k in ('name', 'system', 'partition', 'environ')
                       if not isinstance(case, dict) or not case.get(k)]
            if missing:
                raise results.ResultsError(f'{path}: test case {i + 1} of run {run.get("run_index", 0)} has no '
                                           f'{", ".join(missing)} (a partial or edited report?)')


# -- the model of one system's report -------------------------------------------------------------------

def _metric(variable):
    return variable.rpartition('_')[0] if variable.rpartition('_')[2].isdigit() else variable


def _size(variable):
    tail = variable.rpartition('_')[2]
    return int(tail) if tail.isdigit() else -1


def _when(start):
    return datetime.datetime.fromtimestamp(start, datetime.timezone.utc)


def build(system, selected, history, method=stats.Method(), platforms_config=None, guard=verdict.Guard()):
    """Everything the templates show for one system (a dict).

    ``selected``: the checked run reports the report is about (their test cases are shown); ``history``: the
    system's results.History, oldest first, the selected sessions included (the values the history test and the
    trends read). ``platforms_config``: a ReFrame configuration given explicitly (``-C``) to say why families did
    not run; without it, the platforms the sessions recorded. Confirmation sessions (``confirms`` extra: the re-run
    of a night's suspects, :mod:`ibrepro.verdict`) are no point of the history: they judge their night only.
    """
    problems = list(history.problems)
    sessions = history.sessions
    selected_ids = {r['session_info'].get('uuid') for r in selected}
    nights = [r for r in selected if not r['session_info'].get('confirms')]
    newest = (nights or selected)[-1]
    night = run_id(newest)

    runs, run_of = {}, []                    # a run: the sessions of one night (see run_id), oldest first
    confirming = set()                       # positions of the sessions that confirm the newest night
    for position, row in enumerate(sessions):
        if row.confirms:
            run_of.append(None)
            if row.confirms == night:
                confirming.add(position)
        else:
            run_of.append(runs.setdefault(row.run or row.uuid, len(runs)))
    n = len(runs)
    keys, meta = {}, {}                      # index series -> series key; series key -> PerfValue of its oldest value
    for series, (position, value, ref, lower, upper, result) in history.first.items():
        params = tuple(tuple(p) for p in json.loads(series.params))
        key = keys[series] = (series.system, series.partition, series.environ, series.check, params, series.variable)
        if key not in meta or position < meta[key][0]:
            meta[key] = (position, results.PerfValue(
                session=sessions[position].uuid, session_start=sessions[position].start, system=series.system,
                partition=series.partition, environ=series.environ, check=series.check, name=series.name,
                params=params, variable=series.variable, value=value, unit=series.unit, ref=ref, lower=lower,
                upper=upper, result=result))
    meta = {key: pv for key, (_, pv) in meta.items()}

    def aligned(values, first_run=0):
        """{series key: one value per run from ``first_run`` (the median of the run's sessions), None if none}."""
        per_run = collections.defaultdict(lambda: collections.defaultdict(list))
        for series, (positions, xs) in values.items():
            slot = per_run[keys[series]]
            for position, x in zip(positions, xs):
                if run_of[position] is not None and run_of[position] >= first_run:
                    slot[run_of[position]].append(x)
        found = {}
        for key, per in per_run.items():
            found[key] = row = [None] * (n - first_run)
            for j, xs in per.items():
                row[j - first_run] = xs[0] if len(xs) == 1 else statistics.median(xs)
        return found

    latest = {}                              # series key -> the PerfValue of the newest selected session
    cases_now = {}                           # (partition, environ, name) -> (case, {variable: [values]})
    confirmed_cases = {}                     # (partition, environ, name) -> the confirmation's test case
    for report in selected:
        info = report['session_info']
        for case in results.readable_cases(report, []):   # what is unreadable is in the history's problems
            if case['system'] != system:
                continue
            if info.get('confirms'):
                if info['confirms'] == night:
                    confirmed_cases[(case['partition'], case['environ'], case['name'])] = case
                continue
            slot = cases_now.setdefault((case['partition'], case['environ'], case['name']),
                                        [case, collections.defaultdict(list)])
            slot[0] = case
            for pv in results.case_perf_values(info, case):
                latest[pv.series_key] = pv
                slot[1][pv.variable].append(pv.value)

    # the history test reads the newest window + confirm runs: only their values are read
    first_run = max(0, n - method.window - method.confirm)
    since = next((p for p, j in enumerate(run_of) if j is not None and j >= first_run), len(run_of))
    recent = aligned(history.values(since=since), first_run)
    better = {key: parsers.METRIC_BETTER.get(_metric(key[-1]).split('_')[0]) for key in meta}
    result = stats.history_tests(
        {key: (recent.get(key) or [None] * (n - first_run), better[key],
               (meta[key].partition, meta[key].environ, meta[key].name)) for key in meta}, method)

    def whole(wanted):   # every run of a few series: the trends
        return aligned(history.values(series=[s for s, key in keys.items() if key in wanted]))

    current = {key: (case, {v: statistics.median(xs) for v, xs in values.items()})
               for key, (case, values) in cases_now.items()}
    verdicts = _verdicts(result, {k: c for k, (c, _) in cases_now.items()}, confirmed_cases,
                         _confirmation_values(history, keys, confirming), guard)
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
    model.update(_provenance(system, selected, current, problems, platforms_config))
    model['labels'] = _labels(system, model['platforms'])
    model['simulated'] = simulated_table.report_section(system, current)   # the simulated system only
    if model['simulated']:
        model['labels'].insert(0, model['simulated']['label'])
    model.update(_papers(current, model['topologies']))
    if model['simulated']:   # each paper number beside the model of its own testbed only
        model['headline'] = simulated_table.own_testbed(model['headline'])
    starts = {}
    for row, j in zip(sessions, run_of):
        if j is not None:
            starts.setdefault(j, _when(row.start))
    model['runs'] = len(runs)
    model['night'] = night
    model['confirmations'] = [_session_row(sessions[p], True) for p in sorted(confirming)]
    model.update(_regressions(whole, meta, latest, result, [starts[j] for j in range(len(runs))], method))
    model.update(_verdict_lists(verdicts, model['groups']))
    model['guard'] = dataclasses.asdict(guard)
    return model


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


def _verdicts(result, night_cases, confirmed_cases, confirmation_values, guard):
    """{test case (partition, environ, name): verdict.CaseVerdict} of the newest night."""
    verdicts = {}
    for group in sorted(set(result.groups) | set(night_cases)):
        again = confirmed_cases.get(group)
        shift = (stats.confirmation_test(result, group, confirmation_values, alpha=guard.confirmation_alpha)
                 if again is not None else None)
        if again is not None and shift is None:   # the re-run measured nothing of this case (it failed)
            shift = stats.Shift('untested', 'lower', 0, reason='the confirmation measured nothing')
        verdicts[group] = verdict.judge(result.groups.get(group), verdict.noise_problem(night_cases.get(group), guard),
                                        shift, verdict.noise_problem(again, guard))
    return verdicts


def _verdict_lists(verdicts, groups):
    """The verdict of every test case, and the test cases the night's alarm is about."""
    rows = [{'partition': g[0], 'environ': g[1], 'name': g[2], 'verdict': v.verdict, 'shift': v.night,
             'confirmation': v.confirmation, 'noise': v.noise, 'confirmation_noise': v.confirmation_noise,
             'meaning': verdict.VERDICTS[v.verdict], 'needs_confirmation': v.needs_confirmation}
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
            'suspects': [r for r in rows if r['needs_confirmation']]}


def _session_row(row, selected):
    return {'uuid': row.uuid, 'start': _when(row.start).strftime('%Y-%m-%d %H:%M'), 'run': row.run or '',
            'cases': row.cases, 'failures': row.failures, 'selected': selected}


# -- provenance ------------------------------------------------------------------------------------

def _provenance(system, selected, current, problems, platforms_config=None):
    platforms, topologies, softwares, versions, failures, flaky = {}, {}, {}, set(), [], []
    info = selected[-1]['session_info']
    for (partition, environ, name), (case, _) in sorted(current.items()):
        where = f'session {case.get("session_uuid") or info.get("uuid", "?")}: test case {name} @{partition}+{environ}'
        if case.get('platform'):
            platforms[(partition, environ)] = _guarded(problems, where, 'platform', _platform, case['platform'])
        if name.startswith('RdmaTopology') and case.get('topology'):
            topologies[partition] = _guarded(problems, where, 'topology', _topology, case['topology'])
            if topologies[partition]:     # the node it was read on: the cases may have run on others
                topology, text = topologies[partition]
                topologies[partition] = ({**topology, 'read_on': _nodes(case)}, text)
        if case.get('software'):
            softwares[(partition, environ)] = _guarded(problems, where, 'software', _software, case['software'])
        if case.get('ibrepro_version'):
            versions.add(case['ibrepro_version'])
        if case.get('result') == 'fail':
            failures.append({'name': name, 'partition': partition, 'environ': environ,
                             'phase': case.get('fail_phase'), 'reason': case.get('fail_reason')})
        elif case.get('flaky'):
            flaky.append({'name': name, 'partition': partition, 'environ': environ, 'earlier': case['flaky']})
    platforms = {k: v for k, v in platforms.items() if v is not None}
    topologies = {k: v for k, v in topologies.items() if v is not None}
    softwares = {k: v for k, v in softwares.items() if v is not None}
    versions |= {s['ibrepro'] for s, _ in softwares.values() if isinstance(s.get('ibrepro'), str)}

    return {
        'platforms': platforms,
        'topologies': {p: t for p, (t, _) in topologies.items()},
        'topology_text': {p: text for p, (_, text) in topologies.items()},
        'software': {k: lines for k, (_, lines) in softwares.items()},
        'ibrepro_versions': sorted(versions),
        'reframe_version': info.get('version'),
        'failures': failures,
        'flaky': flaky,
        'skipped': _skipped_families(system, current, platforms, platforms_config),
        'session_info': {k: info.get(k) for k in ('uuid', 'time_start', 'time_end', 'hostname', 'user',
                                                   'cmdline', 'version', 'workdir', 'num_cases',
                                                   'num_failures', 'num_skipped')},
        'config_files': [str(f) for f in info.get('config_files') or [] if f != '<builtin>'],
    }


def _guarded(problems, where, field, read, value):
    """``read(value)``, or None with a line in ``problems`` naming the session, test case and field: a stored
    field of the wrong shape loses that field, not the report."""
    try:
        return read(value)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as err:
        problems.append(f'{where}: {field} unreadable ({type(err).__name__}: {err}): left out')
        return None


def _platform(platform):
    """What the page shows of a stored platform description (SoftwareVersions), with the types it needs."""
    def strings(items):
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise TypeError(f'a list of strings expected, not {items!r:.60}')
        return items
    extras = platform.get('extras') or {}
    if not isinstance(extras, dict):
        raise TypeError(f'extras is not an object: {extras!r:.60}')
    environ_extras = platform.get('environ_extras') or {}
    if not isinstance(environ_extras, dict):
        raise TypeError(f'environ_extras is not an object: {environ_extras!r:.60}')
    return {'system_descr': str(platform.get('system_descr') or ''),
            'partition_descr': str(platform.get('partition_descr') or ''),
            'features': strings(platform.get('features') or []),
            'environ_features': strings(platform.get('environ_features') or []), 'extras': extras,
            'environ_extras': environ_extras}


def _nodes(case):
    """The nodes a test case's job ran on, as ReFrame recorded them ([] when it did not)."""
    nodes = case.get('job_nodelist')
    return [n for n in nodes if isinstance(n, str)] if isinstance(nodes, list) else []


def _elsewhere(topo, case):
    """Why the link limit of ``case`` may not be its nodes' own: the topology was read on other nodes, or ''."""
    read_on, ran_on = (topo or {}).get('read_on') or [], _nodes(case)
    if not read_on or not ran_on or set(ran_on) & set(read_on):
        return ''
    return (f'limit from the topology read on {", ".join(read_on)}; this case ran on {", ".join(ran_on)} '
            '(RdmaTopology ran as a job of its own)')


def _topology(topology):
    """``(topology, text)``, read as the report reads it (the text and the link limit), or an error."""
    text = ibtopology.format_topology(topology) if topology.get('devices') is not None else str(topology)
    compare.limit_now(topology, False)
    compare.limit_now(topology, True)
    return topology, text


def _software(probe):
    return probe, software.summary(probe)


def _skipped_families(system, current, platforms, platforms_config):
    """Test cases the sessions skipped (their ``skip_reason``), and the catalog's check families absent from them,
    with why this system cannot run them."""
    skipped = [{'check': f'{name} @{partition}+{environ}',
                'experiments': ', '.join(f'#{t[3:]}' for t in sorted(case.get('tags') or ()) if t.startswith('exp')),
                'reason': case.get('skip_reason') or 'skipped (no reason recorded)'}
               for (partition, environ, name), (case, _) in sorted(current.items()) if case.get('result') == 'skip']
    return skipped + _absent_families(system, current, platforms, platforms_config)


def recorded_configuration(system, platforms):
    """A ReFrame configuration (JSON data, nothing to import) of the system as its sessions recorded it:
    SoftwareVersions' platform descriptions, the partitions' and environments' features and extras.

    Never the configuration file a session names: importing it would run whatever a stored session points at.
    """
    partitions, environments = {}, {}
    for (partition, environ), platform in sorted(platforms.items()):
        part = partitions.setdefault(partition, {'name': partition, 'scheduler': 'local', 'launcher': 'local',
                                                 'environs': [], 'features': platform['features'],
                                                 'extras': platform['extras']})
        part['environs'].append(environ)
        # ReFrame selects environments per system, not per partition: one entry per name, features of all
        env = environments.setdefault(environ, {'name': environ, 'features': [], 'extras': {},
                                                'target_systems': [system]})
        env['features'] = list(dict.fromkeys(env['features'] + platform['environ_features']))
        env['extras'] = {**platform['environ_extras'], **env['extras']}
    if not partitions:
        return None
    return {'systems': [{'name': system, 'hostnames': ['.*'], 'partitions': list(partitions.values())}],
            'environments': list(environments.values())}


#: Run in a child: ReFrame's runtime (which the test variants need to say what they require) is one per process.
#: Prints the verdicts of the system (null without a configuration) and which cases reproduce each experiment.
_VERDICTS = ('import json, sys\nfrom ibrepro import catalog\n'
             'config, system, checks = sys.argv[1:4]\n'
             'verdicts = None\n'
             'if config:\n'
             '    verdicts = {name: whys for name, (_, whys) in catalog.system_view(config, system, checks)[0].items()}\n'
             'found = {e: [(item, sorted(names)) for item, names in items] for e, items in '
             'catalog.reproducing(checks).items()}\n'
             'print(json.dumps({"verdicts": verdicts, "experiments": found}))')


def not_run_verdicts(system, config=None, platforms=None):
    """({test variant: [(why it cannot run, how to enable)]} on ``system``, {experiment id: [(item, [its test
    cases])]}), from the configuration given explicitly (``-C``) or the platforms the sessions recorded; the
    verdicts are None when neither says; CatalogError if it cannot be read."""
    with tempfile.TemporaryDirectory(prefix='ibrepro-report-') as tmp:
        if not config:
            recorded = recorded_configuration(system, platforms or {})
            if recorded is not None:
                config = Path(tmp) / 'recorded.json'
                config.write_text(json.dumps(recorded))
        proc = subprocess.run([sys.executable, '-c', _VERDICTS, str(config or ''), system, str(paths.CHECKS_DIR)],
                              capture_output=True, text=True, timeout=600)
    if proc.returncode:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        raise catalog.CatalogError(lines[-1] if lines else f'exit {proc.returncode}')
    answer = json.loads(proc.stdout.splitlines()[-1])
    return answer['verdicts'], {int(e): items for e, items in answer['experiments'].items()}


def _absent_families(system, current, platforms, platforms_config):
    present = {name for _, _, name in current}
    try:
        verdicts, found = not_run_verdicts(system, platforms_config, platforms)
    except (catalog.CatalogError, subprocess.SubprocessError, OSError, ValueError, IndexError) as err:
        return [{'check': '-', 'experiments': '', 'reason': f'could not evaluate the catalog: {err}'}]

    rows = {}
    for exp in catalog.experiments().values():
        for check, names in found.get(exp['id'], []):
            if present & set(names):
                continue
            row = rows.setdefault(check, {'check': check, 'experiments': [], 'reason': ''})
            row['experiments'].append(exp['id'])
            if verdicts is None:
                row['reason'] = ('not run in the selected sessions (they recorded no platform description: run the '
                                 'SoftwareVersions check, or give the configuration with -C)')
                continue
            whys = list(dict.fromkeys(tuple(w) for name in names for w in verdicts.get(name, ())))
            row['reason'] = ('; '.join(f'{why} (to enable: {how})' if how else why for why, how in whys[:3])
                             or 'runnable here, but not run in the selected sessions')
    for row in rows.values():
        row['experiments'] = ', '.join(f'#{e}' for e in row['experiments'])
    return list(rows.values())


def _int(value, default):
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def _labels(system, platforms):
    labels = []
    extras = [p['extras'] for p in platforms.values()]
    if any(e.get('emulated') for e in extras):
        labels.append(LABEL_EMULATED)
    if system == 'local' and all(_int(e.get('nodes', 1), 1) == 1 for e in extras):
        labels.append(LABEL_LOCAL)
    # several nodes without RDMA (e.g. the CI cluster's namespace nodes): say what carries the messages
    labels += sorted({f'{e["interconnect"]}: not an RDMA network' for e in extras
                      if _int(e.get('nodes', 1), 1) > 1 and e.get('interconnect') and not e.get('rdma_devices')
                      and not e.get('emulated') and not e.get('simulated')})
    return labels


# -- the papers ------------------------------------------------------------------------------------

_UNITS = {'overhead': 'host overhead (us)', 'overlap': 'overlap potential (us)', 'lat': 'latency (us)',
          'bw': 'bandwidth (MB/s = 10^6 B/s)', 'time': 'time (s)'}


def _papers(current, topologies):
    try:
        entries, statements = compare.paper_entries()
    except Exception as err:   # noqa: BLE001  (broken reference data must not hide the rest of the report)
        return {'headline': [], 'figures': [], 'papers_problem': f'reference data unreadable: {err}'}

    headline, groups = [], {}
    for (partition, environ, name), (case, variables) in sorted(current.items()):
        figure_tags = sorted(t for t in case.get('tags') or () if re.fullmatch(r's\d{3}-(fig|tab)\d+', t))
        if not figure_tags:
            continue
        topo = topologies.get(partition)
        relative = {e['id']: e for e in statements if compare.related(e, case)}
        for prefix in _UNITS:   # a figure without a stated value shows the first: a benchmark's own metric
            if not (compare.curve(variables, prefix) or prefix in variables):
                continue
            group = groups.setdefault((tuple(figure_tags), prefix), {
                'names': [], 'metric': prefix, 'figures': figure_tags, 'curves': [], 'entries': {},
                'other': {}, 'relative': {}, 'partition': partition, 'intra_node': True, 'devices': set()})
            if name not in group['names']:
                group['names'].append(name)
            group['relative'].update(relative)
            group['intra_node'] &= compare.placement(case) == 'intra-node'
            # the rails its cases used (None once one did not record them: then the node's fabric bounds it)
            devices = compare.case_devices(case)
            group['devices'] = None if devices is None or group['devices'] is None else group['devices'] | devices
            group['curves'].append((name, f'{partition}+{environ}', compare.curve(variables, prefix)))
            for entry in entries:
                if compare.METRIC_VARIABLE[entry['metric']] != prefix:
                    continue
                how = compare.match(entry, case)
                if how is None:
                    continue
                if not how['comparable']:
                    group['other'][entry['id']] = (entry, how['notes'])
                    continue
                group['entries'][entry['id']] = entry
                headline.append(_headline_row(entry, case, environ, partition, variables, topo, how['notes']))

    figures = [_figure(group, topologies) for group in _figure_groups(groups)]
    headline.sort(key=lambda r: (r['seed'], r['figure_order'], r['id'], r['partition'], r['environ']))
    return {'headline': headline, 'figures': figures, 'papers_problem': None}


def _figure_groups(groups):
    """The metrics the papers' figures show: those with a stated value; else the first metric measured."""
    chosen, by_figures = [], {}
    for (figures, prefix), group in groups.items():
        by_figures.setdefault(figures, []).append(group)
    for metric_groups in by_figures.values():
        stated = [g for g in metric_groups if g['entries'] or g['other']]
        chosen += stated or metric_groups[:1]
    return chosen


def _headline_row(entry, case, environ, partition, variables, topo, notes):
    value, how = compare.measured(entry, variables)
    bidir = compare.direction(case['name'], entry['metric']) == 'bi'
    then = compare.limit_then(entry)
    now, now_note = (compare.limit_now(topo, bidir, compare.placement(case) == 'intra-node', compare.case_devices(case))
                     if compare.METRIC_VARIABLE[entry['metric']] == 'bw' else (None, 'not a bandwidth'))
    paper_si = entry['value_si']
    tags = compare.figures_of(entry['where'])
    return {
        'id': entry['id'], 'seed': entry['seed'], 'where': entry['where'], 'figure_order': tags[0][0],
        'configuration': entry['configuration'], 'message_size': entry['message_size'],
        'metric': entry['metric'], 'qualifier': entry['qualifier'] or '',
        'paper': entry['value'], 'paper_unit': entry['unit'], 'mb_definition': entry['mb_definition'],
        'paper_si': paper_si, 'unit_si': entry['unit_si'], 'quote': entry['quote'],
        'check': case['name'], 'environ': environ, 'partition': partition,
        'measured': value, 'how': how, 'ratio': value / paper_si if value is not None and paper_si else None,
        'limits_config': entry.get('limits_config'), 'limit_then': then,
        'fraction_then': paper_si / then if then else None,
        'limit_now': now, 'fraction_now': value / now if now and value is not None else None,
        'limit_now_note': now_note, 'notes': notes,
        'limit_now_elsewhere': _elsewhere(topo, case) if now else '',
    }


def _figure(group, topologies):
    prefix, names = group['metric'], group['names']
    papers = []
    smallest = min((s for _, _, pts in group['curves'] for s in pts if s > 0), default=None)
    for entry in group['entries'].values():
        size = entry['message_size']
        at = int(size) if str(size).isdigit() else smallest if size == 'small' else None
        where = ', '.join(label for _, label in compare.figures_of(entry['where']))
        config = entry['configuration'] if len(entry['configuration']) <= 40 else entry['configuration'][:39] + '~'
        papers.append((entry['seed'], f'{where} {config}: {entry["qualifier"] or ""} {entry["value"]:g} '
                                      f'{entry["unit"]}'.replace('  ', ' '), at, entry['value_si']))
    first = next(iter(group['entries'].values()), None)
    limit_now, note = None, None
    if prefix == 'bw':
        bidir = compare.direction(names[0], first['metric'] if first else None) == 'bi'
        limit_now, note = compare.limit_now(topologies.get(group['partition']), bidir, group['intra_node'],
                                            group['devices'])
    title_figs = ', '.join(f'{t[1:4]} {label}' for t in group['figures']
                           for label in [t.split('-', 1)[1].replace('fig', 'Fig. ').replace('tab', 'Table ')])
    title = names[0] if len(names) == 1 else f'{", ".join(sorted({n.split()[0] for n in names}))} ({len(names)} cases)'
    curves = [((f'{name.split(" ", 1)[1] if " " in name else name} ' if len(names) > 1 else '') + where, points)
              for name, where, points in group['curves']]
    image = plots.paper_figure(f'{title}: {_UNITS[prefix].split(" (")[0]}\n(papers: {title_figs})', _UNITS[prefix],
                               curves, papers, limit_now, note)
    relative = [{'id': e['id'], 'where': e['where'], 'text': f"{e['qualifier'] or ''} {e['value']} {e['unit']} "
                 f"{e['metric']}".strip(), 'configuration': e['configuration']}
                for e in group['relative'].values()]
    return {'name': title, 'cases': names, 'metric': prefix, 'figures': title_figs, 'image': image,
            'relative': relative, 'alt': f'{title} {_UNITS[prefix]} versus message size, with the papers\' values',
            'entries': len(group['entries']), 'limit_note': note, 'limit_now': limit_now,
            'other': [{'id': e['id'], 'where': e['where'], 'value': e['value'], 'unit': e['unit'],
                       'configuration': e['configuration'], 'notes': notes}
                      for e, notes in group['other'].values()]}


# -- regressions -----------------------------------------------------------------------------------

def _regressions(whole, meta, latest, result, dates, method):
    """The variables' and test cases' verdicts, and the trends (``whole(keys)``: every run of those series)."""
    rows = []
    for key, shift in result.variables.items():
        pv = latest.get(key, meta[key])
        rows.append({
            'key': key, 'partition': pv.partition, 'environ': pv.environ, 'name': pv.name, 'variable': pv.variable,
            'unit': pv.unit, 'value': pv.value if key in latest else None,
            'reframe': ('not run' if key not in latest else 'no reference' if pv.ref is None else pv.result),
            'ref': pv.ref, 'lower': pv.lower, 'upper': pv.upper, 'shift': shift,
            'order': (pv.partition, pv.environ, pv.name, _metric(pv.variable), _size(pv.variable)),
        })
    rows.sort(key=lambda r: r['order'])
    flagged = [r for r in rows if r['shift'].verdict in ('regression', 'change', 'improvement')]
    flagged.sort(key=lambda r: (r['shift'].verdict == 'improvement', -abs(r['shift'].change or 0)))
    groups = [{'partition': g[0], 'environ': g[1], 'name': g[2], 'shift': s}
              for g, s in sorted(result.groups.items())]

    trends = []
    chosen = ([r for r in flagged if r['shift'].verdict != 'improvement'] or _headline_variables(rows))[:MAX_TRENDS]
    aligned = whole({row['key'] for row in chosen})
    for row in chosen:
        shift = row['shift']
        band = ((shift.baseline * math.exp(-2 * shift.noise), shift.baseline * math.exp(2 * shift.noise))
                if shift.baseline and shift.noise else None)
        ref = None
        if row['ref'] is not None:
            ref = (row['ref'], row['ref'] * (1 + row['lower']) if row['lower'] is not None else None,
                   row['ref'] * (1 + row['upper']) if row['upper'] is not None else None)
        title = f'{row["name"]} @{row["partition"]}+{row["environ"]}: {row["variable"]}'
        trends.append({'title': title, 'verdict': shift.verdict,
                       'image': plots.trend(title, row['unit'], dates, aligned[row['key']], method.confirm,
                                            band, ref)})
    reframe_fail = [r for r in rows if r['reframe'] == 'fail']
    alarms = [r for r in flagged if r['shift'].verdict == 'change']   # see stats.HistoryResult.alarms
    return {
        'variables': rows, 'flagged': flagged, 'alarms': alarms, 'groups': groups,
        'group_alarms': [g for g in groups if g['shift'].alarm], 'trends': trends,
        'reframe_fail': reframe_fail, 'reframe_judged': sum(1 for r in rows if r['ref'] is not None
                                                             and r['value'] is not None),
        'tested': sum(1 for r in rows if r['shift'].verdict != 'untested'),
        'untested_reasons': collections.Counter(r['shift'].reason for r in rows if r['shift'].verdict == 'untested'),
    }


def _headline_variables(rows):
    """Without flags: per test case the latency at its smallest non-zero size and the bandwidth at its largest."""
    chosen = {}
    for row in rows:
        metric, size = _metric(row['variable']), _size(row['variable'])
        if row['value'] is None or (metric in ('lat', 'bw') and size <= 0):
            continue
        group = (row['partition'], row['environ'], row['name'], metric)
        if metric == 'lat' and (group not in chosen or size < _size(chosen[group]['variable'])):
            chosen[group] = row
        elif metric == 'bw' and (group not in chosen or size > _size(chosen[group]['variable'])):
            chosen[group] = row
    return list(chosen.values())


# -- rendering -------------------------------------------------------------------------------------

def _num(value, digits=4):
    if value is None:
        return '-'
    if isinstance(value, str):
        return value
    if value == 0:
        return '0'
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f'{value:,.{decimals}f}'


def _pct(value, signed=True):
    if value is None:
        return '-'
    return f'{value * 100:+.1f} %' if signed else f'{value * 100:.1f} %'


_MD_SPECIAL = re.compile(r'([\\`*_\[\]<>|#!])')
#: Characters that start a mention or a reference where CI posts the summary (GitHub, GitLab: @user, #1, !1,
#: ~label, %milestone, $snippet, &epic): a zero-width space after each keeps the text and breaks the link.
_MD_REFERENCE = re.compile(r'([@#!~%$^]|&amp;)')
_ZWSP = '\u200b'
#: Bare links, defanged as security advisories write them (``https[:]//``, ``www[.]``, ``me[@]host``): cmark-gfm still
#: links a scheme or ``www.`` with a zero-width space inside (which browsers then drop), and GitLab links on the text.
_MD_LINKS = [(re.compile(r'://'), r'\\[:\\]//'), (re.compile(r'(?i)\b(www)\.'), r'\1\\[.\\]'),
             (re.compile(rf'(?<=\w)@{_ZWSP}(?=\w)'), r'\\[@\\]')]


def _md(value):
    """A string safe inside a Markdown table cell: no markup, no HTML, no line breaks, no mention, reference or
    bare link (``https://``, ``www.`` and e-mail addresses are defanged: not autolinked)."""
    text = ' '.join(str(value).split()).replace('&', '&amp;')
    text = _MD_SPECIAL.sub(r'\\\1', text)
    text = _MD_REFERENCE.sub(rf'\1{_ZWSP}', text)
    for pattern, replacement in _MD_LINKS:
        text = pattern.sub(replacement, text)
    return text


def _code(value):
    """A string as a Markdown code span: one line (a line break would end it and let HTML through), no backticks."""
    return '`' + (' '.join(str(value).split()).replace('`', '') or ' ') + '`'


def _environment(autoescape):
    env = jinja2.Environment(loader=jinja2.PackageLoader('ibrepro', 'templates'), autoescape=autoescape,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=_num, pct=_pct, md=_md, code=_code)
    return env


def render(model, html_name='index.html'):
    """(HTML, Markdown) of a model."""
    html = _environment(True).get_template('report.html.j2').render(m=model)
    md = _environment(False).get_template('summary.md.j2').render(m=model, html_name=html_name)
    return html, md


def write(model, output_dir):
    stamp = str(model['newest'].get('time_start') or 'unknown').split('+')[0]
    target = Path(output_dir) / _safe(model['system']) / _safe(stamp)
    target.mkdir(parents=True, exist_ok=True)
    html, md = render(model)
    (target / 'index.html').write_text(html, encoding='utf-8')
    (target / 'summary.md').write_text(md, encoding='utf-8')
    return target


def _safe(name):
    """A path component from a run's string: no separators, no dot-dot."""
    return re.sub(r'[^A-Za-z0-9._+-]', '_', name).lstrip('.') or '_'


def nightly_lines(model):
    """The night's verdict: the alarms (each test case with the sizes that moved most), then the test cases a
    confirmation cleared and those too noisy to judge."""
    lines = []
    for g in model['group_alarms']:
        s, again = g['shift'], g.get('confirmation')
        what = 'REGRESSION' if g.get('verdict', 'regression') == 'regression' else 'REGRESSION (unconfirmed)'
        lines.append(f"{what} test case {g['name']} @{g['partition']}+{g['environ']}: its variables moved "
                     f"{_pct(s.change)} (median over sizes; 95 % interval {_pct(s.low)} .. {_pct(s.high)}), "
                     f"q = {s.q:.2g}, baseline n = {s.n}"
                     + (f"; confirmed by a re-run: {_pct(again.change)}, p = {again.p:.2g}" if again else ''))
        # the sizes that moved most (each with its own q: with a short history single sizes rarely pass BH)
        moved = [r for r in model['variables'] if r['shift'].worse is not None and r['shift'].q is not None
                 and (r['partition'], r['environ'], r['name']) == (g['partition'], g['environ'], g['name'])]
        for r in sorted(moved, key=lambda r: -r['shift'].worse)[:8]:
            lines.append(f"    {_variable_line(r)}")
    for r in model['alarms']:
        lines.append(f"CHANGE {r['name']} @{r['partition']}+{r['environ']} {_variable_line(r)}")
    for g in model.get('cleared', []):
        s, again = g['shift'], g['confirmation']
        lines.append(f"cleared: test case {g['name']} @{g['partition']}+{g['environ']} moved {_pct(s.change)} "
                     f"(q = {s.q:.2g}); its confirmation re-run moved {_pct(again.change)}"
                     + (f" (p = {again.p:.2g})" if again.p is not None else '') + ': not an alarm')
    for g in model.get('inconclusive', []):
        lines.append(f"INCONCLUSIVE test case {g['name']} @{g['partition']}+{g['environ']}: "
                     f"{g['confirmation_noise'] or g['noise']}")
    return lines


def _variable_line(r):
    s = r['shift']
    return (f"{r['variable']}: {_num(s.baseline)} -> {_num(s.current)} {r['unit']} ({_pct(s.change)}; 95 % interval "
            f"{_pct(s.low)} .. {_pct(s.high)}), q = {s.q:.2g}, baseline n = {s.n}")


def references_problems(system):
    """``(path, problems)`` of the references file ReFrame judges ``system`` against: what makes it unreadable
    (YAML syntax, a refused anchor, file and line) or makes ReFrame skip checks (schema, nesting). No file: none."""
    prefix = os.environ.get('RFM_REFERENCE_PREFIX')
    if prefix:
        path = Path(prefix) / 'references.yaml'
    elif baseline.system_name_problem(system):
        return None, []   # a stored name no ReFrame system can have: it has no references file
    else:
        path = baseline.references_path(system)
    if not path.is_file():
        return path, []
    try:
        doc = references.read_yaml(path)
    except references.DataError as err:
        return path, [str(err.problem)]
    return path, [str(problem) for problem in references.check_reference_document(doc, name=str(path))]


# -- command line ------------------------------------------------------------------------------------

_METHOD_HELP = {
    'window': 'baseline runs before the tested ones',
    'confirm': 'newest runs tested together (their median)',
    'alpha': 'false discovery rate (Benjamini-Hochberg)',
    'min_effect': 'smallest relative change flagged',
    'min_history': 'fewer baseline runs: not tested',
    'min_cv': 'floor of the noise, relative',
}


def _add_options(parser, cls, helps, prefix=''):
    """One option per field of the dataclass ``cls``, typed and defaulted as its defaults."""
    defaults = cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        parser.add_argument(f'--{field.name.replace("_", "-")}', type=type(default), default=default, metavar='X',
                            help=f'{prefix}{helps[field.name]} (default {default})')


def _options_of(args, cls):
    """The ``cls`` of parsed _add_options options (ValueError when out of range)."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def add_method_arguments(parser):
    """One option per parameter of the history test (stats.Method), with its default."""
    _add_options(parser, stats.Method, _METHOD_HELP, 'history test: ')


def method_of(args):
    """The stats.Method of parsed add_method_arguments options (ValueError when out of range)."""
    return _options_of(args, stats.Method)


def add_cli(subparsers):
    p = subparsers.add_parser('report', help='HTML and Markdown reports: the papers, the history, the link limit',
                              description=__doc__ + '\n\nThe history test:\n' + stats.__doc__.split('=\n', 1)[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    which = p.add_mutually_exclusive_group()
    which.add_argument('--sessions', nargs='+', metavar='UUID', help='these stored sessions (UUID prefixes)')
    which.add_argument('--last', type=int, metavar='N',
                       help='the last N stored runs (default 1; a run is a session, or the sessions of one nightly run)')
    which.add_argument('--since', metavar='WHEN', help='stored sessions since a date (2026-11-20) or 7d / 12h ago')
    which.add_argument('--report', nargs='+', metavar='FILE', help='JSON run reports instead of the database')
    which.add_argument('--night', metavar='ID', help='the sessions of nightly run ID (their nightly extra) and the '
                       'confirmation of its suspects; its history is what was stored before it')
    p.add_argument('--db', metavar='FILE', help='results database (default: ibrepro where)')
    p.add_argument('--system', help='only this system')
    p.add_argument('-C', '--config', metavar='FILE',
                   help='ReFrame configuration of the system, to say why check families did not run (default: the '
                        'platforms the sessions recorded; the configuration a session names is never imported)')
    p.add_argument('--no-index', action='store_true',
                   help='decode every stored session instead of reading the values index (slow; the same report)')
    p.add_argument('--output-dir', default=str(paths.REPO_ROOT / 'reports'), metavar='DIR',
                   help='write DIR/<system>/<timestamp>/ (default: reports/ of the checkout)')
    p.add_argument('--history', type=int, default=DEFAULT_HISTORY, metavar='N',
                   help=f'runs in trends and available as baseline (default {DEFAULT_HISTORY})')
    add_method_arguments(p)
    add_guard_arguments(p)
    p.add_argument('--nightly', action='store_true',
                   help="print the night's verdict and exit with its status: 0 clean, 1 regression, 2 could not judge, "
                        '3 inconclusive (see above)')
    p.add_argument('--suspects', metavar='FILE',
                   help='with --nightly: write the test cases to re-run as JSON to FILE (what ibrepro nightly confirms)')
    p.set_defaults(func=_cli)


_GUARD_HELP = {
    'max_noise': 'a night whose repetitions disagree by more (sd of the test-case index) is inconclusive',
    'max_pressure': 'a night whose tasks waited for a CPU longer (share of the run) is inconclusive',
    'confirmation_alpha': 'p-value at which a re-run confirms a suspect',
}


def add_guard_arguments(parser):
    """One option per limit of the noise guard and the confirmation (verdict.Guard), with its default."""
    _add_options(parser, verdict.Guard, _GUARD_HELP)


def guard_of(args):
    """The verdict.Guard of parsed add_guard_arguments options (ValueError when out of range)."""
    return _options_of(args, verdict.Guard)


def _cli(args):
    try:
        return _cli_checked(args)
    except Exception as err:   # a crash is "could not judge", never a regression (exit 1) nor a pass
        import traceback
        traceback.print_exc()
        print(f'ibrepro report: crashed ({type(err).__name__}: {err}): could not judge', file=sys.stderr)
        return verdict.EXIT_UNJUDGED


def _cli_checked(args):
    try:
        method = method_of(args)
        guard_of(args)
        history = max(args.history, method.window + method.confirm)
        inputs = select(db=args.db, sessions=args.sessions, last=args.last,
                        since=parse_since(args.since) if args.since else None, report_files=args.report,
                        history=history, use_index=not args.no_index, night=args.night)
    except (ReportError, results.ResultsError, ValueError) as err:
        print(f'ibrepro report: {err}', file=sys.stderr)
        return 2

    try:
        return _report(args, method, inputs)
    finally:
        inputs.close()


def _report(args, method, inputs):
    gc.freeze()   # the loaded reports live to the end: keep the garbage collector from scanning them again
    for problem in inputs.problems:
        print(f'ibrepro report: skipped: {problem}', file=sys.stderr)
    systems = [s for s in inputs.history if args.system in (None, s)]
    if not systems:
        print('ibrepro report: no session with test cases to report on'
              + (f' for system {args.system}' if args.system else ''), file=sys.stderr)
        return 2

    broken, statuses, suspects = [], [], []
    guard = guard_of(args)
    for system in systems:
        selected = [r for r in inputs.selected if system in _systems(r)]
        model = build(system, selected, inputs.history[system], method, args.config, guard)
        model['problems'] = inputs.problems + model['problems']
        target = write(model, args.output_dir)
        print(f'{target / "index.html"}\n{target / "summary.md"}')
        for problem in model['problems'][len(inputs.problems):]:
            print(f'ibrepro report: {problem}', file=sys.stderr)
        refs_file, refs_problems = references_problems(system)
        for problem in refs_problems:
            print(f'ibrepro report: references of {system} unreadable: {problem}', file=sys.stderr)
        if refs_problems:
            broken.append(refs_file)
        if args.nightly:
            statuses.append(_nightly_verdict(system, model, method, inputs, guard))
            suspects += [{'system': system, 'partition': g['partition'], 'environ': g['environ'], 'name': g['name'],
                          'hashcode': _hashcode(selected, g), 'night': model['night'], 'verdict': g['verdict']}
                         for g in model['suspects']]
    if args.nightly and args.suspects:
        Path(args.suspects).write_text(json.dumps({'suspects': suspects}, indent=1) + '\n')
    if args.nightly and broken:   # ReFrame judged nothing against them: the night cannot pass
        print(f'ibrepro report: the references ReFrame judges against cannot be read ({", ".join(map(str, broken))})'
              ': fix them (ibrepro refs validate) before the nightly test can pass', file=sys.stderr)
        return verdict.EXIT_UNJUDGED
    return verdict.combine(statuses) if args.nightly else 0


def _hashcode(selected, group):
    """The ReFrame hash of a test case of the night (what ``reframe -n /HASH`` selects), or None."""
    for report in selected:
        if report['session_info'].get('confirms'):
            continue
        for case in results.readable_cases(report, []):
            if (case['partition'], case['environ'], case['name']) == (group['partition'], group['environ'],
                                                                     group['name']):
                code = case.get('hashcode')
                return code if isinstance(code, str) and re.fullmatch(r'[0-9a-f]{8}', code) else None
    return None


def _nightly_verdict(system, model, method, inputs, guard):
    """Print the night's verdict of one system; its exit status."""
    lines = nightly_lines(model)
    run = _inconclusive_run(model, inputs, system, guard) if model['inconclusive'] else 0
    status = verdict.exit_status(model['verdict_objects'], run)
    if model['flaky']:     # passed only on a retry: not a clean night (the retry must not hide it)
        status = verdict.combine([status, verdict.EXIT_INCONCLUSIVE])
    kinds = collections.Counter(v['verdict'] for v in model['case_verdicts'])
    if model['group_alarms'] or model['alarms']:
        print(f'{system}: {len(model["group_alarms"])} test case(s) regressed, {len(model["alarms"])} count(s) changed')
    elif not model['tested']:
        print(f'{system}: nothing tested: the history has fewer than {method.min_history} earlier '
              f'runs ({model["runs"]} in all); no regression can be detected yet')
    else:
        print(f'{system}: no regression in {len(model["groups"])} test case(s) ({model["tested"]} tested '
              f'variables, {len(model["variables"])} in all)')
    print(f'  night {model["night"]}: ' + ', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))
          + (f'; confirmation session(s) {", ".join(c["uuid"] for c in model["confirmations"])}'
             if model['confirmations'] else ''))
    alarmed = {(g['partition'], g['environ'], g['name'])
               for g in model['group_alarms'] + model['cleared'] + model['inconclusive']}
    moved = [r for r in model['flagged'] if r['shift'].verdict == 'regression'
             and (r['partition'], r['environ'], r['name']) not in alarmed]
    if moved:
        print(f'  not an alarm: {len(moved)} single variable(s) moved while their test case as a whole did '
              f'not (e.g. {moved[0]["name"]} {moved[0]["variable"]} {_pct(moved[0]["shift"].change)})')
    for line in lines:
        print(f'  {line}')
    for f in model['flaky']:
        print(f"  FLAKY test case {f['name']} @{f['partition']}+{f['environ']}: passed only on a retry, after "
              + '; '.join(f['earlier']))
    if status == verdict.EXIT_UNJUDGED:
        print(f'{system}: {verdict.INCONCLUSIVE_LIMIT} inconclusive nights in a row: the nightly test has not judged '
              'this system since; find what disturbs the runs (another job, a noisy node)')
    elif status == verdict.EXIT_INCONCLUSIVE and model['inconclusive']:
        print(f'{system}: inconclusive night ({run + 1} in a row; {verdict.INCONCLUSIVE_LIMIT} fail)')
    elif status == verdict.EXIT_INCONCLUSIVE:
        print(f'{system}: not a clean night: {len(model["flaky"])} test case(s) passed only on a retry')
    return status


def _inconclusive_run(model, inputs, system, guard):
    """How many nights in a row before this one were inconclusive (read from their stored test cases: a night is
    inconclusive when a test case of it was too noisy and no quiet confirmation judged it)."""
    if inputs.index is None:
        return 0
    history = inputs.history[system]
    nights = list(dict.fromkeys(row.night for row in history.sessions))
    earlier = nights[:nights.index(model['night'])] if model['night'] in nights else []
    count = 0
    for night in reversed(earlier[-(verdict.INCONCLUSIVE_LIMIT - 1):]):
        uuids = [row.uuid for row in history.sessions if row.night == night]
        main, again = {}, {}
        for report in results.sessions_by_uuid(uuids, inputs.index.db, problems=[]):
            for case in results.readable_cases(report, []):
                if case['system'] == system:
                    key = (case['partition'], case['environ'], case['name'])
                    (again if report['session_info'].get('confirms') else main)[key] = case
        if not verdict.night_inconclusive(main, again, guard):
            break
        count += 1
    return count


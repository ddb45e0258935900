"""Which sessions a report is about, and the history of each of their systems (``--sessions``, ``--last``,
``--since``, ``--night``, ``--report``)."""

import dataclasses
import datetime
import re
import time
from pathlib import Path

from .. import paths, results

from ..fleet import history as fleet_history


#: Runs shown in trends (and available as baseline) unless --history says otherwise.
DEFAULT_HISTORY = 90

class ReportError(RuntimeError):
    pass

@dataclasses.dataclass
class Inputs:
    selected: list                                       # run reports the report is about, oldest first
    history: dict = dataclasses.field(default_factory=dict)   # system -> results.History, oldest first
    problems: list = dataclasses.field(default_factory=list)  # what could not be read, and why
    index: object = None                                 # the results.ValueIndex the histories read (open)
    fleet_earlier: dict = dataclasses.field(default_factory=dict)  # system -> run reports before its fleet nights

    def close(self):
        if self.index:
            self.index.close()


def _start(report):
    return float(report['session_info'].get('time_start_unix') or 0)


def systems_of(report):
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
        for system in sorted({s for r in inputs.selected for s in systems_of(r)}):
            mine = [r for r in inputs.selected if system in systems_of(r)]
            newest = max(_start(r) for r in mine)
            have = {r['session_info'].get('uuid') for r in mine}
            earlier = [row for row in rows if system in row.systems and row.start <= newest and row.uuid not in have]
            earlier = _last_runs(earlier, history)
            if not use_index:
                earlier = results.sessions_by_uuid([row.uuid for row in earlier], db, problems=inputs.problems)
            entries = sorted(earlier + mine, key=_order)
            inputs.history[system] = results.History.of(entries, inputs.index, system)
            inputs.fleet_earlier[system] = _fleet_earlier(rows, system, mine, db, inputs.problems)
    except BaseException:
        inputs.close()
        raise
    return inputs


def _fleet_earlier(rows, system, mine, db, problems):
    """The pair-round nights of ``system`` stored before the oldest selected one (the last
    :data:`~ibrepro.fleet.history.STORED_NIGHTS`, found by ReFrame's test case index): its nights' history and each
    component's last verification; [] when no selected session has one."""
    fleet = [_start(r) for r in mine if fleet_history.has_night(r, system)]
    if not fleet or not rows:
        return []
    return fleet_history.night_reports(system, before=min(fleet), last=fleet_history.STORED_NIGHTS, db=db,
                                      problems=problems)


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

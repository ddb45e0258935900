"""Stored sessions: ReFrame's results database and JSON run reports, read-only.

ReFrame 4.10 stores every session's whole run report as JSON in the ``sessions`` table of its SQLite results
database (the same document ``--report-file`` writes). We read those documents; we never parse perflogs and
never write to the database (it is opened read-only, so a running session is not disturbed).
"""

import dataclasses
import gc
import json
import sqlite3
from pathlib import Path

from . import paths


class ResultsError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class PerfValue:
    """One performance variable of one test case of one session."""

    session: str            # session UUID
    session_start: float    # unix time the session started
    system: str
    partition: str
    environ: str
    check: str              # the test class name (the key of the references file)
    name: str               # the display name, e.g. "IMBPointToPoint %benchmark=PingPong"
    params: tuple           # ((name, value), ...) the references are indexed by
    variable: str           # e.g. lat_1024
    value: float
    unit: str
    ref: float | None
    lower: float | None
    upper: float | None
    result: str             # ReFrame's verdict for this variable: pass, fail, xfail, xpass

    @property
    def series_key(self):
        """What identifies the same measurement across sessions."""
        return (self.system, self.partition, self.environ, self.check, self.params, self.variable)


def _connect(db):
    db = Path(db or paths.results_db())
    if not db.is_file():
        raise ResultsError(f'no results database at {db} (run `make run` first, or set RFM_SQLITE_DB_FILE)')

    try:
        return sqlite3.connect(f'file:{db}?mode=ro', uri=True, timeout=30)
    except sqlite3.Error as err:
        raise ResultsError(f'{db}: {err}') from None


def stored_sessions(db=None, *, uuids=None, last=None):
    """Run reports of the stored sessions, oldest first: ``uuids`` (prefixes allowed) or the ``last`` N."""
    with _connect(db) as conn:
        try:
            rows = conn.execute('SELECT uuid, json_blob FROM sessions ORDER BY session_start_unix').fetchall()
        except sqlite3.Error as err:
            raise ResultsError(f'{db or paths.results_db()}: {err}') from None

    if uuids:
        wanted = [u.lower() for u in uuids]
        rows = [r for r in rows if any(r[0].startswith(w) for w in wanted)]
        found = {w for w in wanted for r in rows if r[0].startswith(w)}
        missing = [w for w in wanted if w not in found]
        if missing:
            raise ResultsError(f'no stored session with UUID {", ".join(missing)}')
    if last:
        rows = rows[-last:]

    reports = []
    for uuid, blob in rows:
        try:
            reports.append(json.loads(blob))
        except (TypeError, json.JSONDecodeError) as err:
            raise ResultsError(f'session {uuid}: stored report is not valid JSON ({err})') from None

    return reports


def session_index(db=None):
    """``(uuid, start unix time, systems, run)`` of every stored session, oldest first, without decoding reports.

    ``run`` is the session's ``nightly`` extra (``--session-extras nightly=<id>``: the sessions of one nightly run,
    e.g. one per test case in a CI child pipeline), or None.
    """
    with _connect(db) as conn:
        try:
            starts = conn.execute("SELECT uuid, session_start_unix, json_extract(json_blob, '$.session_info.nightly') "
                                  'FROM sessions ORDER BY session_start_unix').fetchall()
            systems = {}
            for uuid, system in conn.execute('SELECT DISTINCT session_uuid, system FROM testcases'):
                systems.setdefault(uuid, set()).add(system)
        except sqlite3.Error as err:
            raise ResultsError(f'{db or paths.results_db()}: {err}') from None

    return [(uuid, start, sorted(systems.get(uuid, ())), run) for uuid, start, run in starts]


def sessions_by_uuid(uuids, db=None):
    """The run reports of the sessions with these exact UUIDs, in the order given (missing ones left out)."""
    found = {}
    # Decoding hundreds of reports allocates millions of containers, and the cyclic garbage collector would scan
    # them again and again (3x the decoding time for a year of sessions): JSON has no cycles, so pause it.
    collecting = gc.isenabled()
    gc.disable()
    try:
        _load_blobs(uuids, db, found)
    finally:
        if collecting:
            gc.enable()
    return [found[u] for u in uuids if u in found]


def _load_blobs(uuids, db, found):
    with _connect(db) as conn:
        uuids = list(uuids)
        for i in range(0, len(uuids), 500):   # SQLite limits the number of parameters of one statement
            chunk = uuids[i:i + 500]
            try:
                rows = conn.execute(f'SELECT uuid, json_blob FROM sessions WHERE uuid IN '
                                    f'({",".join("?" * len(chunk))})', chunk).fetchall()
            except sqlite3.Error as err:
                raise ResultsError(f'{db or paths.results_db()}: {err}') from None
            for uuid, blob in rows:
                try:
                    found[uuid] = json.loads(blob)
                except (TypeError, json.JSONDecodeError) as err:
                    raise ResultsError(f'session {uuid}: stored report is not valid JSON ({err})') from None


def load_report(path):
    """A JSON run report written by ``reframe --report-file``; ResultsError if broken."""
    try:
        with open(path) as fp:
            report = json.load(fp)
    except OSError as err:
        raise ResultsError(f'{path}: cannot read: {err.strerror}') from None
    except json.JSONDecodeError as err:
        raise ResultsError(f'{path}: not a JSON run report ({err})') from None

    if not isinstance(report, dict) or 'session_info' not in report or 'runs' not in report:
        raise ResultsError(f'{path}: not a ReFrame run report (no session_info/runs)')

    return report


def testcases(report):
    """The final attempt of every test case of a report (retries replace earlier attempts)."""
    final = {}
    for run in report.get('runs', []):
        for case in run.get('testcases', []):
            key = (case.get('name'), case.get('system'), case.get('partition'), case.get('environ'))
            final[key] = case

    return list(final.values())


def perf_values(report):
    """Every performance value recorded in a run report."""
    info = report['session_info']
    for case in testcases(report):
        yield from case_perf_values(info, case)


def case_key(case):
    """``(system, partition, environ, check, params)``: a test case's part of :attr:`PerfValue.series_key`."""
    params = tuple((p, case.get(p)) for p in case.get('reference_index') or [])
    return case['system'], case['partition'], case['environ'], case['name'].split()[0], params


def case_perf_values(info, case):
    """The performance values of one test case of a session (``info`` is the report's session_info)."""
    system, partition, environ, check, params = case_key(case)
    for key, entry in (case.get('perfvalues') or {}).items():
        value, ref, lower, upper, unit, result = (list(entry) + [None] * 6)[:6]
        if value is None:
            continue

        yield PerfValue(
            session=info.get('uuid', ''), session_start=float(info.get('time_start_unix') or 0),
            system=system, partition=partition, environ=environ, check=check, name=case['name'], params=params,
            variable=key.rsplit(':', 1)[-1], value=float(value), unit=unit,
            # ReFrame records 0 with no bounds when a variable had no reference
            ref=None if not ref and lower is None and upper is None else ref,
            lower=lower, upper=upper, result=result)


def describe_storage():
    """Where this user's results are, as lines of text."""
    db = paths.results_db()
    lines = [f'data directory:     {paths.data_home()}',
             f'results database:   {db}']
    try:
        reports = stored_sessions()
    except ResultsError:
        reports = []

    lines.append(f'stored sessions:    {len(reports)}')
    if reports:
        info = reports[-1]['session_info']
        values = sum(1 for _ in perf_values(reports[-1]))
        lines.append(f'latest session:     {info.get("uuid")} ({info.get("time_start")}, '
                     f'{info.get("num_cases")} test cases, {info.get("num_failures")} failed, '
                     f'{values} performance values)')
    lines.append(f'JSON run reports:   {paths.run_reports_dir()}')
    lines.append(f'ReFrame output:     {paths.data_home() / "rfm" / "output"}')
    return lines


def add_cli(subparsers):
    p = subparsers.add_parser('where', help='print where results are stored',
                              description='Print the results database, the latest session and the run '
                                          'reports of this user ($IBREPRO_HOME moves them).')
    p.set_defaults(func=lambda args: print('\n'.join(describe_storage())))

"""Stored sessions: ReFrame's results database and JSON run reports, read-only; the values index beside them.

ReFrame 4.10 stores every session's whole run report as JSON in the ``sessions`` table of its SQLite results
database (the same document ``--report-file`` writes). We read those documents; we never parse perflogs and
never write to the database (it is opened read-only, so a running session is not disturbed).

Decoding every stored report for every report is what makes a long history slow (a year of nightly sessions is
hundreds of MB of JSON), so the performance values of each session are extracted once into an index beside the
database (:class:`ValueIndex`: an SQLite file ``<database>.values``, or under the data home when that directory is
not ours to write). Every use first brings it in step with the database: sessions added are extracted, sessions
gone (``reframe --delete-stored-sessions``) dropped. It is never the source of truth: ``ibrepro results reindex``
rebuilds it, and deleting it loses nothing.

Stored data may be broken or hostile. A session that is not a run report is left out with one line naming it and
the field; a test case with a malformed field is left out the same way; a value outside its metric's physical
domain (:func:`ibrepro.parsers.value_problem`: infinite, NaN, negative, absurd) is left out with a warning naming
the session, the test case and the variable. Nothing is read through SQLite's JSON functions, which reject the
``Infinity`` ReFrame writes for an infinite value and would make every session unreadable.
"""

import array
import collections
import dataclasses
import gc
import json
import math
import os
import re
import sqlite3
import sys
import urllib.parse
from pathlib import Path

from . import ledger, parsers, paths, trust


class ResultsError(RuntimeError):
    pass


class DatabaseBusy(ResultsError):
    """The results database is locked by another connection (a ReFrame storing a session): a wait, not a fault."""


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
    representative: bool = True   # among the case's reference_variables (every variable if it recorded none)

    @property
    def series_key(self):
        """What identifies the same measurement across sessions."""
        return (self.system, self.partition, self.environ, self.check, self.params, self.variable)


# -- reading one run report, whatever it holds -------------------------------------------------------

#: Unix times outside this range are not a session's start (and would overflow a date).
_TIME_RANGE = (0.0, 1e11)


def decode(blob, where):
    """A stored or written run report (JSON text) as a checked dict (see :func:`check_report`)."""
    try:
        report = json.loads(blob)
    except (TypeError, ValueError) as err:
        raise ResultsError(f'{where}: not a JSON run report ({err})') from None
    except RecursionError:
        raise ResultsError(f'{where}: not a JSON run report (nested too deeply to read)') from None
    check_report(report, where)
    return report


def check_report(report, where):
    """ResultsError naming ``where`` and the field unless ``report`` has the shape of a ReFrame run report."""
    if not isinstance(report, dict):
        raise ResultsError(f'{where}: not a ReFrame run report (a JSON {_kind(report)}, not an object)')
    info = report.get('session_info')
    if not isinstance(info, dict):
        raise ResultsError(f'{where}: not a ReFrame run report (session_info is {_kind(info)}, not an object)')
    if not isinstance(report.get('runs'), list):
        raise ResultsError(f'{where}: not a ReFrame run report (runs is {_kind(report.get("runs"))}, not a list)')
    for field in ('uuid', 'nightly', 'confirms', 'time_start'):
        if info.get(field) is not None and not isinstance(info[field], str):
            raise ResultsError(f'{where}: session_info.{field} is {_kind(info[field])}, not a string')
    start = info.get('time_start_unix')
    if start is not None and (isinstance(start, bool) or not isinstance(start, (int, float))
                              or not _TIME_RANGE[0] <= start < _TIME_RANGE[1]):
        raise ResultsError(f'{where}: session_info.time_start_unix is {_short(start)}, not a time')
    for i, run in enumerate(report['runs']):
        if not isinstance(run, dict) or not isinstance(run.get('testcases', []), list):
            raise ResultsError(f'{where}: runs[{i}] is not a run (an object with a list of testcases)')


def _kind(value):
    return {dict: 'object', list: 'array', str: 'string', bool: 'boolean', type(None): 'null'}.get(
        type(value), 'number' if isinstance(value, (int, float)) else type(value).__name__)


def _short(value, width=60):
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + '...'


def testcases(report):
    """The final attempt of every test case of a report (retries replace earlier attempts); not objects left out.
    A case that passed only on a retry (``--max-retries``) carries ``flaky``: its earlier failures, each
    ``'<phase>: <reason>'`` (a failure that shows every other night is not hidden by the retry)."""
    final, failed = {}, {}
    for run in report.get('runs') or []:
        for case in (run.get('testcases') or []) if isinstance(run, dict) else []:
            if isinstance(case, dict):
                key = tuple(str(case.get(k)) for k in ('name', 'system', 'partition', 'environ'))
                final[key] = case
                if case.get('result') == 'fail':
                    failed.setdefault(key, []).append(f'{case.get("fail_phase")}: {case.get("fail_reason")}')

    return [{**case, 'flaky': failed[key]} if key in failed and case.get('result') != 'fail' else case
            for key, case in final.items()]


#: Fields of a test case the reports read, and the JSON type each must have (anything else: the case is unreadable).
CASE_FIELDS = {'name': str, 'system': str, 'partition': str, 'environ': str, 'perfvalues': dict,
               'reference_index': list, 'tags': list, 'result': str, 'platform': dict, 'topology': dict,
               'software': dict, 'skip_reason': str, 'fail_reason': str, 'fail_phase': str, 'ibrepro_version': str}
_REQUIRED = ('name', 'system', 'partition', 'environ')


def case_problem(case):
    """Why a test case cannot be read (the field and what it holds), or None."""
    if not isinstance(case, dict):
        return f'not an object but {_kind(case)}'
    for field in _REQUIRED:
        if not case.get(field):
            return f'no {field}'
    for field, kind in CASE_FIELDS.items():
        if case.get(field) is not None and not isinstance(case[field], kind):
            return f'{field} is {_kind(case[field])}, not {_kind(kind())}'
    for field in ('reference_index', 'tags'):
        if any(not isinstance(item, str) for item in case.get(field) or ()):
            return f'{field} holds something other than strings'
    return None


def case_key(case):
    """``(system, partition, environ, check, params)``: a test case's part of :attr:`PerfValue.series_key`."""
    params = tuple((p, _param(case.get(p))) for p in case.get('reference_index') or [])
    return case['system'], case['partition'], case['environ'], case['name'].split()[0], params


def _param(value):
    """A parameter value as a key: JSON scalars as they are, anything else as its JSON text."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else json.dumps(value, sort_keys=True)


def _number(value):
    """A finite number as a float, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:   # an integer of hundreds of digits
        return None
    return value if math.isfinite(value) else None


#: A performance variable's name (lat_1024, bw_peak, flow_overlap): ASCII, so a size suffix is a number int()
#: reads ('²'.isdigit() is true), and short (int() refuses more than 4300 digits).
_VARIABLE = re.compile(r'[A-Za-z][A-Za-z0-9_.-]{0,63}', re.ASCII)


def _values(info, case, problems):
    """``(variable, value, unit, ref, lower, upper, result)`` of a case's valid performance values; the invalid
    ones are left out with a line in ``problems`` naming session, test case and variable."""
    for key, entry in (case.get('perfvalues') or {}).items():
        variable = str(key).rsplit(':', 1)[-1]
        if not _VARIABLE.fullmatch(variable):
            problems.append(f'session {info.get("uuid", "?")}: test case {case["name"]}: variable {_short(variable)}: '
                            'not a performance variable name (ASCII letters, digits, _ . -; at most 64): left out')
            continue
        if not isinstance(entry, (list, tuple)) or not entry:
            problems.append(f'session {info.get("uuid", "?")}: test case {case["name"]}: {variable}: not a ReFrame '
                            f'performance entry ({_short(entry)}): left out')
            continue
        value, ref, lower, upper, unit, result = (list(entry) + [None] * 6)[:6]
        if value is None:
            continue
        problem = parsers.value_problem(variable, value)
        if problem:
            problems.append(f'session {info.get("uuid", "?")}: test case {case["name"]}: {variable} = {_short(value)}: '
                            f'{problem}: left out')
            continue
        # ReFrame records 0 with no bounds when a variable had no reference
        ref, lower, upper = _number(ref), _number(lower), _number(upper)
        yield (variable, float(value), unit if isinstance(unit, str) else str(unit or ''),
               None if not ref and lower is None and upper is None else ref, lower, upper,
               result if isinstance(result, str) else None)


def case_perf_values(info, case, problems=None):
    """The valid performance values of one test case of a session (``info`` is the report's session_info)."""
    system, partition, environ, check, params = case_key(case)
    chosen = case.get('reference_variables')
    chosen = set(v for v in chosen if isinstance(v, str)) if isinstance(chosen, list) and chosen else None
    for variable, value, unit, ref, lower, upper, result in _values(info, case, [] if problems is None else problems):
        yield PerfValue(
            session=info.get('uuid') or '', session_start=float(info.get('time_start_unix') or 0),
            system=system, partition=partition, environ=environ, check=check, name=case['name'], params=params,
            variable=variable, value=value, unit=unit, ref=ref, lower=lower, upper=upper, result=result,
            representative=chosen is None or variable in chosen)


def readable_cases(report, problems, where=None):
    """The final test cases of a report that can be read; the others named in ``problems`` and left out."""
    info = report['session_info']
    where = where or f'session {info.get("uuid", "?")}'
    for i, case in enumerate(testcases(report)):
        problem = case_problem(case)
        if problem:
            name = case.get('name') if isinstance(case.get('name'), str) else f'#{i + 1}'
            problems.append(f'{where}: test case {name}: {problem}: left out')
            continue
        yield case


def perf_values(report, problems=None):
    """Every valid performance value recorded in a run report (what is not valid is named in ``problems``)."""
    problems = [] if problems is None else problems
    info = report['session_info']
    for case in readable_cases(report, problems):
        yield from case_perf_values(info, case, problems)


# -- one session as the index keeps it -------------------------------------------------------------

#: What identifies a performance variable across sessions in the index (``params`` as JSON text).
Series = collections.namedtuple('Series', 'system partition environ check name params variable unit')


@dataclasses.dataclass
class SessionRow:
    uuid: str
    start: float
    run: str | None         # the ``nightly`` extra: sessions of one nightly run
    cases: int | None
    failures: int | None
    systems: tuple
    confirms: str | None = None   # the ``confirms`` extra: this session re-ran a night's suspects (ibrepro nightly)
    hardware: str = '{}'     # JSON: {"<system>|<partition>|<environ>|<name>": the node hardware its control read}

    @property
    def night(self):
        """The run this session belongs to: the night it confirms, its ``nightly`` extra, or itself."""
        return self.confirms or self.run or self.uuid

    def hardware_of(self, system, partition, environ, name):
        """The node hardware a test case of this session ran on (``{}`` when its control did not record it)."""
        try:
            found = json.loads(self.hardware)
        except (TypeError, ValueError):
            return {}
        if not isinstance(found, dict):
            return {}
        return ledger.hardware_of(found.get(hardware_key(system, partition, environ, name)))


def hardware_key(system, partition, environ, name):
    return f'{system}|{partition}|{environ}|{name}'


def extract(report, uuid=None):
    """``(SessionRow, [(Series, value, ref, lower, upper, result)], problems)`` of a checked run report."""
    info = report['session_info']
    problems, values = [], []
    cases = list(readable_cases(report, problems, f'session {uuid or info.get("uuid", "?")}'))
    for case in cases:
        system, partition, environ, check, params = case_key(case)
        for variable, value, unit, ref, lower, upper, result in _values(info, case, problems):
            values.append((Series(system, partition, environ, check, case['name'], json.dumps(params), variable, unit),
                           value, ref, lower, upper, result))
    hardware = {hardware_key(c['system'], c['partition'], c['environ'], c['name']): found for c in cases
                if (found := ledger.hardware_of(c.get('node_hardware')))}
    row = SessionRow(uuid or info.get('uuid') or '', float(info.get('time_start_unix') or 0), info.get('nightly'),
                     _count(info.get('num_cases')), _count(info.get('num_failures')),
                     tuple(sorted({c['system'] for c in cases})), info.get('confirms'),
                     json.dumps(hardware, sort_keys=True))
    return row, values, problems


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


#: The loggable variable only a pair-round case has (reframe-checks/system/fleet_pairs.py): a fleet night.
PAIR_ROUND_FLOWS = 'fleet_flows'


def pair_round_part(report):
    """The run report with only its pair-round cases (every run kept, so a retry still replaces its first
    attempt: :func:`testcases`), or None without one: what the fleet's history reads of a night."""
    runs = [run for run in report.get('runs') or [] if isinstance(run, dict)] \
        if isinstance(report.get('runs'), list) else []
    kept = [{**run, 'testcases': [c for c in run.get('testcases') or [] if isinstance(c, dict)
                                  and PAIR_ROUND_FLOWS in c]} for run in runs if isinstance(run.get('testcases'), list)]
    if not any(run['testcases'] for run in kept):
        return None
    return {'session_info': report['session_info'], 'runs': kept}


# -- the history of a system: what the report and the history test read -------------------------------

@dataclasses.dataclass(frozen=True)
class FirstValue:
    """A series' oldest value in a History, with ReFrame's reference and verdict of it."""

    position: int          # in History.sessions
    value: float
    ref: float | None
    lower: float | None
    upper: float | None
    result: str | None


class History:
    """Sessions (oldest first), the first occurrence of each series in them, and their values on demand.

    ``first[series]`` is the :class:`FirstValue` of the series' oldest value; :meth:`values` reads the values: the
    recent ones of every series (what the history test reads), or all of a few (a trend). Sessions come from
    decoded run reports or from a ValueIndex, which is then read only for what is asked: a year of history is not
    loaded to test the last month.
    """

    def __init__(self):
        self.sessions, self.first, self.problems = [], {}, []
        self._decoded = {}       # series -> (positions, values) of the sessions decoded here
        self._index = None       # (ValueIndex, its table of this history's sessions, {series id: Series})

    def _note_first(self, series, position, value, details):
        if series not in self.first or position < self.first[series].position:
            self.first[series] = FirstValue(position, value, *details)

    def values(self, series=None, since=0):
        """``{series: (positions, values)}`` at positions >= ``since``, of ``series`` (every series when None)."""
        wanted = None if series is None else set(series)
        found = {}
        for key, (positions, values) in self._decoded.items():
            if wanted is None or key in wanted:
                kept = [(p, v) for p, v in zip(positions, values) if p >= since]
                if kept:
                    found[key] = (array.array('i', [p for p, _ in kept]), array.array('d', [v for _, v in kept]))
        if self._index:
            index, table, series_ids = self._index
            index.read_values(table, series_ids, found, wanted, since)
        return found

    @classmethod
    def of(cls, entries, index=None, system=None):
        """The history of ``entries``, oldest first: checked run reports (decoded here), or sessions in ``index``
        (UUIDs or SessionRows; a ValueIndex, which must stay open while the history is read); only ``system``'s
        values."""
        history, indexed = cls(), {}
        rows = {row.uuid: (row, problems) for row, problems in index.sessions()[0]} if index else {}
        for entry in entries:
            position = len(history.sessions)
            if isinstance(entry, dict):
                row, values, problems = extract(entry)
                for series, value, *details in values:
                    if system is None or series.system == system:
                        history._note_first(series, position, value, details)
                        slot = history._decoded.setdefault(series, (array.array('i'), array.array('d')))
                        slot[0].append(position)
                        slot[1].append(value)
            else:
                row, problems = rows[getattr(entry, 'uuid', entry)]
                indexed[row.uuid] = position
            history.sessions.append(row)
            history.problems.extend(problems)
        if indexed:
            index.attach(history, indexed, system)
        return history


# -- the index beside the database ------------------------------------------------------------------

#: Rows a reader could not use (a wrong type, an infinite value), per table: each table's CHECK refuses them, so
#: no row of the index needs to be looked at when it is opened (a full look cost seconds at ten years of history).
_INDEX_CHECKS = {
    'sessions': "typeof(uuid) != 'text' OR typeof(start) NOT IN ('real', 'integer', 'null') "
                "OR abs(start) > 1e11 OR NOT json_valid(coalesce(systems, '[]')) "
                "OR json_type(coalesce(systems, '[]')) != 'array' OR NOT json_valid(coalesce(problems, '[]')) "
                "OR typeof(series_set) NOT IN ('integer', 'null') OR NOT json_valid(coalesce(hardware, '{}')) "
                "OR json_type(coalesce(hardware, '{}')) != 'object'",
    'series': "typeof(system) != 'text' OR typeof(partition) != 'text' OR typeof(environ) != 'text' "
              "OR typeof(check_name) != 'text' OR typeof(name) != 'text' OR typeof(variable) != 'text' "
              "OR typeof(unit) != 'text' OR NOT json_valid(params)",
    'vals': "typeof(value) NOT IN ('real', 'integer') OR abs(value) > 1.7e308 "
            + ''.join(f"OR typeof({c}) NOT IN ('real', 'integer', 'null') OR abs({c}) > 1.7e308 "
                      for c in ('ref', 'lower', 'upper')) + "OR typeof(result) NOT IN ('text', 'null')",
    'fleet': "typeof(session) != 'integer' OR NOT json_valid(report) OR json_type(report) != 'object'",
    'series_sets': "NOT json_valid(members) OR json_type(members) != 'array'",
}

_INDEX_FORMAT = '4'
_INDEX_SCHEMA = [
    'CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)',
    'CREATE TABLE sessions(id INTEGER PRIMARY KEY, uuid TEXT UNIQUE NOT NULL, start REAL, run TEXT, cases INTEGER, '
    'failures INTEGER, systems TEXT, problems TEXT, unreadable TEXT, confirms TEXT, series_set INTEGER, hardware TEXT, '
    f'CHECK(NOT ({_INDEX_CHECKS["sessions"]})))',
    'CREATE TABLE series(id INTEGER PRIMARY KEY, system TEXT, partition TEXT, environ TEXT, check_name TEXT, '
    'name TEXT, params TEXT, variable TEXT, unit TEXT, '
    'UNIQUE(system, partition, environ, check_name, name, params, variable, unit), '
    f'CHECK(NOT ({_INDEX_CHECKS["series"]})))',
    # one row per value, clustered by session: adding and dropping a session touches one range
    'CREATE TABLE vals(session INTEGER, series INTEGER, value REAL, ref REAL, lower REAL, upper REAL, result TEXT, '
    f'PRIMARY KEY(session, series), CHECK(NOT ({_INDEX_CHECKS["vals"]}))) WITHOUT ROWID',
    # the series a session holds, as one set of series ids shared by the sessions that hold the same (most do):
    # which series the chosen sessions hold is read without reading their values (attach)
    'CREATE TABLE series_sets(id INTEGER PRIMARY KEY, members TEXT UNIQUE NOT NULL, '
    f'CHECK(NOT ({_INDEX_CHECKS["series_sets"]})))',
    # the pair-round nights (a session's run report with only its pair-round cases, :func:`pair_round_part`): the
    # fleet's history reads these few kB per night, not the whole stored session
    'CREATE TABLE fleet(session INTEGER PRIMARY KEY, report TEXT, '
    f'CHECK(NOT ({_INDEX_CHECKS["fleet"]})))',
]


#: SQLite virtual-machine steps between two looks of the progress handler, and the looks one connection to a
#: results database may take: about 10^10 steps, far beyond what reading a real database takes, so no crafted file
#: (a huge or recursive query hidden in it) keeps a command busy without end.
PROGRESS_EVERY = 100_000
PROGRESS_LOOKS = 100_000

#: The tables ReFrame 4.10 creates (reframe/frontend/reporting/storage.py) and their columns: what ibrepro and
#: ReFrame query is these, never a view, a virtual table or anything a trigger rewrites.
REFRAME_TABLES = {
    'sessions': ['uuid', 'session_start_unix', 'session_end_unix', 'json_blob', 'report_file'],
    'testcases': ['name', 'system', 'partition', 'environ', 'job_completion_time_unix', 'session_uuid', 'uuid'],
    'metadata': ['schema_version'],
}


#: An index on plain columns (what ReFrame creates): no expression to compute, no WHERE, on every write.
_PLAIN_INDEX = re.compile(r'CREATE\s+(UNIQUE\s+)?INDEX\s+"?\w+"?\s+ON\s+"?\w+"?\s*\(\s*"?\w+"?(\s+(ASC|DESC))?'
                          r'(\s*,\s*"?\w+"?(\s+(ASC|DESC))?)*\s*\)', re.IGNORECASE)


def _database_name():
    return 'RFM_SQLITE_DB_FILE' if os.environ.get('RFM_SQLITE_DB_FILE') else 'IBREPRO_HOME'


def _connect(db, timeout=30):
    """A read-only connection to the results database ``db``: a file that is ours to trust (:mod:`ibrepro.trust`),
    opened with SQLite's ``trusted_schema`` off, holding ReFrame's tables as ReFrame creates them
    (:func:`check_schema`), every query bounded (:data:`PROGRESS_LOOKS`). ResultsError, one line, otherwise."""
    db = Path(db or paths.results_db())
    try:   # the file and what SQLite reads beside it (a journal is played back into it): ours
        for path in [db, *(Path(f'{db}{s}') for s in ('-journal', '-wal', '-shm'))]:
            trust.check(path, kind='file', root=path, name=_database_name())
    except trust.Refused as err:
        raise ResultsError(f'results database {err}') from None
    if not db.is_file():
        raise ResultsError(f'no results database at {db} (run `make run` first, or set RFM_SQLITE_DB_FILE)')

    try:
        # quoted: a '?' or '#' in the path would otherwise set URI parameters (mode=rwc)
        conn = sqlite3.connect(f'file:{urllib.parse.quote(str(db))}?mode=ro', uri=True, timeout=timeout)
    except sqlite3.Error as err:
        raise ResultsError(f'{db}: {err}') from None
    looks = [0]

    def bound():
        looks[0] += 1
        return looks[0] > PROGRESS_LOOKS

    conn.set_progress_handler(bound, PROGRESS_EVERY)
    try:
        conn.execute('PRAGMA trusted_schema=OFF')
        check_schema(conn, db)
    except BaseException:
        conn.close()
        raise
    return conn


def check_schema(conn, db):
    """ResultsError unless the database holds no trigger and ReFrame's tables, where present, are the plain tables
    ReFrame creates (:data:`REFRAME_TABLES`): a view or a trigger in a crafted file would run its SQL in every
    command that reads the database, and in ReFrame when it stores a session."""
    entries = _stored(conn, db, 'SELECT type, name, sql FROM sqlite_master')
    triggers = sorted(str(name) for kind, name, _ in entries if kind == 'trigger')
    if triggers:
        raise ResultsError(f'{db}: holds trigger(s) {", ".join(triggers[:5])}, which ReFrame never creates (SQL '
                           'that would run when the database is written): refused; remove them, or move the file '
                           'away and let ReFrame start a new one')
    for kind, name, sql in entries:
        if kind == 'index' and sql is not None and not _PLAIN_INDEX.fullmatch(str(sql).strip()):
            raise ResultsError(f'{db}: index {name} is on an expression or a part of a table, which ReFrame never '
                               'creates (SQL that would run when the database is written): refused; drop it')
        if name not in REFRAME_TABLES:
            continue
        if kind != 'table' or not str(sql or '').upper().startswith('CREATE TABLE'):
            raise ResultsError(f'{db}: {name} is a {kind if kind != "table" else "virtual table"}, not the table '
                               'ReFrame creates: refused; move the file away and let ReFrame start a new one')
        columns = [row[1] for row in _stored(conn, db, f'PRAGMA table_xinfo({name})')]
        if columns != REFRAME_TABLES[name]:
            raise ResultsError(f'{db}: table {name} has columns {", ".join(map(str, columns))[:200]}, not '
                               f'ReFrame\'s ({", ".join(REFRAME_TABLES[name])}): refused; is it a ReFrame 4.10 '
                               'results database?')


def _session_rows(conn, db, problems):
    """``(uuid, start)`` of every stored session, oldest first; a row without a UUID (NULL, not text, or with
    characters no UUID has) or without a start time (not a number, out of range) is named in ``problems`` and left
    out: one crafted row must not block every report."""
    rows = []
    # two narrow reads that ReFrame's own indexes answer (the UUID key, index_sessions_time), not a scan of the
    # table, whose every row is a page of JSON: a cold read of ten years' list took 0.15 s, this one 0.006 s
    starts = dict(_stored(conn, db, 'SELECT rowid, session_start_unix FROM sessions'))
    for rowid, uuid in _stored(conn, db, 'SELECT rowid, uuid FROM sessions'):
        start = starts.get(rowid)
        if not isinstance(uuid, str) or not _UUID.fullmatch(uuid):
            problems.append(f'stored session #{rowid} (started {_short(start)}): its UUID is {_short(uuid)}, not a '
                            'UUID: left out')
        elif isinstance(start, bool) or not isinstance(start, (int, float)) \
                or not _TIME_RANGE[0] <= start < _TIME_RANGE[1]:
            problems.append(f'session {uuid}: session_start_unix is {_short(start)}, not a time: left out')
        else:
            rows.append((uuid, start))
    return sorted(rows, key=lambda r: (r[1], r[0]))


#: What ReFrame stores as a session's UUID (any case, hex and dashes; shorter ones in tests and old sessions).
_UUID = re.compile(r'[0-9A-Za-z][0-9A-Za-z-]{0,63}')


def _stored(conn, db, sql, args=()):
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.Error as err:
        raise _read_error(db, err, 'cannot read the results database') from None


def _read_error(db, err, what):
    """The ResultsError of a failed query: the bound (:data:`PROGRESS_LOOKS`) named as such."""
    if isinstance(err, sqlite3.OperationalError) and str(err) == 'interrupted':
        return ResultsError(f'{db}: a query ran past {PROGRESS_EVERY * PROGRESS_LOOKS:.0e} SQLite steps (a crafted '
                            'or damaged database?): stopped')
    if isinstance(err, sqlite3.OperationalError) and str(err) in ('database is locked', 'database is busy'):
        return DatabaseBusy(f'{db}: {what}: {err}')
    return ResultsError(f'{db}: {what}: {err}')


def _index_files(path):
    return [Path(f'{path}{suffix}') for suffix in ('', '-wal', '-shm')]


def _schema_problem(conn):
    """Why an index file's schema is not the one :data:`_INDEX_SCHEMA` creates (another table, a table without its
    CHECK, a trigger or a view: SQL that would run when we write), or ''."""
    stored = {(kind, name): sql for kind, name, sql in conn.execute('SELECT type, name, sql FROM sqlite_master')}
    ours = {(sql.split()[1].lower(), sql.split('(', 1)[0].split()[2]): sql for sql in _INDEX_SCHEMA}
    changed = [f'{kind} {name}: not as we create it' for (kind, name), sql in ours.items()
               if stored.get((kind, name)) != sql]
    extra = [f'{kind} {name}: not ours' for (kind, name), sql in sorted(stored.items())
             if (kind, name) not in ours and not (kind == 'index' and sql is None)]   # a key's own index: ours
    return ', '.join(changed + extra)


class ValueIndex:
    """The performance values of every stored session, extracted once (see the module doc)."""

    def __init__(self, db=None, path=None):
        self.db = Path(db or paths.results_db())
        self.path = Path(path) if path else self.default_path(self.db)
        self.conn = None
        self.skipped = []    # stored rows that are no session (no UUID, no start time): named, left out

    @staticmethod
    def default_path(db):
        """``<database>.values`` when its directory is ours to trust (:func:`ibrepro.trust.problem`: another user
        could plant an index there, read as the truth, or a link, followed when we write) and we may write there;
        else ``values-index/`` under the data home, itself held to the same check when the index is opened."""
        db = Path(db).resolve()
        beside = db.with_name(db.name + '.values')
        if os.access(db.parent, os.W_OK) and not trust.problem(db.parent) \
                and not any(trust.problem(f, kind='file', follow=False) for f in _index_files(beside)) \
                and (not beside.exists() or os.access(beside, os.W_OK)):
            return beside
        import hashlib
        return paths.data_home() / 'values-index' / f'{hashlib.sha256(str(db).encode()).hexdigest()[:16]}.values'

    def open(self):
        """Open (create) the index and bring it in step with the database; the index is rebuilt if unusable.
        ResultsError (one line) where the database or the index's directory is not ours to trust."""
        source = _connect(self.db)
        try:
            self.conn = self._open_index()
            self._sync(source)
        except trust.Refused as err:
            raise ResultsError(f'values index: {err}') from None
        finally:
            source.close()
        return self

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def _open_index(self):
        memory = str(self.path) == ':memory:'
        if not memory:
            # a directory of ours: no one else can plant a file or a link between the checks and the connect
            trust.make_dir(self.path.parent, root=self._root(), name='IBREPRO_HOME')
            for path in _index_files(self.path):    # a link or another user's file is never opened (nor followed)
                if trust.problem(path, kind='file', follow=False):
                    print(f'ibrepro: {path}: not a file of ours (a link, or another user\'s): removed, the index is '
                          'rebuilt from the database', file=sys.stderr)
                    path.unlink()
        for attempt in range(2):
            try:
                conn = sqlite3.connect(':memory:' if memory else self.path, timeout=60)
                if not memory:
                    conn.execute('PRAGMA journal_mode=WAL')
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if not tables:
                    self._create(conn)
                fmt = conn.execute("SELECT value FROM meta WHERE key='format'").fetchone()
                bad = _schema_problem(conn) if fmt and fmt[0] == _INDEX_FORMAT else ''
                if fmt and fmt[0] == _INDEX_FORMAT and not bad:
                    return conn
                if bad:     # written by something else: rebuilt from the database, losing nothing
                    print(f'ibrepro: values index {self.path}: {bad}: rebuilt from the database', file=sys.stderr)
                conn.close()
            except sqlite3.DatabaseError:
                pass
            if attempt == 0:   # another format or a broken file: it holds nothing that is not in the database
                self.remove()
        raise ResultsError(f'{self.path}: cannot create the values index')

    def _create(self, conn):
        """The index's schema and format in one transaction: another process opening it meanwhile sees all of it
        or none (each CREATE on its own committed at once, and a half-made schema read as a broken index was
        removed under the process making it). Another process may be creating it too: what it stored first stays."""
        conn.isolation_level = None          # our own BEGIN and COMMIT
        try:
            conn.execute('BEGIN IMMEDIATE')  # waits (the connection's timeout) for a writer already in it
            try:
                for sql in _INDEX_SCHEMA:
                    conn.execute(re.sub(r'^CREATE (TABLE|INDEX)', r'CREATE \1 IF NOT EXISTS', sql))
                conn.execute("INSERT OR IGNORE INTO meta VALUES('format', ?)", (_INDEX_FORMAT,))
                conn.execute("INSERT OR IGNORE INTO meta VALUES('database', ?)", (str(self.db.resolve()),))
            except BaseException:
                conn.execute('ROLLBACK')
                raise
            conn.execute('COMMIT')
        finally:
            conn.isolation_level = ''        # back to sqlite3's own transactions

    def _root(self):
        home = paths.data_home()
        return home if home in self.path.parents else self.path.parent

    def remove(self):
        """Delete the index files; ResultsError where their directory is not ours (nothing deleted there)."""
        if str(self.path) == ':memory:':
            return
        why = trust.problem(self.path.parent, root=self._root(), name='IBREPRO_HOME')
        if why:
            raise ResultsError(f'values index: {why}')
        for suffix in ('', '-wal', '-shm'):
            Path(f'{self.path}{suffix}').unlink(missing_ok=True)

    def _sync(self, source):
        self.skipped = []
        stored = dict(_session_rows(source, self.db, self.skipped))
        have = {uuid: sid for uuid, sid in self.conn.execute('SELECT uuid, id FROM sessions')}
        gone = [have[u] for u in have if u not in stored]
        new = sorted((u for u in stored if u not in have), key=lambda u: stored[u] or 0)
        if gone:
            with self.conn:
                for i in range(0, len(gone), 500):
                    chunk = gone[i:i + 500]
                    marks = ','.join('?' * len(chunk))
                    self.conn.execute(f'DELETE FROM vals WHERE session IN ({marks})', chunk)
                    self.conn.execute(f'DELETE FROM fleet WHERE session IN ({marks})', chunk)
                    self.conn.execute(f'DELETE FROM sessions WHERE id IN ({marks})', chunk)
        series = {Series(*row[1:]): row[0] for row in self.conn.execute(
            'SELECT id, system, partition, environ, check_name, name, params, variable, unit FROM series')}
        collecting = gc.isenabled()
        gc.disable()   # decoding allocates millions of containers without cycles: keep the collector out
        try:
            for i in range(0, len(new), 50):
                chunk = new[i:i + 50]
                rows = _stored(source, self.db, f'SELECT uuid, json_blob FROM sessions WHERE uuid IN '
                                                f'({",".join("?" * len(chunk))})', chunk)
                with self.conn:
                    for uuid, blob in rows:
                        self._ingest(uuid, blob, series)
        finally:
            if collecting:
                gc.enable()

    def _ingest(self, uuid, blob, series):
        """Extract one stored session. (Another process may be doing the same: what it stored first stays.)"""
        try:
            report = decode(blob, f'session {uuid}')
        except ResultsError as err:
            self.conn.execute('INSERT OR IGNORE INTO sessions(uuid, unreadable) VALUES(?, ?)', (uuid, str(err)))
            return
        row, values, problems = extract(report, uuid)
        cursor = self.conn.execute('INSERT OR IGNORE INTO sessions(uuid, start, run, cases, failures, systems, '
                                   'problems, confirms, hardware) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)',
                                   (uuid, row.start, row.run, row.cases, row.failures, json.dumps(row.systems),
                                    json.dumps(problems), row.confirms, row.hardware))
        if not cursor.rowcount:
            return
        sid = cursor.lastrowid
        rows = {}
        for key, value, ref, lower, upper, result in values:
            if key not in series:
                self.conn.execute('INSERT OR IGNORE INTO series(system, partition, environ, check_name, name, params, '
                                  'variable, unit) VALUES(?, ?, ?, ?, ?, ?, ?, ?)', key)
                series[key] = self.conn.execute(
                    'SELECT id FROM series WHERE system = ? AND partition = ? AND environ = ? AND check_name = ? AND '
                    'name = ? AND params = ? AND variable = ? AND unit = ?', key).fetchone()[0]
            rows[series[key]] = (sid, series[key], value, ref, lower, upper, result)
        self.conn.executemany('INSERT INTO vals VALUES(?, ?, ?, ?, ?, ?, ?)', rows.values())
        members = json.dumps(sorted(rows))
        self.conn.execute('INSERT OR IGNORE INTO series_sets(members) VALUES(?)', (members,))
        self.conn.execute('UPDATE sessions SET series_set = (SELECT id FROM series_sets WHERE members = ?) '
                          'WHERE id = ?', (members, sid))
        part = pair_round_part(report)
        if part:
            self.conn.execute('INSERT INTO fleet VALUES(?, ?)', (sid, json.dumps(part)))

    def _damaged(self, what):
        """The ResultsError of a row no reader can use (written past the tables' CHECKs: a damaged file, a hand
        edit): the index is removed, so the next command rebuilds it from the database, losing nothing."""
        path = self.path
        self.close()
        try:
            self.remove()
        except ResultsError:
            pass
        return ResultsError(f'values index {path}: {what} is not what ibrepro stores there (a damaged file?): '
                            'removed; run the command again, it rebuilds the index from the database')

    # -- queries ------------------------------------------------------------------------------------

    def sessions(self):
        """``(SessionRow, problems)`` of every readable stored session, oldest first, and the unreadable ones'
        reasons."""
        readable, unreadable = [], list(self.skipped)
        for uuid, start, run, cases, failures, systems, problems, bad, confirms, hardware in self.conn.execute(
                'SELECT uuid, start, run, cases, failures, systems, problems, unreadable, confirms, hardware '
                'FROM sessions ORDER BY start, uuid'):
            if bad:
                unreadable.append(bad)
                continue
            try:
                readable.append((SessionRow(uuid, start, run, cases, failures, tuple(json.loads(systems)), confirms,
                                            hardware or '{}'), list(json.loads(problems))))
            except (TypeError, ValueError):
                raise self._damaged(f'the row of session {_short(uuid)}') from None
        return readable, unreadable

    def pair_round_parts(self, uuids):
        """``{uuid: its run report with only its pair-round cases (:func:`pair_round_part`), None without one, or
        why the session is unreadable (str)}`` of those of these sessions the index holds."""
        found = {}
        uuids = list(uuids)
        for i in range(0, len(uuids), 500):
            chunk = uuids[i:i + 500]
            for uuid, bad, part in self.conn.execute(
                    f'SELECT s.uuid, s.unreadable, f.report FROM sessions s LEFT JOIN fleet f ON f.session = s.id '
                    f'WHERE s.uuid IN ({",".join("?" * len(chunk))})', chunk):
                try:
                    found[uuid] = bad or (json.loads(part) if part is not None else None)
                except ValueError:
                    raise self._damaged(f'the pair-round cases of session {_short(uuid)}') from None
        return found

    def attach(self, history, positions, system=None):
        """Make ``history`` read the values of the sessions ``{uuid: position in history}`` (of ``system``) from
        here, and note the first occurrence of each series."""
        self._tables = getattr(self, '_tables', 0) + 1
        table = f'chosen{self._tables}'   # one per history: several may be read at once
        self.conn.execute(f'CREATE TEMP TABLE {table}(id INTEGER PRIMARY KEY, position INTEGER)')
        ids = dict(self.conn.execute('SELECT uuid, id FROM sessions'))
        self.conn.executemany(f'INSERT INTO {table} VALUES(?, ?)', [(ids[u], p) for u, p in positions.items()])
        series = {sid: Series(*rest) for sid, *rest in self.conn.execute(
            'SELECT id, system, partition, environ, check_name, name, params, variable, unit FROM series'
            + (' WHERE system = ?' if system else ''), (system,) if system else ())}
        history._index = (self, table, series)
        # the first occurrence of every series present: walk the sessions oldest first until all are seen (most
        # series are in the oldest session, so this reads a few sessions, not the history)
        pending = set()
        for (members,) in self.conn.execute(f'SELECT members FROM series_sets WHERE id IN (SELECT DISTINCT '
                                            f's.series_set FROM {table} c JOIN sessions s ON s.id = c.id)'):
            try:
                pending.update(sid for sid in json.loads(members) if sid in series)
            except (TypeError, ValueError):
                raise self._damaged(f'series set {_short(members)}') from None
        order = [sid for sid, _ in sorted(self.conn.execute(f'SELECT id, position FROM {table}'), key=lambda r: r[1])]
        for i in range(0, len(order), 64):
            if not pending:
                break
            chunk = order[i:i + 64]
            rows = self.conn.execute(f'SELECT v.series, c.position, v.value, v.ref, v.lower, v.upper, v.result '
                                     f'FROM {table} c CROSS JOIN vals v ON v.session = c.id '
                                     f'WHERE c.id IN ({",".join("?" * len(chunk))})', chunk).fetchall()
            for sid, position, value, *details in sorted(rows, key=lambda r: r[1]):
                if not isinstance(value, float):
                    raise self._damaged(f'value {_short(value)}')
                if sid in pending:
                    history._note_first(series[sid], position, value, details)
                    pending.discard(sid)

    def read_values(self, table, series, found, wanted, since):
        """Add to ``found`` (see History.values) the values of the sessions in ``table``."""
        args, where = [since], 'c.position >= ?'
        if wanted is not None:
            ids = [sid for sid, key in series.items() if key in wanted]
            if not ids:
                return
            where += f' AND v.series IN ({",".join("?" * len(ids))})'
            args += ids
        slots = {}
        # CROSS JOIN: the chosen sessions outside, each one's values a range of the primary key (SQLite would
        # otherwise scan every value of the index)
        for sid, position, value in self.conn.execute(f'SELECT v.series, c.position, v.value FROM {table} c '
                                                      f'CROSS JOIN vals v ON v.session = c.id WHERE {where}', args):
            slot = slots.get(sid)
            if slot is None:
                key = series.get(sid)
                if key is None:
                    continue
                slot = slots[sid] = found.setdefault(key, (array.array('i'), array.array('d')))
            slot[0].append(position)
            try:
                slot[1].append(value)
            except TypeError:
                raise self._damaged(f'value {_short(value)}') from None

    def size(self):
        return sum(Path(f'{self.path}{s}').stat().st_size for s in ('', '-wal') if Path(f'{self.path}{s}').exists())


def open_index(db=None):
    """The ValueIndex of a database, in step with it; ResultsError if the database cannot be read. Where the index
    cannot be written (no space, no permission), one in memory for this process."""
    index = ValueIndex(db)
    try:
        return index.open()
    except (OSError, sqlite3.Error) as err:   # our files
        print(f'ibrepro: {index.path}: cannot write the values index ({err}): reading every session', file=sys.stderr)
        index.close()
        return ValueIndex(db, path=':memory:').open()


# -- the sessions of a database ------------------------------------------------------------------------

def stored_sessions(db=None, *, uuids=None, last=None, problems=None):
    """Run reports of the stored sessions, oldest first: ``uuids`` (prefixes allowed) or the ``last`` N.

    Sessions that cannot be read are left out and named in ``problems`` (ResultsError when none is given).
    """
    db = db or paths.results_db()
    skipped = []
    with _connect(db) as conn:
        rows = _session_rows(conn, db, skipped)
    if skipped:
        if problems is None:
            raise ResultsError(skipped[0])
        problems.extend(skipped)
    if uuids:
        wanted = [u.lower() for u in uuids]
        rows = [r for r in rows if any(r[0].startswith(w) for w in wanted)]
        missing = [w for w in wanted if not any(r[0].startswith(w) for r in rows)]
        if missing:
            raise ResultsError(f'no stored session with UUID {", ".join(missing)}')
    if last:
        rows = rows[-last:]
    return sessions_by_uuid([r[0] for r in rows], db, problems=problems)


def last_nights(count, db=None, problems=None):
    """The run reports of the last ``count`` nights, oldest first: the sessions of one nightly run are one night (a CI
    child pipeline stores one session per test case), a session without a ``nightly`` extra a night of its own, and
    a confirmation re-run no night (its night's suspects only). Unreadable sessions are named in ``problems``."""
    with open_index(db) as index:
        readable, unreadable = index.sessions()
    if problems is not None:
        problems.extend(unreadable)
    rows = [row for row, _ in readable if not row.confirms]
    keep = set(list(dict.fromkeys(row.night for row in rows))[-count:]) if count > 0 else set()
    return sessions_by_uuid([row.uuid for row in rows if row.night in keep], db, problems=problems)


def session_index(db=None):
    """``(uuid, start unix time, systems, run)`` of every readable stored session, oldest first (from the index).

    ``run`` is the session's ``nightly`` extra (``--session-extras nightly=<id>``: the sessions of one nightly run,
    e.g. one per test case in a CI child pipeline), or None.
    """
    with open_index(db) as index:
        rows = index.sessions()[0]
    return [(row.uuid, row.start, list(row.systems), row.run) for row, _ in rows]


def run_id(report):
    """The run a stored session belongs to: its ``nightly`` extra (``--session-extras nightly=<id>``; a CI child
    pipeline stores one session per test case, all with the pipeline's id), else the session's own UUID; None when
    the report names neither as a string."""
    info = report.get('session_info') if isinstance(report, dict) else None
    info = info if isinstance(info, dict) else {}
    return next((v for v in (info.get('nightly'), info.get('uuid')) if isinstance(v, str) and v), None)


def check_sessions(check, system=None, partition=None, before=None, db=None):
    """UUIDs of the stored sessions with a test case of ``check`` (the check's name, a variant's display name
    ``check %param=...``) on ``system`` (and ``partition``) started before ``before`` (unix time), oldest first:
    ReFrame's own ``testcases`` table, so a check's sessions are found without reading any run report."""
    db = db or paths.results_db()
    sql = ('SELECT uuid FROM sessions WHERE uuid IN (SELECT session_uuid FROM testcases WHERE '
           "(name = ? OR name LIKE ? ESCAPE '\\')" + (' AND system = ?' if system else '')
           + (' AND partition = ?' if partition else '') + ')' + (' AND session_start_unix < ?' if before else '')
           + ' ORDER BY session_start_unix, uuid')
    like = check.replace('\\', '\\\\').replace('%', '\\%').replace('_', '\\_') + ' %'
    args = [check, like] + [a for a in (system, partition, before) if a]
    with _connect(db) as conn:
        try:
            return [uuid for uuid, in conn.execute(sql, args)]
        except sqlite3.DatabaseError as err:
            raise _read_error(db, err, 'cannot read its test cases') from None


def sessions_by_uuid(uuids, db=None, problems=None):
    """The run reports of the sessions with these exact UUIDs, in the order given (missing ones left out).

    A session that is not a readable run report is named in ``problems``, or raises ResultsError without it.
    """
    db = db or paths.results_db()
    found = {}
    # Decoding hundreds of reports allocates millions of containers, and the cyclic garbage collector would scan
    # them again and again (3x the decoding time for a year of sessions): JSON has no cycles, so pause it.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _connect(db) as conn:
            uuids = list(uuids)
            for i in range(0, len(uuids), 500):   # SQLite limits the number of parameters of one statement
                chunk = uuids[i:i + 500]
                for uuid, blob in _stored(conn, db, f'SELECT uuid, json_blob FROM sessions WHERE uuid IN '
                                                    f'({",".join("?" * len(chunk))})', chunk):
                    try:
                        found[uuid] = decode(blob, f'session {uuid}')
                    except ResultsError as err:
                        if problems is None:
                            raise
                        problems.append(str(err))
    finally:
        if collecting:
            gc.enable()
    return [found[u] for u in uuids if u in found]


def pair_round_reports(uuids, db=None, problems=None):
    """The run reports of the sessions with these exact UUIDs that have pair-round cases, in the order given, each
    with only those (:func:`pair_round_part`): read from the values index, a few kB a night, not the whole stored
    session; one stored since the index was brought in step is decoded from the database. A session that cannot be
    read is named in ``problems``, or raises ResultsError without it (as :func:`sessions_by_uuid`)."""
    uuids = list(uuids)
    with open_index(db) as index:
        parts = index.pair_round_parts(uuids)
    reports = []
    for uuid in uuids:
        if uuid not in parts:      # stored a moment ago
            parts[uuid] = next((pair_round_part(r) for r in sessions_by_uuid([uuid], db, problems)), None)
        part = parts[uuid]
        if isinstance(part, str):
            if problems is None:
                raise ResultsError(part)
            problems.append(part)
        elif part:
            reports.append(part)
    return reports


def load_report(path):
    """A JSON run report written by ``reframe --report-file``; ResultsError if broken."""
    try:
        with open(path, 'rb') as fp:
            blob = fp.read()
    except OSError as err:
        raise ResultsError(f'{path}: cannot read: {err.strerror}') from None

    return decode(blob, path)


# -- command line ---------------------------------------------------------------------------------------

def describe_storage():
    """``(lines, ok)``: where this user's results are, and False when the database exists but cannot be read."""
    db = paths.results_db()
    lines = [f'data directory:     {paths.data_home()}',
             f'results database:   {db}']
    ok = True
    if not db.is_file():
        lines.append('stored sessions:    none yet (no results database: run `make run`)')
    else:
        try:
            with open_index(db) as index:
                rows, unreadable = index.sessions()
            lines.append(f'stored sessions:    {len(rows)}' + (' (empty)' if not rows and not unreadable else '')
                         + (f', and {len(unreadable)} unreadable' if unreadable else ''))
            lines += [f'  unreadable: {reason}' for reason in unreadable[:10]]
            if rows:
                (report,) = sessions_by_uuid([rows[-1][0].uuid], db)
                info = report['session_info']
                values = sum(1 for _ in perf_values(report))
                lines.append(f'latest session:     {info.get("uuid")} ({info.get("time_start")}, '
                             f'{info.get("num_cases")} test cases, {info.get("num_failures")} failed, '
                             f'{values} performance values)')
            lines.append(f'values index:       {index.path}')
        except ResultsError as err:
            ok = False
            lines.append(f'stored sessions:    UNREADABLE: {err}')
    lines.append(f'JSON run reports:   {paths.run_reports_dir()}')
    lines.append(f'ReFrame output:     {paths.data_home() / "rfm" / "output"}')
    return lines, ok


def add_cli(subparsers):
    p = subparsers.add_parser('where', help='print where results are stored',
                              description='Print the results database, the latest session and the run '
                                          'reports of this user ($IBREPRO_HOME moves them). Exits 1 when the '
                                          'database exists but cannot be read.')
    p.set_defaults(func=_cli_where)

    p = subparsers.add_parser('results', help='the values index of the results database',
                              description=__doc__, formatter_class=__import__('argparse').RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='action', metavar='ACTION', required=True)
    r = sub.add_parser('reindex', help='rebuild the values index from the results database')
    r.add_argument('--db', metavar='FILE', help='results database (default: ibrepro where)')
    r.set_defaults(func=_cli_reindex)


def _cli_where(args):
    lines, ok = describe_storage()
    print('\n'.join(lines))
    return 0 if ok else 1


def _cli_reindex(args):
    index = ValueIndex(args.db)
    try:
        index.remove()
        with index.open():
            rows, unreadable = index.sessions()
            size = index.size()
    except (ResultsError, OSError, sqlite3.Error) as err:
        print(f'ibrepro results: {err}', file=sys.stderr)
        return 1
    for reason in unreadable:
        print(f'ibrepro results: unreadable: {reason}', file=sys.stderr)
    print(f'{index.path}: {len(rows)} session(s) indexed, {len(unreadable)} unreadable, {size / 1e6:.1f} MB')
    return 0

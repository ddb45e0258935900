"""The values index: what the report reads stored sessions through, and rows in it that no session has.

Histories are synthetic results databases in ReFrame 4.10's schema (scripts/bench_report.py: the stored report of a
real short `make run`, one session a day, values with 5 % noise), sessions changed where a test needs a broken one;
impossible values are stored by real ReFrame sessions (tests/checks/stored_values.py); sessions are deleted with
ReFrame's own ``--delete-stored-sessions``.
"""

import json
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import VENV_BIN, ReFrameRunner, output
from ibrepro import report, results
from ibrepro.report import render
from test_report import _script, run_report, written

bench = _script('bench_report')


@pytest.fixture
def runner(tmp_path):
    return ReFrameRunner(tmp_path / 'ibrepro-home')


def _history(path, sessions, values=200, seed=1):
    bench.make_db(path, sessions, values, seed=seed)
    return path


def _blobs(db):
    with sqlite3.connect(db) as conn:
        return conn.execute('SELECT uuid, json_blob FROM sessions ORDER BY session_start_unix').fetchall()


def _store(db, uuid, blob, start=None):
    """Replace a session's stored report, or store a new one (``start``)."""
    with sqlite3.connect(db) as conn:
        if start is None:
            conn.execute('UPDATE sessions SET json_blob = ? WHERE uuid = ?', (blob, uuid))
        else:
            conn.execute('INSERT INTO sessions VALUES(?, ?, ?, ?, ?)', (uuid, start, start + 60, blob, None))


def _rendered(db, use_index, **kwargs):
    inputs = report.select(db=db, history=400, use_index=use_index, **kwargs)
    try:
        model = report.build('local', inputs.selected, inputs.history['local'])
        html, md = render.render(model)
    finally:
        inputs.close()
    return re.sub(r'generated [^<]*', '', html), md, model


# -- the index --------------------------------------------------------------------------------------------

def test_index_and_decoding_give_the_same_report(tmp_path):
    db = _history(tmp_path / 'results.db', 40)
    (uuid, blob), *_ = _blobs(db)[-3:]
    stored = json.loads(blob)   # an older session with an impossible value, as ReFrame stores inf
    case = next(c for c in stored['runs'][0]['testcases'] if c.get('perfvalues'))
    case['perfvalues'][next(iter(case['perfvalues']))][0] = float('inf')
    _store(db, uuid, json.dumps(stored))

    by_index = _rendered(db, True)
    by_decoding = _rendered(db, False)
    assert by_index[0] == by_decoding[0] and by_index[1] == by_decoding[1]
    model = by_index[2]
    assert model['tested'] > 100 and len(model['sessions']) == 40 and model['trends']
    assert any(f'session {uuid}: test case {case["name"]}' in p and '= inf: not a finite number' in p
               for p in model['problems'])
    assert results.ValueIndex(db).path == Path(f'{db}.values') and Path(f'{db}.values').is_file()


@pytest.mark.integration
def test_index_follows_sessions_stored_and_deleted(tmp_path):
    db = _history(tmp_path / 'results.db', 12, values=100)
    with results.ValueIndex(db) as index:
        assert len(index.sessions()[0]) == 12

    bench.add_session(db, 100, seed=7)   # the next night
    newest = _blobs(db)[-1][0]
    with results.ValueIndex(db) as index:
        rows = index.sessions()[0]
        assert len(rows) == 13 and rows[-1][0].uuid == newest
        values = index.conn.execute('SELECT COUNT(*) FROM vals').fetchone()[0]

    gone = _blobs(db)[0][0]
    proc = ReFrameRunner(tmp_path / 'home')('--delete-stored-sessions', gone, env={'RFM_SQLITE_DB_FILE': str(db)})
    assert proc.returncode == 0 and 'deleted successfully' in proc.stdout, output(proc)
    with results.ValueIndex(db) as index:
        rows = index.sessions()[0]
        assert len(rows) == 12 and gone not in {row.uuid for row, _ in rows}
        assert index.conn.execute('SELECT COUNT(*) FROM vals').fetchone()[0] == values - values // 13

    # never the source of truth: broken, it is rebuilt; reindexed on demand
    Path(f'{db}.values').write_bytes(b'not an index' * 100)
    with results.ValueIndex(db) as index:
        assert len(index.sessions()[0]) == 12
    proc = ReFrameRunner(tmp_path / 'home').ibrepro('results', 'reindex', '--db', str(db))
    assert proc.returncode == 0 and '12 session(s) indexed, 0 unreadable' in proc.stdout, output(proc)


def test_two_processes_bring_the_index_in_step_at_once(tmp_path, runner):
    db = _history(tmp_path / 'results.db', 30, values=100)
    env = {**runner.env, 'RFM_SQLITE_DB_FILE': str(db)}
    procs = [subprocess.Popen([str(VENV_BIN / 'ibrepro'), 'where'], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and 'stored sessions:    30' in out, (out, err)
    with results.ValueIndex(db) as index:
        assert len(index.sessions()[0]) == 30
        assert index.conn.execute('SELECT COUNT(*) FROM vals').fetchone()[0] == 30 * bench.template(100)[1]


def test_another_process_sees_the_index_schema_whole_or_not_at_all(tmp_path, monkeypatch):
    """Three ``ibrepro where`` at once failed one of them (CI, 2026-11-30): each CREATE committed on its own, so a
    second process saw some tables and no format, took the index for a broken one and removed it under the first."""
    db = _history(tmp_path / 'results.db', 2, values=10)
    path = results.ValueIndex.default_path(db)
    seen = []

    class Watched(list):                  # the schema, looked at from another connection while it is made
        def __iter__(self):
            for i, sql in enumerate(list.__iter__(self)):
                if i == 1 and not seen:           # its first reading is the creation's (later ones compare it)
                    other = sqlite3.connect(path, timeout=0.1)
                    seen.append({r[0] for r in other.execute('SELECT name FROM sqlite_master')})
                    other.close()
                yield sql
    monkeypatch.setattr(results, '_INDEX_SCHEMA', Watched(results._INDEX_SCHEMA))
    with results.ValueIndex(db) as index:
        assert len(index.sessions()[0]) == 2
    assert seen == [set()]


def test_a_database_directory_we_cannot_write_puts_the_index_in_the_data_home(tmp_path, monkeypatch):
    shared = tmp_path / 'shared'
    shared.mkdir()
    db = _history(shared / 'results.db', 3, values=50)
    monkeypatch.setenv('IBREPRO_HOME', str(tmp_path / 'home'))
    # root may write anywhere: what another user's directory looks like to us is what os.access says
    monkeypatch.setattr(results.os, 'access', lambda path, mode: not str(path).startswith(str(shared)))
    with results.ValueIndex(db) as index:
        assert index.path.parent == tmp_path / 'home' / 'values-index' and len(index.sessions()[0]) == 3
    assert not Path(f'{db}.values').exists()


def test_without_a_writable_index_the_report_reads_every_session(tmp_path, runner):
    db = _history(tmp_path / 'results.db', 10, values=50)
    Path(f'{db}.values').mkdir()   # where the index would be: no file can be written there...
    runner.home.mkdir(parents=True, exist_ok=True)
    (runner.home / 'values-index').write_text('')     # ... nor in the data home
    proc = run_report(runner, '--db', str(db), '--min-history', '5')
    assert proc.returncode == 0 and 'cannot write the values index' in proc.stderr, output(proc)
    assert 'reading every session' in proc.stderr and '10 run(s)' in written(proc)[0]


def test_stored_rows_no_session_has_are_named_and_left_out(tmp_path, runner):
    """A variable named lat_² or with 5000 digits, a text session_start_unix, a NULL UUID: each named, the rest
    reported (they crashed `where`, `report` and `report --nightly`: one crafted row blocked every later report)."""
    db = _history(tmp_path / 'results.db', 10, values=60)
    rows = _blobs(db)
    newest = json.loads(rows[-1][1])
    case = next(c for c in newest['runs'][0]['testcases'] if c.get('perfvalues'))
    key = next(iter(case['perfvalues']))
    prefix = key.rsplit(':', 1)[0]
    case['perfvalues'][f'{prefix}:lat_²'] = case['perfvalues'][key]
    case['perfvalues'][f'{prefix}:lat_{"9" * 5000}'] = case['perfvalues'][key]
    _store(db, rows[-1][0], json.dumps(newest))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET session_start_unix = 'yesterday' WHERE uuid = ?", (rows[-3][0],))
        conn.execute('INSERT INTO sessions VALUES(NULL, ?, ?, ?, NULL)', (1.7e9, 1.7e9 + 60, rows[-2][1]))
    expected = [f'session {rows[-3][0]}: session_start_unix is \'yesterday\', not a time: left out',
                'its UUID is None, not a UUID: left out',
                f'session {rows[-1][0]}: test case {case["name"]}: variable \'lat_²\': not a performance '
                'variable name',
                f'session {rows[-1][0]}: test case {case["name"]}: variable \'lat_999']
    for args in ([], ['--nightly', '--min-history', '5'], ['--no-index']):
        proc = run_report(runner, '--db', str(db), *args)
        assert proc.returncode == 0 and 'Traceback' not in proc.stderr, output(proc)
        assert all(line in proc.stderr for line in expected), output(proc)
        assert '9 run(s)' in written(proc)[0]
    where = runner.ibrepro('where', env={'RFM_SQLITE_DB_FILE': str(db)})
    assert where.returncode == 0 and 'stored sessions:    9, and 2 unreadable' in where.stdout, output(where)
    assert 'its UUID is None' in where.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")
def test_an_index_planted_in_a_shared_directory_is_never_read(tmp_path, runner, monkeypatch):
    """In a world-writable directory another user's `results.db.values` (a latency 1000x the stored one) or a link
    (root would follow it when it writes) is not ours: the index goes to the data home."""
    monkeypatch.setenv('IBREPRO_HOME', str(runner.home))     # the report's data home, and ours here
    shared = tmp_path / 'shared'
    shared.mkdir()
    shared.chmod(0o1777)
    db = _history(shared / 'results.db', 6, values=40)
    planted = Path(f'{db}.values')
    with results.ValueIndex(db, path=tmp_path / 'made.values') as index:
        index.conn.execute('UPDATE vals SET value = value * 1000')
        index.conn.commit()
    shutil.copy(tmp_path / 'made.values', planted)
    os.chown(planted, 65534, 65534)          # another user's file
    victim = tmp_path / 'victim'
    for target in (planted, None):
        if target is None:                   # a link to a file of ours, to be overwritten when we write the index
            planted.unlink()
            victim.write_text('precious')
            planted.symlink_to(victim)
        proc = run_report(runner, '--db', str(db))
        assert proc.returncode == 0, output(proc)
        decoded = [pv.value for report in results.stored_sessions(db) for pv in results.perf_values(report)]
        with results.ValueIndex(db) as index:   # the index the report used: its own, with the stored values
            assert index.path != planted and index.path.parent.name == 'values-index'
            assert sorted(v for (v,) in index.conn.execute('SELECT value FROM vals')) == sorted(decoded)
    assert victim.read_text() == 'precious' and planted.is_symlink()


@pytest.mark.parametrize('damage', [
    "UPDATE vals SET value = 'fast' WHERE session >= 5",
    "UPDATE sessions SET systems = '[' WHERE id = 2",
])
def test_rows_of_the_index_that_are_not_values_are_refused_and_a_damaged_index_is_rebuilt(tmp_path, runner, damage):
    db = _history(tmp_path / 'results.db', 6, values=40)
    with results.ValueIndex(db) as index:
        for sql in ("UPDATE vals SET value = 'fast' WHERE session = 1", "UPDATE vals SET value = 9e999",
                    "UPDATE vals SET result = x'00'", "UPDATE sessions SET systems = '[' WHERE id = 1",
                    "UPDATE sessions SET systems = '{}' WHERE id = 1", "UPDATE series SET params = 'x'",
                    "INSERT INTO fleet VALUES(1, '[]')"):
            with pytest.raises(sqlite3.IntegrityError, match='CHECK constraint failed'):
                index.conn.execute(sql)      # the tables refuse what no reader could use
        index.conn.execute('PRAGMA ignore_check_constraints=ON')   # written past them: a damaged file
        index.conn.execute(damage)
        index.conn.commit()
    proc = run_report(runner, '--db', str(db))
    assert proc.returncode == 2 and f'values index {db}.values: ' in proc.stderr \
        and 'is not what ibrepro stores there (a damaged file?): removed; run the command again' in proc.stderr \
        and 'Traceback' not in proc.stderr, output(proc)
    assert not Path(f'{db}.values').exists()
    proc = run_report(runner, '--db', str(db))
    assert proc.returncode == 0, output(proc)
    assert '6 run(s)' in written(proc)[0]


def test_an_index_with_tables_not_as_we_create_them_is_rebuilt(tmp_path, runner):
    """An index of this format whose tables lack their CHECKs (rows could be anything) or that holds a trigger (SQL
    run when we write) is not read: it is rebuilt from the database, losing nothing."""
    db = _history(tmp_path / 'results.db', 6, values=40)
    with results.ValueIndex(db) as index:
        want = sorted(index.conn.execute('SELECT session, series, value FROM vals'))
    for change in ("ALTER TABLE vals RENAME TO old; CREATE TABLE vals(session, series, value, ref, lower, upper, "
                   "result); INSERT INTO vals SELECT * FROM old; DROP TABLE old",
                   "CREATE TRIGGER t AFTER INSERT ON vals BEGIN DELETE FROM vals; END"):
        with sqlite3.connect(f'{db}.values') as conn:
            conn.executescript(change)
        proc = run_report(runner, '--db', str(db))
        assert proc.returncode == 0 and ': rebuilt from the database' in proc.stderr \
            and ('table vals: not as we create it' in proc.stderr or 'trigger t: not ours' in proc.stderr), \
            output(proc)
        with results.ValueIndex(db) as index:
            assert sorted(index.conn.execute('SELECT session, series, value FROM vals')) == want
            assert results._schema_problem(index.conn) == ''

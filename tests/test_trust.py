"""Safe where others can write (issue #41): a data directory, results database, values index or verdict file
another user can change is refused in one line, before anything is run, written or lost (ibrepro.trust).

Another local user is uid 65534 (``nobody``), played with ``setpriv``: the tests that need one need root, and skip
saying so otherwise.
"""

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import broken_nightly_checkout, output
from ibrepro import pair, paths, results, rfmconfig, trust

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534

needs_another_user = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which('setpriv'),
                                        reason='playing another user (uid 65534, setpriv) needs root')


def as_nobody(*argv):
    """Run ``argv`` as uid/gid 65534 (no shell: the paths are data)."""
    subprocess.run(['setpriv', f'--reuid={NOBODY}', f'--regid={NOBODY}', '--clear-groups', *argv], check=True,
                   timeout=60)


@pytest.fixture
def shared():
    """A directory under /tmp another user can reach (pytest's own tmp_path is private to us)."""
    path = Path(tempfile.mkdtemp(prefix='ibrepro-trust-', dir='/tmp'))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _one_line(err):
    text = str(err)
    assert '\n' not in text and 'Traceback' not in text, text
    return text


def _local(home, monkeypatch, **env):
    monkeypatch.setenv('IBREPRO_HOME', str(home))
    for var in ('RFM_SQLITE_DB_FILE', 'IBREPRO_GROUP', 'SLURM_JOB_ID', 'IBREPRO_IN_ALLOCATION'):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    envs = [{'name': 'impi', 'features': []}, {'name': 'mpich', 'features': []}]
    return lambda **kw: rfmconfig.site_configuration([rfmconfig.local_system(envs)], envs, **kw)


def _schema(db, *extra):
    with sqlite3.connect(db) as conn:
        for sql in [*_script_schema(), *extra]:
            conn.execute(sql)
    conn.close()


def _script_schema():
    import importlib.util
    spec = importlib.util.spec_from_file_location('bench_report', ROOT / 'scripts' / 'bench_report.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SCHEMA


# -- the one decision -------------------------------------------------------------------------------------

def test_ours_is_owned_by_us_and_written_by_no_one_else(tmp_path):
    mine = tmp_path / 'mine'
    mine.mkdir(mode=0o700)
    assert trust.problem(mine) is None and trust.problem(mine / 'not-yet') is None
    mine.chmod(0o777)
    why = trust.problem(mine / 'below', root=mine, name='IBREPRO_HOME')
    assert why.startswith(f'{mine} (owner ') and 'mode 0777) is writable by others: chmod go-w' in why
    assert 'IBREPRO_HOME' in why and '\n' not in why
    mine.chmod(0o700)
    (mine / 'file').write_text('x')
    assert 'is not a directory' in trust.problem(mine / 'file')
    assert 'is not a regular file' in trust.problem(mine, kind='file')


def test_a_sticky_root_directory_is_fine_above_ours_never_as_ours():
    assert trust.problem('/tmp', root='/tmp/below') is None        # no one else can rename ours in /tmp
    why = trust.problem('/tmp', name='IBREPRO_HOME')
    assert why.startswith('/tmp (owner root, group root, mode 1777) is writable by others')


def test_a_link_is_followed_only_from_a_directory_of_ours(tmp_path):
    (tmp_path / 'real').mkdir(mode=0o700)
    (tmp_path / 'link').symlink_to(tmp_path / 'real')
    assert trust.problem(tmp_path / 'link' / 'x', root=tmp_path / 'link') is None
    (tmp_path / 'real').chmod(0o777)     # where the link leads is judged, not the link
    assert f'{tmp_path / "real"} (owner' in trust.problem(tmp_path / 'link', root=tmp_path / 'link')
    (tmp_path / 'real').chmod(0o700)
    assert 'is a symbolic link' in trust.problem(tmp_path / 'link', follow=False)


@needs_another_user
def test_another_users_entry_or_a_link_in_their_directory_is_refused(shared):
    theirs = shared / 'theirs'
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    why = trust.problem(theirs / 'sub', name='IBREPRO_HOME')
    assert why == (f'{theirs} (owner nobody, group nogroup, mode 0755) is owned by nobody, not by you: remove it '
                   '(as its owner or root) and let ibrepro create it, or set IBREPRO_HOME to a directory of yours')
    (shared / 'mine').mkdir()
    as_nobody('ln', '-s', str(shared / 'mine'), str(theirs / 'to-mine'))   # their link, even to ours
    assert 'owned by nobody' in trust.problem(theirs / 'to-mine')


def test_a_private_temporary_file_then_a_rename(tmp_path):
    out = tmp_path / 'verdict.txt'
    victim = tmp_path / 'victim'
    victim.write_text('precious')
    (tmp_path / 'verdict.txt.partial').symlink_to(victim)     # the name the old writer used: never opened now
    trust.write_file(out, 'bad n1\n', mode=0o644)
    assert out.read_text() == 'bad n1\n' and stat.S_IMODE(out.stat().st_mode) == 0o644
    assert victim.read_text() == 'precious'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['verdict.txt', 'verdict.txt.partial', 'victim']
    out.unlink()
    out.symlink_to(victim)                                     # replaced, not written through
    trust.write_file(out, 'new\n')
    assert not out.is_symlink() and victim.read_text() == 'precious'
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_directory_is_made_private_and_checked_level_by_level(tmp_path):
    made = trust.make_dir(tmp_path / 'home' / 'a' / 'b', root=tmp_path / 'home')
    assert made.is_dir()
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / 'home', made.parent, made)} == {0o700}


# -- Why 1: root ran another user's job script ---------------------------------------------------------------

@needs_another_user
def test_a_data_directory_others_can_write_is_refused_before_reframe_writes_a_job_script(shared, monkeypatch):
    """IBREPRO_HOME mode 1777: another user pre-creates the stage tree (to swap rfm_job.sh later). Refused."""
    home = shared / 'home'
    home.mkdir()
    home.chmod(0o1777)
    stage = home / 'rfm' / 'stage' / 'local' / 'default' / 'impi'
    as_nobody('mkdir', '-p', str(stage))
    config = _local(home, monkeypatch)
    with pytest.raises(trust.Refused) as err:
        config()
    assert _one_line(err.value).startswith(f'{home} (owner root, group root, mode 1777) is writable by others: '
                                           f'chmod go-w {home}, or set IBREPRO_HOME to a directory of yours')
    assert sorted(p.name for p in home.iterdir()) == ['rfm']         # nothing of ours made there

    # the directory made private again, their stage tree left behind: still refused, naming it
    home.chmod(0o755)
    with pytest.raises(trust.Refused) as err:
        config()
    assert _one_line(err.value).startswith(f'{home / "rfm"} (owner nobody, group nogroup, mode 0755) is owned by '
                                           'nobody, not by you: remove it')
    shutil.rmtree(home / 'rfm')
    assert config()['systems'][0]['prefix'] == str(home / 'rfm')      # and then it runs
    as_nobody('true')


@needs_another_user
def test_a_test_directory_left_by_another_user_is_refused(tmp_path, monkeypatch):
    home = tmp_path / 'home'
    left = home / 'rfm' / 'output' / 'local' / 'default' / 'mpich' / 'IMBPingPong'
    left.mkdir(parents=True)
    os.chown(left, NOBODY, NOBODY)
    with pytest.raises(trust.Refused, match=f'^{left} .*owned by nobody'):
        _local(home, monkeypatch)()


def test_the_data_directory_is_made_private(tmp_path, monkeypatch):
    home = tmp_path / 'home'
    _local(home, monkeypatch)()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert sorted(p.name for p in home.iterdir()) == ['logs', 'perflogs', 'run-reports']


# -- Why 2: the values index ----------------------------------------------------------------------------------

def _history(db, sessions=3):
    """A results database of ``sessions`` copies of a real run report."""
    data = json.loads((ROOT / 'tests' / 'data' / 'run-reports' / 'run-report.local_imb_short.json').read_text())
    _schema(db)
    with sqlite3.connect(db) as conn:
        for i in range(sessions):
            uuid = f'{i:08d}-0000-0000-0000-000000000000'
            data['session_info']['uuid'] = uuid
            start = 1.7e9 + i * 86400
            conn.execute('INSERT INTO sessions VALUES(?, ?, ?, ?, ?)',
                         (uuid, start, start + 60, json.dumps(data), None))
    conn.close()
    return db


@needs_another_user
def test_a_values_index_directory_another_user_made_is_refused(shared, monkeypatch):
    home = shared / 'home'
    home.mkdir()
    home.chmod(0o1777)
    monkeypatch.setenv('IBREPRO_HOME', str(home))
    (shared / 'db').mkdir()
    db = _history(shared / 'db' / 'results.db')
    # the database's own directory is not ours to write: the index would go to the data home
    monkeypatch.setattr(results.os, 'access', lambda path, mode: not str(path).startswith(str(shared / 'db')))
    index = results.ValueIndex(db)
    victim = shared / 'victim'
    victim.write_text('precious')
    as_nobody('mkdir', '-m', '0777', str(home / 'values-index'))
    as_nobody('ln', '-s', str(victim), str(index.path))        # planted where root would connect
    home.chmod(0o700)
    with pytest.raises(results.ResultsError) as err:
        index.open()
    assert _one_line(err.value).startswith(f'values index: {home / "values-index"} (owner nobody, group nogroup, '
                                           'mode 0777) is owned by nobody, not by you')
    with pytest.raises(results.ResultsError, match='^values index: .* is owned by nobody'):
        index.remove()                                         # `ibrepro results reindex` deletes nothing there
    assert victim.read_text() == 'precious' and [p.name for p in (home / 'values-index').iterdir()] == [index.path.name]


# -- Why 3: another user's results database, a trigger --------------------------------------------------------

def _with_trigger(db):
    _schema(db, 'CREATE TABLE fired(n INTEGER)',
            'CREATE TRIGGER pwn AFTER INSERT ON sessions BEGIN INSERT INTO fired VALUES(1); END')
    return db


@needs_another_user
def test_another_users_results_database_is_neither_read_nor_written(tmp_path, monkeypatch):
    db = _history(tmp_path / 'theirs.db')
    os.chown(db, NOBODY, NOBODY)
    db.chmod(0o666)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    config = _local(tmp_path / 'home', monkeypatch, RFM_SQLITE_DB_FILE=str(db))
    with pytest.raises(trust.Refused) as err:
        config()
    assert _one_line(err.value).startswith(f'{db} (owner nobody, group nogroup, mode 0666) is owned by nobody, not '
                                           'by you: remove it (as its owner or root) and let ibrepro create it, or '
                                           'set RFM_SQLITE_DB_FILE')
    with pytest.raises(results.ResultsError, match=f'^results database {db} .*owned by nobody'):
        results.stored_sessions(db)
    proc = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'where'], capture_output=True, text=True, timeout=120,
                          env={**os.environ, 'RFM_SQLITE_DB_FILE': str(db)}, cwd=ROOT)
    assert proc.returncode == 1 and 'UNREADABLE: results database' in proc.stdout, proc.stdout + proc.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before and not Path(f'{db}.values').exists()


def test_a_results_database_with_a_trigger_is_refused_before_reframe_stores_a_session(tmp_path, monkeypatch):
    db = _with_trigger(tmp_path / 'results.db')
    before = db.read_bytes()
    with pytest.raises(trust.Refused) as err:
        _local(tmp_path / 'home', monkeypatch, RFM_SQLITE_DB_FILE=str(db))()
    assert _one_line(err.value) == (f'{db}: holds trigger(s) pwn, which ReFrame never creates (SQL that would run when '
                                    'the database is written): refused; remove them, or move the file away and let '
                                    'ReFrame start a new one')
    with pytest.raises(results.ResultsError, match='holds trigger'):
        results.check_sessions('IMBPingPong', db=db)
    assert db.read_bytes() == before


def test_a_database_beside_which_another_user_left_a_journal_is_refused(tmp_path):
    db = _history(tmp_path / 'results.db')
    journal = Path(f'{db}-journal')
    journal.write_bytes(b'')
    journal.chmod(0o666)      # a hot journal is played back into the database when it is opened
    with pytest.raises(results.ResultsError, match=f'{journal} .*writable by others'):
        results.stored_sessions(db)


def test_an_index_computed_on_every_write_is_refused_and_a_question_mark_is_part_of_the_path(tmp_path):
    odd = tmp_path / 'a?mode=rwc#x'
    odd.mkdir()
    db = _history(odd / 'results.db', sessions=2)
    assert len(results.stored_sessions(db)) == 2 and not (tmp_path / 'a').exists()
    with sqlite3.connect(db) as conn:
        conn.execute('CREATE INDEX heavy ON sessions(length(zeroblob(1000000)), json_blob)')
    conn.close()
    with pytest.raises(results.ResultsError, match=r'index heavy is on an expression .*: refused; drop it$'):
        results.stored_sessions(db)


# -- Why 4: a never-ending view ---------------------------------------------------------------------------------

def _never_ending_view(db):
    """A database whose ``sessions`` is a view that never ends."""
    with sqlite3.connect(db) as conn:
        conn.execute('CREATE VIEW sessions(uuid, session_start_unix, session_end_unix, json_blob, report_file) AS '
                     'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) '
                     "SELECT printf('%08d', n), 1.7e9, 1.7e9, '{}', NULL FROM r")
    conn.close()
    return db


def test_sessions_as_a_never_ending_view_is_refused_at_once(tmp_path, monkeypatch):
    db = _never_ending_view(tmp_path / 'results.db')
    with pytest.raises(results.ResultsError) as err:
        results.stored_sessions(db)
    assert _one_line(err.value) == (f'{db}: sessions is a view, not the table ReFrame creates: refused; move the '
                                    'file away and let ReFrame start a new one')
    with pytest.raises(trust.Refused, match='sessions is a view'):
        _local(tmp_path / 'home', monkeypatch, RFM_SQLITE_DB_FILE=str(db))()
    proc = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'report', '--db', str(db), '--output-dir',
                           str(tmp_path / 'reports')], capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'IBREPRO_HOME': str(tmp_path / 'home')}, cwd=ROOT)
    assert proc.returncode == 2 and 'sessions is a view' in proc.stderr, proc.stdout + proc.stderr
    assert 'Traceback' not in proc.stderr


def test_every_query_has_a_bound(tmp_path, monkeypatch):
    """A query no crafted file can make endless: the progress handler stops it after a number of SQLite steps."""
    db = _history(tmp_path / 'results.db', sessions=1)
    with sqlite3.connect(db) as conn:
        conn.executemany('INSERT INTO testcases VALUES(?, ?, ?, ?, ?, ?, ?)',
                         [(f'Case{i}', 's', 'p', 'e', 0, 'x', str(i)) for i in range(20000)])
    conn.close()
    assert results.check_sessions('Case7', db=db) == []      # within the bound
    monkeypatch.setattr(results, 'PROGRESS_EVERY', 100)
    monkeypatch.setattr(results, 'PROGRESS_LOOKS', 50)
    assert len(results.stored_sessions(db)) == 1              # one session: a few steps
    with pytest.raises(results.ResultsError) as err:
        results.check_sessions('Case7', db=db)                # every test case: thousands
    assert _one_line(err.value) == (f'{db}: a query ran past 5e+03 SQLite steps (a crafted or damaged database?): '
                                    'stopped')


# -- Why 5: refusals are one line -------------------------------------------------------------------------------

def test_a_refusal_under_reframe_is_a_config_error_of_one_line():
    code = ('import reframe.core.exceptions as e\n'
            'from ibrepro import rfmconfig\n'
            'try:\n'
            '    rfmconfig.user_prefixes({"IBREPRO_PREFIXES": "/opt/$(reboot)"})\n'
            'except e.ConfigError as err:\n'
            '    print("ConfigError:", err)\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.stdout.startswith("ConfigError: IBREPRO_PREFIXES='/opt/$(reboot)': a value that reaches"), proc.stderr
    assert proc.stdout.count('\n') == 1
    with pytest.raises(ValueError):       # outside ReFrame, what it always was
        rfmconfig.user_prefixes({'IBREPRO_PREFIXES': '/opt/$(reboot)'})


def test_a_broken_nightly_subset_is_one_line(tmp_path, monkeypatch):
    from ibrepro.catalog import nightly_cases
    (tmp_path / 'nightly.yaml').write_text('cases: [\n')
    monkeypatch.setattr(paths, 'REFERENCE_DATA', tmp_path)
    nightly_cases.cache_clear()
    try:
        with pytest.raises(trust.Refused) as err:
            _local(tmp_path / 'home', monkeypatch)(nightly_subset=True)
    finally:
        nightly_cases.cache_clear()
    assert _one_line(err.value).startswith('the nightly subset cannot be read: ')


def _pair_spec(path, **fields):
    spec = {'version': 2, 'program': 'true', 'flows': [{'id': 0, 'port': 18515, 'server': {'node': 0},
                                                        'client': {'node': 1}}], **fields}
    path.write_text(json.dumps(spec))
    return path


@pytest.mark.parametrize('value', ['²', '1e3', '-1', '99999999999'])
def test_a_rank_that_is_no_rank_is_one_line(tmp_path, value):
    spec = _pair_spec(tmp_path / 'flows.json')
    work = tmp_path / 'work'
    work.mkdir()
    proc = subprocess.run([sys.executable, pair.__file__, str(spec), '--workdir', str(work)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, 'SLURM_PROCID': value, 'SLURM_NTASKS': '2'})
    lines = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 2 and len(lines) == 1, lines
    assert lines[0] == f'ibrepro pair: SLURM_PROCID={value!r} is not a task rank (ASCII digits, 0 to 1): the ' \
                       'launcher\'s environment is broken'
    assert not list(work.iterdir())


def test_a_pair_spec_past_its_bounds_is_one_line_and_writes_nothing(tmp_path):
    work = tmp_path / 'work'
    work.mkdir()
    for fields, reason in [({'nodes': 10 ** 8}, "field 'nodes' must be 1 to 16384, not 100000000"),
                           ({'nodes': 0}, "field 'nodes' must be 1 to 16384, not 0")]:
        spec = _pair_spec(tmp_path / 'flows.json', **fields)
        proc = subprocess.run([sys.executable, pair.__file__, str(spec), '--workdir', str(work)], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr == f'ibrepro pair: {spec}: {reason}\n', proc.stderr
    with pytest.raises(pair.SpecError, match='processes'):
        pair.check_spec({'version': 2, 'program': 'x', 'flows': [
            {'id': 0, 'port': 1, 'server': {'node': 0, 'processes': 10 ** 6}, 'client': {'node': 1}}]})
    with pytest.raises(pair.SpecError, match="'port' must be 1 to 65535"):
        pair.check_spec({'version': 2, 'program': 'x', 'flows': [
            {'id': 0, 'port': 70000, 'server': {'node': 0}, 'client': {'node': 1}}]})
    assert not list(work.iterdir())


# -- the fleet verdict, reports -----------------------------------------------------------------------------------

def test_a_verdict_file_in_a_directory_others_can_write_is_refused_before_anything_is_drained(tmp_path):
    sweep = tmp_path / 'sweep.json'
    sweep.write_text(json.dumps({'faults': [{'component': 'n1:mlx5_0/1', 'fault': 'port width 1x', 'evidence': 'e'}]}))
    shared = tmp_path / 'shared'
    shared.mkdir()
    shared.chmod(0o1777)
    proc = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'fleet', 'verdict', '--sweep', str(sweep), '--out',
                           str(shared / 'verdict.txt'), '--apply'], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == '', proc.stdout
    assert proc.stderr == (f'ibrepro fleet verdict: {shared} ({trust.describe(shared.lstat())}) is writable by '
                           f'others: chmod go-w {shared}, or set --out to a directory of yours\n')
    assert not list(shared.iterdir())


def test_a_report_is_written_only_into_a_directory_of_ours(tmp_path):
    from ibrepro.report import render
    out = tmp_path / 'reports'
    out.mkdir()
    out.chmod(0o777)
    model = {'system': 'local', 'newest': {'time_start': '2026-11-29T01:00:00'}}
    with pytest.raises(trust.Refused, match=f'^{out} .*writable by others'):
        render.write(model, out)
    assert not list(out.iterdir())


# -- a shared group directory, asked for ---------------------------------------------------------------------------

@needs_another_user
def test_a_shared_group_directory_works_when_asked_for_and_holds_for_everyone_outside(tmp_path, monkeypatch):
    home = tmp_path / 'home'
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)           # a member of the group made it: nobody's primary group is nogroup
    home.chmod(0o2770)
    config = _local(home, monkeypatch)
    with pytest.raises(trust.Refused, match='owned by nobody'):
        config()
    monkeypatch.setenv('IBREPRO_GROUP', 'nogroup')
    assert config()['storage'][0]['sqlite_db_file_mode'] == '660'      # the group writes the database and its lock
    logs = home / 'logs'
    assert (logs.stat().st_gid, stat.S_IMODE(logs.stat().st_mode)) == (NOBODY, 0o2770)
    # someone outside the group (uid 1, daemon) owns a directory of the group's: refused all the same
    os.chown(logs, 1, NOBODY)
    with pytest.raises(trust.Refused, match=f'^{logs} .*owned by daemon'):
        config()
    os.chown(logs, 0, NOBODY)
    logs.chmod(0o2777)                        # and writable by others is never the group's
    with pytest.raises(trust.Refused, match=f'^{logs} .*writable by others'):
        config()
    monkeypatch.setenv('IBREPRO_GROUP', 'no-such-group-here')
    with pytest.raises(trust.Refused, match="^IBREPRO_GROUP='no-such-group-here': no such group"):
        config()


# -- through ReFrame itself: one line, no traceback, nothing run ---------------------------------------------------

def _refusal(proc):
    """The one line ReFrame prints for a refused configuration (its note on where its log went aside)."""
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1 and 'Traceback' not in text, output(proc)
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith('Log file(s) saved in')]
    assert len(lines) == 1 and lines[0].startswith('ERROR: failed to load configuration: '), output(proc)
    return lines[0][len('ERROR: failed to load configuration: '):]


@needs_another_user
def test_reframe_runs_no_job_in_a_data_directory_others_can_write(shared, reframe):
    home = reframe.home = shared / 'home'
    reframe.env['IBREPRO_HOME'] = str(home)
    home.mkdir()
    home.chmod(0o1777)
    as_nobody('mkdir', '-p', str(home / 'rfm' / 'stage' / 'local' / 'default' / 'impi'))
    proc = reframe('--nocolor', '-r', '-n', 'SoftwareVersions', checks='reframe-checks/system')
    assert _refusal(proc).startswith(f'{home} (owner root, group root, mode 1777) is writable by others')
    assert sorted(str(p.relative_to(home)) for p in home.rglob('*')) == [
        'rfm', 'rfm/stage', 'rfm/stage/local', 'rfm/stage/local/default', 'rfm/stage/local/default/impi']


def test_reframe_never_stores_a_session_into_a_database_with_a_trigger(tmp_path, reframe):
    db = _with_trigger(tmp_path / 'results.db')
    before = db.read_bytes()
    for args in (['--list-stored-sessions'], ['-r', '-n', 'SoftwareVersions']):
        proc = reframe('--nocolor', *args, checks='reframe-checks/system', env={'RFM_SQLITE_DB_FILE': str(db)})
        assert _refusal(proc).startswith(f'{db}: holds trigger(s) pwn, which ReFrame never creates')
    assert db.read_bytes() == before and not (reframe.home / 'rfm').exists()


def test_reframe_lists_no_sessions_from_a_never_ending_view(tmp_path, reframe):
    db = _never_ending_view(tmp_path / 'results.db')
    proc = reframe('--nocolor', '--list-stored-sessions', checks='reframe-checks/system',
                   env={'RFM_SQLITE_DB_FILE': str(db)})
    assert _refusal(proc) == (f'{db}: sessions is a view, not the table ReFrame creates: refused; move the file away '
                              'and let ReFrame start a new one')


@pytest.mark.parametrize('variable, value, named', [
    ('IBREPRO_PREFIXES', '/opt/$(touch pwned)', 'IBREPRO_PREFIXES='),
    ('IBREPRO_DEPS', '/tmp/`touch pwned`', 'IBREPRO_DEPS=')])
def test_reframe_refuses_a_setting_in_one_line(tmp_path, reframe, variable, value, named):
    proc = reframe('--nocolor', '-l', checks='reframe-checks/system',
                   env={variable: value.replace('/tmp', str(tmp_path)), 'IBREPRO_ROOT': str(ROOT)})
    line = _refusal(proc)
    assert named in line and 'may not contain' in line
    assert not list(tmp_path.rglob('pwned')) and not (ROOT / 'pwned').exists()


def test_reframe_refuses_a_broken_nightly_subset_in_one_line(tmp_path, reframe):
    root = broken_nightly_checkout(tmp_path)
    proc = reframe('--nocolor', '-l', '--mode', 'nightly', '--system', 'example-cluster:hdr',
                   config='configs/example-cluster.py',
                   env={'IBREPRO_ROOT': str(root), 'IBREPRO_DEPS': str(paths.DEPS_DIR)})
    assert _refusal(proc).startswith('the nightly subset cannot be read: nightly.yaml:14: malformed YAML')

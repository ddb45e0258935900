"""Stored data that is broken or hostile: what the report, baseline and `where` make of it.

Histories as in test_report_store.py (synthetic results databases in ReFrame 4.10's schema); impossible values are
stored by real ReFrame sessions (tests/checks/stored_values.py).
"""

import copy
import json
import re
import sqlite3
from pathlib import Path

import pytest

from conftest import ReFrameRunner, output
from ibrepro import rfmconfig
from test_report import FIXTURE, MAKE_RUN, report_inline, run_report, written
from test_report_store import _blobs, _history, _store, bench


@pytest.fixture
def runner(tmp_path):
    return ReFrameRunner(tmp_path / 'ibrepro-home')


# -- impossible values already stored ---------------------------------------------------------------------

@pytest.fixture(scope='module')
def impossible(tmp_path_factory):
    """Three sessions of plausible values, then one that also stores inf, NaN, -5 and 1e308, by real ReFrame runs."""
    runner = ReFrameRunner(tmp_path_factory.mktemp('impossible') / 'ibrepro-home')
    # one environment, whichever this machine declares first (`system` exists only with an MPI or benchmarks on PATH)
    environ = rfmconfig.local_environments()[0]['name']
    for kind in ['clean'] * 3 + ['']:
        proc = runner('-r', '-p', f'^{environ}$', '-n', f'StoredValues%kind={kind}' if kind else 'StoredValues',
                      checks='tests/checks/stored_values.py')
        assert 'Current session stored with UUID' in proc.stdout, output(proc)
    return runner


@pytest.mark.integration
def test_impossible_values_stored_by_reframe_never_block_a_report(impossible):
    runner = impossible
    (newest, blob), = _blobs(runner.db)[-1:]
    assert 'Infinity' in blob and 'NaN' in blob      # what ReFrame stores for them...
    with sqlite3.connect(runner.db) as conn, pytest.raises(sqlite3.OperationalError, match='malformed JSON'):
        conn.execute("SELECT json_extract(json_blob, '$.session_info.uuid') FROM sessions").fetchall()   # ...and SQLite

    expected = [f'session {newest}: test case StoredValues %kind=impossible: lat_8 = inf: not a finite number: '
                'left out',
                f'session {newest}: test case StoredValues %kind=impossible: lat_16 = nan: not a finite number',
                f'session {newest}: test case StoredValues %kind=impossible: bw_1024 = -5.0: bw must be >= 0',
                f'session {newest}: test case StoredValues %kind=impossible: bw_2048 = 1e+308: bw must be >= 0 and '
                '<= 1e+09 MB/s']
    for args in ([], ['--nightly', '--min-history', '2'], ['--no-index'], ['--last', '2']):
        proc = run_report(runner, *args)
        assert proc.returncode == 0, output(proc)
        assert all(line in proc.stderr for line in expected), output(proc)
        html, md = written(proc)
        assert 'lat_32' in html and 'Infinity' not in html and 'inf us' not in html   # the valid value is kept
    older = run_report(runner, '--sessions', _blobs(runner.db)[0][0])       # older sessions report as before
    assert older.returncode == 0 and 'left out' not in older.stderr, output(older)

    where = runner.ibrepro('where')
    assert where.returncode == 0 and 'stored sessions:    4' in where.stdout, output(where)
    refs = runner.home / 'refs.yaml'
    proc = runner.ibrepro('baseline', '--last', '4', '--output', str(refs))
    assert proc.returncode == 0 and all(line in proc.stderr for line in expected[:1]), output(proc)
    text = refs.read_text()
    assert 'lat_32: [2.5' in text and 'lat_8: [1.5' in text and not re.search(r'\.inf|\.nan|e\+308', text, re.I)


# -- malformed stored sessions and run reports --------------------------------------------------------------

def test_malformed_sessions_each_give_one_line_and_the_rest_reports(tmp_path, runner, capsys, monkeypatch):
    db = _history(tmp_path / 'results.db', 12, values=100)
    rows = _blobs(db)
    good = json.loads(rows[-1][1])
    start = good['session_info']['time_start_unix']
    broken = {
        'aaaaaaa1': ('[1, 2]', 'not a ReFrame run report (a JSON array, not an object)'),
        'aaaaaaa2': ('{"runs": []}', 'not a ReFrame run report (session_info is null, not an object)'),
        'aaaaaaa3': ('[' * 100000 + ']' * 100000, 'not a JSON run report (nested too deeply to read)'),
        'aaaaaaa4': ('{"session_info": ', 'not a JSON run report (Expecting value'),
        'aaaaaaa5': (json.dumps({**good, 'session_info': {**good['session_info'], 'time_start_unix': 1e308}}),
                     'session_info.time_start_unix is 1e+308, not a time'),
        'aaaaaaa6': (json.dumps({**good, 'runs': {'0': 'x'}}),
                     'not a ReFrame run report (runs is object, not a list)'),
    }
    for n, (uuid, (blob, _)) in enumerate(broken.items()):
        _store(db, uuid, blob, start=start - 3600 * (n + 1))
    # an older session with malformed test cases, and the newest with malformed details the page shows
    older = json.loads(rows[-2][1])
    cases = [c for c in older['runs'][0]['testcases'] if c.get('perfvalues')]
    cases[0]['perfvalues'], cases[1]['tags'] = 'x', 5
    cases[2]['perfvalues'][next(iter(cases[2]['perfvalues']))] = {'value': 1}
    _store(db, rows[-2][0], json.dumps(older))
    for case in good['runs'][0]['testcases']:
        if case['name'] == 'SoftwareVersions':
            case['software'] = {'mpi': 'not an object'}
            case['platform'] = {**case['platform'], 'features': 'mpi'}
        if case['name'] == 'RdmaTopology':
            case['topology'] = {'devices': [{'name': 'mlx4_0', 'ports': 'x'}]}
    _store(db, rows[-1][0], json.dumps(good))

    proc = run_report(runner, '--db', str(db), '--nightly', '--min-history', '5')
    assert proc.returncode == 0, output(proc)
    for uuid, (_, reason) in broken.items():
        assert f'ibrepro report: skipped: session {uuid}: {reason}' in proc.stderr, output(proc)
    for line in [f'session {rows[-2][0]}: test case {cases[0]["name"]}: perfvalues is string, not object: left out',
                 f'session {rows[-2][0]}: test case {cases[1]["name"]}: tags is number, not array: left out',
                 f'session {rows[-2][0]}: test case {cases[2]["name"]}: ',
                 f'session {rows[-1][0]}: test case SoftwareVersions @default+impi: software unreadable '
                 '(AttributeError',
                 f'session {rows[-1][0]}: test case SoftwareVersions @default+mpich: platform unreadable (TypeError',
                 f'session {rows[-1][0]}: test case RdmaTopology @default+impi: topology unreadable']:
        assert line in proc.stderr, output(proc)
    assert 'Traceback' not in proc.stderr and 'no regression in' in proc.stdout
    html, md = written(proc)
    assert 'aaaaaaa3' in md and 'nested too deeply' in html

    where = runner.ibrepro('where', env={'RFM_SQLITE_DB_FILE': str(db)})
    assert where.returncode == 0 and 'stored sessions:    12, and 6 unreadable' in where.stdout, output(where)

    # the same documents as JSON run reports: one line each, naming the file
    for uuid, (blob, reason) in broken.items():
        path = tmp_path / f'{uuid}.json'
        path.write_text(blob)
        proc = report_inline(runner, capsys, monkeypatch, '--report', str(path), str(MAKE_RUN))
        assert proc.returncode == 0 and f'{path}: {reason}' in proc.stderr, output(proc)


def test_where_tells_empty_from_unreadable(tmp_path, runner):
    def where(db):
        return runner.ibrepro('where', env={'RFM_SQLITE_DB_FILE': str(db)})

    proc = where(tmp_path / 'none.db')
    assert proc.returncode == 0 and 'none yet (no results database' in proc.stdout
    empty = tmp_path / 'empty.db'
    with sqlite3.connect(empty) as conn:
        for sql in bench.SCHEMA:
            conn.execute(sql)
    proc = where(empty)
    assert proc.returncode == 0 and 'stored sessions:    0 (empty)' in proc.stdout, output(proc)
    garbage = tmp_path / 'garbage.db'
    garbage.write_bytes(b'\x00not a database\n' * 512)
    proc = where(garbage)
    assert proc.returncode == 1 and 'stored sessions:    UNREADABLE:' in proc.stdout, output(proc)
    assert 'file is not a database' in proc.stdout
    proc = run_report(runner, '--db', str(garbage))
    assert proc.returncode == 2 and 'cannot read the results database: file is not a database' in proc.stderr


# -- no code from data ------------------------------------------------------------------------------------

def test_the_report_imports_no_configuration_a_session_names(tmp_path, runner, capsys, monkeypatch):
    marker = tmp_path / 'executed'
    evil = tmp_path / 'evil_config.py'
    evil.write_text(f'open({str(marker)!r}, "w").write("ran")\nsite_configuration = {{"systems": []}}\n')
    data = json.loads(FIXTURE.read_text())   # a session without the perftest families
    data['session_info']['config_files'] = ['<builtin>', str(evil)]
    path = tmp_path / 'run-report.json'
    path.write_text(json.dumps(data))
    db = tmp_path / 'results.db'
    with sqlite3.connect(db) as conn:
        for sql in bench.SCHEMA:
            conn.execute(sql)
    _store(db, data['session_info']['uuid'], json.dumps(data), start=data['session_info']['time_start_unix'])

    for args in (['--report', str(path)], ['--db', str(db)]):
        proc = report_inline(runner, capsys, monkeypatch, *args)
        assert proc.returncode == 0, output(proc)
        assert not marker.exists()
        html = written(proc)[0]
        # why families did not run, from the platforms the session recorded (SoftwareVersions)
        assert re.search(r'PerftestLatency %operation=send</td><td>[^<]*</td><td>no RDMA device \(to enable: ', html)
        assert 'evil_config.py' in html   # shown as provenance, never run
    # a configuration given explicitly
    proc = report_inline(runner, capsys, monkeypatch, '--report', str(path), '-C', 'configs/local.py')
    assert proc.returncode == 0 and not marker.exists()
    assert re.search(r'PerftestLatency %operation=send</td><td>[^<]*</td><td>no RDMA device \(to enable: ',
                     written(proc)[0])


# -- what CI posts ------------------------------------------------------------------------------------------

def test_summary_md_neutralises_what_a_run_can_write(tmp_path, runner):
    data = json.loads(MAKE_RUN.read_text())
    data['session_info']['uuid'] = 'c0ffee\n<img src=x onerror=alert(1)>\n'
    data['session_info']['version'] = ('4.10 @admin ~security https://evil.example/x www.evil.example #1 !2 '
                                       'HTTP://EVIL.EXAMPLE ftp://evil.example me@evil.example')
    for case in data['runs'][0]['testcases']:
        if case.get('perfvalues') and case['name'].startswith('IMBPointToPoint'):
            case['name'] = case['display_name'] = f'{case["name"]} $\\frac{{1}}{{@cc}}$'   # mathtext in a plot title
    path = tmp_path / 'hostile.json'
    path.write_text(json.dumps(data))

    proc = run_report(runner, '--report', str(path))
    assert proc.returncode == 0, output(proc)
    html, md = written(proc)
    assert '`c0ffee <img src=x onerror=alert(1)>`' in md          # one line: the code span holds it
    for raw in ('@admin', '~security', 'https://evil', 'www.evil', '@cc', '#1', '!2'):
        assert raw not in md, raw
    assert '@\u200badmin' in md and r'https\[:\]//evil.example/x' in md    # the text stays readable
    assert '<img src=x' not in html
    # as GitHub and GitLab render it (cmark-gfm with its autolink extension): no link but the report's own
    import cmarkgfm
    rendered = cmarkgfm.github_flavored_markdown_to_html(md)
    assert re.findall(r'<a [^>]*>', rendered) == [f'<a href="{Path(proc.stdout.splitlines()[0]).name}">'], rendered
    assert 'https[:]//evil.example/x' in rendered and 'www[.]evil.example' in rendered
    assert 'me[@]evil.example' in rendered and 'HTTP[:]//EVIL.EXAMPLE' in rendered


# -- the references the nightly run is judged against --------------------------------------------------

@pytest.mark.parametrize('text, where', [
    ('IMBPointToPoint:\n  $index: [$partition, $environ\n  local:default: {}\n', ':3: malformed YAML'),
    ('IMBPointToPoint: &c\n  $index: [$partition]\nOther: *c\n', ':1: YAML anchors and aliases are not accepted'),
    ('IMBPointToPoint:\n  $index: [$partition, $environ]\n  local:default: 5\n', 'IMBPointToPoint'),
])
def test_nightly_fails_when_the_references_cannot_be_read(tmp_path, runner, capsys, monkeypatch, text, where):
    refs = tmp_path / 'refs'
    refs.mkdir()
    (refs / 'references.yaml').write_text(text)
    env = {'RFM_REFERENCE_PREFIX': str(refs)}
    proc = report_inline(runner, capsys, monkeypatch, '--report', str(MAKE_RUN), '--nightly', env=env)
    assert proc.returncode == 2, output(proc)
    assert f'references of local unreadable: {refs / "references.yaml"}' in proc.stderr and where in proc.stderr
    plain = report_inline(runner, capsys, monkeypatch, '--report', str(MAKE_RUN), env=env)
    assert plain.returncode == 0 and 'references of local unreadable' in plain.stderr


# -- where baseline writes -------------------------------------------------------------------------------

def test_baseline_writes_only_under_the_systems_directory(tmp_path, runner):
    root = tmp_path / 'checkout'
    (root / 'reference-data' / 'systems').mkdir(parents=True)
    env = {'IBREPRO_ROOT': str(root)}
    data = json.loads(MAKE_RUN.read_text())
    for system, ok in [('../../../outside', False), ('/tmp/abs', False), ('evil\nname', False), ('local', True)]:
        hostile = copy.deepcopy(data)
        for case in hostile['runs'][0]['testcases']:
            case['system'] = system
        path = tmp_path / 'run.json'
        path.write_text(json.dumps(hostile))
        proc = runner.ibrepro('baseline', '--report', str(path), env=env)
        if ok:
            assert proc.returncode == 0, output(proc)
            assert (root / 'reference-data' / 'systems' / 'local' / 'references.yaml').is_file()
        else:
            assert proc.returncode == 1 and 'is not a ReFrame system name' in proc.stderr, output(proc)
            assert 'use --system and --output' in proc.stderr or 'elsewhere with --system and --output' in proc.stderr
    written_files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob('*.yaml'))
    assert written_files == ['checkout/reference-data/systems/local/references.yaml']
    assert not Path('/tmp/abs').exists()

    # elsewhere only when asked
    proc = runner.ibrepro('baseline', '--report', str(path), '--output', str(tmp_path / 'mine.yaml'), env=env)
    assert proc.returncode == 0 and (tmp_path / 'mine.yaml').is_file(), output(proc)
    # an existing file it cannot read is not overwritten
    target = root / 'reference-data' / 'systems' / 'local' / 'references.yaml'
    target.write_text('a: &x [1]\nb: *x\n')
    proc = runner.ibrepro('baseline', '--report', str(path), env=env)
    assert proc.returncode == 1, output(proc)
    assert 'systems/local/references.yaml:1: YAML anchors and aliases' in proc.stderr
    assert target.read_text() == 'a: &x [1]\nb: *x\n'
    assert runner.ibrepro('baseline', '--report', str(path), '--replace', env=env).returncode == 0
    assert '&' not in target.read_text() and '*' not in target.read_text()


def test_baseline_never_writes_a_non_finite_number(tmp_path):
    from ibrepro import baseline
    with pytest.raises(ValueError, match=r'references\.C\.local:default\.e\.lat_8: inf is not a reference'):
        baseline.write({'C': {'local:default': {'e': {'lat_8': [float('inf'), None, 0.1, 'us']}}}},
                       tmp_path / 'r.yaml', [], {})
    assert not (tmp_path / 'r.yaml').exists()


def test_a_session_uuid_writes_no_yaml_into_the_baseline_header(tmp_path, runner):
    db = _history(tmp_path / 'results.db', 3, values=40)
    uuid, blob = _blobs(db)[-1]
    data = json.loads(blob)
    data['session_info']['uuid'] = 'a\nX: [1]\n#'
    _store(db, uuid, json.dumps(data))
    refs = tmp_path / 'refs.yaml'
    proc = runner.ibrepro('baseline', '--last', '3', '--output', str(refs), env={'RFM_SQLITE_DB_FILE': str(db)})
    assert proc.returncode == 0, output(proc)
    import yaml
    doc = yaml.safe_load(refs.read_text())
    assert 'X' not in doc and refs.read_text().splitlines()[1].endswith(', a?X???1?')



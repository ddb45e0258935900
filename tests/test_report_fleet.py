"""The report's fleet section, from real pair-round nights on the namespace fat tree (tests/data/fleet: three run
reports of reframe-checks/system/fleet_pairs.py, MANIFEST.md there): each night judged again from its stored flows,
the evidence chain of what the newest night named, the leaf x leaf table and each component's last verification;
stored strings escaped; a night whose flows cannot be judged is said, not a crash."""

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from ibrepro import results

from ibrepro.fleet import history as fleet_history

FLEET = Path(__file__).parent / 'data' / 'fleet'
NIGHTS = ['fattree-clean', 'fattree-uplink-leaf1-spine1-25', 'fattree-downlink-spine0-leaf2-25']


def stored_nights(db, reports=None):
    """A results database (ReFrame 4.10's schema) holding real nights' run reports, unedited: the three of
    ``NIGHTS`` unless ``reports`` (paths) are given."""
    from test_report import _script
    with sqlite3.connect(db) as conn:
        for sql in _script('bench_report').SCHEMA:
            conn.execute(sql)
        for path in reports or [FLEET / f'{name}.report.json' for name in NIGHTS]:
            data = json.loads(Path(path).read_text())
            info = data['session_info']
            conn.execute('INSERT INTO sessions VALUES(?, ?, ?, ?, ?)', (info['uuid'], info['time_start_unix'],
                         info['time_end_unix'], json.dumps(data), None))
            conn.executemany('INSERT INTO testcases VALUES(?, ?, ?, ?, ?, ?, ?)',
                             [(c['name'], c['system'], c['partition'], c['environ'], c['job_completion_time_unix'],
                               info['uuid'], c['uuid']) for run in data['runs'] for c in run['testcases']])
    return db


def newest_night_section(tmp_path, db):
    """The fleet section of ``ibrepro report --last 1`` on the results database ``db`` (HTML)."""
    done = subprocess.run([sys.executable, '-m', 'ibrepro', 'report', '--db', str(db), '--last', '1',
                           '--output-dir', str(tmp_path / 'out')], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    html = Path(done.stdout.splitlines()[0]).read_text()
    return html[html.index('<h2 id="fleet">'):html.index('<h2 id="provenance">')]


def report(tmp_path, *paths):
    done = subprocess.run([sys.executable, '-m', 'ibrepro', 'report', '--report', *map(str, paths),
                           '--output-dir', str(tmp_path / 'out')], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    html, md = [Path(line) for line in done.stdout.splitlines()[:2]]
    return html.read_text(), md.read_text()


def test_the_fleet_section_judges_each_night_again_and_shows_the_evidence(tmp_path):
    html, md = report(tmp_path, *(FLEET / f'{n}.report.json' for n in NIGHTS))
    section = html[html.index('<h2 id="fleet">'):html.index('<h2 id="provenance">')]
    rows = section[section.index('id="fleet-nights"'):section.index('</table>')].split('<tr>')[2:]
    assert len(rows) == 3 and 'nothing' in rows[0]
    named, cleared = rows[1].split('</td>')[5:7]
    assert 'uplink leaf1&gt;spine1 = downlink spine1&gt;leaf2' in named and 'cable' not in named + cleared
    # the downlink night as stored named three; judged again, the link alone: the cables, of whose flows only
    # those through the link were slow, are no suspects
    named, cleared = rows[2].split('</td>')[5:7]
    assert 'uplink leaf1&gt;spine0 = downlink spine0&gt;leaf2' in named and 'cable' not in named + cleared
    # its evidence: the night's slow flows, then the link round's re-runs
    chain = section[section.index('class="fleet-named"'):]
    assert chain.count('<td>night</td>') >= 2 and chain.count('<td>confirmation-links</td>') == 2
    assert 'id="fleet-leaves"' in section and '<th>leaf1</th><th>leaf2</th>' in section
    assert 'id="fleet-verified"' in section and '<a href="#fleet">Fleet</a>' in html
    fleet_line = next(line for line in md.splitlines() if line.startswith('Fleet, newest night'))
    assert '**named uplink leaf1\\>spine0 = downlink spine0\\>leaf2**' in fleet_line and 'cable' not in fleet_line


def test_stored_strings_are_escaped_and_unjudgeable_flows_are_said(tmp_path):
    data = json.loads((FLEET / 'fattree-uplink-leaf1-spine1-25.report.json').read_text())
    case = next(c for run in data['runs'] for c in run['testcases'] if 'fleet_flows' in c)
    hostile = '<img src=x onerror=alert(1)>@all'
    swap = json.dumps(case['fleet_flows']).replace('node6', hostile.replace('"', ''))
    case['fleet_flows'] = json.loads(swap)
    case['fleet_confirmation'] = json.loads(json.dumps(case['fleet_confirmation']).replace('node6', hostile))
    case['fleet_fabric'] = json.loads(json.dumps(case['fleet_fabric']).replace('node6', hostile))
    (tmp_path / 'hostile.json').write_text(json.dumps(data))
    html, md = report(tmp_path, tmp_path / 'hostile.json')
    assert '<img src=x' not in html and '&lt;img src=x onerror=alert(1)&gt;' in html
    assert '\\<img src=x onerror=alert(1)\\>' in md and not re.search(r'(?<!\\)<img', md)   # Markdown-escaped

    broken = json.loads((FLEET / 'fattree-clean.report.json').read_text())
    case = next(c for run in broken['runs'] for c in run['testcases'] if 'fleet_flows' in c)
    case['fleet_flows'] = [{'host': 'node1', 'bw': 4.7}]              # no peer
    (tmp_path / 'broken.json').write_text(json.dumps(broken))
    html, _ = report(tmp_path, tmp_path / 'broken.json')
    assert 'its pair-round flows cannot be judged' in html


def test_stored_fleet_variables_of_the_wrong_type_are_named_not_a_crash():
    """A stored pair-round case whose loggable variables are not what the check stores (a number for the named
    components, a string for the fabric, numbers for flows): the report says which session, case and field; the
    history leaves that night out."""
    from ibrepro.fleet import history as fleet_history
    from ibrepro.report import fleet
    base = json.loads((FLEET / 'fattree-clean.report.json').read_text())
    for field, value in [('fleet_named', 5), ('fleet_fabric', '$(touch pwned)'), ('fleet_flows', [1, 2]),
                         ('fleet_confirmation', 'abc'), ('fleet_fabric', {'spines': float('inf')})]:
        data = json.loads(json.dumps(base))
        case = next(c for run in data['runs'] for c in run['testcases'] if 'fleet_flows' in c)
        case[field] = {**case[field], **value} if isinstance(value, dict) else value    # spines: 1e999 stored
        section, problems = fleet.section('fattree-cluster', [data])
        assert section is None and len(problems) == 1, (field, problems)
        assert data['session_info']['uuid'] in problems[0] and field in problems[0], problems
        assert fleet_history.stored_history([data], 'fattree-cluster', 'fabric') == ({}, [])


def test_nights_stored_before_the_selected_one_are_its_history_verification_and_trend(tmp_path):
    """The three real nights stored in a results database (ReFrame 4.10's schema, reports unedited) and only the
    newest selected (``--last 1``): the two nights before it are that night's history, as the check read it, and
    the link it suspected shows when it was last verified (in the uplink night) instead of "never"."""
    section = newest_night_section(tmp_path, stored_nights(tmp_path / 'results.db'))
    nights = section[section.index('id="fleet-nights"'):].split('</table>')[0].split('<tr>')[2:]
    assert len(nights) == 1 and '48fb7030' in nights[0]
    assert nights[0].split('</td>')[3] == '<td class="n">2'                     # history: the two nights before
    trend = section[section.index('id="fleet-trend"'):].split('</table>')[0]
    assert trend.count('<th>20261127T') == 3
    assert '<tr><td>uplink leaf1&gt;spine0</td>' in trend and '<tr><td>cable node7:fab0/1 down</td>' in trend
    verified = section[section.index('id="fleet-verified"'):].split('</table>')[0]
    assert '<tr><td>downlink spine0&gt;leaf2</td><td class="">20261127T081844+0000</td></tr>' in verified
    assert '<tr><td>cable node7:fab0/1 down</td><td class="">20261127T083407+0000</td></tr>' in verified


def test_fleet_analyse_of_a_stored_night_reads_the_history_it_had(tmp_path):
    """``ibrepro fleet analyse --session``: the newest stored night judged with the two nights stored before it, as
    its check judged it; the oldest night has none."""
    db = stored_nights(tmp_path / 'results.db')
    env = {**os.environ, 'RFM_SQLITE_DB_FILE': str(db), 'IBREPRO_HOME': str(tmp_path / 'home')}
    outputs = {}
    for uuid in ('48fb7030-761e-412e-9f37-726f69812f1a', '2aecefe9-2863-4889-9b55-5313a21ff2e8'):
        done = subprocess.run([sys.executable, '-m', 'ibrepro', 'fleet', 'analyse', '--session', uuid],
                              capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        outputs[uuid] = done.stdout
    assert 'history: 2 pair-round night(s) stored before it' in outputs['48fb7030-761e-412e-9f37-726f69812f1a']
    assert 'NAMED uplink leaf1>spine0 = downlink spine0>leaf2' in outputs['48fb7030-761e-412e-9f37-726f69812f1a']
    assert 'history: 0 pair-round night(s)' in outputs['2aecefe9-2863-4889-9b55-5313a21ff2e8']


def test_a_nights_history_is_found_among_many_other_sessions(tmp_path):
    """The ten real fault-free nights, the first one followed by 300 sessions of other checks (a site's nightly
    stores many): the pair-round sessions are found by ReFrame's test case index, so the tenth night's history is
    the nine before it however many sessions lie between, and only those sessions are read."""
    nights = sorted((FLEET / 'nights').glob('fattree-clean-*.report.json'))
    db = stored_nights(tmp_path / 'results.db', nights)
    reports = [json.loads(p.read_text()) for p in nights]
    first, second = (r['session_info']['time_start_unix'] for r in reports[:2])
    with sqlite3.connect(db) as conn:
        for i in range(300):
            uuid, start = f'00000000-0000-4000-8000-{i:012d}', first + (second - first) * (i + 1) / 302
            conn.execute('INSERT INTO sessions VALUES(?, ?, ?, ?, ?)', (uuid, start, start, '{}', None))
            conn.execute('INSERT INTO testcases VALUES(?, ?, ?, ?, ?, ?, ?)',
                         ('FleetPairsElsewhere %x=1', 'fattree-cluster', 'fabric', 'tcp', start, uuid, uuid))
    system = reports[0]['runs'][0]['testcases'][0]['system']
    uuids = [r['session_info']['uuid'] for r in reports]
    assert results.check_sessions('FleetPairs', system, db=db) == uuids
    assert results.check_sessions('FleetPairs', system, 'fabric', before=second, db=db) == uuids[:1]
    assert results.check_sessions('FleetPairs', 'elsewhere', db=db) == []
    assert results.check_sessions('Fleet%', db=db) == [] and results.check_sessions('FleetPairs_', db=db) == []
    history, used = fleet_history.history_before(reports[-1], db)
    assert used == uuids[:-1] and history


def test_a_component_is_verified_over_more_nights_than_its_history(tmp_path):
    """Each component's last verification reads the last 90 stored pair-round nights, not the 14 of a history:
    twenty nights (the ten real fault-free ones, then the same again ten days later under new session UUIDs), the
    newest selected; node8's flows are taken out of all but the oldest (drained, as it were), so its cable was last
    verified 19 nights before: shown with that night, not left out."""
    reports = []
    for repeat in range(2):
        for k, path in enumerate(sorted((FLEET / 'nights').glob('fattree-clean-*.report.json'))):
            data = json.loads(path.read_text())
            info = data['session_info']
            if repeat:
                info['uuid'] = f'10000000-0000-4000-8000-{k:012d}'
                info['time_start_unix'] += 10 * 86400
                info['time_start'] = f'later-{k:02d}'
            if repeat or k:
                case = next(c for run in data['runs'] for c in run['testcases'] if 'fleet_flows' in c)
                case['fleet_flows'] = [f for f in case['fleet_flows'] if 'node8' not in (f['host'], f['peer'])]
            reports.append(tmp_path / f'{repeat}-{path.name}')
            reports[-1].write_text(json.dumps(data))
    db = stored_nights(tmp_path / 'results.db', reports)
    done = subprocess.run([sys.executable, '-m', 'ibrepro', 'report', '--db', str(db), '--last', '1',
                           '--output-dir', str(tmp_path / 'out')], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    html = Path(done.stdout.splitlines()[0]).read_text()
    verified = html[html.index('id="fleet-verified"'):].split('</table>')[0]
    oldest = json.loads(reports[0].read_text())['session_info']['time_start']
    assert f'<tr><td>cable node8:fab0/1 up</td><td class="">{oldest}</td></tr>' in verified, verified[:3000]
    trend = html[html.index('id="fleet-trend"'):].split('</table>')[0]
    assert trend.count('<th>later-') == 10 and trend.count('<th>') <= 16          # the trend: the last nights


def test_a_latency_suspects_evidence_is_its_latencies_and_their_increase():
    from ibrepro.fleet import localise as fl
    from ibrepro.fleet import plan as fp
    from ibrepro.report import fleet as report_fleet
    from test_fleet_localise import latency_night
    fabric = fp.fat_tree(64)
    result = fl.localise(latency_night(fabric, ('cable n0017:mlx5_0/1 up', ('n0017>leaf',)), 7), fabric)
    shown = report_fleet._suspect(result.named[0])
    assert shown['metric'] == 'latency' and shown['unit'] == 'us' and shown['effect'] > 0
    slowest = shown['evidence'][0]
    assert slowest['value'] == slowest['lat'] and slowest['change'] > 0.2    # slower = more latency, shown as +


def split_night(path, out_dir, night):
    """A real night's run report as a CI child pipeline stores a night of two jobs: two sessions (the second a
    minute later, its own UUID), each one pair-round case (``job_index`` 0 and 1) with its half of the night's flows
    in their order, both with the session extra ``nightly``; the confirmation and what the night named go with the
    second. Returns the two files."""
    data = json.loads(Path(path).read_text())
    case = next(c for run in data['runs'] for c in run['testcases'] if 'fleet_flows' in c)
    half = len(case['fleet_flows']) // 2
    parts = []
    for k, flows in enumerate((case['fleet_flows'][:half], case['fleet_flows'][half:])):
        part = json.loads(json.dumps(data))
        info = part['session_info']
        info['nightly'] = night
        info['uuid'] = f'{k}{info["uuid"][1:]}'
        info['time_start_unix'] += 60 * k
        info['time_end_unix'] += 60 * k
        mine = next(c for run in part['runs'] for c in run['testcases'] if 'fleet_flows' in c)
        mine.update(name=f'FleetPairs %job_index={k}', uuid=f'{info["uuid"]}:0', fleet_flows=flows)
        if not k:
            mine.update(fleet_confirmation=[], fleet_named=[])
        parts.append(out_dir / f'{night}-{k}.report.json')
        parts[-1].write_text(json.dumps(part))
    return parts


def test_a_night_stored_as_several_sessions_is_one_night(tmp_path):
    """The three real nights, each stored as a CI child pipeline stores a night of two jobs (two sessions sharing
    their ``nightly`` extra): each is one night of history with every flow of its two sessions, as the same nights
    stored whole are, in the library (its first session named), in ``fleet analyse`` of a night's second session
    (its own first session is no history of it) and in the report's fleet section."""
    whole = [json.loads((FLEET / f'{name}.report.json').read_text()) for name in NIGHTS]
    files = [p for name in NIGHTS for p in split_night(FLEET / f'{name}.report.json', tmp_path, f'night-{name}')]
    split = [json.loads(p.read_text()) for p in files]
    expected, _ = fleet_history.stored_history(whole, 'fattree-cluster', 'fabric')
    history, used = fleet_history.stored_history(split, 'fattree-cluster', 'fabric')
    assert history == expected and used == [r['session_info']['uuid'] for r in split[::2]]
    # read as six nights, every component would have six effects of half a night
    apart = [{**r, 'session_info': {**r['session_info'], 'nightly': None}} for r in split]
    assert len(fleet_history.stored_history(apart, 'fattree-cluster', 'fabric')[1]) == 6

    db = stored_nights(tmp_path / 'results.db', files)
    nights = fleet_history.night_reports('fattree-cluster', 'fabric', last=2, db=db)
    assert [n['session_info']['sessions'] for n in nights] == [
        [r['session_info']['uuid'] for r in split[k:k + 2]] for k in (2, 4)]
    assert len(fleet_history.night_reports(last=2, db=db, exclude={'night-fattree-clean'})) == 2
    assert len(fleet_history.night_reports(last=5, db=db, exclude={'night-fattree-clean'})) == 2

    env = {**os.environ, 'RFM_SQLITE_DB_FILE': str(db), 'IBREPRO_HOME': str(tmp_path / 'home')}
    done = subprocess.run([sys.executable, '-m', 'ibrepro', 'fleet', 'analyse', '--session',
                           split[-1]['session_info']['uuid']], capture_output=True, text=True, timeout=300, env=env)
    assert 'history: 2 pair-round night(s) stored before it' in done.stdout, done.stdout + done.stderr

    section = newest_night_section(tmp_path, db)
    rows = section[section.index('id="fleet-nights"'):].split('</table>')[0].split('<tr>')[2:]
    assert len(rows) == 1 and split[-2]['session_info']['uuid'][:8] in rows[0], rows
    assert rows[0].split('</td>')[2] == f'<td class="n">{len(whole[-1]["runs"][0]["testcases"][0]["fleet_flows"])}'
    assert rows[0].split('</td>')[3] == '<td class="n">2'                     # history: the two nights before
    assert 'uplink leaf1&gt;spine0 = downlink spine0&gt;leaf2' in rows[0]


def test_stored_run_ids_of_the_wrong_type_are_no_run():
    """A stored session whose ``nightly`` or ``session_info`` or ``runs`` is not what ReFrame stores: a night of its
    own (by its UUID, or its place), never merged with another by a value that is not an id, never a crash."""
    real = json.loads((FLEET / 'fattree-clean.report.json').read_text())
    odd = [{**real, 'session_info': {**real['session_info'], 'nightly': ['x']}},
           {**real, 'session_info': {**real['session_info'], 'uuid': 'b', 'nightly': {'x': 1}}},
           {**real, 'session_info': 'x', 'runs': {'testcases': []}}, {'session_info': None, 'runs': 'x'}]
    assert [results.run_id(r) for r in odd] == [real['session_info']['uuid'], 'b', None, None]
    nights = fleet_history.nights_of(odd)
    assert len(nights) == 4 and [len(n['runs']) for n in nights] == [1, 1, 0, 0]
    assert fleet_history.stored_history(odd, 'fattree-cluster', 'fabric')[1] == [real['session_info']['uuid'], 'b']


def test_the_fleets_history_reads_each_night_s_pair_round_cases_from_the_values_index(tmp_path, monkeypatch):
    """The nights the check and the report read are each session's pair-round cases kept in the values index
    (every run of them, so a retry still replaces its first attempt), not the whole stored session: a night that
    also ran a thousand other values reads as the same night; a session deleted from the database leaves the
    index with it; one stored after the index was brought in step is read from the database."""
    imb = json.loads((Path(__file__).parent / 'data' / 'run-reports' / 'run-report.local_imb_short.json').read_text())
    paths = []
    for name in NIGHTS:
        data = json.loads((FLEET / f'{name}.report.json').read_text())
        data['runs'][0]['testcases'] += imb['runs'][0]['testcases']      # the night's other checks
        paths.append(tmp_path / f'{name}.json')
        paths[-1].write_text(json.dumps(data))
    db = stored_nights(tmp_path / 'results.db', paths[:2])
    whole = [json.loads(p.read_text()) for p in paths]
    nights = fleet_history.night_reports('fattree-cluster', 'fabric', db=db)
    assert [results.testcases(n) for n in nights] == [
        [c for c in results.testcases(r) if 'fleet_flows' in c] for r in whole[:2]]
    assert [{k: v for k, v in n['session_info'].items() if k != 'sessions'} for n in nights] == \
        [r['session_info'] for r in whole[:2]]
    with results.ValueIndex(db) as index:
        assert index.conn.execute('SELECT count(*) FROM fleet').fetchone() == (2,)
        assert len(index.pair_round_parts([r['session_info']['uuid'] for r in whole])) == 2

    monkeypatch.setattr(results.ValueIndex, '_sync', lambda self, source: None)    # the index not in step
    stored_nights(tmp_path / 'more.db', paths[2:])
    with sqlite3.connect(db) as conn, sqlite3.connect(tmp_path / 'more.db') as more:
        conn.executemany('INSERT INTO sessions VALUES(?, ?, ?, ?, ?)', more.execute('SELECT * FROM sessions'))
        conn.executemany('INSERT INTO testcases VALUES(?, ?, ?, ?, ?, ?, ?)', more.execute('SELECT * FROM testcases'))
    nights = fleet_history.night_reports('fattree-cluster', 'fabric', db=db)
    assert len(nights) == 3 and results.testcases(nights[2]) == [c for c in results.testcases(whole[2])
                                                                 if 'fleet_flows' in c]
    monkeypatch.undo()

    gone = whole[0]['session_info']['uuid']
    with sqlite3.connect(db) as conn:
        conn.execute('DELETE FROM testcases WHERE session_uuid = ?', (gone,))
        conn.execute('DELETE FROM sessions WHERE uuid = ?', (gone,))
    assert [n['session_info']['uuid'] for n in fleet_history.night_reports('fattree-cluster', db=db)] == \
        [r['session_info']['uuid'] for r in whole[1:]]
    with results.ValueIndex(db) as index:
        assert index.conn.execute('SELECT count(*) FROM fleet').fetchone() == (2,)


def test_the_nodes_a_night_left_out_are_said_with_why_and_escaped(tmp_path):
    """A night's jobs left nodes out (``fleet_left_out``: Slurm could not give them): the page and summary.md say
    which and why, each stored string escaped."""
    data = json.loads((FLEET / 'fattree-clean.report.json').read_text())
    case = next(c for run in data['runs'] for c in run['testcases'] if 'fleet_flows' in c)
    case['fleet_left_out'] = {'node8': 'state drain', '<b>x</b>': 'state down* (not responding)'}
    path = tmp_path / 'night.json'
    path.write_text(json.dumps(data))
    html, md = report(tmp_path, path)
    said = html[html.index('id="fleet-left-out"'):].split('</p>')[0]
    assert 'node8 (state drain)' in said and '&lt;b&gt;x&lt;/b&gt; (state down* (not responding))' in said, said
    line = next(line for line in md.splitlines() if line.startswith('Fleet, newest night'))
    assert 'left out, not tested: ' in line and 'node8 (state drain)' in line and '<b>' not in line, line


def test_the_page_says_which_routing_a_night_was_judged_on(tmp_path):
    """A night without the fabric's tables says its routing was assumed; the same night stored with the routes of
    the fabric's own tables (real infiniband-diags output on an ibsim tree of the same shape, which route as the
    model does) says so and is judged the same."""
    from ibrepro.fleet import plan as fleet_plan
    from ibrepro.fleet import routes as fleet_routes
    night = FLEET / 'fattree-uplink-leaf1-spine1-25.report.json'
    html, _ = report(tmp_path / 'a', night)
    assumed = html[html.index('id="fleet-routing"'):].split('</p>')[0]
    assert 'assumed, not read: destination-mod-k over topology.conf&#39;s node order' in assumed
    tables = Path(__file__).parent / 'fixtures' / 'infiniband-diags' / '44.0-ibsim-fattree8'
    fabric = fleet_plan.fabric_from_routes(fleet_routes.read((tables / 'ibnetdiscover.txt').read_text(),
                                                             (tables / 'dump_lfts.txt').read_text()))
    data = json.loads(night.read_text())
    for run in data['runs']:
        for case in run['testcases']:
            if case.get('fleet_fabric'):
                assert case['fleet_fabric']['leaves'] == fabric.leaves
                case['fleet_fabric']['routes'] = fleet_plan.routes_json(fabric)
    path = tmp_path / 'with-routes.json'
    path.write_text(json.dumps(data))
    html2, _ = report(tmp_path / 'b', path)
    read = html2[html2.index('id="fleet-routing"'):].split('</p>')[0]
    assert 'the fabric&#39;s own forwarding tables' in read and '0 of its 8 leaf-to-node routes differ' in read
    def named(page):
        return page[page.index('id="fleet-nights"'):].split('</table>')[0]
    assert named(html2) == named(html)


def test_a_partitions_calibrated_level_is_stored_with_its_night_and_judges_it_again(tmp_path, capsys):
    """``fleet_alpha`` (the partition's level, ``ibrepro fleet calibrate``) is stored in the night's fleet_fabric:
    the report and ``fleet analyse`` judge the night at it (the analysis says its level; ``--alpha`` overrides);
    a stored level that is no level is refused, named."""
    from ibrepro.cli import main
    from ibrepro.fleet import localise as fleet_localise
    from ibrepro.fleet import rounds as fleet_rounds
    data = json.loads((FLEET / 'fattree-uplink-leaf1-spine1-25.report.json').read_text())
    night = fleet_history.from_report(data)
    fabric = fleet_history.night_fabric(night, fleet_localise.read_flows(night['flows']))
    assert night['alpha'] is None
    assert fleet_rounds.analyse(night['flows'], fabric, night['confirmation']).method.alpha == 0.01
    case = next(c for run in data['runs'] for c in run['testcases'] if 'fleet_flows' in c)
    case['fleet_fabric']['alpha'] = 0.002
    assert fleet_history.from_report(data)['alpha'] == 0.002
    assert fleet_rounds.analyse(night['flows'], fabric, night['confirmation'], alpha=0.002).method.alpha == 0.002
    stored, out = tmp_path / 'calibrated.json', tmp_path / 'analysis.json'
    stored.write_text(json.dumps(data))
    assert main(['fleet', 'analyse', str(stored), '--json', str(out)]) == 1      # the link, named at its level
    assert json.loads(out.read_text())['alpha'] == 0.002
    assert main(['fleet', 'analyse', str(stored), '--alpha', '0.05', '--json', str(out)]) == 1
    assert json.loads(out.read_text())['alpha'] == 0.05
    assert main(['fleet', 'analyse', str(stored), '--alpha', '0.9']) == 2
    assert 'is not a level' in capsys.readouterr().err
    for bad in (1e999, -0.01, 0.5, 'x', True):
        case['fleet_fabric']['alpha'] = bad
        try:
            fleet_history.from_report(data)
        except ValueError as err:
            assert 'fleet_fabric alpha' in str(err), err
        else:
            raise AssertionError(f'alpha {bad!r} accepted')

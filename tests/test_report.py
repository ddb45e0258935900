"""ibrepro report: the papers, the history and the link limit, from real sessions.

Two sources of real sessions: stored run reports of short `make run`s on this machine (tests/data/run-reports,
see the MANIFEST: one with the current checks, one from before the IMB layouts, whose IMB cases carry the papers'
inter-node figure tags), and sessions the integration tests run with ReFrame here (short IMB PingPong/Uniband
sweeps; one with a constructed sysfs tree for RdmaTopology, so the link has a limit; one slowed by the injector's
200 us per MPI call: a regression of 200x and more that the test makes, whatever this machine's speed or load).
"""

import copy
import importlib.util
import json
import math
import os
import re
import sqlite3
import statistics
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import ROOT, ReFrameRunner, needs_impi, output
from ibrepro import cli, compare, report, results
from ibrepro.report import provenance, render
from test_topology import ACTIVE, ib_device, pci_function

FIXTURES = ROOT / 'tests' / 'data' / 'run-reports'
MAKE_RUN = FIXTURES / 'run-report.local_make_run_short.json'
FIXTURE = FIXTURES / 'run-report.local_imb_short.json'   # before the IMB layouts: inter-node figure tags

PINGPONG = ['-n', 'IMBPointToPoint%benchmark=PingPong', '-p', 'impi', '-S', 'IMBPointToPoint.message_sizes=1:16',
            '-S', 'IMBPointToPoint.iterations=1000', '-S', 'IMBPointToPoint.time_per_sample=300']
PROVENANCE = ['-n', 'IMBPointToPoint%benchmark=Uniband', '-n', 'RdmaTopology', '-n', 'SoftwareVersions']
#: 2 ms more per MPI call that completes a message (ibrepro.rfm.inject): 1000x and more on shared memory, and more
#: than the time slices a busy core costs two polling ranks (with 200 us, a busy loop beside them hid it)
SLOW = ['-S', 'inject_us=2000']


class Page(HTMLParser):
    """The elements of a page we check: images, tables by id, labels, text."""

    def __init__(self, html):
        super().__init__()
        self.images, self.tables, self.text, self.tags = [], set(), [], []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == 'img':
            self.images.append(attrs)
        if tag == 'table' and attrs.get('id'):
            self.tables.add(attrs['id'])

    def handle_data(self, data):
        self.text.append(data)

    @property
    def plain(self):
        return ' '.join(' '.join(self.text).split())


def _script(name):
    """A script of scripts/, imported as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / 'scripts' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_report(runner, *args):
    return runner.ibrepro('report', '--output-dir', str(runner.home / 'reports'), *args)


def report_inline(runner, capsys, monkeypatch, *args, env=None):
    """`ibrepro report` in this process (ibrepro.cli.main): what run_report checks, without a Python start-up and
    the report's imports (seconds each); the environment is the runner's, as for the process."""
    environ = {**runner.env, **(env or {})}
    for var in set(os.environ) - set(environ):
        monkeypatch.delenv(var)
    for var, value in environ.items():
        monkeypatch.setenv(var, value)
    capsys.readouterr()
    status = cli.main(['report', '--output-dir', str(runner.home / 'reports'), *args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(['ibrepro', 'report', *args], status, out.out, out.err)


def written(proc):
    """The index.html and summary.md paths `ibrepro report` printed."""
    html, md = [Path(line) for line in proc.stdout.splitlines()[:2]]
    return html.read_text(), md.read_text()


# -- the stored run report (no ReFrame run needed) ----------------------------------------------------

@pytest.fixture
def runner(tmp_path):
    return ReFrameRunner(tmp_path / 'ibrepro-home')


def test_report_of_a_stored_run_report(runner):
    proc = run_report(runner, '--report', str(MAKE_RUN))
    assert proc.returncode == 0, output(proc)
    html, md = written(proc)
    page = Page(html)
    assert {'headline', 'groups', 'variables', 'session', 'platforms', 'skipped', 'sessions'} <= page.tables
    assert report.LABEL_LOCAL in page.plain and report.LABEL_EMULATED not in page.plain
    # every image is an embedded PNG: the page needs nothing else
    assert page.images and all(i['src'].startswith('data:image/png;base64,') for i in page.images)
    assert not re.search(r'(src|href)="(https?:|//)', html) and 'script' not in page.tags
    # provenance from the SoftwareVersions and RdmaTopology checks, skipped cases with ReFrame's reasons
    assert 'Intel(R) MPI Library 2021.14' in page.plain and 'imb: 2021.8' in page.plain
    assert 'MPICH Version: 5.0.2' in page.plain and 'Open MPI v4.1.4' in page.plain
    assert 'no RDMA devices found' in page.plain
    assert ('IMBPointToPoint %benchmark=PingPong %layout=2x1 @default+impi #11, #16, #22 layout 2x1 needs 2 nodes; '
            'local:default has 1 (extras nodes)') in page.plain
    # one within-node bandwidth figure: no link limit to draw
    assert 'intra-node (shared memory): no link to limit it' in page.plain
    # one session, so no history test: said, never "no regression"
    assert 'History test: nothing judged: no test case of this night had both values and a history' in page.plain
    assert '**History test: nothing judged**' in md and 'no regression' not in md and '| 002-fig9-intra-lat-ib |' in md


def test_intra_node_sessions_answer_the_papers_intra_node_numbers():
    data = json.loads(MAKE_RUN.read_text())
    model = report.build('local', [data], results.History.of([data], system='local'))
    rows = {r['id']: r for r in model['headline']}
    values = {pv.name: {} for pv in results.perf_values(data)}
    for pv in results.perf_values(data):
        values[pv.name][pv.variable] = pv.value
    uniband = values['IMBPointToPoint %benchmark=Uniband %layout=1x2']
    # 002 Fig. 10: intra-node bandwidth "over 450 MB/s", MB = 2^20 -> 471.9 MB/s of 10^6 bytes, on PCI-X + SDR
    row = rows['002-fig10-intra-bw-ib']
    assert row['paper_si'] == pytest.approx(471.8592) and row['mb_definition'] == '2^20'
    assert row['measured'] == max(v for k, v in uniband.items() if k.startswith('bw_'))
    assert row['limit_then'] == pytest.approx(1000.0) and row['fraction_then'] == pytest.approx(0.4718592)
    assert row['fraction_now'] is None and row['limit_now_note'] == 'intra-node (shared memory): no link to limit it'
    row = rows['002-fig9-intra-lat-ib']
    assert row['measured'] == values['IMBPointToPoint %benchmark=PingPong %layout=1x2']['lat_1']
    # the papers' between-node numbers are not answered by a within-node case
    assert not any(r['id'].startswith(('002-fig5', '002-fig4')) for r in model['headline'])
    bibw = next(f for f in model['figures'] if f['name'] == 'BiDirectionalBandwidth %layout=1x2')
    assert {o['id'] for o in bibw['other']} >= {'002-fig5-bibw-ib', '002-fig5-bibw-quadrics'}
    assert all('the paper measured between nodes' in ' '.join(o['notes']) for o in bibw['other'])
    # variants of one figure share a plot
    assert any(f['name'] == 'BufferReuse (3 cases)' for f in model['figures'])
    # our overhead and overlap benchmarks are drawn in their own metric, beside 002 Fig. 3's host overheads
    figures = {f['name']: f for f in model['figures']}
    overhead = figures['HostOverhead %layout=1x2']
    assert overhead['metric'] == 'overhead' and 'host overhead (us)' in overhead['alt']
    assert {o['id'] for o in overhead['other']} == {'002-fig3-overhead-ib', '002-fig3-overhead-myrinet',
                                                    '002-fig3-overhead-quadrics'}
    assert figures['OverlapPotential %layout=1x2']['metric'] == 'overlap'


def test_headline_numbers_are_the_measured_values_beside_the_papers():
    data = json.loads(FIXTURE.read_text())
    model = report.build('local', [data], results.History.of([data], system='local'))
    rows = {(r['id'], r['check']): r for r in model['headline']}
    pingpong = {pv.variable: pv.value for pv in results.perf_values(data) if pv.name.endswith('PingPong')}
    uniband = {pv.variable: pv.value for pv in results.perf_values(data) if pv.name.endswith('Uniband')}

    # 000 Fig. 12: "small message" MPI latency 4.1 us -> this system's latency at the smallest non-zero size
    row = rows[('000-fig12-mpi-lat-pcie', 'IMBPointToPoint %benchmark=PingPong')]
    assert row['measured'] == pingpong['lat_1'] and row['how'] == 'at 1 B (smallest)'
    assert row['ratio'] == pytest.approx(pingpong['lat_1'] / 4.1)
    # 000 Fig. 13: peak bandwidth 971 MB/s on PCIe x8 + SDR 4X (limit 1000 MB/s)
    row = rows[('000-fig13-mpi-uni-bw-pcie', 'IMBPointToPoint %benchmark=Uniband')]
    peak = max(v for k, v in uniband.items() if k.startswith('bw_'))
    assert row['measured'] == peak and row['how'].startswith('peak, at ')
    assert row['limit_then'] == pytest.approx(1000.0) and row['fraction_then'] == pytest.approx(0.971)
    assert row['fraction_now'] is None and row['limit_now_note'] == 'no RDMA device: limit not applicable'
    # 002 uses MB = 2^20: 235 MB/s is 246.4 MB/s of 10^6 bytes
    row = rows[('002-fig2-bw-myrinet', 'IMBPointToPoint %benchmark=Uniband')]
    assert (row['paper'], row['mb_definition']) == (235, '2^20')
    assert row['paper_si'] == pytest.approx(246.41536) and row['ratio'] == pytest.approx(peak / 246.41536)
    # two-port striping is not what IMB over one rail measures: not in the table, named under the figure
    assert not any(r['id'] == '000-fig13-mpi-uni-bw-pcie-2port' for r in model['headline'])
    uniband_fig = next(f for f in model['figures'] if f['name'].endswith('Uniband'))
    assert any(o['id'] == '000-fig13-mpi-uni-bw-pcie-2port' for o in uniband_fig['other'])
    # figures only for the metrics the papers' figures show
    assert {(f['name'].split('=')[-1], f['metric']) for f in model['figures']} >= {
        ('PingPong', 'lat'), ('Uniband', 'bw'), ('Biband', 'bw'), ('Alltoall', 'lat'), ('Allreduce', 'lat')}
    assert ('PingPong', 'bw') not in {(f['name'].split('=')[-1], f['metric']) for f in model['figures']}


def test_entries_match_by_figure_experiment_and_parameters():
    data = json.loads(FIXTURE.read_text())
    cases = {c['name']: c for c in results.testcases(data)}
    entries, _ = compare.paper_entries()
    by_id = {e['id']: e for e in entries}
    alltoall = cases['IMBCollective %benchmark=Alltoall']
    how = compare.match(by_id['002-fig11-alltoall-ib-pcix'], alltoall)      # operation MPI_Alltoall, 8 nodes
    assert how == {'comparable': True, 'notes': ['paper: 8 nodes; here: 2 processes']}
    assert compare.match(by_id['002-fig11-alltoall-ib-pcix'], cases['IMBCollective %benchmark=Bcast']) is None
    assert compare.match(by_id['000-fig12-mpi-lat-pcie'], cases['IMBPointToPoint %benchmark=Uniband']) is None
    assert compare.figures_of('Sec. IV.C.1, Figs. 13-14') == [('fig13', 'Fig. 13'), ('fig14', 'Fig. 14')]
    assert compare.figures_of('Sec. 4.2, Table 2') == [('tab2', 'Table 2')]


def test_hostile_strings_are_escaped(runner, tmp_path):
    """Names and outputs from a run end up in HTML and Markdown: they must stay text."""
    data = json.loads(FIXTURE.read_text())
    evil = '<script>alert(1)</script>|**x**'
    for case in data['runs'][0]['testcases']:
        case['system'] = '../x<b>sys</b>'
        if case['name'].endswith('PingPong'):
            case['name'] = case['display_name'] = f'IMBPointToPoint %benchmark=PingPong {evil}'
            case['result'], case['fail_phase'], case['fail_reason'] = 'fail', 'sanity', '<img src=x onerror=alert(2)>'
        if case['name'] == 'SoftwareVersions':
            case['software']['mpi']['library'] = '</td></table><script>alert(3)</script>'
    path = tmp_path / 'hostile.json'
    path.write_text(json.dumps(data))

    proc = run_report(runner, '--report', str(path))
    assert proc.returncode == 0, output(proc)
    html, md = written(proc)
    # the output directory is inside --output-dir whatever the system is called
    out = Path(proc.stdout.splitlines()[0])
    assert out.parent.parent.parent == runner.home / 'reports' and out.parent.parent.name == '_x_b_sys__b_'
    assert '<script>' not in html and '<img src=x' not in html and '<b>sys</b>' not in html
    assert '&lt;script&gt;alert(1)&lt;/script&gt;' in html and '&lt;img src=x onerror=alert(2)&gt;' in html
    assert Page(html).tags.count('script') == 0
    assert '<script>' not in md and '\\<script\\>' in md and '\\|\\*\\*x\\*\\*' in md


def test_broken_and_partial_run_reports_are_named_and_the_rest_reported(runner, tmp_path):
    data = json.loads(FIXTURE.read_text())
    truncated = tmp_path / 'truncated.json'
    truncated.write_text(FIXTURE.read_text()[:5000])
    partial = copy.deepcopy(data)
    del partial['runs'][0]['testcases'][3]['system']
    (tmp_path / 'partial.json').write_text(json.dumps(partial))
    (tmp_path / 'other.json').write_text('{"some": "json"}')

    proc = run_report(runner, '--report', str(FIXTURE), str(truncated), str(tmp_path / 'partial.json'),
                      str(tmp_path / 'other.json'), str(tmp_path / 'missing.json'))
    assert proc.returncode == 0, output(proc)
    assert f'{truncated}: not a JSON run report' in proc.stderr
    assert f'{tmp_path / "partial.json"}: test case 4 of run 0 has no system' in proc.stderr
    assert f'{tmp_path / "other.json"}: not a ReFrame run report' in proc.stderr
    assert f'{tmp_path / "missing.json"}: cannot read' in proc.stderr
    html, md = written(proc)
    assert 'truncated.json: not a JSON run report' in Page(html).plain and 'truncated.json' in md
    assert '000-fig12-mpi-lat-pcie' in html   # the readable report is all there

    nothing = run_report(runner, '--report', str(truncated))
    assert nothing.returncode == 2 and 'no session with test cases' in nothing.stderr


def test_the_sessions_of_one_nightly_run_are_one_run(runner, tmp_path):
    """CI child pipelines store one session per test case; sessions sharing a `nightly` extra are one night."""
    bench = _script('bench_report')
    data = json.loads(FIXTURE.read_text())
    cases = data['runs'][0]['testcases']
    db = tmp_path / 'results.db'
    conn = sqlite3.connect(db)
    for sql in bench.SCHEMA:
        conn.execute(sql)
    for night in range(3):
        for part in range(2):   # two sessions per night, half of the test cases each
            report = copy.deepcopy(data)
            info = report['session_info']
            info['uuid'] = uuid = f'{night}{part}000000-0000-0000-0000-000000000000'
            info['time_start_unix'] = 1.7e9 + night * 86400 + part * 600
            info['nightly'] = f'night{night}'
            report['runs'][0]['testcases'] = mine = copy.deepcopy(cases[part::2])
            conn.execute('INSERT INTO sessions VALUES(?, ?, ?, ?, ?)',
                         (uuid, info['time_start_unix'], info['time_start_unix'] + 60, json.dumps(report), None))
            conn.executemany('INSERT INTO testcases VALUES(?, ?, ?, ?, ?, ?, ?)',
                             [(c['name'], c['system'], c['partition'], c['environ'], 0, uuid, f'{uuid}:{i}')
                              for i, c in enumerate(mine)])
    conn.commit()
    conn.close()

    assert [run for *_, run in results.session_index(db)] == ['night0'] * 2 + ['night1'] * 2 + ['night2'] * 2
    proc = run_report(runner, '--db', str(db), '--nightly', '--min-history', '2')
    assert proc.returncode == 0, output(proc)
    html = written(proc)[0]
    # the latest night is both its sessions; the history test sees 3 runs, of 2 sessions each
    assert html.count('<td>yes</td>') == 2 and '3 run(s)' in html
    tested = re.search(r'no regression in (\d+) test case\(s\) \((\d+) tested variable', proc.stdout)
    assert tested and int(tested.group(2)) == len([1 for c in cases for v in c.get('perfvalues') or {}
                                                   if c['perfvalues'][v][0]]), output(proc)


def test_without_a_database_the_error_says_where_it_looked(runner):
    proc = run_report(runner)
    assert proc.returncode == 2
    assert f'no results database at {runner.home / "results.db"}' in proc.stderr


def test_markdown_cells_and_numbers():
    assert render._md('a|b <x> *y* `z`\nnext') == 'a\\|b \\<x\\> \\*y\\* \\`z\\` next'
    assert render.num(0.000123) == '0.0001230' and render.num(12345.6) == '12,346' and render.num(None) == '-'
    assert render.pct(0.1234) == '+12.3 %' and render.pct(-0.05, False) == '-5.0 %'
    assert report.parse_since('2026-11-20') == pytest.approx(1795132800.0)
    assert report.parse_since('2d', now=1000000.0) == pytest.approx(1000000.0 - 2 * 86400)
    with pytest.raises(report.ReportError, match='--since'):
        report.parse_since('yesterday')


# -- real sessions: history, nightly, limit ------------------------------------------------------------

@pytest.fixture(scope='module')
def history(tmp_path_factory):
    """Four real sessions: three over shared memory (the third also records a constructed RDMA topology, the
    software and Uniband), then one slowed by the injector."""
    home = tmp_path_factory.mktemp('history')
    sysfs = home / 'sys'
    fn = pci_function(sysfs, '0000:04:00.0', speed='5.0 GT/s PCIe', width=8)
    ib_device(sysfs, 'mlx4_0', {1: (*ACTIVE, '40 Gb/sec (4X QDR)', 'InfiniBand')}, function=fn)

    runner = ReFrameRunner(home / 'ibrepro-home')
    for args, env in [(PINGPONG, None), (PINGPONG, None),
                      (PINGPONG + PROVENANCE + ['-S', f'RdmaTopology.sysfs_root={sysfs}'], None),
                      (PINGPONG + SLOW, None)]:
        proc = runner('-r', *args, env=env)
        assert proc.returncode == 0, output(proc)
    uuids = [uuid for uuid, *_ in results.session_index(runner.db)]
    assert len(uuids) == 4
    return runner, uuids


@needs_impi
@pytest.mark.integration
def test_report_of_stored_sessions(history):
    runner, uuids = history
    proc = run_report(runner, '--sessions', uuids[2][:8])
    assert proc.returncode == 0, output(proc)
    html, md = written(proc)
    page = Page(html)
    stored = results.sessions_by_uuid([uuids[2]], runner.db)[0]
    values = {(pv.name, pv.variable): pv.value for pv in results.perf_values(stored)}
    row = re.search(r'<tr><td title="[^"]*">002-fig10-intra-bw-ib</td>.*?</tr>', html, re.S)
    peak = max(v for (name, var), v in values.items()
               if name == 'IMBPointToPoint %benchmark=Uniband %layout=1x2' and var.startswith('bw_'))
    assert row and f'{render.num(peak)} MB/s' in row.group(0)
    # the constructed topology (one QDR 4X port behind PCIe gen2 x8) is recorded and bounds the links...
    topology = next(c['topology'] for c in results.testcases(stored) if c['name'] == 'RdmaTopology')
    assert 'mlx4_0' in page.plain and compare.limit_now(topology, False) == (pytest.approx(4000.0), None)
    assert compare.limit_now(topology, True) == (pytest.approx(8000.0), None)
    # ...but these MPI processes share one node: no link between them
    assert 'intra-node (shared memory): no link to limit it' in row.group(0)
    assert 'needs 2 nodes (has 1)' in page.plain and 'Intel(R) MPI Library 2021.14' in page.plain
    assert len(re.findall(r'<tr><td>[0-9a-f-]{36}</td>', html)) == 3   # the history up to the selected session

    # measured = median over the selected sessions
    both = run_report(runner, '--sessions', uuids[0], uuids[1])
    assert both.returncode == 0, output(both)
    lat1 = [pv.value for r in results.sessions_by_uuid(uuids[:2], runner.db) for pv in results.perf_values(r)
            if pv.variable == 'lat_1']
    row = re.search(r'>002-fig9-intra-lat-ib</td>.*?<td class="n">([0-9.,]+) us<br>', written(both)[0], re.S)
    assert row and float(row.group(1).replace(',', '')) == pytest.approx(statistics.median(lat1), rel=1e-3)

    # the other ways to choose sessions
    last = run_report(runner, '--last', '2')
    assert last.returncode == 0, output(last)
    assert written(last)[0].count('<td>yes</td>') == 2 and uuids[3] in written(last)[1]
    assert run_report(runner, '--since', '2000-01-01').returncode == 0
    for args, message in [(['--since', '2999-01-01'], 'no session with test cases'),
                          (['--system', 'elsewhere'], 'no session with test cases to report on for system elsewhere'),
                          (['--sessions', 'ffffffff'], 'no stored session with UUID ffffffff')]:
        proc = run_report(runner, *args)
        assert proc.returncode == 2 and message in proc.stderr, output(proc)


@needs_impi
@pytest.mark.integration
def test_nightly_fails_on_a_real_regression_and_passes_without(history):
    runner, uuids = history
    # the slowed session against the three before it
    proc = run_report(runner, '--nightly', '--window', '3', '--min-history', '3')
    assert proc.returncode == 1, output(proc)
    # (no confirmation ran: an unconfirmed regression is an alarm; q is printed as is, not as a rounded confidence)
    case = re.search(r'REGRESSION \(unconfirmed\) test case IMBPointToPoint %benchmark=PingPong %layout=1x2 '
                     r'@default\+impi: its variables moved \+([0-9.,]+) %.*?q = ([0-9.e+-]+),', proc.stdout)
    assert case and float(case.group(1).replace(',', '')) > 100 and float(case.group(2)) <= 0.01, output(proc)
    sizes = re.findall(r'^\s+(lat_\d+|bw_\d+): .*?\(([+-][0-9.,]+) %', proc.stdout, re.M)
    assert sizes and all(abs(float(change.replace(',', ''))) > 50 for _, change in sizes), output(proc)
    html, md = written(proc)
    assert '1 test case(s) regressed' in md and 'class="regression"' in html

    # the third session against the two before it: no change beyond 10x (whatever this machine's load; the
    # statistics themselves are tested in test_stats.py)
    proc = run_report(runner, '--nightly', '--sessions', uuids[2], '--window', '2', '--min-history', '2',
                      '--min-effect', '9')
    assert proc.returncode == 0, output(proc)
    assert 'local: no regression in' in proc.stdout


@needs_impi
@pytest.mark.integration
def test_false_alarm_replay_counts_the_nights_that_would_have_alarmed(history):
    runner, _ = history
    proc = subprocess.run([sys.executable, ROOT / 'scripts' / 'history_false_alarms.py', '--db', runner.db,
                           '--window', '3', '--min-history', '2', '--min-effect', '9'],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, output(proc)
    nights = re.findall(r'^night +(\d+) .*?: (\d+) test case\(s\), (\d+) alarm', proc.stdout, re.M)
    # runs 3 and 4 have two before them; only the slowed session (run 4) alarms, on the PingPong test case
    assert [(n, a) for n, _, a in nights] == [('3', '0'), ('4', '1')], proc.stdout
    alarmed = next(line for line in proc.stdout.splitlines() if line.startswith('night    4 '))
    assert '[IMBPointToPoint %benchmark=PingPong %layout=1x2 +' in alarmed, alarmed
    assert 'nights tested: 2; nights with an alarm: 1' in proc.stdout


def test_false_alarm_rate_bound_is_clopper_pearson():
    bound = _script('history_false_alarms').upper_bound
    assert bound(0, 300) == pytest.approx(1 - 0.05 ** (1 / 300))     # the "rule of three": about 1 %
    assert bound(0, 300) == pytest.approx(0.00994, abs=1e-5)
    for failures, trials in [(1, 20), (3, 150)]:
        p = bound(failures, trials)
        tail = sum(math.comb(trials, k) * p ** k * (1 - p) ** (trials - k) for k in range(failures + 1))
        assert tail == pytest.approx(0.05, abs=1e-6) and p > failures / trials


def test_labels_say_what_carries_the_messages():
    ci = {'veth': {'extras': {'nodes': 2, 'interconnect': 'namespace nodes, TCP over veth'}}}
    assert provenance.labels_of('ci-cluster', ci) == ['namespace nodes, TCP over veth: not an RDMA network']
    emulated = {'nodes2': {'extras': {'nodes': 2, 'emulated': True, 'rdma_devices': ['rxe2'],
                                      'interconnect': 'soft-RoCE (rdma_rxe, RoCE v2) in QEMU TCG guests'}}}
    assert provenance.labels_of('softroce', emulated) == [report.LABEL_EMULATED]
    assert provenance.labels_of('local', {'default': {'extras': {'nodes': 1}}}) == [report.LABEL_LOCAL]


def test_a_limit_read_on_another_node_than_the_case_ran_on_says_so():
    topo = {'devices': [], 'read_on': ['cn01']}
    assert provenance.elsewhere(topo, {'job_nodelist': ['cn01', 'cn02']}) == ''
    assert provenance.elsewhere(topo, {'job_nodelist': ['cn03', 'cn04']}) == (
        'limit from the topology read on cn01; this case ran on cn03, cn04 (RdmaTopology ran as a job of its own)')
    # unrecorded (or not a list): nothing to say either way
    assert provenance.elsewhere(topo, {}) == provenance.elsewhere(topo, {'job_nodelist': 'cn03'}) == ''
    assert provenance.elsewhere({'devices': []}, {'job_nodelist': ['cn03']}) == ''


def test_the_command_runs_as_a_module_and_says_what_the_report_is():
    # python -m ibrepro is the ibrepro command; report's help is the report package's documentation
    proc = subprocess.run([sys.executable, '-m', 'ibrepro', 'report', '--help'], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert 'this system beside the papers, its own history and its link limit' in proc.stdout
    assert '--nightly' in proc.stdout and 'The history test:' in proc.stdout

"""The papers' reference data (reference-data/) and `ibrepro refs`: validation, queries, export, coverage."""

import copy
import csv
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from ibrepro import baseline, cli, limits, parsers, paths, refcoverage, results
from ibrepro import references as refs

SEEDS_DIR = Path(os.environ.get('IBREPRO_SEEDS', '/work/shared/seeds'))
PAPER_000 = 'papers/000-liu-pcie-extended.yaml'
PAPER_003 = 'papers/003-liu-pcie-hoti04.yaml'


@pytest.fixture
def data_copy(tmp_path):
    """A writable copy of the shipped reference-data tree."""
    root = tmp_path / 'reference-data'
    shutil.copytree(paths.REFERENCE_DATA, root, ignore=shutil.ignore_patterns('local'))
    return root


def edit_yaml(path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10000))


def run_cli(argv, capsys):
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


# ---------------------------------------------------------------------------------------------
# The shipped data

def test_shipped_data_validates():
    assert refs.validate() == []


def test_every_seed_has_results_and_methods():
    by_seed = {}
    for item in refs.entries():
        by_seed.setdefault(item['seed'], set()).add(item['kind'])
    assert set(by_seed) == {'000', '001', '002', '003', '004'}
    for seed, kinds in by_seed.items():
        assert {'result', 'method'} <= kinds, seed


def test_ids_are_unique_across_seeds():
    ids = [item['id'] for item in refs.entries()]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize('entry_id, value, unit, testbed', [
    ('003-fig3-rdma-write-lat-pcie', 3.8, 'us', '003-pcie-x8-mt25208'),
    ('000-fig3-rdma-write-lat-pcie', 3.8, 'us', '000-pcie-x8-mt25208'),
    ('001-fig2b-bw-qdr-2.0', 2575, 'MB/s', '001-qdr-2.0'),
    ('002-tab2-is-ib-pcix-8', 1.78, 's', '002-ib-pcix'),
    ('002-tab2-cg-quadrics-2', 135.05, 's', '002-quadrics'),
    ('004-perf-impr-infinihost3-gap', 1.15, 'us', '004-infinihost3-mt25218'),
])
def test_known_values(entry_id, value, unit, testbed):
    item = refs.entry(entry_id)
    assert (item['value'], item['unit'], item['testbed']) == (value, unit, testbed)


def test_table2_cell_carries_its_row_and_column():
    item = refs.entry('002-tab2-is-ib-pcix-8')
    assert item['parameters'] == {'benchmark': 'IS', 'npb_class': 'B', 'nodes': 8, 'processes': 8}
    assert item['quote'].split() == 'IS 6.73 3.30 1.78 7.86 4.99 2.89 7.04 4.71 2.47'.split()
    assert item['experiment'] == 34


def test_disagreements_between_000_and_003_are_both_kept():
    assert refs.entry('000-fig3-rdma-write-lat-pcix')['value'] == 4.8
    assert refs.entry('003-fig3-rdma-write-lat-pcix')['value'] == 5.0
    assert refs.entry('000-abs-2proc-bi-bw-pcie')['value'] == 2787
    assert refs.entry('000-fig11-2proc-bi-bw-pcie-binding')['value'] == 2745
    assert refs.entry('003-fig11-2proc-bi-bw-pcie-binding')['value'] == 2729


def test_mb_definitions_and_si_values():
    ib = refs.entry('002-fig2-bw-ib-w16')
    assert (ib['mb_definition'], ib['value'], ib['value_si'], ib['unit_si']) == ('2^20', 841, 881.852416, 'MB/s')
    qdr = refs.entry('001-intro-qdr-uni-bw')
    assert (qdr['unit'], qdr['value_si'], qdr['unit_si']) == ('GB/s', 2500.0, 'MB/s')
    lat = refs.entry('003-fig2-send-recv-lat-pcie')
    assert (lat['mb_definition'], lat['value_si']) == (None, 5.2)


def test_testbed_configuration_inherits_its_testbed():
    qdr = refs.testbed('001-qdr-2.0')
    assert qdr['values']['host_bus'] == {'type': 'pcie', 'gen': 2, 'lanes': 8}
    assert qdr['values']['link'] == {'tech': 'infiniband', 'rate': 'QDR', 'width': 4, 'ports': 2, 'ports_used': 1}
    assert qdr['values']['nodes'] == 2 and qdr['values']['topology'] == 'back-to-back'
    assert refs.testbed('002-quadrics')['values']['link']['mb_per_s_per_direction'] == 400
    assert refs.testbed('000-pcie-x8-mt25208-2port')['values']['link']['ports_used'] == 2


def test_entry_filters():
    items = refs.entries(seed='003', experiment=2)
    assert items and all(i['seed'] == '003' and 2 in ([i['experiment']] if isinstance(i['experiment'], int)
                                                       else i['experiment']) for i in items)
    assert '003-fig3-rdma-write-lat-pcie' in {i['id'] for i in items}
    qdr = refs.entries(configuration='qdr', metric='Bandwidth')
    assert qdr and all('QDR' in i['configuration'] and i['metric'] == 'bandwidth' for i in qdr)
    methods = refs.entries(seed=2, kind='method')
    assert methods and all(i['kind'] == 'method' and i['seed'] == '002' for i in methods)
    assert {i['id'] for i in refs.entries(testbed='001-harpertown-2node')} >= {'001-fig6-processes'}


def test_limits_config_of_every_configuration_is_understood_by_limits():
    for bed_id, bed in refs.testbeds().items():
        if bed['kind'] == 'configuration':
            assert limits.bound(refs.limits_config(bed['values'])).per_direction > 0, bed_id
    assert refs.limits_config(refs.testbed('000-pcix-mt23108-2port')['values']) == 'pcix:64:133 ib:sdr:4x:2'
    assert refs.limits_config(refs.testbed('002-quadrics')['values']) == 'pci:64:66 quadrics:elan3'


def test_entries_carry_their_limits_config():
    item = refs.entry('003-fig6-uni-bw-pcie')
    assert item['limits_config'] == 'pcie:gen1:x8 ib:sdr:4x'
    assert limits.fraction_of_limit(item['value_si'], item['limits_config']) == pytest.approx(0.968)
    ib = refs.entry('002-fig2-bw-ib-w16')    # 841 MB of 2^20 bytes on a 1 GB/s 4X SDR link
    assert limits.fraction_of_limit(ib['value_si'], ib['limits_config']) == pytest.approx(0.8819, abs=1e-4)
    assert refs.entry('003-intro-ib-bw-min')['limits_config'] is None


# ---------------------------------------------------------------------------------------------
# CLI: show and export

def test_cli_show_filters(capsys):
    status, out, err = run_cli(['refs', 'show', '--seed', '003', '--experiment', '2'], capsys)
    assert status == 0
    assert '003-fig3-rdma-write-lat-pcie' in out and '3.8 us' in out
    assert '000-' not in out and '003-fig2-' not in out
    assert f'({len(refs.entries(seed="003", experiment=2))} entries)' in err


def test_cli_export_json_round_trips(capsys):
    status, out, _ = run_cli(['refs', 'export', '--format', 'json'], capsys)
    assert status == 0
    assert json.loads(out) == refs.entries()


def test_cli_export_csv_round_trips(tmp_path, capsys):
    target = tmp_path / 'refs.csv'
    status, _, _ = run_cli(['refs', 'export', '--format', 'csv', '-o', str(target)], capsys)
    assert status == 0
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    items = refs.entries()
    assert len(rows) == len(items)
    for row, item in zip(rows, items):
        assert row['id'] == item['id'] and row['testbed_config'] == (item['testbed_config'] or '')
        assert row['quote'] == item['quote']
        if isinstance(item['value'], (int, float)):
            assert float(row['value']) == item['value']
        for key, val in (item['parameters'] or {}).items():
            assert row[f'param.{key}'] == str(val)


def test_cli_export_filtered(capsys):
    status, out, _ = run_cli(['refs', 'export', '--seed', '001', '--kind', 'method'], capsys)
    assert status == 0
    data = json.loads(out)
    assert data and {d['seed'] for d in data} == {'001'} and {d['kind'] for d in data} == {'method'}


# ---------------------------------------------------------------------------------------------
# Broken copies: each problem names the file, the entry and the reason

def test_duplicate_id_is_reported(data_copy):
    edit_yaml(data_copy / PAPER_003, lambda d: d['entries'].append(copy.deepcopy(d['entries'][5])))
    dup = yaml.safe_load((data_copy / PAPER_003).read_text())['entries'][5]['id']
    problems = [str(p) for p in refs.validate([data_copy / PAPER_003], root=data_copy)]
    assert any(PAPER_003 in p and f'entry {dup}' in p and 'duplicate id' in p for p in problems), problems


def test_bad_unit_is_reported(data_copy):
    def change(d):
        d['entries'][0]['unit'] = 'furlongs'
    edit_yaml(data_copy / PAPER_000, change)
    first = yaml.safe_load((data_copy / PAPER_000).read_text())['entries'][0]['id']
    problems = refs.validate([data_copy / PAPER_000], root=data_copy)
    assert len(problems) == 1
    assert problems[0].file == PAPER_000 and problems[0].where == f'entry {first} (unit)'
    assert "'furlongs'" in problems[0].reason and problems[0].line


def test_unresolved_testbed_is_reported(data_copy):
    def change(d):
        d['entries'][3]['testbed'] = '003-no-such-testbed'
    edit_yaml(data_copy / PAPER_003, change)
    problems = [str(p) for p in refs.validate([data_copy / PAPER_003], root=data_copy)]
    assert len(problems) == 1
    assert PAPER_003 in problems[0] and "'003-no-such-testbed' is not a testbed" in problems[0]


def test_inconsistent_value_si_and_quote_are_reported(data_copy):
    def change(d):
        item = next(e for e in d['entries'] if e['id'] == '002-fig2-bw-ib-w16')
        item['value_si'] = 841          # forgot the 2^20 -> 10^6 conversion
        other = next(e for e in d['entries'] if e['id'] == '002-fig1-lat-ib')
        other['value'] = 6.9            # not what the quote says
        other['value_si'] = 6.9
    edit_yaml(data_copy / 'papers/002-liu-mpi-ib-myrinet-quadrics.yaml', change)
    problems = [str(p) for p in refs.validate([data_copy / 'papers'], root=data_copy)]
    assert any('entry 002-fig2-bw-ib-w16' in p and 'value_si 841 is inconsistent' in p for p in problems)
    assert any('entry 002-fig1-lat-ib' in p and 'does not contain the value' in p for p in problems)


def test_malformed_yaml_names_file_and_line_and_others_are_still_checked(data_copy):
    (data_copy / PAPER_000).write_text('seed: "000"\nentries:\n  - id: 000-a\n    value: [1, 2\n  - id: 000-b\n')
    edit_yaml(data_copy / PAPER_003, lambda d: d['entries'][1].update(kind='opinion'))
    problems = refs.validate(root=data_copy)
    broken = [p for p in problems if p.file == PAPER_000]
    assert len(broken) == 1 and 'malformed YAML' in broken[0].reason and broken[0].line == 5
    assert any(p.file == PAPER_003 and "'opinion'" in p.reason for p in problems)


def test_cli_validate_fails_with_file_and_entry(data_copy, capsys):
    edit_yaml(data_copy / PAPER_003, lambda d: d['entries'][2].update(experiment=44))
    entry_id = yaml.safe_load((data_copy / PAPER_003).read_text())['entries'][2]['id']
    status, _, err = run_cli(['refs', 'validate', '--root', str(data_copy), str(data_copy / PAPER_003)], capsys)
    assert status == 1
    assert f'{PAPER_003}:' in err and f'entry {entry_id}' in err and '1 problem(s)' in err


def _alias_bomb():
    spec = importlib.util.spec_from_file_location('bench_hostile_inputs',
                                                  Path(__file__).parents[1] / 'scripts' / 'bench_hostile_inputs.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.alias_bomb()


@pytest.mark.parametrize('text, reason, line', [
    (_alias_bomb(), 'YAML anchors and aliases are not accepted (&a0)', 1),    # 9^9 leaves once expanded
    ('IMBPointToPoint:\n  $index: &idx [$partition, $environ]\n', 'YAML anchors and aliases are not accepted (&idx)',
     2),
    ('a: 1\nb: *nothing\n', 'YAML anchors and aliases are not accepted (*nothing)', 2),
    ('a: ' + '[' * 100000 + ']' * 100000 + '\n', 'nested deeper than 64 levels', 1),   # libyaml would crash
])
def test_yaml_aliases_and_deep_nesting_are_refused_with_file_and_line(data_copy, capsys, text, reason, line):
    path = data_copy / 'systems' / 'attacked' / 'references.yaml'
    path.parent.mkdir()
    path.write_text(text)
    status, _, err = run_cli(['refs', 'validate', '--root', str(data_copy), str(path)], capsys)
    assert status == 1 and f'systems/attacked/references.yaml:{line}: {reason}' in err, err


def test_validate_one_path_still_resolves_against_the_tree(data_copy, capsys):
    status, out, _ = run_cli(['refs', 'validate', '--root', str(data_copy), str(data_copy / PAPER_003)], capsys)
    assert status == 0 and 'OK: 1 file(s)' in out


def test_experiment_row_must_be_about_the_entry_seed(data_copy):
    edit_yaml(data_copy / PAPER_003, lambda d: d['entries'][2].update(experiment=16))
    entry_id = yaml.safe_load((data_copy / PAPER_003).read_text())['entries'][2]['id']
    problems = [str(p) for p in refs.validate([data_copy / PAPER_003], root=data_copy)]
    assert problems == [f'{PAPER_003}:{problems[0].split(":")[1]}: entry {entry_id}: experiment 16 is about '
                        'seed(s) 001, not 003']


def test_limit_statement_spec_must_parse(data_copy):
    statements = data_copy / 'limits' / 'statements.yaml'
    edit = statements.read_text().replace('spec: pcie:gen1:x1', 'spec: pcie:gen9:x1', 1)
    assert edit != statements.read_text()
    statements.write_text(edit)
    problems = [str(p) for p in refs.validate([statements], root=data_copy)]
    assert len(problems) == 1 and 'statement 1 (pcie:gen9:x1): spec does not parse' in problems[0]


def test_unknown_file_is_reported(data_copy):
    (data_copy / 'papers' / 'notes.txt').write_text('x')
    (data_copy / 'stray.yaml').write_text('a: 1\n')
    problems = [str(p) for p in refs.validate([data_copy / 'stray.yaml'], root=data_copy)]
    assert any(p.startswith('stray.yaml: no schema') for p in problems)


# ---------------------------------------------------------------------------------------------
# Per-system ReFrame references and their provenance

SYSTEM_REFS = textwrap.dedent('''\
    OsuLatency:
      'cluster:ib':
        lat_8: [3.8, null, 0.10, 'us']
        lat_1024: ['$xfail', 'known slow path', [9.0, null, 0.10, 'us']]
    OsuBandwidth:
      $index: [$partition, msg_size]
      'cluster:ib':
        1048576: {bw_1048576: [968.0, -0.10, null, 'MB/s']}
    ''')


def write_system(root, refs_text=SYSTEM_REFS, provenance=None):
    system = root / 'systems' / 'cluster'
    system.mkdir(parents=True, exist_ok=True)
    (system / 'references.yaml').write_text(refs_text)
    if provenance is not None:
        (system / 'provenance.yaml').write_text(provenance)
    return system


def test_system_references_and_provenance_validate(data_copy):
    write_system(data_copy, provenance=textwrap.dedent('''\
        OsuLatency:
          'cluster:ib':
            lat_8: 003-fig3-rdma-write-lat-pcie
            lat_1024: {measured: 'session 920effa7 on cluster:ib', note: baseline}
        OsuBandwidth:
          'cluster:ib':
            1048576: {bw_1048576: [003-fig6-uni-bw-pcie]}
        '''))
    assert refs.validate([data_copy / 'systems'], root=data_copy) == []


def test_system_reference_extra_key_is_rejected(data_copy):
    write_system(data_copy, SYSTEM_REFS.replace("lat_8: [3.8, null, 0.10, 'us']",
                                                "lat_8: [3.8, null, 0.10, 'us']\n    provenance: 003-x"))
    problems = [str(p) for p in refs.validate([data_copy / 'systems'], root=data_copy)]
    assert problems and all(p.startswith('systems/cluster/references.yaml') for p in problems)
    assert any('provenance' in p for p in problems)


def test_system_reference_index_depth_is_checked(data_copy):
    write_system(data_copy, SYSTEM_REFS.replace("1048576: {bw_1048576: [968.0, -0.10, null, 'MB/s']}",
                                                "bw_1048576: [968.0, -0.10, null, 'MB/s']"))
    problems = [str(p) for p in refs.validate([data_copy / 'systems'], root=data_copy)]
    assert any('OsuBandwidth.cluster:ib.bw_1048576' in p and 'level' in p for p in problems), problems


def test_bad_thresholds_are_rejected(data_copy):
    write_system(data_copy, SYSTEM_REFS.replace('[3.8, null, 0.10', '[3.8, 0.5, 0.10'))
    problems = [str(p) for p in refs.validate([data_copy / 'systems'], root=data_copy)]
    assert any('OsuLatency' in p and 'lat_8' in p for p in problems), problems


def test_provenance_must_resolve(data_copy):
    write_system(data_copy, provenance="OsuLatency:\n  'cluster:ib':\n    lat_8: 003-no-such-entry\n"
                                       "    lat_16: 003-fig3-rdma-write-lat-pcie\n")
    problems = [str(p) for p in refs.validate([data_copy / 'systems'], root=data_copy)]
    assert any("OsuLatency.cluster:ib.lat_8: '003-no-such-entry' is not a paper entry id" in p for p in problems)
    assert any('OsuLatency.cluster:ib.lat_16: no such key in references.yaml' in p for p in problems)


def test_baseline_output_is_a_valid_reference_document():
    """What `ibrepro baseline` writes (here from a real IMB PingPong output) passes our schema."""
    table = parsers.parse_file(Path(__file__).parent / 'fixtures/imb/2021.8/IMB-MPI1-PingPong-2.txt').tables[0]
    values = [results.PerfValue('s1', 0.0, 'local', 'default', 'gnu', 'IMBPointToPoint', 'IMBPointToPoint',
                                (('benchmark', 'PingPong'),), var, value, unit, None, None, None, 'pass')
              for var, value, unit in table.metric_values()]
    doc = baseline.build(values)
    assert refs.check_reference_document(doc) == []
    doc['IMBPointToPoint']['local:default']['gnu']['PingPong']['lat_0'] = [0.34, 0.2, None, 'us']
    assert [p.where for p in refs.check_reference_document(doc)] == [
        'IMBPointToPoint.local:default.gnu.PingPong.lat_0.1']


def _reframe():
    exe = Path(sys.executable).with_name('reframe')
    return exe if exe.exists() else shutil.which('reframe')


@pytest.mark.integration
@pytest.mark.skipif(not _reframe(), reason='reframe is not installed in this environment')
def test_reframe_reads_a_validated_reference_file_and_skips_extra_keys(tmp_path):
    """Why provenance is a sibling file: ReFrame 4.10 drops the whole check if a class entry has any
    other key. Our schema must accept exactly what ReFrame accepts."""
    (tmp_path / 'settings.py').write_text(textwrap.dedent('''\
        site_configuration = {
            'systems': [{'name': 'cluster', 'hostnames': ['.*'], 'modules_system': 'nomod',
                         'partitions': [{'name': 'ib', 'scheduler': 'local', 'launcher': 'local',
                                         'environs': ['plain']}]}],
            'environments': [{'name': 'plain'}],
        }
        '''))
    (tmp_path / 'check.py').write_text(textwrap.dedent('''\
        import reframe as rfm
        import reframe.utility.sanity as sn
        from reframe.core.builtins import performance_function, sanity_function


        @rfm.simple_test
        class OsuLatency(rfm.RunOnlyRegressionTest):
            valid_systems = ['*']
            valid_prog_environs = ['*']
            executable = 'echo'
            executable_opts = ['8 3.9']
            reference = {'$ref': 'references.yaml'}

            @sanity_function
            def ok(self):
                return sn.assert_found(r'^8', self.stdout)

            @performance_function('us')
            def lat_8(self):
                return sn.extractsingle(r'^8\\s+(\\S+)', self.stdout, 1, float)
        '''))

    def run(refs_text):
        (tmp_path / 'references.yaml').write_text(refs_text)
        return subprocess.run([str(_reframe()), '-C', 'settings.py', '-c', 'check.py', '-r'], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120).stdout

    good = "OsuLatency:\n  'cluster:ib':\n    lat_8: [3.8, null, 0.1, 'us']\n"
    schema_root = tmp_path / 'data'
    shutil.copytree(paths.REFERENCE_DATA / 'schemas', schema_root / 'schemas')
    write_system(schema_root, good)
    assert refs.validate(root=schema_root) == []
    assert 'P: lat_8: 3.9 us (r:3.8, l:None, u:0.1)' in run(good)

    extra = good + "    provenance: 003-fig3-rdma-write-lat-pcie\n"
    assert refs.validate(root=write_system(schema_root, extra).parents[1]) != []
    out = run(extra)
    assert "skipping test 'OsuLatency'" in out and 'Ran 0/0 test case(s)' in out


# ---------------------------------------------------------------------------------------------
# Coverage of the seed texts

SYNTHETIC_TEXT = textwrap.dedent('''\
    1 Results
    The latency is 3.8 us for 8 bytes (see Figure 2 and [4]).
    The bandwidth is 968 MB/s with a window of 64.
    A stray 42 MB/s that nobody recorded.
    ''')


def synthetic_root(tmp_path, entries, rules):
    root = tmp_path / 'data'
    shutil.copytree(paths.REFERENCE_DATA / 'schemas', root / 'schemas')
    (root / 'papers').mkdir()
    paper = {'seed': '009', 'seed_file': '009_abc.txt', 'title': 't', 'authors': ['a'], 'venue': None, 'year': None,
             'mb_definition': {'value': '10^6', 'quote': None}, 'size_units': {'value': 'bytes', 'quote': None},
             'entries': entries}
    (root / 'papers' / '009-test.yaml').write_text(yaml.safe_dump(paper))
    (root / 'coverage-ignore.yaml').write_text(yaml.safe_dump({'rules': rules}))
    seeds = tmp_path / 'seeds'
    seeds.mkdir()
    (seeds / '009_abc.txt').write_text(SYNTHETIC_TEXT)
    return root, seeds


def entry_of(id_, value, unit, quote, **extra):
    return dict({'id': id_, 'seed': '009', 'where': 'Sec. 1', 'experiment': 1, 'kind': 'result', 'configuration': None,
                 'testbed': None, 'message_size': None, 'metric': 'latency', 'value': value, 'unit': unit,
                 'qualifier': None, 'mb_definition': None, 'value_si': value, 'quote': quote}, **extra)


def test_coverage_finds_unclaimed_numbers_missing_quotes_and_stale_rules(tmp_path):
    root, seeds = synthetic_root(tmp_path, [
        entry_of('009-lat', 3.8, 'us', 'The latency is 3.8 us for 8 bytes', message_size=8),
        entry_of('009-bw', 968, 'MB/s', 'The bandwidth is 968 MB/s with a window of 64.', metric='bandwidth',
                 mb_definition='10^6', parameters={'window': 64}),
        entry_of('009-ghost', 5.0, 'us', 'a quote that is not in the text 5.0'),
    ], [
        {'id': 'citations', 'seeds': 'all', 'pattern': r'\[[0-9]+\]', 'reason': 'citation markers'},
        {'id': 'figures', 'seeds': 'all', 'pattern': r'Figure [0-9]+', 'reason': 'figure labels'},
        {'id': 'never', 'seeds': ['009'], 'text': 'no such text', 'reason': 'matches nothing at all'},
    ])
    results, stale = refcoverage.coverage(seeds, root=root)
    res = results[0]
    assert {(n.text, n.line) for n in res.uncovered} == {('1', 1), ('42', 4)}
    claimed = {n.text: n.claimed_by for n in res.numbers if n.claimed_by}
    assert claimed == {'3.8': '009-lat', '8': '009-lat', '968': '009-bw', '64': '009-bw'}
    assert res.missing_quotes == [('009-ghost', 'a quote that is not in the text 5.0')]
    assert stale == ['never']


def test_coverage_checks_the_limit_statements_quotes(tmp_path):
    root, seeds = synthetic_root(tmp_path, [entry_of('009-lat', 3.8, 'us', 'The latency is 3.8 us')], [])
    (root / 'limits').mkdir()
    (root / 'limits' / 'statements.yaml').write_text(yaml.safe_dump([
        {'seed': '009_abc.txt', 'section': '1', 'quote': 'The bandwidth is 968 MB/s', 'spec': 'pcie:gen1:x8',
         'quantity': 'per_direction', 'value': 968, 'unit': 'MB/s'},
        {'seed': '009_abc.txt', 'section': '1', 'quote': 'The bandwidth is 969 MB/s', 'spec': 'pcie:gen1:x8',
         'quantity': 'per_direction', 'value': 969, 'unit': 'MB/s'}]))
    results_, _ = refcoverage.coverage(seeds, root=root)
    assert results_[0].missing_quotes == [('limits/statements.yaml #2', 'The bandwidth is 969 MB/s')]


def test_coverage_cli_needs_a_seeds_directory(capsys, monkeypatch):
    monkeypatch.delenv('IBREPRO_SEEDS', raising=False)
    status, _, err = run_cli(['refs', 'coverage'], capsys)
    assert status == 2 and 'IBREPRO_SEEDS' in err


@pytest.mark.skipif(not SEEDS_DIR.is_dir(), reason=f'seed texts not available (set IBREPRO_SEEDS; tried {SEEDS_DIR}); '
                                                   'they are not distributed with ibrepro')
def test_every_number_of_the_seed_texts_is_captured_or_explained(capsys):
    status, out, _ = run_cli(['refs', 'coverage', '--seeds', str(SEEDS_DIR)], capsys)
    assert status == 0, out
    assert out.count(' 0 uncovered, 0 quotes not found') == 5, out


def test_the_checks_read_a_references_file_once_per_run(tmp_path):
    """Every test instance is judged against the same file: read and checked once (per path, mtime and size), and
    given to ReFrame inline (ReFrame's own `$ref` would parse the whole file again for every instance)."""
    from ibrepro import rfm
    path = tmp_path / 'references.yaml'
    shutil.copy(paths.REFERENCE_DATA / 'systems' / 'testbeds' / 'references.yaml', path)
    problem, doc = rfm.system_references(str(path))
    assert problem is None and rfm.system_references(str(path))[1] is doc      # the same object: not read again
    refs = rfm.class_references(doc, 'PerftestLatency')
    assert refs['$index'] == ('$partition', '$environ', 'operation')
    assert refs['testbeds:pcie-sdr']['verbs']['send'] == {'lat_2': (5.2, None, 0.25, 'us')}
    assert rfm.class_references(doc, 'NoSuchCheck') == {}
    path.write_text(path.read_text() + 'Extra:\n  $index: 7\n')                   # changed: read again
    problem, doc = rfm.system_references(str(path))
    assert doc is None and problem == f'references file {path}: Extra.$index: $index: 7 is not of type \'array\''
    problem, doc = rfm.system_references(str(paths.REFERENCE_DATA / 'systems' / 'testbeds' / 'references.yaml'))
    assert rfm.class_references(doc, 'PerftestLatency', 'other') == {'$index': ('$partition', '$environ', 'operation')}


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")
def test_references_in_a_shared_directory_are_read_only_when_ours(tmp_path):
    """In a world-writable directory, another user's file (planted first) is refused; ours is read."""
    from ibrepro import rfm
    shared = tmp_path / 'shared'
    shared.mkdir()
    shared.chmod(0o1777)
    path = shared / 'references.yaml'
    shutil.copy(paths.REFERENCE_DATA / 'systems' / 'testbeds' / 'references.yaml', path)
    assert rfm.system_references(str(path))[0] is None
    os.chown(path, 65534, 65534)
    os.utime(path, ns=(1, 1))                                     # another key of the cache: read again
    problem, doc = rfm.system_references(str(path))
    assert doc is None and problem == (f'references file {path}: cannot read: owned by uid 65534 in a directory '
                                       'anyone can write'), problem

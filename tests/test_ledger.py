"""The ledger of nights (ibrepro.ledger): one line per night, append-only, every line read back or named."""

import json

import pytest

from ibrepro import ledger

REPORT = {'runs': [
    {'testcases': [{'display_name': 'A %x=1', 'environ': 'impi', 'result': 'fail', 'fail_reason': 'first try'}]},
    {'testcases': [{'display_name': 'A %x=1', 'environ': 'impi', 'result': 'pass',
                    'repetition_values': {'lat_8': [0.2, float('inf'), 0.3]},
                    'control_values': [{'pingpong_ns': 55.0, 'copy_gbs': None}],
                    'repetition_pressure': [0.1, None], 'injected': '', 'inject_added': {}}]}]}


def record(night='t0001'):
    return ledger.night_record(REPORT, night, phase='tuning', schedule={'kind': 'clean'}, started=1.0, wall_s=2.0)


def test_a_night_keeps_the_last_attempt_and_no_non_finite_value():
    case = record()['cases']['A %x=1']
    assert case['result'] == 'pass' and case['values'] == {'lat_8': [0.2, None, 0.3]}
    assert case['control'] == [{'copy_gbs': None, 'pingpong_ns': 55.0}] and case['pressure'] == [0.1, None]


def test_a_night_keeps_the_nodes_hardware_and_nothing_hostile_of_it():
    report = json.loads(json.dumps(REPORT))
    report['runs'][1]['testcases'][0]['node_hardware'] = {'cpu': 'AMD EPYC', 'cache': '1024 KB', 'x': '<\n>'}
    assert ledger.night_record(report, 't1', phase='tuning', schedule={'kind': 'clean'}, started=1.0,
                               wall_s=2.0)['cases']['A %x=1']['hardware'] == {'cache': '1024 KB', 'cpu': 'AMD EPYC'}
    assert 'hardware' not in record()['cases']['A %x=1']       # a session stored before the control printed it


def test_append_only_and_read_back(tmp_path):
    path = tmp_path / 'ledger.jsonl'
    assert ledger.read(path) == []
    ledger.append(path, record('t0001'))
    ledger.append(path, record('t0002'))
    with pytest.raises(ledger.LedgerError, match='t0001 is there already'):
        ledger.append(path, record('t0001'))
    assert [n['night'] for n in ledger.read(path)] == ['t0001', 't0002']
    assert len(path.read_text().splitlines()) == 2


def test_another_machine_under_the_same_name_is_told_apart():
    here = ledger.machine_identity()
    assert here['cpus'] >= 1 and here['cpu']
    night = ledger.night_record(REPORT, 't0001', phase='tuning', schedule={'kind': 'clean'}, started=1.0,
                                wall_s=2.0, host='vm', machine=here)
    assert ledger.other_machine([record('t0000'), night], {**here, 'boot_id': 'after a reboot'}) == ''
    moved = ledger.other_machine([night, record('t0002')], {**here, 'cache': '1 KB'})
    assert 'cache' in moved and "'1 KB'" in moved and 'cpu_model' not in moved
    assert ledger.other_machine([record('t0001')], {**here, 'cache': '1 KB'}) == ''   # no night says


@pytest.mark.parametrize('line, message', [
    ('{not json', 'not JSON'),
    ('[1]', 'not a night'),
    (json.dumps({'v': 99}), 'format 99'),
    (json.dumps({'v': 1, 'night': '$(id)', 'cases': {}, 'schedule': {}}), 'night id'),
    (json.dumps({'v': 1, 'night': 'n', 'cases': {'A': {'values': []}}, 'schedule': {}}), 'not a case record'),
])
def test_a_line_that_cannot_be_read_is_named(tmp_path, line, message):
    path = tmp_path / 'ledger.jsonl'
    path.write_text(json.dumps(record()) + '\n' + line + '\n')
    with pytest.raises(ledger.LedgerError, match=f':2: .*{message}'):
        ledger.read(path)


def test_a_night_twice_and_a_bad_id_are_refused(tmp_path):
    path = tmp_path / 'ledger.jsonl'
    path.write_text((json.dumps(record()) + '\n') * 2)
    with pytest.raises(ledger.LedgerError, match=':2: night t0001 is there twice'):
        ledger.read(path)
    with pytest.raises(ledger.LedgerError, match='night id'):
        record('a b')


def test_refs_validate_reads_the_ledgers(tmp_path):
    """`ibrepro refs validate` checks every ledger of reference-data/ledger with the ledger's own reader (not as
    YAML), and names a broken line."""
    import shutil

    from ibrepro import paths, references
    root = tmp_path / 'reference-data'
    shutil.copytree(paths.REFERENCE_DATA, root)
    assert references.validate(root=root) == []
    with open(root / 'ledger' / 'vm-impi-1x2.jsonl', 'a') as f:
        f.write('{"v": 1, "night": "t0001"\n')
    (problem,) = references.validate(root=root)
    assert problem.file == 'ledger/vm-impi-1x2.jsonl' and 'not JSON' in problem.reason

"""Parser of ibrepro-bench outputs, on real outputs of our programs (tests/fixtures/ibrepro-bench,
recorded by benchmarks/tests/record-fixtures.sh; see tests/fixtures/MANIFEST.md)."""

import json
from pathlib import Path

import pytest

from ibrepro.parsers import (BenchmarkFailed, ParseError, detect_tool, parse_file, parse_text)

REPO = Path(__file__).resolve().parents[1]
VERSION = (REPO / 'benchmarks' / 'VERSION').read_text().strip()
FIXTURES = REPO / 'tests' / 'fixtures' / 'ibrepro-bench' / VERSION


def sweep(lo, hi):
    sizes = [0] if lo == 0 else []
    size = max(lo, 1)
    while size <= hi:
        sizes.append(size)
        size *= 2
    return sizes


def data_lines(text):
    """Per '# table:' the lines after its header, as printed (an independent reading)."""
    tables, current, header_seen = [], None, False
    for line in text.splitlines():
        if line.startswith('# table:'):
            current, header_seen = [], False
            tables.append(current)
        elif line.startswith('#') or current is None or not line.strip():
            continue
        elif not header_seen:
            header_seen = True
        else:
            current.append(line.split())
    return tables


@pytest.mark.parametrize('name, benchmark, tables, sizes, metrics', [
    ('overhead-2.txt', 'overhead', ['overhead'], sweep(0, 4096), {'lat', 'overhead'}),
    ('bilat-2.txt', 'bilat', ['bilat'], sweep(0, 4 << 20), {'lat'}),
    ('bibw-2.txt', 'bibw', ['bibw'], sweep(1, 4 << 20), {'bw', 'msgrate'}),
    ('bibw.w64-2.txt', 'bibw', ['bibw'], sweep(1, 1 << 20), {'bw', 'msgrate'}),
    ('overlap-2.txt', 'overlap', ['overlap'], sweep(0, 4 << 20), {'lat', 'overlap'}),
    ('reuse_lat-2.txt', 'reuse_lat', ['reuse_lat'] * 3, sweep(0, 4 << 20), {'lat'}),
    ('reuse_bw-2.txt', 'reuse_bw', ['reuse_bw'] * 3, sweep(1, 4 << 20), {'bw'}),
])
def test_mpi_outputs(name, benchmark, tables, sizes, metrics):
    path = FIXTURES / name
    text = path.read_text()
    assert detect_tool(text) == 'bench'
    out = parse_file(path)
    assert (out.tool, out.version, out.meta['benchmark']) == ('bench', VERSION, benchmark)
    assert out.meta['ranks'] == 2 and out.meta['placement'] == 'intra-node'
    assert [t.benchmark for t in out.tables] == tables
    for table, lines in zip(out.tables, data_lines(text)):
        assert table.sizes() == sizes
        assert set(table.metrics) == metrics
        assert len(table.rows) == len(lines)
        for row, tokens in zip(table.rows, lines):  # every printed number is kept
            assert [float(row[c.key]) for c in table.columns] == [float(t) for t in tokens]
        variables = list(table.metric_values())
        assert len(variables) == len(sizes) * len(metrics)
        assert all(value >= 0 for _, value, _ in variables)
    json.dumps(out.to_dict())


def test_units_of_the_variables():
    out = parse_file(FIXTURES / 'overhead-2.txt')
    variables = {name: unit for name, _, unit in out.table('overhead').metric_values()}
    assert variables['lat_0'] == 'us' and variables['overhead_4096'] == 'us'
    out = parse_file(FIXTURES / 'bibw-2.txt')
    variables = {name: unit for name, _, unit in out.table('bibw').metric_values()}
    assert variables['bw_1048576'] == 'MB/s' and variables['msgrate_1'] == 'msg/s'
    assert out.meta['window'] == 16 and parse_file(FIXTURES / 'bibw.w64-2.txt').meta['window'] == 64


def test_overlap_output():
    out = parse_file(FIXTURES / 'overlap-2.txt')
    tolerance = out.meta['tolerance_pct'] / 100
    for row in out.table('overlap').rows:
        assert 0 <= row['overlap'] <= row['rtt'] * (1 + tolerance) + 0.01


def test_reuse_tables_by_percentage():
    out = parse_file(FIXTURES / 'reuse_lat-2.txt')
    assert [t.params['reuse'] for t in out.tables] == [0, 50, 100]
    r50 = out.table('reuse_lat', reuse=50)
    assert all(row['fresh'] <= row['iterations'] for row in r50.rows)
    assert all(row['fresh'] == 0 for row in out.table('reuse_lat', reuse=100).rows)
    with pytest.raises(ParseError, match='expected one table for reuse_lat'):
        out.table('reuse_lat')


@pytest.mark.parametrize('ranks', [1, 2, 4])
def test_memory_outputs(ranks):
    out = parse_file(FIXTURES / f'memory-{ranks}.txt')
    assert out.meta['ranks'] == ranks
    per_rank = out.table('memory_per_rank')
    assert [row['rank'] for row in per_rank.rows] == list(range(ranks))
    assert per_rank.size_key is None and per_rank.metrics == {}
    summary = out.table('memory')
    assert [(name, unit) for name, _, unit in summary.metric_values()] == [('mem', 'KiB')]
    assert summary.rows[0]['mem'] == max(row['rss'] for row in per_rank.rows)


@pytest.mark.parametrize('name, kind, reason', [
    ('bilat.ranks-3.txt', 'invalid-ranks', 'needs exactly 2 MPI processes, got 3'),
    ('bibw.badoption-2.txt', 'invalid-option', '-W must be between 1 and 65536, got 0'),
    ('rdma_write_bw-nodevice.txt', 'no-device', 'ibrepro_rdma: no RDMA device found'),
    ('rdma_server-nodevice.txt', 'no-device', 'ibrepro_rdma: no RDMA device found'),
    ('rdma.badoption.txt', 'invalid-option', '-W is a client option'),
])
def test_failures(name, kind, reason):
    with pytest.raises(BenchmarkFailed) as err:
        parse_file(FIXTURES / name)
    assert err.value.kind == kind
    assert reason in str(err.value) and name in str(err.value)


def test_interrupted_run_keeps_what_it_measured():
    with pytest.raises(BenchmarkFailed) as err:
        parse_file(FIXTURES / 'bilat.interrupted-2.txt')
    # MPICH's hydra printed no abort line this time (only its own stack): the missing "# done"
    assert err.value.kind == 'incomplete' and 'last size 0' in err.value.reason
    table = err.value.partial.table('bilat')
    assert table.sizes() == [0]  # what it measured before mpiexec stopped it
    assert any('Sending Ctrl-C' in note for note in table.notes)  # the launcher's lines


def test_help_is_not_a_result():
    with pytest.raises(ParseError, match='not the output of a known benchmark'):
        parse_file(FIXTURES / 'rdma-help.txt')


def test_output_cut_before_done_is_incomplete():
    text = (FIXTURES / 'bilat-2.txt').read_text()
    cut = text[:text.index('\n1024 ')]  # as if the job died after 512 bytes
    with pytest.raises(BenchmarkFailed) as err:
        parse_text(cut, source='cut')
    assert err.value.kind == 'incomplete' and 'last size 512' in str(err.value)
    assert err.value.partial.table('bilat').sizes() == sweep(0, 512)


def test_damaged_row_is_a_parse_error():
    text = (FIXTURES / 'bibw-2.txt').read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith('1024 '))
    damaged = text.replace(line, line.rsplit(None, 1)[0])  # drop the last field
    with pytest.raises(ParseError, match=r"bibw: row '1024 .*' has 2 fields, the header has 3"):
        parse_text(damaged, source='damaged')


def test_imb_detection_unchanged():
    imb = next((REPO / 'tests' / 'fixtures' / 'imb').glob('*/IMB-MPI1-PingPong-2.txt'))
    assert detect_tool(imb.read_text()) == 'imb'


RXE = REPO / 'tests' / 'fixtures' / 'ibrepro-bench' / f'{VERSION}-rxe'


def test_rdma_client_outputs_over_soft_roce():
    out = parse_file(RXE / 'rdma_write_bw.stripe2.pairs2.bidir.txt')
    assert out.meta['benchmark'] == 'rdma_write_bw' and out.meta['role'] == 'client'
    assert (out.meta['pairs'], out.meta['channels'], out.meta['mode']) == (2, 2, 'stripe')
    assert out.meta['devices'].split() == ['rxe0:1', 'rxe1:1']
    table = out.table('rdma_write_bw')
    assert table.sizes() == sweep(1024, 1 << 20)
    for row in table.rows:  # both from the slowest pair's time: bw = msg/s x size (MB = 10^6 B)
        rounding = 0.5 * row['bytes'] / 1e6 + 0.0005  # msgrate is printed as an integer
        assert abs(row['bw'] - row['msgrate'] * row['bytes'] / 1e6) <= rounding

    lat = parse_file(RXE / 'rdma_write_lat.pairs4.txt').table('rdma_write_lat')
    assert all(row['lat_max'] >= row['lat'] > 0 for row in lat.rows)  # slowest pair >= mean
    assert [name for name, _, _ in lat.metric_values()] == [f'lat_{s}' for s in sweep(2, 256)]


def test_rdma_server_output_has_no_table():
    out = parse_file(RXE / 'rdma_write_bw.stripe2.pairs2.bidir.server.txt')
    assert out.meta['role'] == 'server' and out.meta['pairs'] == 2 and out.tables == []


def test_rdma_failures_over_soft_roce():
    with pytest.raises(BenchmarkFailed) as err:
        parse_file(RXE / 'rdma_write_bw.noserver.txt')
    assert err.value.kind == 'timeout'
    with pytest.raises(BenchmarkFailed) as err:
        parse_file(RXE / 'rdma_write_bw.pairsmismatch.server.txt')
    assert err.value.kind == 'invalid-option'  # the first failure printed, before pair 1's timeout

"""OSU, NPB and perftest parsers: units, recorded facts, and bad input (real fixtures, cut short)."""

import json
import math
import subprocess
from pathlib import Path

import pytest

from ibrepro import cli
from ibrepro.parsers import BenchmarkFailed, ParseError, parse_file, perftest

FIXTURES = Path(__file__).parent / 'fixtures'


def _cut(tmp_path, fixture, keep):
    """A copy of a real fixture cut after ``keep`` characters (a run killed mid-write)."""
    text = (FIXTURES / fixture).read_text()
    path = tmp_path / Path(fixture).name
    path.write_text(text[:keep(text)])
    return path


# -- garbage ---------------------------------------------------------------------------------

def test_empty_file(tmp_path):
    path = tmp_path / 'empty.txt'
    path.write_text('\n  \n')
    with pytest.raises(ParseError, match=r'empty\.txt: empty output'):
        parse_file(path)


def test_binary_file(tmp_path):
    path = tmp_path / 'core.bin'
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ParseError, match=r'core\.bin: not the output of a known benchmark'):
        parse_file(path)


def test_missing_file(tmp_path):
    with pytest.raises(ParseError, match=r'nothere\.txt: cannot read'):
        parse_file(tmp_path / 'nothere.txt')


@pytest.mark.parametrize('fixture, last_row', [
    ('osu/7.4/osu_latency-2.txt', '4194304 '),
    ('osu/5.3/osu_mbw_mr-2.txt', '4194304              4077.87'),
    ('perftest/4.5-0.17-rxe/ib_write_bw.txt', ' 65536      5000             30.70'),
    ('perftest/4.5-0.17-rxe/ib_write_lat.all.txt', ' 8388608 20          371668.43'),
    ('imb/2021.8/IMB-MPI1-PingPong-2.txt', '      1048576           40'),
])
def test_truncated_row(tmp_path, fixture, last_row):
    path = _cut(tmp_path, fixture, lambda text: text.index(last_row) + len(last_row))
    with pytest.raises(ParseError, match=rf'{path.name}: .*has \d+ fields, the header'):
        parse_file(path)


def test_truncated_npb_summary(tmp_path):
    path = _cut(tmp_path, 'npb/3.4.2/cg.A-2.txt', lambda text: text.index('Mop/s total') + 16)
    with pytest.raises(ParseError, match=r"cg\.A-2\.txt: NPB summary has no numeric 'mops_total'"):
        parse_file(path)


@pytest.mark.parametrize('fixture, header', [
    ('osu/7.4/osu_bw-2.txt', '# Size      Bandwidth (MB/s)\n'),
    ('osu/5.3/osu_latency-2.txt', '# Size          Latency (us)\n'),
    ('perftest/4.5-0.17-rxe/ib_write_lat.txt', '99.9% percentile[usec] \n'),
])
def test_header_only(tmp_path, fixture, header):
    path = _cut(tmp_path, fixture, lambda text: text.index(header) + len(header))
    with pytest.raises(BenchmarkFailed, match=rf'{path.name}: incomplete: .*(header|no row)') as info:
        parse_file(path)
    assert info.value.partial.tables[0].rows == []


def test_npb_banner_only(tmp_path):
    path = _cut(tmp_path, 'npb/3.4.2/is.A-2.txt', lambda text: text.index('Iterations:'))
    with pytest.raises(BenchmarkFailed, match=r'is\.A-2\.txt: incomplete: NPB IS: output ends'):
        parse_file(path)


def test_perftest_client_without_table(tmp_path):
    path = _cut(tmp_path, 'perftest/4.5-0.17-rxe/ib_write_bw.txt', lambda text: text.index(' local'))
    with pytest.raises(BenchmarkFailed, match=r'ib_write_bw\.txt: incomplete: perftest RDMA_Write BW'):
        parse_file(path)


# -- OSU -------------------------------------------------------------------------------------

def test_osu_mb_is_1e6_bytes():
    """mbw_mr prints both MB/s and messages/s: MB/s = size * messages/s / 10^6 (not 2^20)."""
    table = parse_file(FIXTURES / 'osu/5.3/osu_mbw_mr-2.txt').table()
    for row in table.rows:
        expected = row['bytes'] * row['messages_s'] / 1e6
        rounding = 0.005 + row['bytes'] * 0.005 / 1e6      # both columns have 2 decimals
        assert row['mb_s'] == pytest.approx(expected, abs=rounding), row
        if row['bytes'] >= 1024:                             # and 2^20 would be 5% off
            assert row['mb_s'] != pytest.approx(expected / 1.048576, abs=rounding), row


def test_osu_version_formats():
    old = parse_file(FIXTURES / 'osu/5.3/osu_latency-2.txt').table()
    new = parse_file(FIXTURES / 'osu/7.4/osu_latency-2.txt').table()
    assert [c.name for c in old.columns] == ['Size', 'Latency (us)']
    assert [c.name for c in new.columns] == ['Size', 'Avg Latency(us)']
    assert (old.metrics, new.metrics) == ({'lat': 'latency_us'}, {'lat': 'avg_latency_us'})
    assert old.params == {} and new.params == {'datatype': 'MPI_CHAR'}
    assert old.rows[0] == {'bytes': 0, 'latency_us': 0.34}


def test_osu_full_stats_and_validation_columns():
    full = parse_file(FIXTURES / 'osu/7.4/osu_allreduce.full-4.txt').table()
    assert [c.key for c in full.columns] == ['bytes', 'avg_latency_us', 'min_latency_us',
                                             'max_latency_us', 'iterations']
    assert full.rows[-1] == {'bytes': 1048576, 'avg_latency_us': 1952.77,
                             'min_latency_us': 1886.42, 'max_latency_us': 2049.64, 'iterations': 100}
    valid = parse_file(FIXTURES / 'osu/7.4/osu_allreduce.validate_int-2.txt').table()
    assert {row['validation'] for row in valid.rows} == {'Pass'}


def test_osu_failed_validation_keeps_rows():
    with pytest.raises(BenchmarkFailed) as info:
        parse_file(FIXTURES / 'osu/7.4/osu_allreduce.validate-2.txt')
    rows = info.value.partial.table().rows
    assert [row['validation'] for row in rows] == ['Pass'] * 4 + ['Fail']


def test_osu_options_and_sizeless_tables():
    mbw = parse_file(FIXTURES / 'osu/7.4/osu_mbw_mr-4.txt').table()
    assert mbw.params == {'pairs': 2, 'window_size': 64, 'datatype': 'MPI_CHAR'}
    put = parse_file(FIXTURES / 'osu/7.4/osu_put_latency-2.txt').table()
    assert put.params['window_creation'] == 'MPI_Win_allocate'
    nbc = parse_file(FIXTURES / 'osu/7.4/osu_ialltoall-2.txt').table()
    assert nbc.notes == ['Overall = Coll. Init + Compute + MPI_Test + MPI_Wait']
    assert [c.key for c in nbc.columns][1:] == ['overall_us', 'compute_us', 'pure_comm_us',
                                                'overlap_pct']
    barrier = parse_file(FIXTURES / 'osu/7.4/osu_barrier-4.txt').table()
    assert list(barrier.metric_values()) == [('lat', 2.63, 'us')]


def test_osu_startup_programs():
    old = parse_file(FIXTURES / 'osu/5.3/osu_init-2.txt')     # no title, no "ms" in 5.3
    new = parse_file(FIXTURES / 'osu/7.4/osu_init.mpich-4.txt')
    assert old.version is None and new.version == '7.4'
    assert old.table().rows[0] == {'nprocs': 2, 'min_ms': 243, 'max_ms': 245, 'avg_ms': 244,
                                   'avg_s': 0.244}
    assert list(new.table().metric_values()) == [('time', 0.174, 's')]
    hello = parse_file(FIXTURES / 'osu/7.4/osu_hello-2.txt')
    assert hello.tables == [] and hello.meta['processes'] == 2


# -- NPB -------------------------------------------------------------------------------------

def test_npb_summary():
    out = parse_file(FIXTURES / 'npb/3.3.1/ft.A-2.txt')
    table = out.table('FT', **{'class': 'A'})
    assert out.version == '3.3.1' and out.meta['banner'].startswith('NAS Parallel Benchmarks 3.3 ')
    assert table.size_key is None
    assert table.rows[0]['size'] == '256x256x128' and table.rows[0]['mops_per_process'] == 750.88
    assert list(table.metric_values()) == [('time', 4.75, 's'), ('mops', 1501.76, 'Mop/s')]
    assert out.meta['compile_options']['MPIF77'] == 'mpif77.openmpi'


def test_npb_failed_verification_keeps_measurement():
    with pytest.raises(BenchmarkFailed) as info:
        parse_file(FIXTURES / 'npb/3.4.2/ft.A.niter4_verify_fail-2.txt')
    row = info.value.partial.table().rows[0]
    assert (row['class'], row['iterations'], row['time_s']) == ('U', 4, 3.74)


# -- perftest --------------------------------------------------------------------------------

def test_perftest_mb_is_2_to_the_20():
    """perftest's MB/sec is 2^20 B/s: the derived SI column is printed * 1.048576, and the data
    agree: bytes * MsgRate matches the SI value, not the printed one (every BW fixture, rows where
    the 2-decimal MB/sec and 6-decimal Mpps columns are precise to better than 0.5%)."""
    checked = 0
    for path in sorted((FIXTURES / 'perftest/4.5-0.17-rxe').glob('ib_*_bw*.txt')):
        table = parse_file(path).table()
        units = {c.key: c.unit for c in table.columns}
        assert units['bw_average_mb_sec'] == 'MiB/s' and units['bw_average_si'] == 'MB/s'
        for row in table.rows:
            assert row['bw_average_si'] == pytest.approx(row['bw_average_mb_sec'] * 2**20 / 10**6)
            assert row['msgrate_si'] == pytest.approx(row['msgrate_mpps'] * 1e6)
            if row['msgrate_si'] >= 200 and row['bw_average_mb_sec'] >= 1:
                from_rate = row['bytes'] * row['msgrate_si'] / 1e6
                assert row['bw_average_si'] == pytest.approx(from_rate, rel=0.01), (path, row)
                assert row['bw_average_mb_sec'] != pytest.approx(from_rate, rel=0.01), (path, row)
                checked += 1
    assert checked >= 15


def test_perftest_report_formats_from_source():
    """Header lines as perftest_parameters.h (v4.5-0.17) defines them: RESULT_FMT_G (--report_gbits,
    Gb/sec = 10^9 bit/s), RESULT_FMT_PER_PORT (-O dual-port), RESULT_FMT_LAT_DUR (-D)."""
    gbits, derived = perftest._columns(
        ' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]', 'h')
    assert derived['bw_average_si'] == ('bw_average_gb_sec', 125.0)
    assert [c.unit for c in gbits] == ['B', None, 'Gb/s', 'MB/s', 'Gb/s', 'MB/s', 'Mpps', 'msg/s']
    per_port, _ = perftest._columns(
        ' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]   '
        'BW Port1[MB/sec]   MsgRate Port1[Mpps]   BW Port2[MB/sec]   MsgRate Port2[Mpps]', 'h')
    assert [c.name for c in per_port if not c.key.endswith('_si')][5:] == [
        'BW Port1[MB/sec]', 'MsgRate Port1[Mpps]', 'BW Port2[MB/sec]', 'MsgRate Port2[Mpps]']
    duration, _ = perftest._columns(' #bytes        #iterations       t_avg[usec]    tps average', 'h')
    assert [c.key for c in duration] == ['bytes', 'iterations', 't_avg_usec', 'tps_average']


def test_perftest_settings_and_sides():
    client = parse_file(FIXTURES / 'perftest/4.5-0.17-rxe/ib_write_lat.all.txt')
    assert {k: client.meta[k] for k in ('test', 'role', 'device', 'transport', 'connection', 'mtu',
                                         'link_type', 'qps', 'dual_port', 'rdma_cm')} == {
        'test': 'RDMA_Write Latency Test', 'role': 'client', 'device': 'rxe0', 'transport': 'IB',
        'connection': 'RC', 'mtu': 1024, 'link_type': 'Ethernet', 'qps': 1, 'dual_port': 'OFF',
        'rdma_cm': 'OFF'}
    assert client.meta['warnings'] == ['Correlation coefficient r^2: 0.889929 < 0.9']
    last = client.table().rows[-1]
    assert math.isnan(last['t_stdev_usec']) and last['t_typical_usec'] == 444522.48
    assert last['p99_9_usec'] == 542712.45

    passive = parse_file(FIXTURES / 'perftest/4.5-0.17-rxe/ib_read_lat.server.txt')
    assert passive.meta['role'] == 'server' and passive.tables == []
    with pytest.raises(ParseError, match='found 0'):
        passive.table()

    copy = parse_file(FIXTURES / 'perftest/4.5-0.17-rxe/ib_write_bw.all.server.txt').table()
    assert copy.sizes() == [8388608] and 'client\'s final report' in copy.notes[0]


def test_cli_prints_json_for_results(capsys):
    files = [FIXTURES / 'osu/5.9/osu_bw-2.txt', FIXTURES / 'perftest/4.5-0.17-rxe/ib_send_bw.txt',
             FIXTURES / 'npb/3.4.2/mg.A-4.txt']
    assert cli.main(['parse', *map(str, files)]) == 0
    results = json.loads(capsys.readouterr().out)
    assert [r['tool'] for r in results] == ['osu', 'perftest', 'npb']
    assert results[1]['tables'][0]['metrics'] == {'bw': 'bw_average_si', 'msgrate': 'msgrate_si'}


# perftest as sites have it today (upstream 26.04.17; MOFED/DOCA builds print the same header): bandwidth in
# MiB/sec, Gb/sec with --report_gbits, in duration mode (-D), with two QPs (-q 2) and bidirectional (-b)
UPSTREAM = FIXTURES / 'perftest/26.04.17-rxe'


@pytest.mark.parametrize('name, printed, factor', [
    ('ib_write_bw.txt', 21.94, 2**20 / 1e6),
    ('ib_write_bw.report_gbits.txt', 0.13, 125.0),
    ('ib_write_bw.duration.txt', 13.99, 2**20 / 1e6),
    ('ib_write_bw.qp2.txt', 24.40, 2**20 / 1e6),
    ('ib_write_bw.bidir.txt', 39.78, 2**20 / 1e6),
    ('ib_read_bw.txt', 11.06, 2**20 / 1e6),
])
def test_perftest_upstream_bandwidth_in_mb_per_s(name, printed, factor):
    table = parse_file(UPSTREAM / name).table()
    values = {name: (value, unit) for name, value, unit in table.metric_values()}
    assert values['bw_65536'] == (pytest.approx(printed * factor), 'MB/s')
    assert 'msgrate' in table.metrics


def test_perftest_upstream_help_and_json():
    with pytest.raises(ParseError, match='ib_write_bw --help output'):
        parse_file(UPSTREAM / 'ib_write_bw-help.txt')    # "Usage:" names the program by its full path
    json_lat = parse_file(UPSTREAM / 'ib_write_lat.out_json.json').table()
    text_lat = parse_file(UPSTREAM / 'ib_write_lat.out_json.txt').table()   # the same run's stdout
    assert list(json_lat.metric_values()) == list(text_lat.metric_values()) == [('lat_2', 1646.32, 'us')]
    with pytest.raises(ParseError, match='bandwidth carries no unit'):
        parse_file(UPSTREAM / 'ib_write_bw.out_json.json')


def test_a_metric_the_output_lacks_fails_naming_it():
    """A check that reports bw fails sanity naming 'bw' and the columns it read, instead of dropping the
    variable (ReFrame never judges the references of a variable that was not produced)."""
    from reframe.core.exceptions import SanityError

    from ibrepro.rfm import PaperExperiment

    class Check:
        tool, report_metrics = 'perftest', ['bw']
    table = parse_file(UPSTREAM / 'ib_write_lat.txt').table()
    with pytest.raises(SanityError, match=r"no 'bw' in the output \(its columns: #bytes, #iterations, t_min"):
        PaperExperiment.check_metrics(Check(), table)
    Check.report_metrics = ['lat']
    PaperExperiment.check_metrics(Check(), table)


@pytest.mark.parametrize('stderr, event', [
    # Slurm's slurmstepd line, as Slurm sites document it (e.g. the University of Bern's user guide)
    ('slurmstepd: error: *** JOB 41239 ON fnode01 CANCELLED AT 2016-11-30T11:22:57 DUE TO TIME LIMIT ***',
     'the job hit its time limit (Slurm cancelled the step)'),
    ('srun: error: *** STEP 41239.0 ON cn7 CANCELLED AT 2026-11-24T10:00:00 DUE TO NODE FAILURE ***',
     'a node of the job failed while it ran: Slurm cancelled 41239.0 (job state NODE_FAIL; `sinfo -R` names the '
     'node and why)'),
    ('MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode 3', None),  # not the scheduler
])
def test_what_the_scheduler_did_to_the_job(stderr, event):
    from ibrepro.parsers import job_event
    assert job_event(stderr) == event


def test_perftest_ended_by_a_signal_keeps_its_rows_and_says_so(tmp_path):
    """What a job's output holds when perftest is killed mid-sweep: the rows it printed (a real output, cut after
    its 16384 B row), then the shell's own word for the signal, printed here by a real bash."""
    lines = (UPSTREAM / 'ib_write_bw.all.txt').read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if line.split()[:1] == ['16384']) + 1
    head = tmp_path / 'head.txt'
    head.write_text(''.join(lines[:cut]))
    done = subprocess.run(['bash', '-c', 'cat "$1"; sh -c "kill -TERM \\$\\$"; true', 'bash', str(head)],
                          capture_output=True, text=True)
    assert 'Terminated' in done.stderr
    killed = tmp_path / 'ib_write_bw.out'
    killed.write_text(done.stdout + done.stderr)
    with pytest.raises(BenchmarkFailed) as info:
        parse_file(killed, tool='perftest')
    assert info.value.kind == 'abort'
    assert "stopped after 16384 B: the output ends with 'Terminated'" in info.value.reason
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith('#bytes'))
    printed = [int(line.split()[0]) for line in lines[header + 1:cut] if line.split()[:1][0].isdigit()]
    assert [row['bytes'] for row in info.value.partial.table().rows] == printed and printed[-1] == 16384

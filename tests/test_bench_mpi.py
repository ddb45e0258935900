"""The MPI benchmarks of benchmarks/mpi, built with the project's MPI and run for real (2 ranks,
short settings). Finds mpicc in $IBREPRO_MPICC, <repo>/.deps/mpich/bin/mpicc (make setup) or PATH."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ibrepro.parsers import BenchmarkFailed, parse_text
from ibrepro.paths import DEPS_DIR

REPO = Path(__file__).resolve().parents[1]
VERSION = (REPO / 'benchmarks' / 'VERSION').read_text().strip()
TWO_RANK_PROGRAMS = ['ibrepro_overhead', 'ibrepro_bilat', 'ibrepro_bibw', 'ibrepro_overlap',
                     'ibrepro_reuse']

pytestmark = pytest.mark.integration


def _mpicc():
    given = os.environ.get('IBREPRO_MPICC')
    if given:
        return given
    # DEPS_DIR is resolved: make cannot take a compiler path with white space in it
    local = DEPS_DIR / 'mpich' / 'bin' / 'mpicc'
    return str(local) if local.exists() else shutil.which('mpicc')


MPICC = _mpicc()
if MPICC is None:
    pytest.skip('no MPI C compiler: set IBREPRO_MPICC, run make setup (.deps/mpich) or put mpicc '
                'on PATH', allow_module_level=True)
MPIEXEC = str(Path(MPICC).with_name('mpiexec'))
if not os.access(MPIEXEC, os.X_OK):
    MPIEXEC = shutil.which('mpiexec')


def _launcher_options():
    version = subprocess.run([MPIEXEC, '--version'], capture_output=True, text=True).stdout
    if 'Open MPI' in version or 'OpenRTE' in version:
        return ['--oversubscribe'] + (['--allow-run-as-root'] if os.geteuid() == 0 else [])
    return []


@pytest.fixture(scope='module')
def bindir(tmp_path_factory):
    build = tmp_path_factory.mktemp('bench-build')
    done = subprocess.run(['make', '-C', str(REPO / 'benchmarks'), f'BUILD={build}',
                           f'MPICC={MPICC}', 'mpi'], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'warning:' not in done.stderr, done.stderr
    return build / 'bin'


def run(bindir, program, *args, ranks=2, timeout=180):
    cmd = [MPIEXEC, '-n', str(ranks), *_launcher_options(), str(bindir / program), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def parsed(done, what):
    assert done.returncode == 0, done.stdout + done.stderr
    return parse_text(done.stdout + done.stderr, source=what)


def sweep(lo, hi):
    sizes = [0] if lo == 0 else []
    size = max(lo, 1)
    while size <= hi:
        sizes.append(size)
        size *= 2
    return sizes


def test_overhead(bindir):
    out = parsed(run(bindir, 'ibrepro_overhead', '-m', '0:1K', '-i', '500', '-x', '50'),
                 'overhead')
    assert out.tool == 'bench' and out.version == VERSION
    assert out.meta['benchmark'] == 'overhead' and out.meta['ranks'] == 2
    assert out.meta['placement'] == 'intra-node' and len(out.meta['hosts'].split()) == 2
    table = out.table('overhead')
    assert table.sizes() == sweep(0, 1024)
    for row in table.rows:
        assert row['lat'] > 0 and row['send'] > 0 and row['recv'] > 0
        assert row['overhead'] == pytest.approx(row['send'] + row['recv'], abs=0.002)
    names = {name for name, _, _ in table.metric_values()}
    assert {'lat_0', 'overhead_1024'} <= names


def test_bilat(bindir):
    out = parsed(run(bindir, 'ibrepro_bilat', '-m', '0:16K', '-i', '200', '-x', '20',
                     '-I', '50', '-X', '5'), 'bilat')
    assert out.meta['iterations'] == 200 and out.meta['iterations_large'] == 50
    table = out.table('bilat')
    assert table.sizes() == sweep(0, 16384)
    assert all(row['lat'] > 0 for row in table.rows)


def test_bibw(bindir):
    out = parsed(run(bindir, 'ibrepro_bibw', '-m', '1:64K', '-W', '4', '-i', '10', '-x', '2',
                     '-I', '5', '-X', '1'), 'bibw')
    assert out.meta['window'] == 4
    table = out.table('bibw')
    assert table.sizes() == sweep(1, 65536)
    for row in table.rows:
        assert row['msgrate'] > 0 and (row['bw'] > 0 or row['bytes'] < 1024)  # 2 decimals
        # both come from the same time: bw = messages/s x size (MB = 10^6 B)
        rounding = 0.5 * row['bytes'] / 1e6 + 0.0005  # msgrate is printed as an integer
        assert abs(row['bw'] - row['msgrate'] * row['bytes'] / 1e6) <= rounding


def test_overlap_never_above_the_round_trip(bindir):
    out = parsed(run(bindir, 'ibrepro_overlap', '-m', '0:4K', '-i', '200', '-x', '20',
                     '-t', '25'), 'overlap')
    assert out.meta['tolerance_pct'] == 25
    table = out.table('overlap')
    assert table.sizes() == sweep(0, 4096)
    for row in table.rows:
        assert row['lat'] == pytest.approx(row['rtt'] / 2, abs=0.01)
        assert 0 <= row['overlap'] <= row['rtt'] * 1.25 + 0.01
        assert row['probes'] >= 4  # three base probes and at least one search probe
    # MPICH's eager shared-memory exchange leaves room for computation: the search finds some
    assert any(row['overlap'] > 0 for row in table.rows)


def test_reuse_latency_schedule_and_memory_cap(bindir):
    out = parsed(run(bindir, 'ibrepro_reuse', '-m', '256K:1M', '-i', '100', '-x', '5',
                     '--max-memory', '4'), 'reuse')
    assert out.meta['benchmark'] == 'reuse_lat' and out.meta['max_memory_mib'] == 4
    tables = {t.params['reuse']: t for t in out.tables}
    assert sorted(tables) == [0, 50, 100]
    for t in tables.values():
        assert t.sizes() == [262144, 524288, 1048576]
        assert all(row['lat'] > 0 for row in t.rows)
    # 4 MiB per rank holds 16, 8, 4 fresh buffers of 256K, 512K, 1M
    assert [(r['iterations'], r['fresh']) for r in tables[0].rows] == [(16, 16), (8, 8), (4, 4)]
    assert [(r['iterations'], r['fresh']) for r in tables[50].rows] == [(32, 16), (16, 8), (8, 4)]
    assert [(r['iterations'], r['fresh']) for r in tables[100].rows] == [(100, 0)] * 3


def test_reuse_bandwidth(bindir):
    out = parsed(run(bindir, 'ibrepro_reuse', '--mode', 'bw', '-m', '1:64K', '-W', '4',
                     '-i', '10', '-x', '2', '-R', '0,100'), 'reuse bw')
    assert out.meta['benchmark'] == 'reuse_bw' and out.meta['window'] == 4
    tables = {t.params['reuse']: t for t in out.tables}
    assert sorted(tables) == [0, 100]
    assert all(r['fresh'] == 40 and r['iterations'] == 10 for r in tables[0].rows)
    assert all(r['bw'] > 0 for t in tables.values() for r in t.rows if r['bytes'] >= 1024)
    assert all(r['fresh'] == 0 for r in tables[100].rows)
    assert tables[0].sizes() == sweep(1, 65536)


@pytest.fixture(scope='module')
def memory(bindir):
    return {n: parsed(run(bindir, 'ibrepro_memory', ranks=n), f'memory {n}') for n in (1, 2, 4)}


def test_memory_per_rank(memory):
    for n, out in memory.items():
        per_rank = out.table('memory_per_rank')
        assert [row['rank'] for row in per_rank.rows] == list(range(n))
        for row in per_rank.rows:
            assert row['hwm'] >= row['rss'] > 0 and row['hwm_init'] >= row['rss_init'] > 0
        summary = out.table('memory').rows[0]
        assert summary['ranks'] == n
        assert summary['mem'] == max(row['rss'] for row in per_rank.rows)
        assert summary['rss_total'] == sum(row['rss'] for row in per_rank.rows)


def test_memory_grows_with_ranks(memory):
    totals = [memory[n].table('memory').rows[0]['rss_total'] for n in (1, 2, 4)]
    assert totals[0] < totals[1] < totals[2]
    per_process = [memory[n].table('memory').rows[0]['mem'] for n in (1, 4)]
    assert per_process[0] < per_process[1]
    assert list(memory[4].table('memory').metric_values()) == [
        ('mem', memory[4].table('memory').rows[0]['mem'], 'KiB')]


@pytest.mark.parametrize('program', TWO_RANK_PROGRAMS)
def test_wrong_rank_count_is_rejected(bindir, program):
    done = run(bindir, program, ranks=1)
    assert done.returncode == 2
    assert (f'{program}: invalid rank count: this benchmark needs exactly 2 MPI processes, '
            'got 1') in done.stderr
    with pytest.raises(BenchmarkFailed) as err:
        parse_text(done.stdout + done.stderr)
    assert err.value.kind == 'invalid-ranks'


def test_three_ranks_are_rejected(bindir):
    done = run(bindir, 'ibrepro_bilat', ranks=3)
    assert done.returncode == 2
    assert done.stderr.count('invalid rank count') == 1  # rank 0 speaks for all


@pytest.mark.parametrize('program, args, message', [
    ('ibrepro_bibw', ['-W', '0'], '-W must be between 1 and 65536, got 0'),
    ('ibrepro_bilat', ['--sizes', '5'], "--sizes needs MIN:MAX (e.g. 0:4M), got '5'"),
    ('ibrepro_bilat', ['-m', '8:4'], '-m: MIN (8) is larger than MAX (4)'),
    ('ibrepro_bilat', ['-m', '0:2T'], "-m: unknown size suffix in '2T' (use K, M or G)"),
    ('ibrepro_overhead', ['-i', 'many'], "-i needs an integer, got 'many'"),
    ('ibrepro_overlap', ['--tolerance', '0'], '--tolerance must be between 0.1 and 100, got 0'),
    ('ibrepro_overlap', ['-i'], '-i needs a value'),
    ('ibrepro_reuse', ['-R', '0,101'], '-R must be between 0 and 100, got 101'),
    ('ibrepro_reuse', ['--mode', 'both'], "--mode must be lat or bw, got 'both'"),
    ('ibrepro_reuse', ['-R', ''], '-R needs at least one percentage'),
    ('ibrepro_reuse', ['-X', '0'],
     '-I and -X do not apply: the reuse test runs N = -i iterations at every size'),
    ('ibrepro_reuse', ['-m', '0:4M', '--max-memory', '2'],
     '--max-memory 2 MiB is smaller than one buffer of 4194304 bytes'),
    ('ibrepro_memory', ['--barriers', '0'], '--barriers must be between 1 and 1000000, got 0'),
    ('ibrepro_memory', ['--frobnicate'], "unknown option '--frobnicate'"),
    ('ibrepro_bibw', ['extra'], "unexpected argument 'extra'"),
])
def test_invalid_options(bindir, program, args, message):
    done = run(bindir, program, *args)
    assert done.returncode == 2
    assert f'{program}: invalid option: {message} (see {program} --help)' in done.stderr
    assert done.stderr.count('invalid option') == 1
    with pytest.raises(BenchmarkFailed) as err:
        parse_text(done.stdout + done.stderr)
    assert err.value.kind == 'invalid-option'


@pytest.mark.parametrize('program', TWO_RANK_PROGRAMS + ['ibrepro_memory'])
def test_help_and_version(bindir, program):
    done = run(bindir, program, '--help', ranks=1)
    assert done.returncode == 0 and done.stdout.startswith('Usage: mpiexec -n ')
    assert '--version' in done.stdout
    done = run(bindir, program, '-V', ranks=1)
    assert done.returncode == 0 and done.stdout.strip() == f'{program} (ibrepro-bench) {VERSION}'

"""ibrepro_imb (benchmarks/mpi/imb.c), the IMB-timed PMB benchmarks the simulated testbeds run, on a real MPI:
built with the project's mpicc (make setup's MPICH wheel, or $IBREPRO_MPICC, or PATH) and run for real."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ibrepro.parsers import BenchmarkFailed, parse_text
from ibrepro.paths import DEPS_DIR

REPO = Path(__file__).resolve().parents[1]
MPICC = os.environ.get('IBREPRO_MPICC') or next(
    (str(p) for p in [DEPS_DIR / 'mpich' / 'bin' / 'mpicc'] if p.exists()), None) or shutil.which('mpicc')
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(MPICC is None, reason='no MPI C compiler: run make setup (.deps/mpich), set '
                                                       'IBREPRO_MPICC or put mpicc on PATH')]


@pytest.fixture(scope='module')
def imb(tmp_path_factory):
    build = tmp_path_factory.mktemp('imb-build')
    done = subprocess.run(['make', '-C', str(REPO / 'benchmarks'), f'BUILD={build}', f'MPICC={MPICC}',
                           str(build / 'bin' / 'ibrepro_imb')], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'warning:' not in done.stderr, done.stderr
    mpiexec = str(Path(MPICC).with_name('mpiexec'))

    def run(*args, ranks=2):
        return subprocess.run([mpiexec, '-n', str(ranks), str(build / 'bin' / 'ibrepro_imb'), *args],
                              capture_output=True, text=True, timeout=300)
    return run


def _table(done):
    assert done.returncode == 0, done.stdout + done.stderr
    return parse_text(done.stdout, source='ibrepro_imb').tables[0]


def test_iterations_follow_imbs_volume_rule(imb):
    table = _table(imb('-b', 'PingPong', '-m', '0:1M', '-i', '100', '--volume', '1'))
    assert table.benchmark == 'PingPong'
    # n = max(1, min(-i, 1 MiB / size)): 100 up to 8 KiB, then 64, 32, ... 1
    iterations = {row['bytes']: row['iterations'] for row in table.rows}
    assert iterations[0] == iterations[8192] == 100
    assert iterations[16384] == 64 and iterations[1048576] == 1
    assert all(row['lat'] > 0 for row in table.rows)


def test_collective_reports_min_max_and_the_mean_as_lat(imb):
    table = _table(imb('-b', 'Alltoall', '-m', '1:1K', '-i', '50'))
    for row in table.rows:
        assert row['t_min'] <= row['lat'] <= row['t_max']
    assert table.metrics == {'lat': 'lat'}
    pmb = _table(imb('-b', 'Bcast', '-m', '1:1K', '-i', '50', '--sync', '0'))
    assert len(pmb.rows) == 11


def test_allreduce_skips_sizes_below_one_float(imb):
    table = _table(imb('-b', 'Allreduce', '-m', '0:16', '-i', '20'))
    assert table.sizes() == [0, 4, 8, 16]


@pytest.mark.parametrize('args, ranks, kind', [
    (['-b', 'Alltoal'], 2, 'invalid-option'),
    (['-m', '0:8'], 2, 'invalid-option'),          # -b is required
    (['-b', 'Biband', '-W', '0'], 2, 'invalid-option'),
    (['-b', 'PingPong'], 3, 'invalid-ranks'),
])
def test_bad_input_is_named(imb, args, ranks, kind):
    done = imb(*args, ranks=ranks)
    assert done.returncode == 2
    with pytest.raises(BenchmarkFailed) as err:
        parse_text(done.stdout + done.stderr, source='ibrepro_imb')
    assert err.value.kind == kind

"""Building benchmarks/: the unit test of the pure C logic, the verbs program (compiles, handles
"no RDMA device" and bad options), the Makefile's skip message, install and clean."""

import os
import subprocess
from pathlib import Path

import pytest

from ibrepro.parsers import BenchmarkFailed, parse_text

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / 'benchmarks'
VERSION = (BENCH / 'VERSION').read_text().strip()


def make(*args, timeout=300, **env):
    return subprocess.run(['make', '-C', str(BENCH), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **env})


def test_unit_algo(tmp_path):
    """benchmarks/tests/unit_algo.c: reuse schedule, overlap search, striping plan."""
    done = make(f'BUILD={tmp_path}', 'check')
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(('ok ', 'not ok '))]
    assert len(lines) >= 38 and all(ln.startswith('ok ') for ln in lines), done.stdout
    assert f'1..{len(lines)}' in done.stdout


def test_verbs_skipped_without_rdma_core(tmp_path):
    # a compiler that cannot see the system headers stands for a machine without rdma-core
    done = make(f'BUILD={tmp_path}', 'verbs', f'CC=cc --sysroot={tmp_path}/empty')
    assert done.returncode == 0, done.stderr
    assert ('verbs benchmarks skipped: rdma-core headers (libibverbs-dev, librdmacm-dev) not '
            'found') in done.stdout
    assert not (tmp_path / 'bin' / 'ibrepro_rdma').exists()


@pytest.fixture(scope='module')
def rdma(tmp_path_factory):
    build = tmp_path_factory.mktemp('verbs-build')
    done = make(f'BUILD={build}', 'verbs')
    assert done.returncode == 0, done.stdout + done.stderr
    if 'verbs benchmarks skipped' in done.stdout:
        pytest.skip('rdma-core headers (libibverbs-dev, librdmacm-dev) are not installed')
    assert 'warning:' not in done.stderr, done.stderr
    return build / 'bin' / 'ibrepro_rdma'


def has_rdma_device():
    path = Path('/sys/class/infiniband')
    return path.is_dir() and any(path.iterdir())


def run(rdma, *args):
    return subprocess.run([str(rdma), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize('args, role', [(['192.0.2.1'], 'client'), ([], 'server')])
def test_verbs_no_device(rdma, args, role):
    if has_rdma_device():
        pytest.skip('this machine has an RDMA device')
    done = run(rdma, *args)
    assert done.returncode == 3
    assert done.stdout == ''
    assert done.stderr.startswith('ibrepro_rdma: no RDMA device found: ')
    with pytest.raises(BenchmarkFailed) as err:
        parse_text(done.stdout + done.stderr)
    assert err.value.kind == 'no-device'


@pytest.mark.parametrize('args, message', [
    (['-W', '16'], '-W is a client option: the server takes the test parameters from the client'),
    (['-t', 'lat', 'a,b'], '--test lat uses one port: give one server address'),
    (['-o', 'read', 'h'], '--op read applies to --test lat only'),
    (['-t', 'lat', '-b', 'h'], '--bidirectional applies to --test bw only'),
    (['-t', 'pingpong', 'h'], "--test must be bw or lat, got 'pingpong'"),
    (['-M', 'both', 'h'], "--mode must be stripe or bind, got 'both'"),
    (['-m', '0:64', 'h'], '--sizes: messages have at least 1 byte'),
    (['-P', '65', 'h'], '-P must be between 1 and 64, got 65'),
    (['--source', '10.0.0.1', 'a,b'], '--source needs one address per server address (2)'),
    (['--bind', '10.0.0.1', 'h'], '--bind is a server option'),
    (['a', 'b'], "unexpected argument 'b'"),
    (['-T'], '-T needs a value'),
])
def test_verbs_invalid_options(rdma, args, message):
    done = run(rdma, *args)
    assert done.returncode == 2
    assert done.stderr.startswith(f'ibrepro_rdma: invalid option: {message}')
    with pytest.raises(BenchmarkFailed) as err:
        parse_text(done.stderr)
    assert err.value.kind == 'invalid-option'


def test_verbs_help_and_version(rdma):
    done = run(rdma, '--help')
    assert done.returncode == 0 and done.stdout.startswith('Usage: ibrepro_rdma [options]')
    for option in ('--test', '--mode', '--threshold', '--window', '--pairs', '--timeout'):
        assert option in done.stdout
    done = run(rdma, '--version')
    assert done.returncode == 0 and done.stdout.strip() == f'ibrepro_rdma (ibrepro-bench) {VERSION}'


def test_install_and_clean(tmp_path):
    build, prefix = tmp_path / 'build', tmp_path / 'prefix'
    # the unit test binary is not installed; verbs may be skipped: build what this machine can
    assert make(f'BUILD={build}', 'verbs').returncode == 0
    done = make(f'BUILD={build}', f'PREFIX={prefix}', 'install')
    installed = sorted(p.name for p in (prefix / 'bin').iterdir()) if (prefix / 'bin').exists() else []
    built = sorted(p.name for p in (build / 'bin').glob('ibrepro_*')) if (build / 'bin').exists() else []
    if not built:  # no rdma-core here and no MPI build: install must say so and fail
        assert done.returncode != 0 and 'nothing to install' in done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert installed == built
    assert (prefix / 'share' / 'ibrepro-bench' / 'VERSION').read_text().strip() == VERSION
    assert make(f'BUILD={build}', 'clean').returncode == 0
    assert not build.exists()

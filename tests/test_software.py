"""ibrepro software: the MPI library and benchmark versions of an environment, probed for real."""

import hashlib
import json
import os
import subprocess

import pytest

from conftest import VENV_BIN, needs_impi, output
from ibrepro import software
from ibrepro.paths import DEPS_DIR

DEPS = DEPS_DIR


def probe_in(prefix, *lib_dirs):
    env = {**os.environ, 'PATH': f'{prefix / "bin"}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ["PATH"]}',
           'LD_LIBRARY_PATH': os.pathsep.join(str(prefix / d) for d in lib_dirs)}
    env.pop('SPACK_ENV', None)
    proc = subprocess.run([str(VENV_BIN / 'ibrepro'), 'software', '--json'], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, output(proc)
    return json.loads(proc.stdout)


@needs_impi
def test_intel_mpi_environment():
    found = probe_in(DEPS / 'impi', 'lib', 'lib/libfabric')
    assert found['mpi']['library'].startswith('Intel(R) MPI Library 2021.14')
    assert found['mpi']['libmpi'].startswith(str(DEPS / 'impi' / 'lib'))
    assert found['benchmarks']['imb'] == {'path': str(DEPS / 'impi' / 'bin' / 'IMB-MPI1'), 'version': '2021.8',
                                          'source': 'embedded in the binary'}
    assert found['ibrepro'] and found['spack_lock'] is None


@pytest.mark.skipif(not (DEPS / 'mpich' / 'lib' / 'libmpi.so').exists(), reason='MPICH missing: run `make setup`')
def test_mpich_environment_past_its_linker_script():
    # the wheel's libmpi.so is a 20-byte linker script; the probe must load the real libmpi.so.12
    assert (DEPS / 'mpich' / 'lib' / 'libmpi.so').stat().st_size < 100
    found = probe_in(DEPS / 'mpich', 'lib')
    assert found['mpi']['library'] == 'MPICH Version: 5.0.2'
    assert found['mpi']['libmpi'] == str(DEPS / 'mpich' / 'lib' / 'libmpi.so.12')


def test_spack_lock_hash(tmp_path):
    (tmp_path / 'spack.lock').write_text('{"roots": []}\n')
    lock = software.spack_lock({'SPACK_ENV': str(tmp_path)})
    assert lock == {'path': str(tmp_path / 'spack.lock'),
                    'sha256': hashlib.sha256(b'{"roots": []}\n').hexdigest()}
    assert software.spack_lock({}) is None


def test_summary_lines_say_what_is_missing():
    lines = software.summary({'mpi': {'library': None}, 'benchmarks': {}, 'rdma_core': None, 'spack_lock': None})
    assert lines == ['MPI: none found', 'rdma-core: not installed (no ibv_devinfo)',
                     'Spack lock: no Spack environment']

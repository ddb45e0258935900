"""Live checks of spack-repo/ and configs/spack/ with a real Spack (skipped without one).

Spack is `spack` on PATH, else the clone of `make spack` (.deps/spack). Each concretization
takes about a minute of CPU. The environments are concretized in a temporary copy (their
relative paths kept by symlinks) so no spack.lock is written into the checkout.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPO = ROOT / 'spack-repo' / 'spack_repo' / 'ibrepro'
OUR_PACKAGES = ['perftest', 'mvapich2-striping', 'ibrepro-benchmarks']


def find_spack():
    if shutil.which('spack'):
        return shutil.which('spack'), {}
    clone = ROOT / '.deps' / 'spack' / 'bin' / 'spack'
    python = ROOT / '.deps' / 'spack-python' / 'bin' / 'python'
    if clone.exists() and python.exists():
        return str(clone), {'SPACK_PYTHON': str(python)}
    return None, {}


SPACK, SPACK_EXTRA_ENV = find_spack()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(SPACK is None, reason='no Spack: `spack` is not on PATH and .deps/spack is '
                       'absent (scripts/spack-setup.sh installs it)'),
]


def spack(*args, config_scope=None, timeout=900):
    env = {k: v for k, v in os.environ.items() if k != 'SPACK_ENV'} | SPACK_EXTRA_ENV
    scope = ['-C', str(config_scope)] if config_scope else []
    return subprocess.run([SPACK, *scope, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.fixture(scope='module')
def ibrepro_scope(tmp_path_factory):
    """A configuration scope that adds the ibrepro repository to the user's Spack."""
    scope = tmp_path_factory.mktemp('scope')
    (scope / 'repos.yaml').write_text(f'repos:\n  ibrepro: {REPO}\n')
    return scope


def test_audit_packages(ibrepro_scope):
    result = spack('audit', 'packages', *OUR_PACKAGES, config_scope=ibrepro_scope)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'PKG-DIRECTIVES: passed' in result.stdout


def env_copy(tmp_path, name):
    """configs/spack/<name> in a temporary tree whose relative paths lead to the checkout."""
    (tmp_path / 'configs' / 'spack' / name).mkdir(parents=True)
    shutil.copy(ROOT / 'configs' / 'spack' / name / 'spack.yaml', tmp_path / 'configs' / 'spack' / name)
    (tmp_path / 'spack-repo').symlink_to(ROOT / 'spack-repo')
    if (ROOT / 'benchmarks').is_dir():
        (tmp_path / 'benchmarks').symlink_to(ROOT / 'benchmarks')
    else:  # concretizing reads no source
        (tmp_path / 'benchmarks').mkdir()
    return tmp_path / 'configs' / 'spack' / name


@pytest.mark.parametrize('name, expected', [
    ('generic', ['perftest@4.5-0.17', 'commit=e63987c4223b08f8c67390c7f60836ad2bf4a6e0',
                 'osu-micro-benchmarks@7.4', 'intel-mpi-benchmarks@2021.7', 'npb@3.4.3',
                 'classes:=A,B', 'ibrepro-benchmarks@develop+verbs']),
    ('ib-mvapich', ['mvapich2-striping@2.3.7', 'fabrics=mrail', 'ports=2',
                    'striping_threshold=8192', 'perftest@4.5-0.17', 'osu-micro-benchmarks@7.4']),
])
def test_environment_concretizes(tmp_path, name, expected):
    env_dir = env_copy(tmp_path, name)
    result = spack('-e', str(env_dir), 'concretize')
    assert result.returncode == 0, result.stdout + result.stderr
    for text in expected:
        assert text in result.stdout, f'{text!r} not in:\n{result.stdout}'
    assert (env_dir / 'spack.lock').is_file()


def test_mvapich2_striping_refuses_unchecked_releases(ibrepro_scope):
    """2.3.7-1 is the newest builtin release but its source was not checked against our patch."""
    result = spack('spec', '--deprecated', 'mvapich2-striping@=2.3.7-1', config_scope=ibrepro_scope)
    assert result.returncode != 0
    assert 'ibrepro checked its patch on MVAPICH2 2.3.1-2.3.7 only' in result.stdout + result.stderr

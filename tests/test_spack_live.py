"""Live checks of spack-repo/ and configs/spack/ with a real Spack (skipped without one).

Spack is `spack` on PATH, else the clone of `make spack` (.deps/spack). What spack-packages' CI
runs on a package (`spack audit packages`, `packages-https`, `externals`) runs on ours; both
environments are concretized, and what the recipes hand to configure and the compiler is read
from the concrete specs. Each concretization takes about a minute of CPU. The environments are
concretized in a temporary copy (their relative paths kept by symlinks) so no spack.lock is
written into the checkout.
"""

import json
import os
import shutil
import sys
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

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


def spack_python(code, *, scope=None, env_dir=None):
    """Run `code` in Spack's Python (`spack python -c` takes one statement only, hence a
    file); it prints one JSON document."""
    with tempfile.NamedTemporaryFile('w', suffix='.py') as script:
        script.write(code)
        script.flush()
        args = ['-e', str(env_dir)] if env_dir else []
        result = spack(*args, 'python', script.name, config_scope=scope)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize('audit, names', [
    ('packages', OUR_PACKAGES),
    ('packages-https', OUR_PACKAGES),
    # Spack 1.1 matches a detection test by the directory that holds it (mvapich2_striping),
    # not by the package name: with `mvapich2-striping` it would run no test and pass.
    ('externals', ['mvapich2_striping']),
])
def test_audit(ibrepro_scope, audit, names):
    result = spack('audit', audit, *names, config_scope=ibrepro_scope)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert 'passed' in result.stdout and 'issue' not in output, output
    assert 'has no detection test' not in output, output


def test_a_site_mvapich2_is_not_taken_for_mvapich2_striping(ibrepro_scope, tmp_path):
    """The layout of mvapich2-striping's detection test is a stock MVAPICH2 to the builtin
    recipe (so the audit above proves something), and nothing to ours."""
    test = yaml.safe_load((REPO / 'packages' / 'mvapich2_striping' / 'detection_test.yaml')
                          .read_text())['paths'][0]['layout'][0]
    for exe in test['executables']:
        (tmp_path / exe).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / exe).write_text(f'#!/bin/bash\n{test["script"]}\n')
        (tmp_path / exe).chmod(0o755)
    found = spack_python(
        'import json, spack.detection\n'
        f'found = spack.detection.by_path(["mvapich2", "mvapich2-striping"], '
        f'path_hints=["{tmp_path / "bin"}"])\n'
        'print(json.dumps({name: [str(s) for s in specs] for name, specs in found.items()}))',
        scope=ibrepro_scope)
    assert [s.split('~')[0] for s in found['mvapich2']] == ['mvapich2@2.3.7'], found
    assert not found.get('mvapich2-striping'), found


def test_perftest_configure_arguments(ibrepro_scope):
    """CUDA stays off unless asked for: 26.04.17 gets --disable-cudart; 4.5-0.17 has no such
    option (nor the /usr/local/cuda probe) and gets nothing."""
    args = spack_python(
        'import json, spack.repo, spack.spec\n'
        'out = {}\n'
        'for text in ("perftest@=26.04.17~cuda", "perftest@=4.5-0.17~cuda"):\n'
        '    spec = spack.spec.Spec(text)\n'
        '    out[text] = spack.repo.PATH.get_pkg_class(spec.name)(spec).configure_args()\n'
        'print(json.dumps(out))', scope=ibrepro_scope)
    assert args == {'perftest@=26.04.17~cuda': ['--disable-cudart'], 'perftest@=4.5-0.17~cuda': []}


def test_spack_packages_own_lint_passes(ibrepro_scope, tmp_path):
    """ruff with the pinned spack-packages' own [tool.ruff] (its pyproject.toml, read where Spack installed it)."""
    pytest.importorskip('tomllib', reason='Python < 3.11 has no tomllib')
    ruff = shutil.which('ruff') or str(Path(sys.executable).parent / 'ruff')
    if not Path(ruff).exists():
        pytest.skip('ruff is not installed (make setup installs the test extras)')
    root = spack_python('import json, spack.repo\n'
                        'print(json.dumps(spack.repo.PATH.get_repo("builtin").root))',
                        scope=ibrepro_scope)
    pyproject = Path(root).parents[2] / 'pyproject.toml'
    if not pyproject.is_file():
        pytest.skip(f'the builtin repository at {root} is not a spack-packages checkout')
    config = tmp_path / 'pyproject.toml'
    config.write_text(pyproject.read_text())      # used in place, never copied into this checkout
    for args in (['format', '--diff'], ['check', '--no-fix']):
        result = subprocess.run([ruff, *args, '--config', str(config), 'spack-repo'], cwd=ROOT,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr


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


@pytest.mark.parametrize('name', ['generic', 'ib-mvapich'])
def test_audit_configs(tmp_path, name):
    """`spack audit configs` (also run by spack-packages' CI) with each environment active."""
    result = spack('-e', str(env_copy(tmp_path, name)), 'audit', 'configs')
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'CFG-PACKAGES: passed' in result.stdout and 'CFG-REPOS: passed' in result.stdout


@pytest.fixture(scope='module')
def concretized(tmp_path_factory):
    """name -> (environment directory, `spack concretize` output), each concretized once."""
    done = {}

    def concretize(name):
        if name not in done:
            env_dir = env_copy(tmp_path_factory.mktemp(name), name)
            result = spack('-e', str(env_dir), 'concretize')
            assert result.returncode == 0, result.stdout + result.stderr
            assert (env_dir / 'spack.lock').is_file()
            done[name] = env_dir, result.stdout
        return done[name]
    return concretize


#: What each environment's roots concretize to, whatever MPI the site declares.
EXPECTED = {
    'generic': ['perftest@4.5-0.17~cuda', 'osu-micro-benchmarks@7.4', 'intel-mpi-benchmarks@2021.7',
                'npb@3.4.3', 'classes:=A,B', 'ibrepro-benchmarks@develop+verbs'],
    'ib-mvapich': ['mvapich2-striping@2.3.7', 'ports=2', 'striping_threshold=8192',
                   'perftest@4.5-0.17~cuda', 'osu-micro-benchmarks@7.4'],
}


@pytest.mark.parametrize('name', sorted(EXPECTED))
def test_environment_concretizes(concretized, name):
    _, output = concretized(name)
    for text in EXPECTED[name]:
        assert text in output, f'{text!r} not in:\n{output}'


def test_mvapich2_striping_flags_and_patches(concretized):
    """In the concrete ib-mvapich spec: the -D flags go to the preprocessor (cppflags), the
    striping patch is applied to 2.3.7, and every MPI user builds against it."""
    env_dir, _ = concretized('ib-mvapich')
    found = spack_python(
        'import json, spack.environment as ev\n'
        'env = ev.active_environment()\n'
        'specs = {s.name: s for r in env.concrete_roots() for s in r.traverse()}\n'
        'mpi = specs["mvapich2-striping"]\n'
        'print(json.dumps({\n'
        '    "cppflags": mpi.package.flag_handler("cppflags", [])[0],\n'
        '    "cflags": mpi.package.flag_handler("cflags", [])[0],\n'
        '    "patches": sorted(p.path_or_url.rsplit("/", 1)[-1] for p in mpi.patches),\n'
        '    "mpi_users": sorted(s.name for s in specs.values() if "mpi" in s\n'
        '                        and s["mpi"].name == "mvapich2-striping")}))',
        env_dir=env_dir)
    assert found['cppflags'] == ['-DMAX_NUM_PORTS=2', '-DIBREPRO_STRIPING_THRESHOLD=8192']
    assert found['cflags'] == []
    assert found['patches'] == ['mpir_attr_delete_list_segfault.patch',
                                'striping-threshold-default.patch']
    assert set(found['mpi_users']) >= {'osu-micro-benchmarks', 'intel-mpi-benchmarks', 'npb',
                                       'ibrepro-benchmarks'}


def test_mvapich2_striping_has_only_checked_releases(ibrepro_scope):
    """2.3.7-1, the builtin's newest, is not a version of ours (its source was not checked),
    and the builtin's maintainers are not ours."""
    info = spack('info', 'mvapich2-striping', config_scope=ibrepro_scope)
    assert info.returncode == 0, info.stderr
    assert 'Preferred version:  \n    2.3.7 ' in info.stdout, info.stdout
    assert '2.3.7-1' not in info.stdout
    maintainers = spack('maintainers', 'mvapich2-striping', config_scope=ibrepro_scope)
    assert maintainers.stdout.split() == ['ibrepro'], maintainers.stdout + maintainers.stderr

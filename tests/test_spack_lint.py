"""spack-packages' own style checks on spack-repo/, as its pull-request CI runs them.

spack-packages v2026.06.0 (.github/workflows/prechecks.yml, .ci/style_check.sh) runs
`ruff format --diff` and `ruff check --no-fix` with its pyproject.toml's [tool.ruff] tables
(copied to spack-repo/ruff.toml) and `vermin` for Python 3.6, with the tool versions of
.github/workflows/requirements/style/requirements.txt. No Spack is needed; the tools are skipped
(with the reason) when that exact version is not installed.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPACK_REPO = ROOT / 'spack-repo'
RUFF_CONFIG = SPACK_REPO / 'ruff.toml'
#: spack-packages v2026.06.0 .github/workflows/requirements/style/requirements.txt
PINNED = {'ruff': '0.15.11', 'vermin': '1.8.0'}
#: .github/workflows/prechecks.yml, job "validate"
VERMIN_ARGS = ['--backport', 'importlib', '--backport', 'argparse', '--violations',
               '--backport', 'typing', '-t=3.6-', '-vvv']


def tool(name):
    """The pinned `name` next to this Python or on PATH, else a skip saying how to get it."""
    found = Path(sys.executable).parent / name
    path = str(found) if found.exists() else shutil.which(name)
    if path is None:
        pytest.skip(f'{name} is not installed: pip install {name}=={PINNED[name]}')
    version = subprocess.run([path, '--version'], capture_output=True, text=True).stdout.split()
    if PINNED[name] not in version:
        pytest.skip(f'{path} is {" ".join(version)}, spack-packages checks with {PINNED[name]}: '
                    f'pip install {name}=={PINNED[name]}')
    return path


def run(*args):
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_ruff_format():
    result = run(tool('ruff'), 'format', '--config', str(RUFF_CONFIG), '--diff', 'spack-repo')
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_check():
    result = run(tool('ruff'), 'check', '--config', str(RUFF_CONFIG), '--no-fix', 'spack-repo')
    assert result.returncode == 0, result.stdout + result.stderr


def test_vermin_python_3_6():
    result = run(tool('vermin'), *VERMIN_ARGS, 'spack-repo')
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'Minimum required versions: 3.6' in result.stdout


def test_ruff_config_is_the_packaged_one():
    """The line length and the package API names that ruff accepts as builtins (the names
    `from spack.package import *` brings) are spack-packages' own."""
    tomllib = pytest.importorskip('tomllib', reason='Python < 3.11 has no tomllib')
    config = tomllib.loads(RUFF_CONFIG.read_text())
    assert config['line-length'] == 99
    assert {'depends_on', 'version', 'maintainers', 'license', 'join_path'} <= set(config['builtins'])
    assert config['lint']['isort']['sections'] == {'spack': ['spack']}

"""spack-packages' own style checks on spack-repo/, as its pull-request CI runs them.

spack-packages v2026.06.0 (.github/workflows/prechecks.yml, .ci/style_check.sh) runs
`ruff format --diff` and `ruff check --no-fix` with its pyproject.toml's [tool.ruff] tables and `vermin` for
Python 3.6, with the tool versions of .github/workflows/requirements/style/requirements.txt. Here ruff runs with
spack-repo/ruff.toml, our settings written to agree with those (tests/test_spack_live.py runs spack-packages' own
configuration where Spack is). No Spack is needed.
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


def test_ruff_config_agrees_with_spack_packages():
    """Line length, rules and isort section as spack-packages v2026.06.0 sets them."""
    tomllib = pytest.importorskip('tomllib', reason='Python < 3.11 has no tomllib')
    config = tomllib.loads(RUFF_CONFIG.read_text())
    assert config['line-length'] == 99
    assert config['lint']['extend-select'] == ['E', 'I', 'W']
    assert {'E731', 'F403', 'F811'} <= set(config['lint']['ignore'])
    assert config['lint']['isort']['sections'] == {'spack': ['spack']}

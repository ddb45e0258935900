"""The project's Python keeps one style: ruff's pycodestyle and pyflakes rules at 120 columns (pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

#: What ruff reads: the package, the checks, the tests, the scripts, the configurations and the benchmarks' Python.
TREES = ['src', 'reframe-checks', 'tests', 'scripts', 'configs', 'benchmarks']


def test_the_project_python_passes_ruff():
    ruff = shutil.which('ruff') or str(Path(sys.executable).parent / 'ruff')
    if not Path(ruff).exists():
        pytest.skip('ruff is not installed (make setup installs the test extras)')
    proc = subprocess.run([ruff, 'check', '--no-cache', '--output-format', 'concise', *TREES], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]

"""CI's two runs of the suite on one commit (.ci/run): the root run leaves out, by exact id, what the newcomer's run
passed (the hooks in tests/conftest.py)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TESTS = '''
import pytest

def test_a():
    pass

def test_a_as_root():
    pass

@pytest.mark.skip(reason='needs what the first run lacks')
def test_b():
    pass

@pytest.mark.parametrize('n', [1, 12])
def test_c(n):
    pass
'''


def pytest_in(where, env):
    """pytest on one file, with this suite's conftest as a plugin and nothing of the outer run's listing env."""
    base = {k: v for k, v in os.environ.items() if k not in ('IBREPRO_PASSED_LIST', 'IBREPRO_ALREADY_PASSED')}
    return subprocess.run([sys.executable, '-m', 'pytest', '-p', 'conftest', '-q', '-p', 'no:cacheprovider',
                           'test_listed.py'], cwd=where, capture_output=True, text=True, timeout=120,
                          env={**base, 'PYTHONPATH': str(ROOT / 'tests'), **env})


def test_the_second_run_runs_exactly_what_the_first_did_not_pass(tmp_path):
    (tmp_path / 'test_listed.py').write_text(TESTS)
    listing = tmp_path / 'passed'
    first = pytest_in(tmp_path, {'IBREPRO_PASSED_LIST': str(listing)})
    assert '4 passed, 1 skipped' in first.stdout, first.stdout + first.stderr
    assert sorted(listing.read_text().splitlines()) == [
        'test_listed.py::test_a', 'test_listed.py::test_a_as_root', 'test_listed.py::test_c[12]',
        'test_listed.py::test_c[1]']

    # the first run passed test_a but not test_a_as_root, test_c[1] but not test_c[12]: exact ids, not prefixes
    listing.write_text('test_listed.py::test_a\ntest_listed.py::test_c[1]\n')
    second = pytest_in(tmp_path, {'IBREPRO_ALREADY_PASSED': str(listing)})
    assert '2 passed, 1 skipped, 2 deselected' in second.stdout, second.stdout + second.stderr


def test_a_listing_that_cannot_be_read_stops_the_run(tmp_path):
    (tmp_path / 'test_listed.py').write_text(TESTS)
    proc = pytest_in(tmp_path, {'IBREPRO_ALREADY_PASSED': str(tmp_path / 'missing')})
    assert proc.returncode == 4 and 'cannot read the tests to leave out' in proc.stderr, proc.stdout + proc.stderr

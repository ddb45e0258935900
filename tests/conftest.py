"""Shared test helpers: run real ReFrame sessions on the embedded default system, isolated per test."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ibrepro.paths import DEPS_DIR

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
REFRAME = VENV_BIN / 'reframe'
IMPI = DEPS_DIR / 'impi' / 'bin' / 'IMB-MPI1'

#: A short IMB sweep: the real binaries and pipeline, seconds instead of minutes.
SHORT_IMB = ['-S', 'message_sizes=1:64', '-S', 'iterations=50', '-S', 'time_per_sample=2']

def old_python(version):
    """An interpreter of ``version`` (``3.6``) from pyenv or PATH that says it is one (a pyenv shim may answer as
    another), or None: the oldest Pythons a compute node may run the node-side code with."""
    for candidate in [*sorted(Path.home().glob(f'.pyenv/versions/{version}.*/bin/python{version}')),
                      shutil.which(f'python{version}')]:
        if not candidate:
            continue
        try:
            done = subprocess.run([str(candidate), '-c', 'import sys; print("%d.%d" % sys.version_info[:2])'],
                                  capture_output=True, text=True)
        except OSError:
            continue
        if done.stdout.strip() == version:
            return str(candidate)
    return None


needs_impi = pytest.mark.skipif(not IMPI.exists(), reason=f'{IMPI} missing: run `make setup`')


class ReFrameRunner:
    """``reframe -C configs/local.py`` with every result under one temporary IBREPRO_HOME."""

    def __init__(self, home):
        self.home = Path(home)
        self.env = {**os.environ, 'IBREPRO_HOME': str(self.home),
                    'PATH': f'{VENV_BIN}{os.pathsep}{os.environ.get("PATH", "")}'}
        for var in ('RFM_SQLITE_DB_FILE', 'RFM_REFERENCE_PREFIX', 'RFM_CONFIG_FILES', 'RFM_SYSTEM', 'SLURM_JOB_ID',
                    'IBREPRO_IN_ALLOCATION', 'IBREPRO_NIGHTLY'):
            self.env.pop(var, None)

    @property
    def db(self):
        return self.home / 'results.db'

    def __call__(self, *args, config='configs/local.py', checks='reframe-checks', timeout=600, env=None):
        cmd = [str(REFRAME), '-C', config, '-c', checks, '--warn-as-error', *args]
        return subprocess.run(cmd, cwd=ROOT, env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=timeout)

    def ibrepro(self, *args, env=None):
        return subprocess.run([str(VENV_BIN / 'ibrepro'), *args], cwd=ROOT, env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=120)


@pytest.fixture
def reframe(tmp_path):
    return ReFrameRunner(tmp_path / 'ibrepro-home')


def output(proc):
    """stdout and stderr of a finished process, for assertion messages."""
    return f'exit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-3000:]}'


# CI (.ci/run) runs the suite twice on one commit: as a newcomer (ci/newcomer.sh), then as root with the system
# packages installed. The second run leaves out, by exact id, what the first passed: it runs what the first skipped.

def pytest_runtest_logreport(report):
    """With IBREPRO_PASSED_LIST set, append the id of every test that passed to that file."""
    listing = os.environ.get('IBREPRO_PASSED_LIST')
    if listing and report.when == 'call' and report.passed:
        with open(listing, 'a', encoding='utf-8') as out:
            out.write(report.nodeid + '\n')


# The `integration` marker (pyproject.toml) is what `-m "not integration"` leaves out: a test that takes the
# `reframe` fixture has it without saying so, and a test without it that starts a ReFrame session or an MPI
# program fails saying so (the guard below), so the fast subset stays what it claims to be.

#: Programs whose start makes a test `integration`: ReFrame, the nightly's runner, MPI launchers, IMB.
INTEGRATION_PROGRAMS = {'reframe', 'run-checks.sh', 'mpiexec', 'mpirun', 'mpiexec.hydra', 'smpirun', 'srun',
                        'sbatch', 'IMB-MPI1'}

_unmarked_test = None      # the nodeid of the running test when it is not `integration`


def _starts_integration(argv):
    """Whether ``argv`` starts ReFrame or MPI: one of INTEGRATION_PROGRAMS, or the ibrepro command line's
    `nightly` without --no-run (it runs scripts/run-checks.sh in a child)."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    words = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in argv]
    if not words:
        return False
    if Path(words[0]).name in INTEGRATION_PROGRAMS:
        return words[1:] not in (['-version'], ['--version'])      # asking a launcher its version runs nothing
    cli = (Path(words[0]).name == 'ibrepro' or words[1:3] in (['-m', 'ibrepro'], ['-m', 'ibrepro.cli']))
    return cli and 'nightly' in words and '--no-run' not in words


_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self, args, *rest, **kwargs):
    if _unmarked_test and _starts_integration(args):
        raise RuntimeError(f'{_unmarked_test} starts {args[0] if isinstance(args, list) else args} (ReFrame or MPI) '
                           'without the `integration` marker: mark it (pytest.mark.integration)')
    _popen_init(self, args, *rest, **kwargs)


subprocess.Popen.__init__ = _guarded_popen_init


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    global _unmarked_test
    _unmarked_test = None if item.get_closest_marker('integration') else item.nodeid


def pytest_runtest_teardown(item):
    global _unmarked_test
    _unmarked_test = None


def pytest_collection_modifyitems(config, items):
    """Tests that take the `reframe` fixture, and the `long` ones, are `integration`. With IBREPRO_ALREADY_PASSED
    set, deselect the tests that file lists (pytest's --deselect matches prefixes: test_a would take test_a_as_root
    with it)."""
    for item in items:
        if 'reframe' in getattr(item, 'fixturenames', ()) or item.get_closest_marker('long'):
            item.add_marker(pytest.mark.integration)
    listing = os.environ.get('IBREPRO_ALREADY_PASSED')
    if not listing:
        return
    try:
        passed = set(Path(listing).read_text(encoding='utf-8').splitlines())
    except OSError as err:
        raise pytest.UsageError(f'IBREPRO_ALREADY_PASSED: cannot read the tests to leave out: {err}') from err
    left_out = [item for item in items if item.nodeid in passed]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item.nodeid not in passed]


def broken_nightly_checkout(tmp_path):
    """A checkout (links to this one) whose reference-data/nightly.yaml has a YAML error on line 14."""
    import shutil

    from ibrepro import paths
    root = tmp_path / 'checkout'
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name != 'reference-data':
            (root / entry.name).symlink_to(entry)
    shutil.copytree(paths.REFERENCE_DATA, root / 'reference-data')
    nightly = root / 'reference-data' / 'nightly.yaml'
    nightly.write_text(nightly.read_text().replace('\ncases:', '\ncases: ['))
    return root

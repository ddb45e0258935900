"""Where things live: the checkout, the reference data, and the per-user data directory."""

import functools
import os
import subprocess
from pathlib import Path

#: The checkout this package runs from (ibrepro is installed editable by `make setup`).
REPO_ROOT = Path(os.environ.get('IBREPRO_ROOT', Path(__file__).resolve().parents[2]))
REFERENCE_DATA = REPO_ROOT / 'reference-data'
CHECKS_DIR = REPO_ROOT / 'reframe-checks'
CONFIGS_DIR = REPO_ROOT / 'configs'
# resolved: under a checkout path with white space, make setup puts the MPI prefixes elsewhere and links .deps there
DEPS_DIR = Path(os.environ.get('IBREPRO_DEPS', REPO_ROOT / '.deps')).resolve()


def data_home() -> Path:
    """The per-user directory holding the results database, run reports and ReFrame scratch.

    ``$IBREPRO_HOME`` if set, else ``$XDG_DATA_HOME/ibrepro`` (``~/.local/share/ibrepro``).
    """
    if os.environ.get('IBREPRO_HOME'):
        return Path(os.environ['IBREPRO_HOME']).expanduser()

    xdg = os.environ.get('XDG_DATA_HOME') or Path.home() / '.local' / 'share'
    return Path(xdg).expanduser() / 'ibrepro'


def cache_home() -> Path:
    """What ibrepro keeps only to be faster (the report's catalog answers): ``$XDG_CACHE_HOME/ibrepro``
    (``~/.cache/ibrepro``). Deleting it loses nothing."""
    xdg = os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache'
    return Path(xdg).expanduser() / 'ibrepro'


def results_db() -> Path:
    """ReFrame's results database: ``$RFM_SQLITE_DB_FILE`` or ``<data home>/results.db``."""
    if os.environ.get('RFM_SQLITE_DB_FILE'):
        return Path(os.environ['RFM_SQLITE_DB_FILE']).expanduser()

    return data_home() / 'results.db'


def private_dir(path) -> Path:
    """``path``, a directory of ours: missing levels created private, every level checked ours to trust
    (:func:`ibrepro.trust.make_dir`; under the data home, the data home is held to it too)."""
    from . import trust

    path, home = Path(path), data_home()
    return trust.make_dir(path, root=home if path == home or home in path.parents else path, name='IBREPRO_HOME')


def run_reports_dir() -> Path:
    """Where every session's JSON run report is kept."""
    return data_home() / 'run-reports'


def system_references_dir(system: str) -> Path:
    """The directory holding ``references.yaml`` of a ReFrame system ($ref references)."""
    return REFERENCE_DATA / 'systems' / system


@functools.lru_cache(maxsize=None)
def source_version() -> str:
    """The ibrepro commit this checkout runs (``git describe --always``, ``-dirty`` when its code has changes that
    are not committed), or the package version. The ledgers of nights (reference-data/ledger) are data a campaign
    appends to while it runs: their changes do not make the code dirty."""
    from . import __version__

    def git(*args):
        return subprocess.run(['git', '-C', str(REPO_ROOT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=10)   # not capture_output/text: a node may be 3.6
    try:
        proc = git('describe', '--always', '--abbrev=12')
        status = git('status', '--porcelain', '--untracked-files=no', '--', '.', ':(exclude)reference-data/ledger')
    except (OSError, subprocess.TimeoutExpired):
        return __version__
    if proc.returncode != 0 or not proc.stdout.strip():
        return __version__
    return proc.stdout.strip() + ('-dirty' if status.returncode == 0 and status.stdout.strip() else '')

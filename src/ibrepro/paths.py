"""Where things live: the checkout, the reference data, and the per-user data directory."""

import os
from pathlib import Path

#: The checkout this package runs from (ibrepro is installed editable by `make setup`).
REPO_ROOT = Path(os.environ.get('IBREPRO_ROOT', Path(__file__).resolve().parents[2]))
REFERENCE_DATA = REPO_ROOT / 'reference-data'
CHECKS_DIR = REPO_ROOT / 'reframe-checks'
CONFIGS_DIR = REPO_ROOT / 'configs'
DEPS_DIR = Path(os.environ.get('IBREPRO_DEPS', REPO_ROOT / '.deps'))


def data_home() -> Path:
    """The per-user directory holding the results database, run reports and ReFrame scratch.

    ``$IBREPRO_HOME`` if set, else ``$XDG_DATA_HOME/ibrepro`` (``~/.local/share/ibrepro``).
    """
    if os.environ.get('IBREPRO_HOME'):
        return Path(os.environ['IBREPRO_HOME']).expanduser()

    xdg = os.environ.get('XDG_DATA_HOME') or Path.home() / '.local' / 'share'
    return Path(xdg).expanduser() / 'ibrepro'


def results_db() -> Path:
    """ReFrame's results database: ``$RFM_SQLITE_DB_FILE`` or ``<data home>/results.db``."""
    if os.environ.get('RFM_SQLITE_DB_FILE'):
        return Path(os.environ['RFM_SQLITE_DB_FILE']).expanduser()

    return data_home() / 'results.db'


def run_reports_dir() -> Path:
    """Where every session's JSON run report is kept."""
    return data_home() / 'run-reports'


def system_references_dir(system: str) -> Path:
    """The directory holding ``references.yaml`` of a ReFrame system ($ref references)."""
    return REFERENCE_DATA / 'systems' / system

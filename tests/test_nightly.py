"""ibrepro nightly (ibrepro.nightly): what a confirmation keeps of the night's options, and one night at a time per
data directory. Nights run end to end, on real ReFrame sessions, are in test_nightly_verdict.py."""

import fcntl
import os
import subprocess
import sys

from conftest import ROOT
from ibrepro import nightly, verdict


def test_confirmation_keeps_the_settings_not_the_selection():
    from ibrepro import nightly
    assert nightly.settings_only(['-n', 'X', '-S', 'a=1', '-p', 'impi', '-Sb=2', '--setvar', 'c=3', '-r']) == \
        ['-S', 'a=1', '-Sb=2', '--setvar', 'c=3']
    assert nightly.confirmation_runs([
        {'system': 's', 'partition': 'p', 'environ': 'e', 'hashcode': 'bbbbbbbb'},
        {'system': 's', 'partition': 'p', 'environ': 'e', 'hashcode': 'aaaaaaaa'},
        {'system': 's', 'partition': 'q', 'environ': 'e', 'hashcode': 'cccccccc'},
        {'system': 's', 'partition': 'q', 'environ': 'e', 'hashcode': None}]) == \
        [('s', 'p', 'e', ['aaaaaaaa', 'bbbbbbbb']), ('s', 'q', 'e', ['cccccccc'])]


def _nightly(home, *args):
    env = {k: v for k, v in os.environ.items() if k not in ('RFM_SQLITE_DB_FILE', 'IBREPRO_NIGHTLY')}
    return subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'nightly', '--no-run', *args], cwd=ROOT,
                          env={**env, 'IBREPRO_HOME': str(home)}, capture_output=True, text=True, timeout=120)


def test_a_night_does_not_start_while_another_holds_the_data_directory(tmp_path):
    home = tmp_path / 'home'
    home.mkdir(mode=0o700)
    lock = home / nightly.LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b'night n1, process 4242, since 2026-11-29 02:00:00 UTC\n')
    fcntl.flock(fd, fcntl.LOCK_EX)            # what a running night holds
    try:
        proc = _nightly(home, '--night', 'n2')
        assert proc.returncode == verdict.EXIT_UNJUDGED, proc.stderr
        assert proc.stderr.startswith(f'ibrepro nightly: night n2 does not start: another night holds {lock} '
                                      '(night n1, process 4242, since 2026-11-29 02:00:00 UTC)'), proc.stderr
    finally:
        os.close(fd)
    proc = _nightly(home, '--night', 'n2')     # released: this night goes on (and finds nothing stored to judge)
    assert proc.returncode == verdict.EXIT_UNJUDGED and 'does not start' not in proc.stderr, proc.stderr
    assert 'could not judge night n2: no results database' in proc.stderr
    assert lock.read_text().startswith('night n2, process ')


def test_the_lock_is_never_taken_through_a_link_someone_else_left(tmp_path):
    home = tmp_path / 'home'
    home.mkdir(mode=0o700)
    (home / nightly.LOCK_NAME).symlink_to(tmp_path / 'elsewhere')
    proc = _nightly(home, '--night', 'n3')
    assert proc.returncode == verdict.EXIT_UNJUDGED and "could not take the night's lock" in proc.stderr, proc.stderr
    assert not (tmp_path / 'elsewhere').exists()

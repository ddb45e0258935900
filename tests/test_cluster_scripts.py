"""Root-run cluster scripts against a hostile neighbour (ci/cluster/lib.sh, shared by ci/cluster/ and
ci/softroce/slurm-*.sh): the work directory is private or refused, nothing below it is followed, PID files
are trusted only when root wrote them for a root process of the right name.

Runs the scripts' own functions in bash, as root; another user's directories and processes are made with
uid 65534 (nobody). Needs no cluster.
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / 'ci' / 'cluster' / 'lib.sh'
NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='root-run scripts: needs root to play the other user')


def _lib(cluster_dir, script):
    """Run ``script`` in bash after sourcing lib.sh for ``cluster_dir``; (exit code, stdout + stderr)."""
    proc = subprocess.run(['bash', '-c', f'set -eu; CLUSTER_DIR={cluster_dir}; say() {{ echo "$@"; }}; '
                           f'. {LIB}; {script}'], capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def _as_nobody(*cmd, **kwargs):
    return subprocess.Popen(['setpriv', f'--reuid={NOBODY}', f'--regid={NOBODY}', '--clear-groups', *cmd],
                            **kwargs)


def test_a_new_work_directory_is_made_root_private(tmp_path):
    rc, out = _lib(tmp_path / 'c', 'secure_cluster_dir')
    assert rc == 0, out
    st = (tmp_path / 'c').stat()
    assert st.st_uid == 0 and oct(st.st_mode & 0o777) == '0o755'


def test_our_earlier_work_directory_is_accepted(tmp_path):
    (tmp_path / 'c' / 'run').mkdir(parents=True)
    (tmp_path / 'c' / 'run' / 'munge.socket').touch()
    assert _lib(tmp_path / 'c', 'secure_cluster_dir')[0] == 0


def test_a_sticky_world_writable_ancestor_like_tmp_is_accepted(tmp_path):
    (tmp_path / 'tmp').mkdir()
    (tmp_path / 'tmp').chmod(0o1777)
    assert _lib(tmp_path / 'tmp' / 'c', 'secure_cluster_dir')[0] == 0


def _hostile(tmp_path, kind):
    """A work directory (or its surroundings) prepared by another user; returns the work directory."""
    d = tmp_path / 'c'
    if kind == 'made by another user':
        d.mkdir()
        os.chown(d, NOBODY, NOBODY)
    elif kind == 'writable by others':
        d.mkdir()
        d.chmod(0o777)
    elif kind == 'a symlink':
        (tmp_path / 'elsewhere').mkdir()
        d.symlink_to(tmp_path / 'elsewhere')
    elif kind == 'a symlink inside':
        (d / 'run').mkdir(parents=True)
        (d / 'etc').symlink_to('/etc')
    elif kind == 'another user\'s file inside':
        (d / 'run').mkdir(parents=True)
        (d / 'run' / 'slurmctld.pid').write_text('1\n')
        os.chown(d / 'run' / 'slurmctld.pid', NOBODY, NOBODY)
    elif kind == 'under another user\'s directory':
        (tmp_path / 'user').mkdir()
        os.chown(tmp_path / 'user', NOBODY, NOBODY)
        d = tmp_path / 'user' / 'c'
    return d


@pytest.mark.parametrize('kind', ['made by another user', 'writable by others', 'a symlink', 'a symlink inside',
                                  'another user\'s file inside', 'under another user\'s directory'])
def test_a_hostile_work_directory_is_refused_and_left_alone(tmp_path, kind):
    d = _hostile(tmp_path, kind)
    before = sorted(str(p) for p in tmp_path.rglob('*'))
    rc, out = _lib(d, 'secure_cluster_dir; mkdir -p "$CLUSTER_DIR/run"; echo USED')
    assert rc == 1 and 'refusing' in out and 'USED' not in out, out
    assert sorted(str(p) for p in tmp_path.rglob('*')) == before      # nothing made, nothing followed
    assert not (Path('/etc') / 'run').exists()


@pytest.fixture
def fake_munged(tmp_path):
    """A process named munged run by another user (what a hostile PID file would point at)."""
    exe = tmp_path / 'bin' / 'munged'
    exe.parent.mkdir()
    shutil.copy(shutil.which('sleep'), exe)
    exe.parent.chmod(0o755)
    proc = _as_nobody(str(exe), '300')
    for _ in range(100):
        if Path(f'/proc/{proc.pid}/comm').read_text().strip() == 'munged':
            break
        time.sleep(0.02)
    yield proc
    proc.kill()
    proc.wait()


def test_a_pid_file_is_trusted_only_for_a_root_process_of_its_name(tmp_path, fake_munged):
    run = tmp_path / 'c' / 'run'
    run.mkdir(parents=True)
    (run / 'munged.pid').write_text(f'{fake_munged.pid}\n')
    rc, out = _lib(tmp_path / 'c', 'pid_alive "$RUN/munged.pid" && echo TRUSTED; stop_pidfile munged "$RUN/munged.pid"')
    assert rc == 0 and 'TRUSTED' not in out, out
    assert fake_munged.poll() is None                    # another user's process: not ours to stop
    assert not (run / 'munged.pid').exists()

    # the same check accepts the real thing: a root process named as the file says
    sleeper = subprocess.Popen([tmp_path / 'bin' / 'munged', '300'])
    try:
        (run / 'munged.pid').write_text(f'{sleeper.pid}\n')
        assert 'TRUSTED' in _lib(tmp_path / 'c', 'pid_alive "$RUN/munged.pid" && echo TRUSTED')[1]
        (run / 'munged.pid').write_text('1\n')           # a root process of another name
        assert 'TRUSTED' not in _lib(tmp_path / 'c', 'pid_alive "$RUN/munged.pid" && echo TRUSTED')[1]
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize('script', ['ci/cluster/down.sh', 'ci/softroce/slurm-down.sh'])
def test_down_refuses_a_hostile_directory_and_signals_nothing(tmp_path, fake_munged, script):
    if any(Path('/run/netns', ns).exists() for ns in ('ibr-switch', 'ibr-node1')) or \
            Path('/sys/class/net/ibrx-mgmt').exists():
        pytest.skip('a cluster is up on this machine: down.sh is not run beside it')
    d = tmp_path / 'c'
    (d / 'run').mkdir(parents=True)
    (d / 'run' / 'munged.pid').write_text(f'{fake_munged.pid}\n')
    os.chown(d, NOBODY, NOBODY)
    env = dict(os.environ, IBREPRO_CLUSTER_DIR=str(d), IBREPRO_SOFTROCE_CLUSTER_DIR=str(d))
    proc = subprocess.run([REPO / script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and 'refusing' in proc.stderr, proc.stdout + proc.stderr
    time.sleep(0.2)
    assert fake_munged.poll() is None

"""The configuration building blocks: environments declare what their binaries really provide."""

import json
import os

import pytest

from conftest import IMPI, REFRAME, ROOT, needs_impi, output
from ibrepro import rfmconfig


def test_missing_prefix_gives_a_featureless_environment_that_says_why(tmp_path):
    env = rfmconfig.prefix_environment('ghost', tmp_path / 'nowhere', descr='a stack that is not there')
    assert env['features'] == []
    assert 'not installed' in env['extras']['about'] and 'make setup' in env['extras']['about']


@needs_impi
def test_spack_views_become_environments_with_their_tools(tmp_path, monkeypatch):
    """A complete view with IMB and OSU programs (real executables linked in) and an external MPI (the Intel MPI
    wheel, not linked into the view, as Spack leaves externals) gives an environment with those features and that
    MPI's launcher; a view whose install has not finished (no stamp) gives none."""
    views = tmp_path / 'spack-view'
    view = views / 'ib-mvapich'
    osu = view / 'libexec' / 'osu-micro-benchmarks' / 'mpi' / 'pt2pt'
    for d in (view / 'bin', osu, views / 'half-built' / 'bin'):
        d.mkdir(parents=True)
    os.symlink(IMPI, view / 'bin' / 'IMB-MPI1')
    os.symlink('/bin/true', osu / 'osu_latency')
    os.symlink('/bin/true', views / 'half-built' / 'bin' / 'osu_bw')
    mpi_prefix = IMPI.parents[1]
    (views / '.complete-ib-mvapich.json').write_text(json.dumps({'environment': 'ib-mvapich',
                                                                 'mpi_prefix': str(mpi_prefix)}))
    monkeypatch.setattr(rfmconfig, 'SPACK_VIEWS', views)

    (env,) = rfmconfig.spack_environments()
    assert env['name'] == 'spack-ib-mvapich'
    assert {'mpi', 'impi', 'spack', 'imb', 'osu'} <= set(env['features'])
    programs = env['extras']['programs']          # the programs it has (the MPI's prefix brings IMB's too)
    assert {'IMB-MPI1', 'osu_latency'} <= set(programs) and 'osu_bw' not in programs    # not the half-built view's
    path = dict(env['env_vars'])['PATH']
    assert f'"{view / "bin"}"' in path and f'"{osu}"' in path and f'"{mpi_prefix / "bin"}"' in path
    local = rfmconfig.local_system(rfmconfig.local_environments())
    assert 'spack-ib-mvapich' in local['partitions'][0]['environs']

    # the stamp without the MPI's prefix: the benchmarks are there, but no launcher, so no 'mpi' feature
    (views / '.complete-ib-mvapich.json').write_text(json.dumps({'environment': 'ib-mvapich', 'mpi_prefix': None}))
    (env,) = rfmconfig.spack_environments()
    assert 'mpi' not in env['features'] and 'osu' in env['features']


def test_no_views_no_spack_environments(tmp_path, monkeypatch):
    monkeypatch.setattr(rfmconfig, 'SPACK_VIEWS', tmp_path / 'absent')
    assert rfmconfig.spack_environments() == []


@needs_impi
def test_the_mpi_of_an_environment_is_known_from_its_launcher_directory():
    """The wheels of make setup: Intel MPI and MPICH (what binding options and Open MPI settings follow from)."""
    deps = IMPI.parents[2]
    assert rfmconfig.mpi_family([deps / 'impi' / 'bin']) == 'impi'
    assert rfmconfig.mpi_family([deps / 'mpich' / 'bin']) == 'mpich'
    assert rfmconfig.mpi_family([deps]) is None           # no launcher there
    mpich = rfmconfig.mpich_environment()
    assert 'mpich' in mpich['features'] and 'OMPI_ALLOW_RUN_AS_ROOT' not in dict(mpich['env_vars'])


def test_paths_in_job_scripts_are_quoted(tmp_path):
    """A checkout under a path with a space stays one word."""
    prefix = tmp_path / 'my stacks' / 'a"b'
    (prefix / 'bin').mkdir(parents=True)
    env = rfmconfig.prefix_environment('odd', prefix, descr='odd path')
    path = dict(env['env_vars'])['PATH']
    assert path == f'"{tmp_path}/my stacks/a\\"b/bin":${{PATH:-}}'
    import subprocess
    out = subprocess.run(['bash', '-c', f'export PATH={path}; echo "$PATH"'], capture_output=True, text=True,
                         cwd=tmp_path, env={'PATH': '/usr/bin:/bin'})
    assert out.stdout.split(':')[0] == f'{prefix}/bin'


@pytest.mark.parametrize('name', ['$(touch pwned)', '`touch pwned`', '$HOME', 'a\nb'])
def test_paths_with_shell_syntax_never_reach_an_environment_variable(tmp_path, name):
    """ReFrame expands environment values itself through a shell (osext.expandvars), escaped or not: refused."""
    prefix = tmp_path / 'stacks' / name
    (prefix / 'bin').mkdir(parents=True)
    with pytest.raises(ValueError, match=r'^PATH=.*may not contain'):
        rfmconfig.prefix_environment('odd', prefix, descr='odd path')
    with pytest.raises(ValueError, match=r'^PATH=.*may not contain'):
        rfmconfig.site_environment('site', descr='a site', tools=['osu'], prefix=prefix)
    with pytest.raises(ValueError, match=r'^IBREPRO_PREFIXES=.*may not contain'):
        rfmconfig.user_prefixes({'IBREPRO_PREFIXES': f'/opt/osu:{prefix}'})
    assert not list(tmp_path.rglob('pwned'))


@pytest.mark.parametrize('variable, value', [('IBREPRO_PREFIXES', '/opt/$(touch pwned)'),
                                             ('IBREPRO_HOME', '/tmp/`touch pwned`')])
def test_reframe_refuses_a_configuration_with_shell_syntax_in_a_path(tmp_path, variable, value):
    """Before ReFrame loads it (it would run the command as the user who runs it)."""
    import subprocess
    env = {**os.environ, 'IBREPRO_HOME': str(tmp_path / 'home'), variable: value.replace('/tmp', str(tmp_path))}
    proc = subprocess.run([str(REFRAME), '-C', 'configs/local.py', '-c', 'reframe-checks/system', '-l'], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and f'{variable}=' in proc.stdout + proc.stderr, output(proc)
    assert 'may not contain' in proc.stdout + proc.stderr
    assert not list(tmp_path.rglob('pwned')) and not (ROOT / 'pwned').exists()

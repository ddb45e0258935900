"""The configuration building blocks: environments declare what their binaries really provide."""

import os

from conftest import IMPI, needs_impi
from ibrepro import rfmconfig


def test_missing_prefix_gives_a_featureless_environment_that_says_why(tmp_path):
    env = rfmconfig.prefix_environment('ghost', tmp_path / 'nowhere', descr='a stack that is not there')
    assert env['features'] == []
    assert 'not installed' in env['extras']['about'] and 'make setup' in env['extras']['about']


@needs_impi
def test_spack_views_become_environments_with_their_tools(tmp_path, monkeypatch):
    """A view with IMB and OSU programs (real executables linked in) gives an environment with those features."""
    view = tmp_path / 'spack-view' / 'ib-mvapich'
    osu = view / 'libexec' / 'osu-micro-benchmarks' / 'mpi' / 'pt2pt'
    for d in (view / 'bin', osu):
        d.mkdir(parents=True)
    os.symlink(IMPI, view / 'bin' / 'IMB-MPI1')
    os.symlink('/bin/true', osu / 'osu_latency')
    monkeypatch.setattr(rfmconfig, 'SPACK_VIEWS', tmp_path / 'spack-view')

    (env,) = rfmconfig.spack_environments()
    assert env['name'] == 'spack-ib-mvapich'
    assert {'mpi', 'spack', 'mvapich2', 'imb', 'osu'} <= set(env['features'])
    path = dict(env['env_vars'])['PATH']
    assert str(view / 'bin') in path and str(osu) in path
    local = rfmconfig.local_system(rfmconfig.local_environments())
    assert 'spack-ib-mvapich' in local['partitions'][0]['environs']


def test_no_views_no_spack_environments(tmp_path, monkeypatch):
    monkeypatch.setattr(rfmconfig, 'SPACK_VIEWS', tmp_path / 'absent')
    assert rfmconfig.spack_environments() == []

"""MVAPICH2 on the soft-RoCE systems (issue 27): the bring-your-own prefix, what each case sets, the recipe, and
the failure reasons on real
recorded outputs (tests/fixtures/mpi-failures, MANIFEST).

What needs an MVAPICH2 2.3 install reads it from ``$IBREPRO_MVAPICH2_PREFIX`` (docs/spack.md) and skips, saying
so, without one; the run in the soft-RoCE guests also needs QEMU and root.
"""

import json
import os
import re
from pathlib import Path

import pytest

from conftest import ROOT, ReFrameRunner, output
from ibrepro.rfm import _missing_binary, mvapich2
from ibrepro.softroce import config as softroce

FAILURES = ROOT / 'tests' / 'fixtures' / 'mpi-failures'
RECIPE = ROOT / 'spack-repo' / 'spack_repo' / 'ibrepro' / 'packages' / 'mvapich2_striping' / 'package.py'
MV2_PREFIX = os.environ.get(softroce.MVAPICH2_PREFIX, '')
needs_mvapich2 = pytest.mark.skipif(
    not (MV2_PREFIX and Path(MV2_PREFIX, 'bin', 'mpiname').exists()),
    reason=f'no MVAPICH2: set {softroce.MVAPICH2_PREFIX} to an MVAPICH2 2.3 install (docs/spack.md)')
MV2_FAMILIES = ('MVAPICH2MultiRail', 'MVAPICH2MultiRailCollective', 'MVAPICH2RailPolicy', 'MVAPICH2Inline')


# -- the environment: a prefix, or a reason -------------------------------------------------------------------

@pytest.mark.parametrize('value, why', [
    ('', 'not set: IBREPRO_MVAPICH2_PREFIX=<an MVAPICH2 2.3 install the guests see>'),
    ('/nonexistent/mvapich2', 'IBREPRO_MVAPICH2_PREFIX=/nonexistent/mvapich2: no such directory'),
    (str(ROOT / 'tests'), 'not an MVAPICH2 (no bin/mpiname)'),
])
def test_without_an_mvapich2_the_environment_has_no_features_and_says_why(value, why):
    env = softroce.mvapich2_environment(['softroce-slurm'], environ={softroce.MVAPICH2_PREFIX: value})
    assert env['features'] == [] and env['target_systems'] == ['softroce-slurm']
    assert why in env['extras']['about']


def test_a_hostile_prefix_is_refused_by_name():
    with pytest.raises(ValueError, match='IBREPRO_MVAPICH2_PREFIX=.*may not contain'):
        softroce.mvapich2_environment(['softroce'], environ={softroce.MVAPICH2_PREFIX: '/opt/$(reboot)'})


def test_the_slurm_guests_declare_what_the_mpi_families_need(tmp_path):
    partition, = softroce.slurm_system(tmp_path)['partitions']
    assert {'mpi', 'roce', 'dual-port', 'nodes1', 'nodes2', 'cores2'} <= set(partition['features'])
    assert 'mvapich2' in partition['environs'] and partition['launcher'] == 'srun'


@pytest.mark.parametrize('config, system', [('configs/softroce.py', 'softroce'),
                                            ('configs/softroce-slurm.py', 'softroce-slurm')])
def test_catalog_says_no_mvapich2_and_the_step_that_enables_it(tmp_path, config, system):
    runner = ReFrameRunner(tmp_path / 'home')
    env = {softroce.MVAPICH2_PREFIX: '', 'IBREPRO_SOFTROCE_CLUSTER_DIR': str(tmp_path / 'cluster')}
    proc = runner.ibrepro('catalog', '-C', config, '--system', system, '--not-run', env=env)
    assert proc.returncode == 0, output(proc)
    for family in MV2_FAMILIES:
        line, = [ln for ln in proc.stdout.splitlines() if ln.split()[:1] == [family]]
        assert 'no MVAPICH2' in line, line
    assert 'IBREPRO_MVAPICH2_PREFIX=<an MVAPICH2 2.3 install> on the soft-RoCE systems' in proc.stdout
    if system == 'softroce':      # no launcher there starts MPI ranks, and its dual-port partition is one node
        assert "MVAPICH2MultiRail                6  lacks feature 'mpi'; needs 2 nodes (has 1)" in proc.stdout


# -- the rails each case names ----------------------------------------------------------------------------------

def test_binding_names_both_devices_and_stripes_nothing():
    env = mvapich2.rail_settings('2-port-binding', ['rxe0', 'rxe1'], 1)
    assert env['MV2_IBA_HCA'] == 'rxe0:rxe1' and env['MV2_RAIL_SHARING_POLICY'] == 'FIXED_MAPPING'
    # above OMB's largest message (4 MiB): the rendezvous path never stripes (ibv_rndv.c 518)
    assert int(env['MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD']) > 4 << 20


def test_binding_on_one_dual_port_device_names_none_and_says_why():
    assert 'MV2_IBA_HCA' not in mvapich2.rail_settings('2-port-binding', ['mlx4_0'], 2)
    assert 'binds processes to devices, not ports' in mvapich2.BINDING_UNNAMED


# -- the recipe ----------------------------------------------------------------------------------------------------

def test_the_recipe_links_the_verbs_libraries_and_notes_the_cm_msg_size():
    text = RECIPE.read_text()
    assert '"--disable-ibv-dlopen",' in text
    assert 'sizeof cm_msg (2176)' in text and 'MV2_USE_RoCE=1' in text


# -- failure reasons on MVAPICH2's own outputs ----------------------------------------------------------------------

def test_a_missing_libmpi_is_named_as_a_missing_library():
    text = (FAILURES / 'mpich-5.0.2.missing-libmpi.txt').read_text()
    reason = _missing_binary(text, 'mpi_init_only')
    assert reason.startswith("'mpi_init_only' cannot load shared library libmpi.so.12"), reason
    assert 'not found in this environment' not in reason


def test_a_missing_program_still_says_not_found():
    reason = _missing_binary('bash: line 1: osu_latency: command not found\n', 'osu_latency')
    assert 'not found in this environment' in reason


def test_the_mpis_own_fatal_error_line_is_the_reason():
    text = (FAILURES / 'mpich-5.0.2.init-error.txt').read_text()
    assert mvapich2.error_stack(text) == 'Fatal error in internal_Init: Other MPI error'
    assert mvapich2.error_stack('srun: error: rxnode2: task 1: Killed\n') is None


def test_cm_msg_larger_than_the_mtu_names_the_mtu():
    # the line as cm.c 2087 formats it (PRINT_ERROR("sizeof cm_msg (%lu) >= rdma_default_mtu (%d).\n")
    reason = mvapich2.mtu_too_small('[rxnode1:mpi_rank_0][MPICM_Init_UD_CM] sizeof cm_msg (2176) >= '
                                    'rdma_default_mtu (1024).\n')
    assert '(2176 B) does not fit the port MTU (1024 B)' in reason
    assert mvapich2.mtu_too_small('# OSU MPI Latency Test v5.9\n') is None


# -- what a case sets on the Slurm guests (dry run, a real MVAPICH2 prefix) ------------------------------------------

def exports(script):
    return dict(re.findall(r'^export (MV2_\w+|SLURM_MPI_TYPE)=(\S*)$', script, re.M))


@needs_mvapich2
def test_the_inline_case_names_its_device_and_runs_roce_through_pmi2(tmp_path):
    runner = ReFrameRunner(tmp_path / 'home')
    env = {softroce.MVAPICH2_PREFIX: MV2_PREFIX, 'IBREPRO_SOFTROCE_CLUSTER_DIR': str(tmp_path / 'cluster')}
    proc = runner('--dry-run', '--system', 'softroce-slurm', '--nocolor', '-n', 'MVAPICH2Inline%benchmark=osu_latency',
                  config='configs/softroce-slurm.py', checks='reframe-checks/multirail/mvapich_multirail.py',
                  env=env)
    assert proc.returncode == 0, output(proc)
    (path,) = sorted(runner.home.glob('run-reports/*.json'))[-1:]
    (case,) = json.loads(path.read_text())['runs'][-1]['testcases']
    env = exports(Path(case['stagedir'], 'rfm_job.sh').read_text())
    assert {k: env.get(k) for k in ('MV2_IBA_HCA', 'MV2_DEFAULT_PORT', 'MV2_MAX_INLINE_SIZE', 'MV2_USE_RoCE',
                                    'SLURM_MPI_TYPE')} == \
        {'MV2_IBA_HCA': 'rxe0', 'MV2_DEFAULT_PORT': '1', 'MV2_MAX_INLINE_SIZE': '168', 'MV2_USE_RoCE': '1',
         'SLURM_MPI_TYPE': 'pmi2'}

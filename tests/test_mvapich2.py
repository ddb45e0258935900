"""MVAPICH2 on the soft-RoCE systems (issue 27): the bring-your-own prefix, what each case sets, the recipe, and
the failure reasons on real
recorded outputs (tests/fixtures/mpi-failures, MANIFEST).

What needs an MVAPICH2 2.3 install reads it from ``$IBREPRO_MVAPICH2_PREFIX`` (docs/spack.md) and skips, saying
so, without one; the run in the soft-RoCE guests also needs QEMU and root.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, ReFrameRunner, output
from ibrepro import parsers
from ibrepro.rfm import _missing_binary, mvapich2, rails
from ibrepro.softroce import config as softroce
from ibrepro.softroce import fabric

FAILURES = ROOT / 'tests' / 'fixtures' / 'mpi-failures'
RECIPE = ROOT / 'spack-repo' / 'spack_repo' / 'ibrepro' / 'packages' / 'mvapich2_striping' / 'package.py'
MV2_PREFIX = os.environ.get(softroce.MVAPICH2_PREFIX, '')
needs_mvapich2 = pytest.mark.skipif(
    not (MV2_PREFIX and Path(MV2_PREFIX, 'bin', 'mpiname').exists()),
    reason=f'no MVAPICH2: set {softroce.MVAPICH2_PREFIX} to an MVAPICH2 2.3 install (docs/spack.md)')
MV2_FAMILIES = ('MVAPICH2MultiRail', 'MVAPICH2MultiRailCollective', 'MVAPICH2RailPolicy', 'MVAPICH2Inline')
# both sides of the striping threshold (8192 B) and up to 256 KiB (with 4-32 KiB rxe1 stayed idle on two rails),
# few iterations and a small window: TCG guests
SMALL_MV2 = ['-S', 'message_sizes=4096:262144', '-S', 'iterations=10', '-S', 'warmup=2', '-S', 'window=8']


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


# -- recorded MVAPICH2 2.3.7 runs on the soft-RoCE Slurm guests (tests/fixtures/mvapich2/2.3.7-rxe-slurm, MANIFEST) --

RXE = ROOT / 'tests' / 'fixtures' / 'mvapich2' / '2.3.7-rxe-slurm'


def test_an_mvapich2_that_names_no_hca_on_rxe_fails_naming_the_hca():
    text = (RXE / 'init-no-hca.txt').read_text()
    assert mvapich2.error_stack(text) == \
        'Fatal error in MPI_Init: Other MPI error (rdma_open_hca: Failed to open HCA: No such file or directory)'
    assert mvapich2.mtu_too_small(text) is None


@pytest.mark.parametrize('name', ['init-no-roce', 'init-ondemand-roce-2port'])
def test_the_ud_connection_manager_on_rxe_fails_naming_the_message_and_the_mtu(name):
    # without MV2_USE_RoCE (2 processes), and with it once connections are made on demand
    text = (RXE / f'{name}.txt').read_text()
    assert '(2176 B) does not fit the port MTU (1024 B)' in mvapich2.mtu_too_small(text)
    assert mvapich2.error_stack(text).startswith('Fatal error in MPI_Init: Other MPI error')


OMB_TITLES = {'osu_latency': 'MPI Latency', 'osu_bw': 'MPI Bandwidth', 'osu_bibw': 'MPI Bi-Directional Bandwidth',
              'osu_mbw_mr': 'MPI Multiple Bandwidth / Message Rate',
              'osu_alltoall': 'MPI All-to-All Personalized Exchange Latency',
              'osu_bcast': 'MPI Broadcast Latency', 'osu_allgather': 'MPI Allgather Latency'}

# the recorded cases (rfm_job.out/.err and the rail counters ReFrame kept): OMB program, rails that must have sent
RECORDED = {
    'MultiRail-osu_latency-ports1': ('osu_latency', {'rxe0'}),
    'MultiRail-osu_latency-ports2': ('osu_latency', {'rxe0', 'rxe1'}),
    'MultiRail-osu_bw-ports1': ('osu_bw', {'rxe0'}),
    'MultiRail-osu_bw-ports2': ('osu_bw', {'rxe0', 'rxe1'}),
    'MultiRail-osu_bibw-ports1': ('osu_bibw', {'rxe0'}),
    'MultiRail-osu_bibw-ports2': ('osu_bibw', {'rxe0', 'rxe1'}),
    'RailPolicy-striping': ('osu_mbw_mr', {'rxe0', 'rxe1'}),
    'RailPolicy-binding': ('osu_mbw_mr', {'rxe0', 'rxe1'}),
    'Inline-osu_latency': ('osu_latency', {'rxe0'}),
    'Inline-osu_bw': ('osu_bw', {'rxe0'}),
    'Inline-osu_bibw': ('osu_bibw', {'rxe0'}),
    # 4x1 on four guests
    'MultiRailCollective-osu_alltoall-ports1': ('osu_alltoall', {'rxe0'}),
    'MultiRailCollective-osu_alltoall-ports2': ('osu_alltoall', {'rxe0', 'rxe1'}),
    'MultiRailCollective-osu_bcast-ports1': ('osu_bcast', {'rxe0'}),
    'MultiRailCollective-osu_allgather-ports1': ('osu_allgather', {'rxe0'}),
    'MultiRailCollective-osu_allgather-ports2': ('osu_allgather', {'rxe0', 'rxe1'}),
    # the broadcast as the check now runs it, whole messages down a binomial tree (MV2_INTER_BCAST_TUNING=1)
    'MultiRailCollective-osu_bcast-binomial-ports1': ('osu_bcast', {'rxe0'}),
    'MultiRailCollective-osu_bcast-binomial-ports2': ('osu_bcast', {'rxe0', 'rxe1'}),
}


@pytest.mark.parametrize('case', sorted(RECORDED))
def test_recorded_mvapich2_outputs_parse_to_the_sizes_asked_for(case):
    program, _ = RECORDED[case]
    parsed = parsers.parse_text((RXE / f'{case}.out').read_text(), source=case, tool='osu')
    table = parsed.tables[0]
    assert table.benchmark == OMB_TITLES[program]
    assert table.sizes() == [4096 << i for i in range(7)]      # -m 4096:262144
    assert all(v > 0 for _, v, _ in table.metric_values())


@pytest.mark.parametrize('case', sorted(RECORDED))
def test_recorded_rail_counters_show_the_rails_each_case_used(case):
    _, rails_used = RECORDED[case]
    sent = rails.traffic((RXE / f'{case}.rails-before.txt').read_text(),
                         (RXE / f'{case}.rails-after.txt').read_text())
    assert set(sent) == {'rxe0:1', 'rxe1:1'}
    assert {r.split(':')[0] for r, n in sent.items() if n} == rails_used
    assert rails.unexpected(sent, sorted(rails_used)) == ''


def test_the_two_rail_bcast_that_left_rxe1_idle_is_named():
    # the one recorded case that failed: osu_bcast 4x1 on rxe0:rxe1 with MVAPICH2's tuned broadcast sent nothing on
    # rxe1 (4 KiB to 256 KiB); the check now asks for the binomial broadcast (recorded above, both rails)
    sent = rails.traffic((RXE / 'MultiRailCollective-osu_bcast-ports2.rails-before.txt').read_text(),
                         (RXE / 'MultiRailCollective-osu_bcast-ports2.rails-after.txt').read_text())
    assert sent['rxe0:1'] > 0 and sent['rxe1:1'] == 0
    assert rails.unexpected(sent, ['rxe0', 'rxe1']) == 'rxe1 carried no packet'


def test_a_case_whose_second_rail_stayed_idle_is_named():
    # the one-rail case's real counters, judged as if both rails had been asked for
    sent = rails.traffic((RXE / 'MultiRail-osu_bw-ports1.rails-before.txt').read_text(),
                         (RXE / 'MultiRail-osu_bw-ports1.rails-after.txt').read_text())
    assert rails.unexpected(sent, ['rxe0', 'rxe1']) == 'rxe1 carried no packet'
    assert rails.unexpected(sent, ['rxe1']) == 'rxe1 carried no packet; rxe0 carried packets it was not asked to'
    assert rails.traffic('', 'rail rxnode1 rxe0 1 5\n') == {}        # not read: nothing judged


@pytest.mark.parametrize('other, fails', [(0, False), (40, False), (None, True), (1, True)])
def test_the_other_ports_own_traffic_is_named_not_failed(other, fails):
    """A one-rail case's real counters (rxe0) with packets on the unnamed rxe1 during the job: a few (IPoIB's ARP,
    NFS, Lustre o2ib on the other port of a production node) are the node's, named; a share of the case's own
    (here: as many as rxe0 sent, other=None: MVAPICH2 striped onto it) fails the case."""
    sent = rails.traffic((RXE / 'MultiRail-osu_bw-ports1.rails-before.txt').read_text(),
                         (RXE / 'MultiRail-osu_bw-ports1.rails-after.txt').read_text())
    own = sent['rxe0:1']
    assert own > 400 and sent['rxe1:1'] == 0
    if other is None:
        other = own
    elif other == 1:
        other = int(own * rails.STRAY_SHARE) + 1
    sent = {**sent, 'rxe1:1': other}
    assert bool(rails.unexpected(sent, ['rxe0'])) == fails
    if fails:
        assert rails.unexpected(sent, ['rxe0']) == 'rxe1 carried packets it was not asked to'
        assert rails.background(sent, ['rxe0']) == ''
    elif other:
        assert rails.background(sent, ['rxe0']).startswith(f'rxe1 sent {other} packet(s), ')
    else:
        assert rails.background(sent, ['rxe0']) == ''


# -- what a case sets on the Slurm guests (dry run, a real MVAPICH2 prefix) ------------------------------------------

def exports(script):
    return dict(re.findall(r'^export (MV2_\w+|SLURM_MPI_TYPE)=(\S*)$', script, re.M))


def _dry_run_exports(tmp_path, selection, nodes=3):
    """{display name: the MV2_*/SLURM_MPI_TYPE exports of its job script} of a dry run on ``nodes`` Slurm guests (the
    node lines `ibrepro softroce up --slurm` writes)."""
    (tmp_path / 'cluster' / 'guests').mkdir(parents=True)
    (tmp_path / 'cluster' / 'guests' / 'slurm-nodes.conf').write_text(fabric.slurm_nodes(nodes, 3))
    runner = ReFrameRunner(tmp_path / 'home')
    env = {softroce.MVAPICH2_PREFIX: MV2_PREFIX, 'IBREPRO_SOFTROCE_CLUSTER_DIR': str(tmp_path / 'cluster')}
    proc = runner('--dry-run', '--system', 'softroce-slurm', '--nocolor', '-n', selection,
                  config='configs/softroce-slurm.py', checks='reframe-checks', env=env)
    assert proc.returncode == 0, output(proc)
    (path,) = sorted(runner.home.glob('run-reports/*.json'))[-1:]
    return {c['display_name']: exports(Path(c['stagedir'], 'rfm_job.sh').read_text())
            for c in json.loads(path.read_text())['runs'][-1]['testcases']}


@needs_mvapich2
def test_the_inline_case_names_its_device_and_runs_roce_through_pmi2(tmp_path):
    (env,) = _dry_run_exports(tmp_path, 'MVAPICH2Inline%benchmark=osu_latency').values()
    assert {k: env.get(k) for k in ('MV2_IBA_HCA', 'MV2_DEFAULT_PORT', 'MV2_MAX_INLINE_SIZE', 'MV2_USE_RoCE',
                                    'SLURM_MPI_TYPE')} == \
        {'MV2_IBA_HCA': 'rxe0', 'MV2_DEFAULT_PORT': '1', 'MV2_MAX_INLINE_SIZE': '168', 'MV2_USE_RoCE': '1',
         'SLURM_MPI_TYPE': 'pmi2'}


@needs_mvapich2
def test_the_broadcast_sends_whole_messages_on_one_port_and_on_two(tmp_path):
    cases = _dry_run_exports(tmp_path, 'MVAPICH2MultiRailCollective', nodes=4)     # 4x1: four guests
    assert len(cases) == 6, sorted(cases)
    for name, env in cases.items():
        assert env.get('MV2_INTER_BCAST_TUNING') == ('1' if 'osu_bcast' in name else None), (name, env)


# -- every family through Slurm on the soft-RoCE guests (a real MVAPICH2, the cluster up) ------------------------

CLUSTER_DIR = Path(os.environ.get('IBREPRO_SOFTROCE_CLUSTER_DIR', '/tmp/ibrepro-softroce'))


def _slurm_nodes_up():
    """The soft-RoCE Slurm guests that answer (sinfo), none when the cluster is not up."""
    if not (CLUSTER_DIR / 'env.sh').exists():
        return []
    try:
        proc = subprocess.run(['sinfo', '-h', '-N', '-p', 'rxe', '-t', 'idle,mix,alloc', '-o', '%N'],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, 'SLURM_CONF': str(CLUSTER_DIR / 'etc' / 'slurm.conf')})
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted(set(proc.stdout.split()))


@pytest.mark.integration
@needs_mvapich2
@pytest.mark.skipif(len(_slurm_nodes_up()) < 2, reason='soft-RoCE Slurm cluster not up (make softroce-slurm-up)')
def test_every_family_runs_through_slurm_on_the_rails_it_names(tmp_path):
    runner = ReFrameRunner(tmp_path / 'home')
    env = {softroce.MVAPICH2_PREFIX: MV2_PREFIX, 'IBREPRO_SOFTROCE_CLUSTER_DIR': str(CLUSTER_DIR),
           'SLURM_CONF': str(CLUSTER_DIR / 'etc' / 'slurm.conf')}
    # sizes on both sides of the striping threshold (8192 B), few iterations: TCG guests
    proc = runner('-r', '--system', 'softroce-slurm', '--exec-policy=serial', '--max-retries=1',
                  *[a for f in MV2_FAMILIES for a in ('-n', f'^{f}')], *SMALL_MV2,
                  config='configs/softroce-slurm.py', checks='reframe-checks',
                  env=env, timeout=5400)
    (path,) = sorted(runner.home.glob('run-reports/*.json'))[-1:]
    cases = {c['display_name']: c for run in json.loads(path.read_text())['runs'] for c in run['testcases']}
    ran = {name: c for name, c in cases.items() if c['result'] != 'skip'}
    assert ran and all(c['result'] == 'pass' for c in ran.values()), output(proc)
    for name, case in ran.items():
        used = {rail.split(':')[0] for rail, n in case['rail_packets'].items() if n}
        both = '%ports=2' in name or '%policy=' in name
        assert used == ({'rxe0', 'rxe1'} if both else {'rxe0'}), (name, case['rail_packets'])
    nodes = len(_slurm_nodes_up())
    for name, case in cases.items():
        if case['result'] == 'skip':     # only the 4x1 collectives, on fewer than 4 guests
            assert name.startswith('MVAPICH2MultiRailCollective') and nodes < 4, (name, case)

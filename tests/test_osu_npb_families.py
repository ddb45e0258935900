"""The OSU, MVAPICH2 and NPB families: selected where their hard requirements are met (and explained by the catalog
where not), a job script for every variant on the example cluster (no Slurm needed), and their sanity and
performance logic over real outputs (tests/checks/replay.py)."""

import json
import re
import runpy

import pytest

from conftest import ROOT, ReFrameRunner, output
from ibrepro import rfmconfig
from ibrepro.rfm import mvapich2
from ibrepro.rfm import bench
from ibrepro.rfm.layout import parse_layout
from ibrepro.rfm.npb import parse_case
from ibrepro.rfm.osu import expected_sizes

FAMILIES = ['reframe-checks/mpi/pt2pt_collectives.py', 'reframe-checks/mpi/multipair.py',
            'reframe-checks/mpi/mvapich2.py', 'reframe-checks/apps']
#: The IMB families share the MPI-level file with the OSU ones (one file per section of the papers)
NOT_HERE = '^(IMB|BenchIMB)'


def families(runner, *args, **kwargs):
    """Run ``reframe`` over the families of this module only."""
    more = [arg for path in FAMILIES[1:] for arg in ('-c', path)]
    return runner(*args, '--nocolor', '-x', NOT_HERE, *more, checks=FAMILIES[0], **kwargs)


# family -> number of variants
VARIANTS = {'OSULatency': 1, 'OSUBandwidth': 3, 'OSUBiBandwidth': 2, 'OSUIntraNode': 2, 'OSUMultiPair': 6,
            'OSUCollective': 5, 'MVAPICH2MultiRail': 6, 'MVAPICH2MultiRailCollective': 6,
            'MVAPICH2RailPolicy': 2, 'MVAPICH2Inline': 3, 'NPB': 42}

#: The partitions of the testbeds the dry run uses: together they fit every layout (2x8, 8x2), but
#: for 4x1 on two ports (the 000 testbed, pcie-sdr), where only that family runs (keeps the test short).
DRY_PARTITIONS = ['testbeds:connectx-qdr', 'testbeds:ib-pcix-8node']
FOUR_NODES_TWO_PORTS = {'MVAPICH2MultiRailCollective': 'testbeds:pcie-sdr'}

_SKIP = re.compile(r'^\[\s*SKIP\s*\] \(\s*\d+/\d+\) (.+?) /[0-9a-f]{8} @(\S+) \[(.*)\]$', re.M)


def npb_cases():
    return runpy.run_path(str(ROOT / 'reframe-checks/apps/npb.py'))['CASES']


def last_report(runner):
    (path,) = sorted(runner.home.glob('run-reports/*.json'), key=lambda p: p.stat().st_mtime)[-1:]
    return json.loads(path.read_text())['runs'][-1]['testcases']


def skips(stdout):
    return {(name, where): reason for name, where, reason in _SKIP.findall(stdout)}


# -- the library -------------------------------------------------------------------------------------------

@pytest.mark.parametrize('benchmark, sizes, first, last, count', [
    ('osu_latency', '', 1, 4194304, 23),          # OMB's default range; 5.x's extra size 0 is not required
    ('osu_allreduce', '', 4, 1048576, 19),        # reductions start at sizeof(float) in OMB 5.x
    ('osu_alltoall', '', 1, 1048576, 21),
    ('osu_mbw_mr', '1:65536', 1, 65536, 17),
    ('osu_latency', '8192', 1, 8192, 14),
    ('osu_bw', '64:4096', 64, 4096, 7),
])
def test_expected_sizes(benchmark, sizes, first, last, count):
    got = expected_sizes(benchmark, sizes)
    assert (got[0], got[-1], len(got)) == (first, last, count)


@pytest.mark.parametrize('sizes, option, rows', [
    ('4096', '4096:4096', [4096]), ('0:4', '0:4', [0, 1, 2, 4]), ('1K:4K', '1K:4K', [1024, 2048, 4096]),
    ('2:2', '2:2', [2])])
def test_our_benchmarks_take_one_size_or_a_range(sizes, option, rows):
    assert (bench.size_range(sizes), bench.expected_sizes(sizes)) == (option, rows)


@pytest.mark.parametrize('sizes', ['', '4:2', 'x', '1Q:2', '1:2:3'])
def test_our_benchmarks_refuse_sizes_naming_the_knob(sizes):
    with pytest.raises(ValueError, match='message_sizes must be SIZE or MIN:MAX'):
        bench.size_range(sizes)


def test_cases_and_layouts_parse_or_say_why():
    assert parse_case('is.B-4x1') == ('is', 'B', 4, 1, 'shm')
    assert parse_case('ft.B-2x8-loopback') == ('ft', 'B', 2, 8, 'loopback')
    assert parse_layout('8x2') == (8, 2)
    for bad in ('xx.B-4x1', 'is.b-4x1', 'is.B-4', 'is.B-4x1-smp', 'is.B-0x1'):
        with pytest.raises(ValueError, match='invalid'):
            parse_case(bad)


def test_npb_cases_are_the_papers_runs():
    cases = npb_cases()
    assert len(cases) == VARIANTS['NPB']
    assert cases['is.B-4x1'] == [[15, 34], ['000-fig18', '002-tab2', '002-fig18']]     # one run, two papers
    assert cases['ft.B-8x1'][0] == [32, 37, 34]
    assert 'ft.B-2x1' not in cases                                  # "FT does not run on 2 nodes" (002)
    square = {n * p for c in cases for _, _, n, p, _ in [parse_case(c)] if c[:2] in ('sp', 'bt')}
    assert square == {4, 16}                                        # SP and BT need a square count
    smp = [c for c in cases if c.endswith('2x8') or c.endswith('2x8-loopback')]
    assert len(smp) == 16 and all(cases[c] == [[21], ['001-fig6']] for c in smp)


def test_mvapich2_cap_warning_fails_the_run():
    # the line MVAPICH2 2.3.5-2.3.7 prints (ibv_param.c: "Warning, max ports per hca is %d, change %s in
    # ibv_param.h to override the option\n" with MAX_NUM_PORTS = 1) when MV2_NUM_PORTS=2 is capped
    line = 'Warning, max ports per hca is 1, change MAX_NUM_PORTS in ibv_param.h to override the option'
    reason = mvapich2.ignored_setting(f'# OSU MPI Bandwidth Test\n{line}\n')
    assert 'capped the ports per hca at 1' in reason and '-DMAX_NUM_PORTS=2' in reason
    assert mvapich2.ignored_setting('# OSU MPI Bandwidth Test v7.4\n1   0.5\n') is None


# -- where the families run, and why not -------------------------------------------------------------------

TESTBEDS = {'config': 'configs/testbeds.py'}


def test_every_family_is_listed_on_the_testbeds(reframe):
    proc = families(reframe, '-l', '--system', 'testbeds', **TESTBEDS)
    assert proc.returncode == 0, output(proc)
    listed = re.findall(r'^- (\w+)', proc.stdout, re.M)
    for family, count in VARIANTS.items():
        assert listed.count(family) == count, family


def test_no_environment_with_the_binaries_no_candidates_and_the_catalog_says_why(reframe):
    """On this machine no environment has OSU or NPB: the families are not candidates on `local`, and
    `ibrepro catalog` names the missing environment features."""
    if {'osu', 'npb'} & set(rfmconfig.tool_features(None)):
        pytest.skip('OSU or NPB binaries are on PATH: this test is about a machine without them')
    proc = families(reframe, '-l')
    assert proc.returncode == 0, output(proc)
    assert set(re.findall(r'^- (\w+)', proc.stdout, re.M)) & set(VARIANTS) == set()

    proc = reframe.ibrepro('catalog')
    assert proc.returncode == 0, output(proc)
    line = next(line for line in proc.stdout.splitlines() if 'not here:  OSULatency:' in line)
    assert 'needs 2 nodes (has 1)' in line and 'no OSU Micro-Benchmarks (to enable: make spack' in line
    line = next(line for line in proc.stdout.splitlines() if 'not here:  NPB %case=is.B-4x1:' in line)
    assert 'no NPB (to enable:' in line


def listed_cases(proc):
    return set(re.findall(r'^- (.+?) /[0-9a-f]{8}$', proc.stdout, re.M))


def test_selection_by_experiment_and_figure(reframe):
    def listed(tag):
        return listed_cases(families(reframe, '-l', '-t', tag, '--system', 'testbeds', **TESTBEDS))

    pci = {f'NPB %case={c}' for c, (rows, _) in npb_cases().items() if 37 in rows}
    assert len(pci) == 7
    assert listed('^exp37$') == {'OSULatency', 'OSUBandwidth %window=16', *pci}
    assert listed('^s002-fig2$') == {f'OSUBandwidth %window={w}' for w in (4, 16, 64)}
    assert listed('^s000-fig16$') == {'OSUCollective %case=osu_bcast-4x1',
                                      'MVAPICH2MultiRailCollective %benchmark=osu_bcast %ports=1',
                                      'MVAPICH2MultiRailCollective %benchmark=osu_bcast %ports=2'}
    # the MPI-level counterpart of the two-port verbs test
    assert listed('^exp7$') == {'MVAPICH2MultiRail %benchmark=osu_bw %ports=2'}
    assert listed('^s000-fig13$') == {'OSUBandwidth %window=64', 'MVAPICH2MultiRail %benchmark=osu_bw %ports=1',
                                      'MVAPICH2MultiRail %benchmark=osu_bw %ports=2'}


def test_requirements_are_visible_without_running(reframe):
    proc = families(reframe, '--describe', '-n',
                    'NPB%case=is.B-2x8-loopback|MVAPICH2MultiRail%benchmark=osu_bw%ports=2',
                    '--system', 'testbeds', **TESTBEDS)
    assert proc.returncode == 0, output(proc)
    described = {d['display_name']: d for d in json.loads(proc.stdout[proc.stdout.index('['):])}
    npb = described['NPB %case=is.B-2x8-loopback']
    assert (npb['num_nodes'], npb['ranks_per_node'], npb['channel']) == (2, 8, 'loopback')
    assert npb['required_environ_features'] == ['npb', 'mvapich2'] and npb['required_partition_features'] == ['ib']
    assert npb['valid_systems'] == ['+mpi +nodes2 +ib +cores8']
    assert npb['valid_prog_environs'] == ['+npb +mvapich2 -cuda']       # host memory: never a GPU environment
    rails = described['MVAPICH2MultiRail %benchmark=osu_bw %ports=2']
    assert rails['required_partition_features'] == ['ib', 'dual-port']
    assert rails['rail_policy'] == '2-port-striping'


@pytest.mark.parametrize('devices, ports, policy, env', [
    # the papers' HCA: one device with two ports
    (['mthca0'], 2, '2-port-striping', {'MV2_NUM_HCAS': '1', 'MV2_NUM_PORTS': '2', 'MV2_IBA_HCA': 'mthca0'}),
    # ConnectX-4 and later: each port is a device
    (['mlx5_0', 'mlx5_1'], 1, '2-port-striping', {'MV2_NUM_HCAS': '2', 'MV2_NUM_PORTS': '1',
                                                   'MV2_IBA_HCA': 'mlx5_0:mlx5_1'}),
    (['mlx5_0', 'mlx5_1'], 1, '1-port', {'MV2_NUM_HCAS': '1', 'MV2_NUM_PORTS': '1', 'MV2_IBA_HCA': 'mlx5_0'}),
    # two devices bound: fixed mapping (local process i on device i % 2), nothing striped
    (['mlx5_0', 'mlx5_1'], 1, '2-port-binding', {'MV2_NUM_HCAS': '2', 'MV2_NUM_PORTS': '1',
                                                  'MV2_IBA_HCA': 'mlx5_0:mlx5_1'}),
    # one device's two ports: naming it would select sharing (mvapich2.BINDING_UNNAMED)
    (['mlx4_0'], 2, '2-port-binding', {'MV2_NUM_PORTS': '2'}),
])
def test_mvapich2_rails_follow_the_partitions_devices_and_ports(devices, ports, policy, env):
    got = mvapich2.rail_settings(policy, devices, ports)
    sharing = {k: got.pop(k) for k in ('MV2_RAIL_SHARING_POLICY', 'MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD') if k in got}
    assert got == env
    assert (sharing == {'MV2_RAIL_SHARING_POLICY': 'USE_FIRST', 'MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD': '8192'}) \
        == (policy == '2-port-striping')
    assert (sharing == {'MV2_RAIL_SHARING_POLICY': 'FIXED_MAPPING',
                        'MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD': str(1 << 30)}) \
        == (policy == '2-port-binding' and ports == 1)
    with pytest.raises(ValueError, match='needs two rails; the partition has 1'):
        mvapich2.rail_settings('2-port-striping', ['mlx5_0'], 1)


def test_the_inline_case_inlines_the_papers_128_byte_payload():
    # MVAPICH2 2.3.7 ibv_param.c: rdma_max_inline_size = 128 + INLINE_THRESHOLD_ADJUST (40), compared with the
    # packet length (payload + header)
    assert mvapich2.PAPER_INLINE_SIZE - mvapich2.INLINE_HEADER == 128


def test_only_what_fits_is_a_case_and_the_catalog_says_why_the_rest_is_not(reframe):
    """A partition too small for a layout, without a second rail, or an environment without MVAPICH2: no test
    case there (nothing to skip in a nightly run); the catalog names exactly what is missing."""
    selection = '|'.join(['OSUCollective%case=osu_alltoall-8x1', 'OSUMultiPair%benchmark=osu_mbw_mr%pairs=8',
                          'MVAPICH2MultiRail%benchmark=osu_bw%ports=2', 'NPB%case=is.B-2x8-loopback',
                          'NPB%case=ft.A-4x2'])
    proc = families(reframe, '-lC', '-n', selection, '--system', 'testbeds:connectx-qdr', **TESTBEDS)
    assert proc.returncode == 0, output(proc)
    cases = set(re.findall(r'^- (.+?) /[0-9a-f]{8} @(\S+)$', proc.stdout, re.M))
    where = 'testbeds:connectx-qdr+{}'
    # fits: 2 nodes x 8 cores, two rails, MVAPICH2 where MVAPICH2 is needed
    assert cases == {('OSUMultiPair %benchmark=osu_mbw_mr %pairs=8', where.format('openmpi')),
                     ('OSUMultiPair %benchmark=osu_mbw_mr %pairs=8', where.format('mvapich2')),
                     ('MVAPICH2MultiRail %benchmark=osu_bw %ports=2', where.format('mvapich2')),
                     ('NPB %case=is.B-2x8-loopback', where.format('mvapich2'))}, proc.stdout

    from ibrepro import catalog, vocabulary
    sysconf = catalog.load_system(ROOT / 'configs' / 'testbeds.py', 'testbeds:connectx-qdr')
    sysconf['partitions'] = [p for p in sysconf['partitions'] if p['name'] == 'connectx-qdr']
    assert catalog.why_not_here(['+mpi +nodes8'], ['+osu'], sysconf) == [
        ('needs 8 nodes (has 2)', vocabulary.HINTS['nodes'][1])]
    assert catalog.why_not_here(['+mpi +nodes4 +cores2'], ['+npb'], sysconf) == [
        ('needs 4 nodes (has 2)', vocabulary.HINTS['nodes'][1])]
    assert catalog.why_not_here(['+mpi +nodes2 +ib +cores8'], ['+npb +mvapich2'], sysconf) == []
    no_mvapich2 = {**sysconf, 'partitions': [{**p, 'environs': [e for e in p['environs'] if e['name'] != 'mvapich2']}
                                             for p in sysconf['partitions']]}
    assert catalog.why_not_here(['+mpi +nodes2 +ib +cores8'], ['+npb +mvapich2'], no_mvapich2) == [
        vocabulary.missing('mvapich2')]


# -- the example cluster: a job script for every variant, without Slurm --------------------------------------

@pytest.fixture(scope='module')
def example_cluster(tmp_path_factory):
    """One dry run of every family on the site partition of the example cluster (srun need not exist)."""
    runner = ReFrameRunner(tmp_path_factory.mktemp('example-cluster'))
    proc = families(runner, '--dry-run', '--system', 'example-cluster:hdr', '--exec-policy=serial',
                    config='configs/example-cluster.py')
    assert proc.returncode == 0, output(proc)
    return runner, proc, last_report(runner)


def job_script(report, name, environ='mvapich2'):
    (case,) = [c for c in report if c['display_name'] == name and c['environ'] == environ]
    assert case['result'] == 'pass', case
    with open(f"{case['stagedir']}/rfm_job.sh") as fp:
        return fp.read()


@pytest.mark.integration
def test_dry_run_writes_a_job_script_for_every_variant(example_cluster):
    runner, proc, report = example_cluster
    assert report and all(c['result'] == 'pass' for c in report)        # nothing selected only to be skipped
    assert {c['display_name'] for c in report} == {c['display_name'] for c in report if c['environ'] == 'mvapich2'}
    assert len({c['display_name'] for c in report}) == sum(VARIANTS.values())
    for case in report:
        with open(f"{case['stagedir']}/rfm_job.sh") as fp:
            script = fp.read()
        assert f"#SBATCH --ntasks={case['num_tasks']}" in script
        assert f"#SBATCH --ntasks-per-node={case['num_tasks_per_node']}" in script
        assert '#SBATCH --exclusive' in script and '--partition=hdr' in script
        assert re.search(rf"^srun .*{re.escape(case['executable'])}", script, re.M), script
        assert case['binding'] and '--cpu-bind=' in script                 # bound, and the run report says how
        assert 'export PATH="/opt/ibrepro/views/' in script                # the environment's prefix


@pytest.mark.integration
def test_the_old_window_size_warns_and_reaches_only_a_family_without_its_own_window(tmp_path):
    """``-S window_size=8`` (the old name of ``window``): read, with a warning, where the family leaves its window
    unset (osu_mbw_mr); the window parameter of osu_bw wins; a family without a window gets no -W."""
    runner = ReFrameRunner(tmp_path)
    proc = families(runner, '--dry-run', '--system', 'example-cluster:hdr', '-n', 'OSUBandwidth%window=16',
                    '-n', 'OSUMultiPair%benchmark=osu_mbw_mr%pairs=8', '-n', 'OSULatency', '-S', 'window_size=8',
                    '--exec-policy=serial', config='configs/example-cluster.py')
    assert proc.returncode == 0, output(proc)
    assert "'window_size' is deprecated and goes in the next release: use 'window'" in proc.stdout, output(proc)
    report = last_report(runner)
    assert 'osu_mbw_mr -W 8\n' in job_script(report, 'OSUMultiPair %benchmark=osu_mbw_mr %pairs=8')
    assert 'osu_bw -W 16\n' in job_script(report, 'OSUBandwidth %window=16')
    assert 'osu_latency\n' in job_script(report, 'OSULatency')


@pytest.mark.parametrize('name, environ, lines', [
    ('OSULatency', 'mvapich2', ['#SBATCH --nodes=2', 'export SLURM_MPI_TYPE=pmi2',
                                'export MV2_ENABLE_AFFINITY=0', 'srun --cpu-bind=map_ldom:1 osu_latency\n']),
    ('OSULatency', 'openmpi', ['export SLURM_MPI_TYPE=pmix', 'srun --cpu-bind=map_ldom:1 osu_latency\n']),
    # one rail, the partition's first (two single-port HCAs): the papers measured one port
    ('OSULatency', 'mvapich2', ['export MV2_IBA_HCA=mlx5_0', 'export MV2_NUM_HCAS=1', 'export MV2_NUM_PORTS=1',
                                'export MV2_DEFAULT_PORT=1']),
    ('OSUBandwidth %window=16', 'openmpi', ['export UCX_NET_DEVICES=mlx5_0:1', 'export FI_VERBS_DEVICE_NAME=mlx5_0',
                                            'export OMPI_MCA_pml=ucx']),
    ('OSUBandwidth %window=16', 'mvapich2', ['#SBATCH --nodes=2', 'srun --cpu-bind=map_ldom:1 osu_bw -W 16\n']),
    ('OSUBiBandwidth %window=16', 'mvapich2', ['osu_bibw -W 16\n']),
    # several ranks per node: bound to CPUs of the rail's HCA (launch.near_cpus_commands), as the node lists them
    ('OSUIntraNode %benchmark=osu_latency', 'mvapich2',
     ['#SBATCH --ntasks=2\n', '#SBATCH --ntasks-per-node=2', '#SBATCH --nodes=1',
      'srun --cpu-bind=$ibrepro_bind osu_latency\n']),
    ('OSUMultiPair %benchmark=osu_mbw_mr %pairs=8', 'mvapich2',
     ['#SBATCH --ntasks=16', '#SBATCH --ntasks-per-node=8',
      'srun --distribution=block --cpu-bind=$ibrepro_bind osu_mbw_mr\n']),
    ('OSUCollective %case=osu_allreduce-8x1', 'mvapich2',
     ['#SBATCH --ntasks=8\n', '#SBATCH --nodes=8', 'osu_allreduce\n']),
    ('MVAPICH2MultiRail %benchmark=osu_bw %ports=1', 'mvapich2',
     ['export MV2_NUM_HCAS=1', 'export MV2_NUM_PORTS=1', 'export MV2_IBA_HCA=mlx5_0', 'osu_bw\n']),
    # the site's rails are two single-port ConnectX-6 (mlx5_0, mlx5_1): two HCAs of one port each
    ('MVAPICH2MultiRail %benchmark=osu_bibw %ports=2', 'mvapich2',
     ['export MV2_NUM_HCAS=2', 'export MV2_NUM_PORTS=1', 'export MV2_IBA_HCA=mlx5_0:mlx5_1',
      'export MV2_RAIL_SHARING_POLICY=USE_FIRST', 'export MV2_RAIL_SHARING_LARGE_MSG_THRESHOLD=8192', 'osu_bibw\n']),
    ('MVAPICH2MultiRailCollective %benchmark=osu_bcast %ports=2', 'mvapich2',
     ['#SBATCH --ntasks=4\n', '#SBATCH --nodes=4', 'export MV2_NUM_HCAS=2', 'osu_bcast\n']),
    ('MVAPICH2RailPolicy %policy=binding', 'mvapich2',
     ['#SBATCH --ntasks=4', '#SBATCH --ntasks-per-node=2', 'export MV2_NUM_PORTS=1',
      'srun --distribution=block --cpu-bind=$ibrepro_bind osu_mbw_mr\n']),
    ('MVAPICH2Inline %benchmark=osu_latency', 'mvapich2', ['export MV2_MAX_INLINE_SIZE=168']),
    ('NPB %case=is.B-2x8-loopback', 'mvapich2',
     ['#SBATCH --ntasks=16', '#SBATCH --ntasks-per-node=8', 'export MV2_USE_SHARED_MEM=0',
      'srun --distribution=block --cpu-bind=$ibrepro_bind is.B.x\n']),
    ('NPB %case=ft.A-4x2', 'openmpi', ['#SBATCH --ntasks=8\n', '#SBATCH --nodes=4',
                                       'srun --distribution=block --cpu-bind=$ibrepro_bind ft.A.x\n']),
    ('NPB %case=lu.B-8x2', 'mvapich2', ['#SBATCH --ntasks=16', '#SBATCH --nodes=8', 'lu.B.x\n']),
    ('NPB %case=sp.B-4x1', 'mvapich2', ['#SBATCH --ntasks=4\n', '#SBATCH --nodes=4', 'sp.B.x\n']),
])
@pytest.mark.integration
def test_job_scripts_carry_the_papers_parameters(example_cluster, name, environ, lines):
    _, _, report = example_cluster
    script = job_script(report, name, environ)
    for line in lines:
        assert line in script, script


@pytest.mark.integration
def test_job_script_without_extra_settings(example_cluster):
    _, _, report = example_cluster
    binding = job_script(report, 'MVAPICH2RailPolicy %policy=binding')
    # two single-port devices: bound by sharing's fixed mapping, the devices named, nothing striped
    assert 'export MV2_RAIL_SHARING_POLICY=FIXED_MAPPING\n' in binding
    assert 'export MV2_IBA_HCA=mlx5_0:mlx5_1\n' in binding and 'MV2_DEFAULT_PORT' not in binding
    shm = job_script(report, 'NPB %case=is.B-2x8')
    assert not {line for line in shm.splitlines() if 'MV2_' in line} - {
        'export MV2_ENABLE_AFFINITY=0',         # binding (srun binds: MVAPICH2's own affinity off) and the one rail
        'export MV2_IBA_HCA=mlx5_0', 'export MV2_NUM_HCAS=1', 'export MV2_NUM_PORTS=1', 'export MV2_DEFAULT_PORT=1'}


@pytest.mark.integration
def test_every_mpi_case_records_its_one_rail_unless_it_sets_its_own(example_cluster):
    _, _, report = example_cluster
    for case in report:
        own = case['display_name'].startswith(('MVAPICH2MultiRail', 'MVAPICH2RailPolicy'))
        assert case['mpi_rail'] == ('' if own else 'mlx5_0:1'), case['display_name']
        assert own or 'one rail, mlx5_0:1 (' in case['binding'], case['binding']


@pytest.mark.integration
def test_other_mpis_are_not_candidates_for_mvapich2_settings_and_npb_33_names(tmp_path):
    """Open MPI would ignore MV2_* silently: no such case runs in it; NPB 3.3.x binaries are named per process
    count."""
    runner = ReFrameRunner(tmp_path / 'home')
    proc = families(runner, '--dry-run', '--system', 'testbeds:connectx-qdr', '-p', 'openmpi',
                    '-n', 'MVAPICH2Inline%benchmark=osu_latency|NPB%case=is.B-2x8', '-S',
                    'NPB.npb_binary={program}.{cls}.{ranks}', config='configs/testbeds.py')
    assert proc.returncode == 0, output(proc)
    report = last_report(runner)
    assert {c['display_name'] for c in report} == {'NPB %case=is.B-2x8'}
    script = job_script(report, 'NPB %case=is.B-2x8', 'openmpi')
    assert 'srun --distribution=block --cpu-bind=$ibrepro_bind is.B.16\n' in script


def test_bad_npb_binary_pattern_says_what_is_allowed(reframe):
    proc = families(reframe, '--dry-run', '--system', 'testbeds:connectx-qdr', '-p', 'openmpi',
                    '-n', 'NPB%case=is.B-2x8$', '-S', 'npb_binary={prog}.x', config='configs/testbeds.py')
    assert proc.returncode == 1, output(proc)
    assert ("npb_binary '{prog}.x': KeyError('prog'); the placeholders are {program}, {cls} and {ranks}"
            in proc.stdout), output(proc)


# -- sanity and performance over real outputs ----------------------------------------------------------------

REPLAY_FAILURES = {
    'osu/7.4/osu_mbw_mr-2.txt': "expected one table for any benchmark, pairs=2, found 0 "
                                "(MPI Multiple Bandwidth / Message Rate {'pairs': 1",
    'osu/5.9/osu_bw-1.txt': 'invalid-ranks: OSU: "This test requires exactly two processes"',
    'osu/5.3/osu_latency.badopt_m-2.txt': "invalid-option: osu_latency rejected the command line: option 'm'",
    'osu/7.4/osu_allreduce.validate-2.txt': 'verification: OSU MPI Allreduce Latency: data validation Fail at '
                                            '16 bytes',
    'osu/7.4/osu_allreduce.mpich_timeout-4.txt': 'abort: OSU MPI Allreduce Latency: a rank was terminated: '
                                                 'Terminated (signal 15)',
    'osu/7.4/osu_latency.m8192-2.txt': 'incomplete message-size sweep, missing 16384, 32768',
    'mpi-failures/openmpi-4.1.4.root-refusal-2.txt':
        'Open MPI (mpirun.openmpi) refuses to run as root: the environment needs OMPI_ALLOW_RUN_AS_ROOT=1',
    'mpi-failures/openmpi-4.1.4.launches-mpich-5.0.2-2.txt':
        'the program was built with MPICH but started by a launcher that speaks PMIx',
    'npb/3.4.2/is.B-2.txt': "expected one table for IS, class=B, processes=4, found 0 "
                            "(IS {'class': 'B', 'processes': 2})",
    'npb/3.4.2/ft.A.niter4_verify_fail-2.txt': 'verification: NPB FT class U: Verification = UNSUCCESSFUL',
    'npb/3.4.2/is.A.nonpow2_abort-3.txt': 'invalid-ranks: NPB needs a power-of-two process count: '
                                          '"Number of processes (3) is not a power of two" '
                                          '(MPI_ABORT on rank 0, error code 16)',
}


@pytest.fixture(scope='module')
def replayed(tmp_path_factory):
    runner = ReFrameRunner(tmp_path_factory.mktemp('replay'))
    proc = runner('-r', '--nocolor', checks='tests/checks/replay.py')
    assert proc.returncode == 1, output(proc)          # the failure fixtures fail, as they must
    return {c['display_name'].split('=', 1)[1]: c for c in last_report(runner)}


@pytest.mark.parametrize('fixture', sorted(REPLAY_FAILURES))
@pytest.mark.integration
def test_sanity_diagnoses_real_failures(replayed, fixture):
    case = replayed[fixture]
    assert (case['result'], case['fail_phase']) == ('fail', 'sanity')
    assert REPLAY_FAILURES[fixture] in case['fail_reason'], case['fail_reason']
    assert case['fail_reason'].count('MPI_ABORT') <= 1


@pytest.mark.parametrize('fixture, variables', [
    ('osu/7.4/osu_latency-2.txt', [f'lat_{2 ** k}' for k in range(23)]),
    ('osu/5.3/osu_latency-2.txt', ['lat_0'] + [f'lat_{2 ** k}' for k in range(23)]),
    ('osu/7.4/osu_mbw_mr-4.txt', [f'{m}_{2 ** k}' for m in ('bw', 'msgrate') for k in range(17)]
     + ['bw_peak', 'msgrate_peak']),
    ('npb/3.4.2/is.A-4.txt', ['mops', 'time']),
    ('npb/3.3.1/ft.A-4.txt', ['mops', 'time']),
])
@pytest.mark.integration
def test_good_outputs_give_one_variable_per_size(replayed, fixture, variables):
    case = replayed[fixture]
    assert case['result'] == 'pass', case['fail_reason']
    values = {key.rsplit(':', 1)[1]: v for key, v in case['perfvalues'].items()}
    assert sorted(values) == sorted(variables)
    assert all(v[0] > 0 for v in values.values())
    units = {v[4] for v in values.values()}
    assert units <= {'us', 'MB/s', 'msg/s', 's', 'Mop/s'}
    if fixture.startswith('npb/3.4.2/is.A-4'):
        assert (values['time'][0], values['mops'][0]) == (1.22, 68.85)    # the fixture's printed numbers

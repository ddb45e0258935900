"""GPUDirect RDMA by PCIe distance (reframe-checks/gpu/gpudirect.py, osu_device.py): which GPU each side or MPI rank
uses, chosen on its node by the PCIe distance from its HCA (ibrepro.pcie_distance, in crafted sysfs trees as the
kernel lays them out), given to the program and recorded; a node without the GPU it promises fails the case; and the
job scripts the template's GPU partition generates.

No GPU and no RDMA device exist here: the sides are real processes (tests/programs/tcp_peer.py) run by the real pair
runner copied into a stage directory as the checks copy it, and the GPU's address reaches their command line as it
reaches perftest's ``--use_cuda_bus_id``.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, old_python, output
from ibrepro import gpu, pair, pcie_distance, topology
from test_fleet import _gpu
from test_gpu import DSP1, DSP2, RP, USP, _hca, report_of
from test_topology import write

PEER = str(Path(__file__).parent / 'programs' / 'tcp_peer.py')

NEAR = '0000:19:00.0'        # behind the HCA's own PCIe switch (DSP1 beside the HCA's DSP2): PIX
FAR = '0000:3b:00.0'         # under the other socket's host bridge: SYS


def node(root, gpus=('near', 'far')):
    """A node under ``root``: mlx5_0 on NUMA node 0 behind a PCIe switch, and its GPUs."""
    _hca(root, [RP, USP, DSP2, ('0000:1a:00.0', 32.0, 16, 32.0, 16)], '0')
    if 'near' in gpus:
        _gpu(root, [RP, USP, DSP1, (NEAR, 32.0, 16, 32.0, 16)])
    if 'far' in gpus:
        far = _gpu(root, [('0000:3a:00.0', 32.0, 16, 32.0, 16), (FAR, 32.0, 16, 32.0, 16)])
        write(far / 'numa_node', '1')
    return root


def test_the_gpus_of_a_node_by_distance_from_its_hca_nearest_first(tmp_path):
    node(tmp_path)
    found = pcie_distance.gpus_by_distance('mlx5_0', tmp_path, 'NVIDIA')
    assert [(g['address'], g['distance'], g['numa_node']) for g in found] == [(NEAR, 'PIX', 0), (FAR, 'SYS', 1)]
    # one rule: the node's topology says the same distances
    assert {g['name']: g['hca_distance'] for g in topology.read_sysfs(tmp_path)['gpus']} == {
        NEAR: {'mlx5_0': 'PIX'}, FAR: {'mlx5_0': 'SYS'}}
    assert pcie_distance.gpus_by_distance('mlx5_0', tmp_path, 'AMD') == []
    assert pcie_distance.gpus_by_distance('rxe0', tmp_path) == []        # no PCI function: no distance


def test_each_rail_publishes_its_gpus_only_when_a_side_uses_one(tmp_path):
    node(tmp_path)
    rail = pair.probe([['mlx5_0', 1]], str(tmp_path), 'NVIDIA')['rails'][0]
    assert rail['gpus'] == [{'address': NEAR, 'distance': 'PIX'}, {'address': FAR, 'distance': 'SYS'}]
    assert 'gpus' not in pair.probe([['mlx5_0', 1]], str(tmp_path))['rails'][0]


def _gpu_spec(**kw):
    return pair.check_spec({'version': 2, 'program': 'ib_write_bw', 'options': ['-F'], 'rails': [['mlx5_0', 1]],
                            'nodes': 2, 'gpu_options': ['--use_cuda_bus_id={gpu}'],
                            'flows': [{'id': 0, 'port': 18515, 'server': {'node': 1, 'rail': 0, 'gpu': 'near'},
                                       'client': {'node': 0, 'rail': 0, 'gpu': 'far'}}], **kw})


def test_a_gpu_side_gives_perftest_the_address_of_its_gpu(tmp_path):
    runner = pair.Runner(_gpu_spec(), tmp_path, nodes=[0, 1], log=lambda m: None)
    gpus = [{'address': NEAR, 'distance': 'PIX'}, {'address': FAR, 'distance': 'SYS'}]
    runner.info = {n: {'host': f'gn0{n}', 'rails': [{'address': f'198.18.0.{n + 1}', 'gpus': gpus}]} for n in (0, 1)}
    flow = runner.spec['flows'][0]
    assert runner.side_command(flow, 'server') == ['ib_write_bw', '-F', '-d', 'mlx5_0', '-i', '1', '-p', '18515',
                                                   f'--use_cuda_bus_id={NEAR}']
    assert runner.side_command(flow, 'client')[-2:] == [f'--use_cuda_bus_id={FAR}', '198.18.0.2']
    assert runner.gpu_for(flow, 'client') == {'address': FAR, 'distance': 'SYS', 'choice': 'far', 'nearest': 'PIX'}


@pytest.mark.parametrize('change, reason', [
    ({'gpu_options': []}, "'gpu_options' must be a list of strings, one with {gpu}"),
    ({'gpu_options': ['--use_cuda=0']}, "one with {gpu}"),
    ({'gpu_vendor': 'Intel'}, "'gpu_vendor' must be one of NVIDIA, AMD"),
])
def test_a_gpu_spec_without_a_usable_gpu_option_is_refused(change, reason):
    with pytest.raises(pair.SpecError, match=re.escape(reason)):
        _gpu_spec(**change)
    flows = _gpu_spec()['flows']
    flows[0]['server']['gpu'] = 'middle'
    with pytest.raises(pair.SpecError, match="server 'gpu' must be one of near, far, not 'middle'"):
        _gpu_spec(flows=flows)


def test_a_gpu_a_peer_published_goes_into_no_command_line_unchecked():
    hostile = {'host': 'gn01', 'cpus': [0], 'rails': [{'address': None, 'gpus': [
        {'address': '0000:19:00.0 --use_cuda=0; touch /tmp/x', 'distance': 'PIX'}]}]}
    assert pair._info_problem(hostile) == 'rail 0 gpus is not a list of PCI addresses and PCIe distances'
    hostile['rails'][0]['gpus'] = [{'address': NEAR, 'distance': 'NEAR'}]
    assert pair._info_problem(hostile)
    hostile['rails'][0]['gpus'] = [{'address': NEAR, 'distance': 'NODE or SYS'}]
    assert pair._info_problem(hostile) is None


def _stage(tmp_path, sysfs, choice, python=sys.executable, port=19460):
    """The runner (run by ``python``) and the distance rule copied into a stage directory as the checks copy them,
    one flow over mlx5_0 of two nodes played by one task, both sides in the memory of the ``choice`` GPU (real
    processes)."""
    stage = tmp_path / 'stage'
    stage.mkdir()
    shutil.copy(pair.__file__, stage / 'ibrepro_pair.py')
    shutil.copy(pcie_distance.__file__, stage / 'pcie_distance.py')
    side = {'rail': 0, 'gpu': choice}
    spec = {'version': 2, 'rails': [['mlx5_0', 1]], 'nodes': 2, 'timeout': 60, 'connect_timeout': 10,
            'wait_listen': False, 'cpu_sharing': True, 'sysfs': str(sysfs),
            'flows': [{'id': 0, 'port': port,
                       'server': {**side, 'node': 1, 'argv': [sys.executable, PEER, 'server', str(port), '{gpu}']},
                       'client': {**side, 'node': 0, 'argv': [sys.executable, PEER, 'client', str(port), '127.0.0.1',
                                                              '0.3', '{gpu}']}}]}
    (stage / 'flows.json').write_text(json.dumps(pair.check_spec(spec)))
    return subprocess.run([python, 'ibrepro_pair.py', 'flows.json'], cwd=stage, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k not in ('SLURM_PROCID', 'PMI_RANK')}), stage


def _sides(stage):
    return [json.loads((stage / f'flow-0.{side}.status.json').read_text()) for side in ('server', 'client')]


@pytest.mark.parametrize('choice, address, distance', [('near', NEAR, 'PIX'), ('far', FAR, 'SYS')])
def test_each_side_runs_in_the_memory_of_the_gpu_at_its_distance_and_records_it(tmp_path, choice, address, distance):
    # each test its own port: the tests may run at once (pytest-xdist)
    done, stage = _stage(tmp_path, node(tmp_path / 'sys'), choice, port=19461 if choice == 'near' else 19462)
    assert done.returncode == 0, done.stdout
    for status in _sides(stage):
        assert status['returncode'] == 0
        assert status['gpu'] == {'address': address, 'distance': distance, 'choice': choice, 'nearest': 'PIX'}
        assert status['command'][-1] == address                      # what the program was given


@pytest.mark.parametrize('gpus, reason', [
    (('near',), 'is to use the memory of the GPU farthest from mlx5_0, but every GPU of the node is at the same '
                'distance from mlx5_0 (PIX): there is no far GPU to measure'),
    ((), 'is to use the memory of the GPU farthest from mlx5_0, but the node shows no GPU near or far from mlx5_0'),
])
def test_a_node_without_the_gpu_it_promises_measures_nothing_and_says_why(tmp_path, gpus, reason):
    done, stage = _stage(tmp_path, node(tmp_path / 'sys', gpus), 'far')
    assert done.returncode == 1, done.stdout
    assert reason in json.loads((stage / 'failed-0.json').read_text())['reason']
    assert not list(stage.glob('flow-*.out'))           # never measured in host memory instead


@pytest.mark.skipif(not old_python('3.6'), reason='no Python 3.6 here (pyenv install 3.6)')
def test_the_gpu_choice_runs_under_python_3_6(tmp_path):
    done, stage = _stage(tmp_path, node(tmp_path / 'sys'), 'near', python=old_python('3.6'), port=19463)
    assert done.returncode == 0, done.stdout
    assert [s['gpu']['address'] for s in _sides(stage)] == [NEAR, NEAR]


def test_the_distance_rule_needs_at_most_python_3_6():
    vermin = Path(sys.executable).parent / 'vermin'
    if not vermin.exists():
        pytest.skip('vermin not installed (pip install -e .[test])')
    done = subprocess.run([str(vermin), '--no-tips', '--violations', '-t=3.6-', pcie_distance.__file__],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


#: What every two-node job of the template's GPU partition asks Slurm for: whole nodes, one task each, all GPUs.
GPU_JOB_LINES = ('#SBATCH --exclusive', '#SBATCH --nodes=2', '#SBATCH --ntasks-per-node=1', '#SBATCH --partition=gpu',
                 '#SBATCH --gpus-per-node=4')


def _gpu_site(tmp_path, far=True):
    template = (ROOT / 'configs' / 'example-cluster.py').read_text()
    text = template.replace('GPU_NODES = False ', 'GPU_NODES = True ')
    if not far:
        text = text.replace(" gpu_far_distance='SYS',", '')
    assert text != template and (far or "gpu_far_distance='" not in text)
    site = tmp_path / 'mysite.py'
    site.write_text(text)
    return str(site)


def test_the_template_gpu_partition_generates_gpudirect_job_scripts(reframe, tmp_path):
    """A dry run on the template's GPU partition: two exclusive nodes with their GPUs, one runner per node started
    by srun with the node's CPUs, each side's GPU chosen by distance on its node; host-memory verbs cases run once,
    with the plain perftest."""
    site = _gpu_site(tmp_path)
    proc = reframe('--dry-run', '-n', 'GpuDirectRdma', '--system', 'example-cluster', config=site)
    assert proc.returncode == 0, output(proc)
    cases = set(re.findall(r'(GpuDirectRdma %operation=\w+ %memory=[\w-]+) /\w+ @example-cluster:(\w+\+\w+)',
                           proc.stdout))
    assert cases == {(f'GpuDirectRdma %operation={op} %memory={m}', 'gpu+gpu')
                     for op in ('write_bw', 'read_lat') for m in ('host', 'gpu-near', 'gpu-far')}, proc.stdout
    (stage,) = [p.parent for p in reframe.home.rglob('GpuDirectRdma_*/flows.json')
                if json.loads(p.read_text())['program'] == 'ib_write_bw'
                and json.loads(p.read_text())['flows'][0]['server'].get('gpu') == 'near']
    text = (stage / 'rfm_job.sh').read_text()
    assert set(GPU_JOB_LINES) <= set(text.splitlines()), text
    assert text.splitlines()[-1] == ('srun --kill-on-bad-exit=1 --whole --cpu-bind=none python3 ibrepro_pair.py '
                                     'flows.json')
    spec = json.loads((stage / 'flows.json').read_text())
    assert spec['gpu_options'] == ['--use_cuda_bus_id={gpu}'] and spec['rails'] == [['mlx5_0', 1]]
    assert [spec['flows'][0][s]['gpu'] for s in ('server', 'client')] == ['near', 'near'] and spec['distinct_hosts']
    assert (stage / 'pcie_distance.py').read_text() == Path(pcie_distance.__file__).read_text()
    # the verbs families' host-memory cases: the plain perftest environment only, never twice
    verbs = reframe('-lC', '-n', 'PerftestBandwidth', '--system', 'example-cluster:gpu', config=site)
    assert verbs.returncode == 0, output(verbs)
    assert set(re.findall(r'@example-cluster:gpu\+(\w+)', verbs.stdout)) == {'verbs'}, verbs.stdout


def test_the_far_gpu_is_measured_only_where_the_partition_says_it_has_one(reframe, tmp_path):
    proc = reframe('--dry-run', '-n', 'GpuDirectRdma%operation=read_lat%memory=gpu-far', '--system',
                   'example-cluster', config=_gpu_site(tmp_path, far=False))
    assert proc.returncode == 0, output(proc)
    assert 'gives no gpu_far_distance' in proc.stdout and ' 1 skipped' in proc.stdout, proc.stdout


# -- an MPI rank in GPU memory (osu_bw -d cuda): pcie_distance.py as the rank's wrapper ----------------------------

SHOW_CUDA = [sys.executable, '-c',
             'import os; print(os.environ["CUDA_DEVICE_ORDER"], os.environ["CUDA_VISIBLE_DEVICES"])']


def _rank(tmp_path, sysfs, choice, **env):
    stage = tmp_path / 'stage'
    stage.mkdir(exist_ok=True)
    shutil.copy(pcie_distance.__file__, stage / 'pcie_distance.py')
    return subprocess.run([sys.executable, 'pcie_distance.py', '--sysfs', str(sysfs), '--device', 'mlx5_0', '--gpu',
                           choice, '--', *SHOW_CUDA], cwd=stage, capture_output=True, text=True, timeout=60,
                          env={'PATH': os.environ['PATH'], 'SLURM_PROCID': '1', **env})


@pytest.mark.parametrize('choice, address, distance, index', [('near', NEAR, 'PIX', 0), ('far', FAR, 'SYS', 1)])
def test_a_rank_runs_with_the_gpu_at_its_distance_as_its_only_cuda_device(tmp_path, choice, address, distance, index):
    """The node's two NVIDIA GPUs in PCI order are 0000:19 (index 0) and 0000:3b (index 1): the rank sees only the
    one chosen, and says which on stderr in the words the check reads back."""
    done = _rank(tmp_path, node(tmp_path / 'sys'), choice, CUDA_VISIBLE_DEVICES='0,1')
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ['PCI_BUS_ID', str(index)]
    (said,) = done.stderr.splitlines()
    host, rank, gpu, at, device, which = pcie_distance.RANK_GPU.match(said).groups()
    assert (rank, gpu, at, device, which) == ('1', address, distance, 'mlx5_0', choice)


@pytest.mark.parametrize('gpus, held, reason', [
    (('near',), None, 'no far GPU: every GPU of the node is at the same distance from mlx5_0 (PIX)'),
    ((), None, 'no far GPU: the node shows no GPU near or far from mlx5_0'),
    (('near', 'far'), '0', "the job holds '0' of the node's 2 GPUs (CUDA_VISIBLE_DEVICES)"),
])
def test_a_rank_without_the_gpu_it_promises_runs_nothing_and_says_why(tmp_path, gpus, held, reason):
    env = {} if held is None else {'CUDA_VISIBLE_DEVICES': held}
    done = _rank(tmp_path, node(tmp_path / 'sys', gpus), 'far', **env)
    assert done.returncode == 3 and done.stdout == '', done.stdout
    assert reason in done.stderr and not pcie_distance.RANK_GPU.match(done.stderr)


def test_the_template_gpu_partition_generates_osu_device_job_scripts(reframe, tmp_path):
    """OSU between GPU memories: the CUDA-aware environment only, two exclusive nodes with all their GPUs, each
    rank bound near the HCA and started through the distance rule; the host-memory OSU cases never run there."""
    site = _gpu_site(tmp_path)
    proc = reframe('--dry-run', '-n', 'OSUDevicePointToPoint', '--system', 'example-cluster', config=site)
    assert proc.returncode == 0, output(proc)
    cases = set(re.findall(r'(OSUDevicePointToPoint %benchmark=\w+ %gpu=\w+) /\w+ @example-cluster:(\w+\+[\w-]+)',
                           proc.stdout))
    assert cases == {(f'OSUDevicePointToPoint %benchmark={b} %gpu={g}', 'gpu+gpu-openmpi')
                     for b in ('osu_latency', 'osu_bw', 'osu_bibw') for g in ('near', 'far')}, proc.stdout
    (script,) = [p for p in reframe.home.rglob('OSUDevicePointToPoint_*/rfm_job.sh')
                 if 'osu_bw -d cuda' in p.read_text() and '--gpu far' in p.read_text()]
    text = script.read_text()
    assert {*GPU_JOB_LINES, 'export UCX_NET_DEVICES=mlx5_0:1'} <= set(text.splitlines()), text
    assert text.splitlines()[-1] == ('srun --cpu-bind=map_ldom:0 python3 pcie_distance.py --device mlx5_0 --gpu far '
                                     '-- osu_bw -d cuda D D'), text
    assert (script.parent / 'pcie_distance.py').read_text() == Path(pcie_distance.__file__).read_text()
    host = reframe('-lC', '-n', 'OSUBandwidth', '--system', 'example-cluster:gpu', config=site)
    assert host.returncode == 0, output(host)
    assert set(re.findall(r'@example-cluster:gpu\+([\w-]+)', host.stdout)) == {'openmpi', 'mvapich2'}, host.stdout


# -- the report: what distance costs ----------------------------------------------------------------------------

def _placement(distance, sides=('server on gn01', 'client on gn02')):
    return {side: {'address': NEAR if distance == 'PIX' else FAR, 'distance': distance, 'device': 'mlx5_0'}
            for side in sides}


def test_distance_costs_put_host_memory_the_nearest_and_the_farthest_gpu_side_by_side():
    """The arithmetic on chosen values (not measurements): the peak bandwidth, the latency at the smallest size, and
    the ratios to host memory and of far to near; OSU has no host-memory case of its own."""
    write = {'bw_65536': 10.0, 'bw_1048576': 12.0}
    cases = [('hdr', 'gpu', 'GpuDirectRdma', {'operation': 'write_bw', 'memory': 'host'}, write, {}),
             ('hdr', 'gpu', 'GpuDirectRdma', {'operation': 'write_bw', 'memory': 'gpu-near'},
              {'bw_65536': 9.0, 'bw_1048576': 11.0}, _placement('PIX')),
             ('hdr', 'gpu', 'GpuDirectRdma', {'operation': 'write_bw', 'memory': 'gpu-far'},
              {'bw_65536': 6.0, 'bw_1048576': 5.5}, _placement('SYS')),
             ('hdr', 'gpu', 'GpuDirectRdma', {'operation': 'read_lat', 'memory': 'host'}, {'lat_2': 2.0, 'lat_8': 3.0},
              {}),
             ('hdr', 'gpu', 'GpuDirectRdma', {'operation': 'read_lat', 'memory': 'gpu-far'}, {'lat_2': 3.0},
              _placement('SYS')),
             ('hdr', 'gpu-openmpi', 'OSUDevicePointToPoint', {'benchmark': 'osu_latency', 'gpu': 'near'},
              {'lat_1': 2.0}, _placement('PIX', ('rank 0 on gn01', 'rank 1 on gn02'))),
             ('hdr', 'gpu-openmpi', 'OSUDevicePointToPoint', {'benchmark': 'osu_latency', 'gpu': 'far'},
              {'lat_1': 2.5}, _placement('SYS', ('rank 0 on gn01', 'rank 1 on gn02'))),
             ('hdr', 'verbs', 'PerftestBandwidth', {'direction': 'uni'}, write, {})]
    rows = {(r['family'], r['operation']): r for r in gpu.distance_costs(cases)}
    assert set(rows) == {('GpuDirectRdma', 'write_bw'), ('GpuDirectRdma', 'read_lat'),
                         ('OSUDevicePointToPoint', 'osu_latency')}
    bw = rows['GpuDirectRdma', 'write_bw']
    assert (bw['metric'], bw['host']['value'], bw['near']['value'], bw['far']['value']) == ('bw', 12.0, 11.0, 6.0)
    assert (bw['near']['distance'], bw['far']['distance'], bw['host']['distance']) == ('PIX', 'SYS', None)
    assert bw['near_vs_host'] == 11.0 / 12.0 and bw['far_vs_host'] == 0.5 and bw['far_vs_near'] == 6.0 / 11.0
    lat = rows['GpuDirectRdma', 'read_lat']
    assert (lat['metric'], lat['host']['value'], lat['far_vs_host'], lat['near_vs_host']) == ('lat', 2.0, 1.5, None)
    osu = rows['OSUDevicePointToPoint', 'osu_latency']
    assert 'host' not in osu and osu['far_vs_near'] == 1.25 and osu['near_vs_host'] is None


def test_the_report_shows_what_distance_costs_and_escapes_what_a_run_stored(tmp_path):
    """A stored night with the three GpuDirectRdma write cases (values chosen for the arithmetic, not measured): the
    page's table has each beside its GPUs' distance and the ratios; a hostile distance is escaped, a malformed
    placement is left out with a problem line, not the report."""
    from ibrepro.report import render
    night = json.loads((ROOT / 'tests' / 'data' / 'fleet' / 'fattree-uplink-leaf1-spine1-25.report.json').read_text())
    base = dict(night['runs'][0]['testcases'][0])
    placements = {'host': {}, 'gpu-near': _placement('PIX'), 'gpu-far': _placement('<b>SYS</b>')}
    for i, (memory, peak) in enumerate((('host', 12.0), ('gpu-near', 11.0), ('gpu-far', 6.0))):
        name = f'GpuDirectRdma %operation=write_bw %memory={memory}'
        case = dict(base, name=name, display_name=name, unique_name=f'GpuDirectRdma_{i}', result='pass',
                    short_name=f'GpuDirectRdma_{i}abcdef0', operation='write_bw', memory=memory,
                    reference_index=['memory', 'operation'], gpu_placement=placements[memory],
                    fail_reason=None, fail_phase=None,
                    perfvalues={f'{base["system"]}:{base["partition"]}:bw_1048576': [peak, 0, None, None, 'MB/s',
                                                                                       'pass']})
        night['runs'][0]['testcases'].append(case)
    broken = dict(night['runs'][0]['testcases'][-1], name='GpuDirectRdma %operation=read_lat %memory=gpu-far',
                  operation='read_lat', unique_name='GpuDirectRdma_9', gpu_placement={'server': 'PIX'})
    night['runs'][0]['testcases'].append(broken)
    model = report_of(tmp_path, night)
    html, _ = render.render(model)
    table = re.search(r'<table id="gpudirect">.*?</table>', html, re.S).group(0)
    assert '<td class="n">12</td>' in table and '<td class="n">11 (PIX)</td>' in table
    assert '<td class="n">0.917</td>' in table and '<td class="n">0.500</td>' in table and '0.545' in table
    assert '&lt;b&gt;SYS&lt;/b&gt;' in table and '<b>SYS' not in table
    assert 'read_lat' not in table
    assert any('gpu_placement unreadable' in p and 'read_lat' in p for p in model['problems']), model['problems']

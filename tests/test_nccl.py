"""NCCL between GPUs (reframe-checks/gpu/nccl.py): nccl-tests outputs that sites published (tests/fixtures/nccl-tests,
its MANIFEST) read to their printed values, the path NCCL said it chose judged against what a partition promises,
and the job scripts the template's GPU partition generates."""

import json
import re
from pathlib import Path

import pytest

from conftest import ReFrameRunner, output
from ibrepro import catalog, nccl_transport, parsers
from test_gpudirect import _gpu_site
from test_osu_npb_families import last_report

NCCL = Path(__file__).parent / 'fixtures' / 'nccl-tests'


def _parsed(name):
    parsed = parsers.parse_file(NCCL / name)
    assert parsed.tool == 'nccl'          # detected, not told
    return parsed


def _value(parsed, variable):
    return dict((name, value) for name, value, _ in parsed.tables[0].metric_values())[variable]


def test_eight_gh200s_on_two_nodes_read_to_the_printed_values():
    parsed = _parsed('all-reduce-gh200-2x4-cscs.txt')
    table = parsed.table('all_reduce')
    assert table.params == {'gpus': 8, 'nodes': 2} and len(table.rows) == 25
    # 134217728 B: out of place 1916.4 us, busbw 122.57 GB/s (in place 123.11, not the metric)
    assert _value(parsed, 'bw_134217728') == 122570.0 and _value(parsed, 'lat_134217728') == 1916.4
    assert table.rows[-1]['busbw_inplace_mbps'] == 123110.0 and table.rows[-1]['wrong'] == 0
    assert _value(parsed, 'lat_8') == 17.93 and _value(parsed, 'bw_8') == 0.0
    assert parsed.meta['avg_busbw_gbps'] == 19.7866
    assert [(r['rank'], r['host'], r['device'], r['bus']) for r in parsed.meta['ranks'][3:5]] == [
        (3, 'nid005471', 3, '0039:01:00'), (4, 'nid005487', 0, '0009:01:00')]
    assert parsed.meta['ranks'][0]['gpu'] == 'NVIDIA GH200 120GB'


def test_the_same_nodes_without_their_network_hook_are_as_slow_as_the_page_says():
    fast, slow = _parsed('all-reduce-gh200-2x4-cscs.txt'), _parsed('all-reduce-gh200-2x4-cscs-no-cxi-hook.txt')
    assert _value(slow, 'bw_134217728') == 5430.0 and slow.meta['avg_busbw_gbps'] == 1.58767
    assert 22 < _value(fast, 'bw_134217728') / _value(slow, 'bw_134217728') < 23


def test_the_2_18_header_with_its_wider_columns_and_version_line():
    parsed = _parsed('all-reduce-gh200-2x1-sarus.txt')
    assert parsed.version == '2.18.2' and parsed.tables[0].params == {'gpus': 2, 'nodes': 2}
    assert parsed.tables[0].sizes() == [1 << n for n in range(20, 28)]
    assert _value(parsed, 'bw_134217728') == 22860.0 and _value(parsed, 'lat_1048576') == 339.61


def test_open_mpi_tags_are_removed_and_the_empty_rows_left_out():
    parsed = _parsed('all-reduce-t4-2x1-efa-tagged.txt')
    table = parsed.tables[0]
    assert table.sizes()[:2] == [4, 8] and table.sizes()[-1] == 1 << 30
    assert table.notes == ['2 row(s) of size 0 left out']
    assert parsed.meta['nccl_version'] == '2.12.7+cuda11.4' and parsed.meta['networks'] == ['AWS Libfabric']
    assert parsed.meta['channels'] == {'NET/AWS Libfabric/0': 8}
    assert parsed.meta['affinity'] == ['test-nccl-efa-worker-0 GPU 0: ff,ffff0000,00ffffff',
                                       'test-nccl-efa-worker-1 GPU 0: ffffff00,0000ffff,ff000000']
    assert {r['host'] for r in parsed.meta['ranks']} == {'test-nccl-efa-worker-0', 'test-nccl-efa-worker-1'}


# -- the path NCCL chose ------------------------------------------------------------------------------------------

def test_a_run_that_sent_over_another_network_did_not_measure_the_fabric():
    meta = _parsed('all-reduce-t4-2x1-efa-tagged.txt').meta
    said = nccl_transport.problem(meta, nodes=2)
    assert 'NCCL sent over AWS Libfabric, not IB' in said and 'fabric was not measured' in said
    # where the partition's network is that one, it passes; GPUDirect RDMA promised, its channels lack GDRDMA
    assert nccl_transport.problem(meta, nodes=2, network='AWS Libfabric') == ''
    gdr = nccl_transport.problem(meta, nodes=2, network='AWS Libfabric', gpudirect=True)
    assert gdr.startswith('8 channel(s) via NET/AWS Libfabric/0 without GDRDMA')


def test_roce_through_the_sharp_plugin_is_nccls_ib_transport():
    meta = _parsed('all-reduce-p40-2x1-roce-koordinator.txt').meta
    assert meta['networks'] == ['IBext_v8'] and meta['net_devices'] == ['IB: [0]mlx5_2:1/RoCE [RO]']
    assert nccl_transport.problem(meta, nodes=2) == ''
    # its author cut the channel lines: nothing says whether GPU memory went by GPUDirect RDMA
    assert 'no "via NET/..." line' in nccl_transport.problem(meta, nodes=2, gpudirect=True)
    assert 'not AWS Libfabric' in nccl_transport.problem(meta, nodes=2, network='AWS Libfabric')


def test_a_run_across_nodes_that_says_nothing_of_its_path_is_not_taken_for_the_fabric():
    meta = _parsed('all-reduce-gh200-2x4-cscs.txt').meta
    assert 'NCCL said nothing of the network it used' in nccl_transport.problem(meta, nodes=2)
    assert nccl_transport.problem(meta, nodes=1) == ''       # inside a node no network is promised


def test_the_summary_parts_the_networks_channels_from_the_nodes_own():
    meta = {'networks': ['IB'], 'channels': {'NET/IB/0/GDRDMA': 4, 'P2P/IPC': 6, 'SHM/direct/direct': 2}}
    said = nccl_transport.summary(meta)
    assert said['network_channels'] == {'NET/IB/0/GDRDMA': 4}
    assert said['node_channels'] == {'P2P/IPC': 6, 'SHM/direct/direct': 2}
    assert nccl_transport.problem(meta, nodes=2, gpudirect=True) == ''
    mixed = {'networks': ['IB'], 'channels': {'NET/IB/0/GDRDMA': 4, 'NET/IB/1': 2}}
    assert nccl_transport.problem(mixed, nodes=2, gpudirect=True).startswith('2 channel(s) via NET/IB/1 without')


# -- what fails an output (the real CSCS output, changed where said) ------------------------------------------

CSCS = (NCCL / 'all-reduce-gh200-2x4-cscs.txt').read_text()


@pytest.mark.parametrize('change, kind, reason', [
    (lambda t: t.replace('# Out of bounds values : 0 OK', '# Out of bounds values : 3 FAILED'), 'verification',
     '3 out-of-bounds values'),
    (lambda t: re.sub(r'(   65536 .*?)      0\n', r'\1      7\n', t, count=1), 'verification',
     'wrong elements at 1 size(s), first 65536 B'),
    (lambda t: t.split('     2097152 ')[0], 'incomplete', 'stops after 1048576 B'),
])
def test_a_wrong_or_cut_output_fails_saying_why(change, kind, reason):
    text = change(CSCS)
    assert text != CSCS
    with pytest.raises(parsers.BenchmarkFailed) as info:
        parsers.parse_text(text, source='out')
    assert info.value.kind == kind and reason in info.value.reason, info.value


def test_nccls_own_failure_line_is_the_reason():
    # a crafted line in the form nccl-tests' NCCLCHECK prints ("<host>: Test NCCL failure <file>:<line> '<error>'")
    text = CSCS.split('     2097152 ')[0] + 'nid005471: Test NCCL failure common.cu:1279 \'unhandled system error\'\n'
    with pytest.raises(parsers.BenchmarkFailed) as info:
        parsers.parse_text(text, source='out')
    assert info.value.kind == 'abort' and 'Test NCCL failure common.cu:1279' in info.value.reason


# -- the catalog and the job scripts --------------------------------------------------------------------------

def test_the_catalog_row_names_the_tool_and_what_it_continues():
    row = catalog.experiment(46)
    assert row['tool'] == 'nccl' and row['status'] == 'encoded' and row['continues'] == [12, 14, 30]


def test_the_template_gpu_partition_generates_nccl_job_scripts(reframe, tmp_path):
    """One rank per GPU on one node and on two, all the node's GPUs in each job, no CPU binding (NCCL pins its
    threads near each GPU), NCCL saying its path; only the environment with nccl-tests built for CUDA."""
    site = _gpu_site(tmp_path)
    proc = reframe('--dry-run', '-n', 'NcclBusBandwidth', '--system', 'example-cluster', config=site)
    assert proc.returncode == 0, output(proc)
    cases = set(re.findall(r'(NcclBusBandwidth %collective=\w+ %nodes=\d) /\w+ @example-cluster:(\w+\+[\w-]+)',
                           proc.stdout))
    assert cases == {(f'NcclBusBandwidth %collective={c} %nodes={n}', 'gpu+gpu-openmpi')
                     for c in ('all_reduce', 'sendrecv') for n in (1, 2)}, proc.stdout
    scripts = {p.parent.name: p.read_text() for p in reframe.home.rglob('NcclBusBandwidth_*/rfm_job.sh')}
    (two,) = [t for t in scripts.values() if 'sendrecv_perf' in t and '--nodes=2' in t]
    lines = two.splitlines()
    assert {'#SBATCH --exclusive', '#SBATCH --nodes=2', '#SBATCH --ntasks=8', '#SBATCH --ntasks-per-node=4',
            '#SBATCH --partition=gpu', '#SBATCH --gpus-per-node=4', 'export NCCL_DEBUG=INFO',
            'export NCCL_DEBUG_SUBSYS=INIT,NET', 'export SLURM_MPI_TYPE=pmix'} <= set(lines), two
    assert lines[-1] == 'srun --whole --cpu-bind=none sendrecv_perf -b 8 -e 1073741824 -f 2 -g 1', two
    described = reframe('--describe', '-n', 'NcclBusBandwidth', '--system', 'example-cluster', config=site)
    jobs = json.loads(described.stdout[described.stdout.index('['):])
    assert {c['display_name']: c['job_nodes'] for c in jobs} == {     # what a CI job of one case asks Slurm for
        f'NcclBusBandwidth %collective={c} %nodes={n}': n for c in ('all_reduce', 'sendrecv') for n in (1, 2)}
    (one,) = [t for t in scripts.values() if 'all_reduce_perf' in t and '--nodes=1' in t]
    assert '#SBATCH --ntasks=4' in one.splitlines() and '#SBATCH --gpus-per-node=4' in one.splitlines(), one


# -- the family's sanity on the real outputs (tests/checks/nccl_replay.py: `cat` of each, run by ReFrame) ----------

@pytest.fixture(scope='module')
def replayed(tmp_path_factory):
    runner = ReFrameRunner(tmp_path_factory.mktemp('nccl-replay'))
    proc = runner('-r', '--nocolor', checks='tests/checks/nccl_replay.py')
    assert proc.returncode == 1, output(proc)          # four of the five fail, as they must
    return {c['display_name'].split('=', 1)[1]: c for c in last_report(runner)}


@pytest.mark.parametrize('name, reason', [
    ('all-reduce-gh200-2x4-cscs.txt', 'NCCL said nothing of the network it used'),
    ('all-reduce-gh200-2x1-sarus.txt', 'NCCL said nothing of the network it used'),
    ('all-reduce-t4-2x1-efa-tagged.txt', 'NCCL sent over AWS Libfabric, not IB'),
    ('all-reduce-p40-2x1-roce-koordinator.txt', '0 of 2 ranks said their GPU'),
])
@pytest.mark.integration
def test_a_run_whose_path_or_gpus_are_not_what_the_case_promises_fails(replayed, name, reason):
    case = replayed[name]
    assert (case['result'], case['fail_phase']) == ('fail', 'sanity') and reason in case['fail_reason'], case


@pytest.mark.integration
def test_a_run_over_the_promised_network_gives_each_size_its_bus_bandwidth(replayed):
    case = replayed['all-reduce-t4-2x1-efa-tagged.txt as efa']
    assert case['result'] == 'pass', case['fail_reason']
    values = {key.rsplit(':', 1)[1]: v for key, v in case['perfvalues'].items()}
    assert sorted(values) == sorted([f'{m}_{1 << k}' for m in ('bw', 'lat') for k in range(2, 31)] + ['bw_peak'])
    assert values['bw_peak'][0] == max(v[0] for k, v in values.items() if k.startswith('bw_') and k != 'bw_peak')
    assert values['bw_1073741824'][0] == 3110.0 and values['bw_1073741824'][4] == 'MB/s'   # 3.11 GB/s printed
    assert values['lat_1073741824'][0] == 344981.0 and values['lat_1073741824'][4] == 'us'
    assert case['nccl_transport']['network_channels'] == {'NET/AWS Libfabric/0': 8}
    assert len(case['nccl_transport']['affinity']) == 2       # the binding that happened: NCCL's, per GPU
    assert sorted(r['host'] for r in case['gpu_ranks'].values()) == ['test-nccl-efa-worker-0',
                                                                      'test-nccl-efa-worker-1']

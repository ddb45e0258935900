"""GPU nodes: host-device copies beside the PCIe link each GPU trained to (ibrepro.gpu, reframe-checks/gpu), from
the real nvbandwidth 0.8 outputs of one H200 (tests/fixtures/nvbandwidth/0.8-h200, MANIFEST.md) and crafted sysfs
trees."""

import re
from pathlib import Path

import pytest

from conftest import ROOT, output
from ibrepro import gpu, limits, parsers, topology
from test_fleet import _gpu

FIXTURES = Path(__file__).parent / 'fixtures' / 'nvbandwidth' / '0.8-h200'
H200 = ('0000:00:05.0', 32.0, 16, 32.0, 16), ('0000:00:06.0', 32.0, 16, 32.0, 16)   # root port, the GPU (sysfs)


def parsed(name):
    return parsers.parse_text((FIXTURES / name).read_text(), source=name, tool='nvbandwidth')


@pytest.mark.parametrize('name, h2d, d2h', [
    ('nvbandwidth-h200.txt', 55480.0, 55330.0),          # MANIFEST: 55.48 and 55.33 GB/s as printed
    ('nvbandwidth-h200.json', 55503.1, 55372.5),         # the JSON run's own values
])
def test_each_gpu_is_a_variable_of_its_copy(name, h2d, d2h):
    out = parsed(name)
    assert gpu.devices(out) == {0: ('NVIDIA H200', '0000:00:06.0')}
    assert gpu.copy_values(out, 'h2d-ce') == [('bw_gpu0', h2d)]
    assert gpu.copy_values(out, 'd2h-ce') == [('bw_gpu0', d2h)]


def test_a_copy_the_output_lacks_is_said_with_its_test_case():
    out = parsed('nvbandwidth-h200-b64-i10.txt')        # -t host_to_device_memcpy_ce device_to_host_memcpy_ce
    assert gpu.copy_values(out, 'h2d-ce') == [('bw_gpu0', 55380.0)]          # SUM ... 55.38
    with pytest.raises(gpu.GpuError, match='did not measure host_to_device_memcpy_sm'):
        gpu.copy_values(out, 'h2d-sm')


def test_the_h200_copy_is_88_percent_of_its_gen5_x16_link(tmp_path):
    line = (FIXTURES / 'sysfs-gpu-pcie-link.txt').read_text()
    assert line.startswith('0000:00:06.0 class=0x030200 vendor=0x10de cur=32.0 GT/s PCIe/x16 max=32.0 GT/s PCIe/x16')
    _gpu(tmp_path, H200)
    out = parsed('nvbandwidth-h200.txt')
    beside = gpu.beside_links(gpu.copy_values(out, 'h2d-ce'), out, topology.read_sysfs(tmp_path))
    limit = limits.limit_MBps('pcie:gen5:x16')               # 32 GT/s x 16 x 128/130 / 8: 63.0 GB/s
    assert beside == {'gpu0': {'name': 'NVIDIA H200', 'address': '0000:00:06.0', 'value_MBps': 55480.0,
                               'link': 'pcie:gen5:x16', 'limit_MBps': round(limit, 1),
                               'fraction': round(55480.0 / limit, 4), 'degraded': False}}
    assert f'{beside["gpu0"]["fraction"]:.0%}' == '88%' and round(limit / 1000, 1) == 63.0


def test_a_gpu_trained_at_gen4_x8_is_beside_that_link_and_degraded(tmp_path):
    _gpu(tmp_path, [('0000:00:05.0', 32.0, 16, 32.0, 16), ('0000:00:06.0', 16.0, 8, 32.0, 16)])
    out = parsed('nvbandwidth-h200.txt')
    (link,) = gpu.beside_links([('bw_gpu0', 14200.0)], out, topology.read_sysfs(tmp_path)).values()
    assert (link['link'], link['degraded']) == ('pcie:gen4:x8', True)
    assert link['limit_MBps'] == round(limits.limit_MBps('pcie:gen4:x8'), 1)


def test_the_narrowest_link_up_to_the_root_port_limits_the_gpu(tmp_path):
    # the GPU at Gen5 x16 behind a switch whose uplink trained at Gen5 x8: the uplink is what copies cross
    _gpu(tmp_path, [('0000:00:01.0', 32.0, 8, 32.0, 16), ('0000:01:00.0', 32.0, 8, 32.0, 16),
                    ('0000:02:00.0', 32.0, 16, 32.0, 16), ('0000:00:06.0', 32.0, 16, 32.0, 16)])
    (g,) = topology.read_sysfs(tmp_path)['gpus']
    assert topology.gpu_link(g) == {'spec': 'pcie:gen5:x8', 'limit_MBps': limits.limit_MBps('pcie:gen5:x8'),
                                    'lower': '0000:01:00.0', 'degraded': True}


def test_a_gpu_sysfs_does_not_show_keeps_its_address_and_no_link(tmp_path):
    out = parsed('nvbandwidth-h200.json')
    (link,) = gpu.beside_links(gpu.copy_values(out, 'h2d-ce'), out, {'gpus': []}).values()
    assert link['address'] == '0000:00:06.0' and link['link'] is None and link['fraction'] is None


def test_the_template_gpu_partition_job_script(reframe, tmp_path):
    """A dry run on the template's GPU partition, switched on as its SITE marker says: one exclusive process with
    the node's GPUs, the node's PCIe state recorded before the copies; no GPU case on the partition without GPUs
    (nor any partition while it is off)."""
    template = (ROOT / 'configs' / 'example-cluster.py').read_text()
    assert template.count('GPU_NODES = False ') == 1
    off = reframe('--dry-run', '-n', 'GpuHostDevice', '--system', 'example-cluster',
                  config='configs/example-cluster.py')
    assert off.returncode == 0 and '@example-cluster' not in off.stdout, output(off)
    site = tmp_path / 'mysite.py'
    site.write_text(template.replace('GPU_NODES = False ', 'GPU_NODES = True '))
    proc = reframe('--dry-run', '-n', 'GpuHostDevice%copy=h2d-ce', '--system', 'example-cluster', config=str(site))
    assert proc.returncode == 0, output(proc)
    assert re.findall(r'@example-cluster:(\w+)\+(\w+)', proc.stdout) and \
        set(re.findall(r'@example-cluster:(\w+)\+(\w+)', proc.stdout)) == {('gpu', 'gpu')}, proc.stdout
    (script,) = reframe.home.rglob('GpuHostDevice_*/rfm_job.sh')
    # the night: both copy-engine directions, on the GPU partition only
    night = reframe('-lC', '--mode', 'nightly', '-n', 'GpuHostDevice', '--system', 'example-cluster', config=str(site))
    assert night.returncode == 0, output(night)
    assert sorted(re.findall(r'^- (GpuHostDevice %copy=\S+) /[0-9a-f]{8} @(\S+)$', night.stdout, re.M)) == [
        ('GpuHostDevice %copy=d2h-ce', 'example-cluster:gpu+gpu'),
        ('GpuHostDevice %copy=h2d-ce', 'example-cluster:gpu+gpu')], night.stdout
    text = script.read_text()
    assert '#SBATCH --exclusive' in text and '#SBATCH --gpus-per-node=4' in text and '#SBATCH --partition=gpu' in text
    assert '-m ibrepro.cli topology --json > node-topology.json' in text
    assert 'case "${SLURM_JOB_PARTITION-}" in gpu) ;;' in text          # it checks where it landed, first
    assert text.splitlines()[-1] == ('srun --whole --cpu-bind=none nvbandwidth -j -t host_to_device_memcpy_ce '
                                     '-b 512 -i 3')


def report_of(tmp_path, night):
    """The report model of one stored night (a ReFrame run report, as a dict), read as `ibrepro report` reads it."""
    import json

    from test_report_render import _model
    path = tmp_path / 'night.json'
    path.write_text(json.dumps(night))
    return _model(path, tmp_path)


def test_the_report_puts_each_gpu_beside_its_link(tmp_path):
    """A stored night with a GpuHostDevice case (its gpu_links from the real H200 output and its sysfs): the page and
    summary.md show 55.48 GB/s as 88 % of 63.0 GB/s; a hostile GPU name is escaped."""
    import json

    from ibrepro.report import render
    _gpu(tmp_path / 'sys', H200)
    out = parsed('nvbandwidth-h200.txt')
    values = gpu.copy_values(out, 'h2d-ce')
    links = gpu.beside_links(values, out, topology.read_sysfs(tmp_path / 'sys'))
    links['gpu1'] = {**links['gpu0'], 'name': '<script>alert(1)</script>', 'link': None, 'limit_MBps': None,
                     'fraction': None}
    night = json.loads((ROOT / 'tests' / 'data' / 'fleet' / 'fattree-uplink-leaf1-spine1-25.report.json').read_text())
    case = dict(night['runs'][0]['testcases'][0])
    case.update({'name': 'GpuHostDevice %copy=h2d-ce', 'display_name': 'GpuHostDevice %copy=h2d-ce',
                 'unique_name': 'GpuHostDevice_0', 'short_name': 'GpuHostDevice_3f2a1c4d', 'result': 'pass',
                 'gpu_links': links, 'job_nodelist': ['gn01'], 'fail_reason': None, 'fail_phase': None})
    night['runs'][0]['testcases'].append(case)
    html, md = render.render(report_of(tmp_path, night))
    row = re.search(r'<table id="gpu-links">.*?</table>', html, re.S).group(0)
    assert '<td class="n">55.48</td>' in row and 'pcie:gen5:x16' in row and '<td class="n">63.0</td>' in row
    assert '<td class="n">88 %</td>' in row and '&lt;script&gt;' in row and '<script>' not in row
    # one figure per node, all its GPUs in it, embedded
    (figure,) = re.findall(r'<img class="gpu-figure" alt="GPUs of gn01 beside their PCIe links" src="([^"]+)">', html)
    assert figure.startswith('data:image/png;base64,')
    assert "gn01 GPU gpu0 0000:00:06.0, GpuHostDevice %copy=h2d-ce: 55.48 GB/s of 63.0 GB/s (pcie:gen5:x16): 88 %" \
        in md.replace('\u200b', '')


def test_ibrepro_topology_lists_the_gpus_and_their_limiting_link(tmp_path):
    """A GPU node without an RDMA device (the shared H200 machine's sysfs), and one whose GPU trained at Gen4 x8."""
    import subprocess
    import sys
    _gpu(tmp_path / 'h200', H200)
    _gpu(tmp_path / 'x8', [('0000:00:05.0', 32.0, 16, 32.0, 16), ('0000:00:06.0', 16.0, 8, 32.0, 16)])
    for name, want in (('h200', 'pcie:gen5:x16 at 0000:00:06.0'), ('x8', 'pcie:gen4:x8 at 0000:00:06.0')):
        proc = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'topology', '--sysfs', str(tmp_path / name)],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith('no RDMA devices found') and 'GPUs (host-device copies' in proc.stdout
        row = next(line for line in proc.stdout.splitlines() if line.startswith('0000:00:06.0'))
        assert want in row and ('DEGRADED' in row) == (name == 'x8'), proc.stdout
    assert '63,015 MB/s' in subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'topology', '--sysfs',
                                            str(tmp_path / 'h200')], capture_output=True, text=True, cwd=ROOT).stdout


# a root port, a PCIe switch (upstream port, downstream ports) and a second switch below it: (address, GT/s, x, ...)
RP, USP, DSP1, DSP2 = (('0000:16:00.0', 32.0, 16, 32.0, 16), ('0000:17:00.0', 32.0, 16, 32.0, 16),
                       ('0000:18:00.0', 32.0, 16, 32.0, 16), ('0000:18:01.0', 32.0, 16, 32.0, 16))


def _hca(root, chain, numa='0'):
    from test_topology import ACTIVE, ib_device, pcie_chain, write
    fn = pcie_chain(root, chain)
    write(fn / 'numa_node', numa)
    ib_device(root, 'mlx5_0', {1: (*ACTIVE, '400 Gb/sec (4X NDR)', 'InfiniBand')}, function=fn)


@pytest.mark.parametrize('hca_chain, numa, distance', [
    ([RP, USP, DSP2, ('0000:1a:00.0', 32.0, 16, 32.0, 16)], '0', 'PIX'),            # the GPU's own switch
    ([RP, USP, DSP2, ('0000:1b:00.0', 32.0, 16, 32.0, 16), ('0000:1c:00.0', 32.0, 16, 32.0, 16),
      ('0000:1d:00.0', 32.0, 16, 32.0, 16)], '0', 'PXB'),                          # behind a second switch
    ([('0000:16:02.0', 32.0, 16, 32.0, 16), ('0000:1e:00.0', 32.0, 16, 32.0, 16)], '0', 'PHB'),  # another root port
    ([('0000:3a:00.0', 32.0, 16, 32.0, 16), ('0000:3b:00.0', 32.0, 16, 32.0, 16)], '0', 'NODE'),  # another host bridge
    ([('0000:3a:00.0', 32.0, 16, 32.0, 16), ('0000:3b:00.0', 32.0, 16, 32.0, 16)], '1', 'SYS'),   # the other socket
])
def test_each_gpu_knows_how_far_each_hca_is_and_the_fleet_names_a_far_one(tmp_path, hca_chain, numa, distance):
    from ibrepro.fleet import sweep as fleet_sweep
    _gpu(tmp_path, [RP, USP, DSP1, ('0000:19:00.0', 32.0, 16, 32.0, 16)])
    _hca(tmp_path, hca_chain, numa)
    topo = topology.read_sysfs(tmp_path)
    (g,) = topo['gpus']
    assert g['hca_distance'] == {'mlx5_0': distance}
    faults, _ = fleet_sweep.judge('gn01', topo, {'gpu_hca_distance': 'PIX'})
    far = [f for f in faults if f['fault'] == 'GPU far from its HCA']
    assert bool(far) == (distance != 'PIX')
    if far:
        assert far[0]['component'] == 'gn01:gpu:0000:19:00.0' and f'mlx5_0 at {distance}' in far[0]['evidence']
    assert f'mlx5_0 {distance}' in topology.format_topology(topo)

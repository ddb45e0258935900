"""ibrepro.fleet, the per-node state sweep: each node's ports, PCIe links, NUMA node, firmware and error counters
judged against the partition, physics and the fleet (sysfs trees laid out as Linux does, in tmp dirs), and the
FleetSweep check run for real by ReFrame on this machine against such a tree."""

import json
import os
import re
from pathlib import Path

import pytest

from conftest import output
from ibrepro import topology
from ibrepro.fleet import sweep as fleet_sweep
from ibrepro.rfm import launch
from test_topology import ACTIVE, DOWN, ib_device, pci_function, pcie_chain, write

HDR = '200 Gb/sec (4X HDR)'
EXPECTED = {'rdma_devices': ['mlx5_0'], 'ib_ports': 1, 'expected_port': {'width': 4, 'speed': 'HDR'},
            'hca_numa_node': 0}


def node(root, *, width=16, rate=HDR, state=ACTIVE, fw='20.39.1002', numa=0, counters=None):
    """One node's sysfs: an HDR HCA (Gen4 x16 card) under a Gen4 x16 root port, trained to ``width`` lanes."""
    fn = pcie_chain(root, [('0000:3a:00.0', 16.0, width, 16.0, 16), ('0000:3b:00.0', 16.0, width, 16.0, 16)])
    write(fn / 'numa_node', str(numa))
    dev = ib_device(root, 'mlx5_0', {1: (*state, rate, 'InfiniBand')}, function=fn)
    write(dev / 'fw_ver', fw)
    for name, value in (counters or {'symbol_error': 0, 'link_downed': 0}).items():
        write(dev / 'ports' / '1' / 'counters' / name, str(value))
    return topology.read_sysfs(root)


def test_a_healthy_node_has_no_fault(tmp_path):
    assert fleet_sweep.judge('cn01', node(tmp_path), EXPECTED) == ([], [])


def test_each_fault_is_named_by_component_with_its_evidence(tmp_path):
    faults, _ = fleet_sweep.judge('cn02', node(tmp_path / 'a', width=8, rate='100 Gb/sec (2X HDR)', numa=1), EXPECTED)
    assert [(f['component'], f['fault']) for f in faults] == [
        ('cn02:mlx5_0/1', 'port width'), ('cn02:pcie:0000:3b:00.0-0000:3a:00.0', 'PCIe link degraded'),
        ('cn02:mlx5_0', 'HCA NUMA node')]
    assert 'trained to 16 GT/s x8; both ends can 16 GT/s x16' in faults[1]['evidence']
    down, _ = fleet_sweep.judge('cn03', node(tmp_path / 'b', state=DOWN), EXPECTED)
    assert [(f['component'], f['fault'], f['evidence']) for f in down] == [
        ('cn03:mlx5_0/1', 'port not active', 'state DOWN, physical state Disabled')]
    missing, _ = fleet_sweep.judge('cn04', node(tmp_path / 'c'), {**EXPECTED, 'rdma_devices': ['mlx5_0', 'mlx5_1']})
    assert [(f['component'], f['fault']) for f in missing] == [('cn04:mlx5_1/1', 'missing')]


@pytest.mark.parametrize('said, faults', [
    (1, []),                                          # the MPI rail's HCA (mlx5_0) only
    ({'mlx5_0': 1, 'mlx5_1': 0}, []),                 # each its own
    ({'mlx5_0': 1, 'mlx5_1': 1}, ['cn07:mlx5_1']),    # the second HCA is said to be on the first's socket
    (0, ['cn07:mlx5_0']),                             # the rail's HCA is not where the partition binds the ranks
])
def test_each_hca_is_judged_against_the_numa_node_it_is_said_to_sit_on(tmp_path, said, faults):
    """A two-socket node with an HCA per socket: one number in the configuration is the MPI rail's HCA's node, not
    every HCA's (which named every healthy node's other HCA "on the wrong NUMA node")."""
    for name, address, numa in (('mlx5_0', '0000:3b:00.0', 1), ('mlx5_1', '0000:86:00.0', 0)):
        fn = pci_function(tmp_path, address, speed='16.0 GT/s PCIe', numa=numa)
        ib_device(tmp_path, name, {1: (*ACTIVE, HDR, 'InfiniBand')}, function=fn)
    extras = {'rdma_devices': ['mlx5_0', 'mlx5_1'], 'ib_ports': 1, 'hca_numa_node': said}
    expected = {'rdma_devices': extras['rdma_devices'], 'hca_numa_node': launch.hca_numa_nodes(extras)}
    found, _ = fleet_sweep.judge('cn07', topology.read_sysfs(tmp_path), expected)
    assert [f['component'] for f in found if f['fault'] == 'HCA NUMA node'] == faults


def test_a_card_capped_by_its_slot_is_not_a_fault(tmp_path):
    # an NDR card (Gen5 x16) in a Gen4 x16 slot trains to Gen4 x16: what the slot can, not a degraded link
    fn = pcie_chain(tmp_path, [('0000:3a:00.0', 16.0, 16, 16.0, 16), ('0000:3b:00.0', 16.0, 16, 32.0, 16)])
    ib_device(tmp_path, 'mlx5_0', {1: (*ACTIVE, '400 Gb/sec (4X NDR)', 'InfiniBand')}, function=fn)
    faults, skipped = fleet_sweep.judge('cn05', topology.read_sysfs(tmp_path), {'rdma_devices': ['mlx5_0']})
    assert faults == [] and skipped == ['cn05:mlx5_0/1: no error counters (ports/1/counters): not judged']


def test_the_fleet_names_the_node_that_differs_from_its_boards_majority(tmp_path):
    states = {f'cn{i:02}': node(tmp_path / str(i)) for i in range(1, 4)}
    states['cn04'] = node(tmp_path / '4', fw='20.31.1014')
    result = fleet_sweep.sweep(states, EXPECTED)
    assert [(f['component'], f['fault'], f['evidence']) for f in result['faults']] == [
        ('cn04:mlx5_0', 'firmware differs from the fleet', '20.31.1014; 3 of 4 nodes with board MT_0000000010 have '
                                                           '20.39.1002')]
    # no strict majority, no verdict: two and two
    states['cn03'] = node(tmp_path / '5', fw='20.31.1014')
    assert fleet_sweep.sweep(states, EXPECTED)['faults'] == []


def test_error_counters_that_rose_are_named(tmp_path):
    before = node(tmp_path / 'a', counters={'symbol_error': 3, 'link_downed': 0})
    after = node(tmp_path / 'b', counters={'symbol_error': 250, 'link_downed': 1})
    assert fleet_sweep.counter_faults('cn06', before, after) == [
        {'component': 'cn06:mlx5_0/1', 'fault': 'error counters rose', 'evidence': 'link_downed +1, symbol_error +247'}]
    assert fleet_sweep.counter_faults('cn06', before, before) == []


def test_sweep_lines_that_cannot_be_read_are_named():
    good = json.dumps({'host': 'cn01', 'topology': {'devices': []}})
    states, problems = fleet_sweep.read_lines([('out', f'{good}\n{{not json\n' + json.dumps({'host': '$(reboot)',
                                                                                       'topology': {}}) + f'\n{good}')])
    assert list(states) == ['cn01']
    assert [p.split(': ')[0] for p in problems] == ['out:2', 'out:3', 'out:4']
    assert 'host cn01 twice' in problems[2]


CONFIG = '''
from ibrepro import rfmconfig
environments = rfmconfig.local_environments()
system = rfmconfig.local_system(environments)
system.update(name='fleet', descr='this machine as a one-node HDR partition (its sysfs a tree of the test)')
part = system['partitions'][0]
part['features'] = [*part['features'], 'ib']
part['extras'] = {{**part['extras'], **{expected!r}}}
site_configuration = rfmconfig.site_configuration(systems=[system], environments=environments)
'''


@pytest.mark.parametrize('width, result', [(16, 'pass'), (8, 'fail')])
def test_the_sweep_runs_as_a_reframe_case_and_fails_naming_the_degraded_link(reframe, tmp_path, width, result):
    node(tmp_path / 'sys', width=width, rate=HDR)
    config = tmp_path / 'fleet.py'
    config.write_text(CONFIG.format(expected=EXPECTED))
    proc = reframe('-r', '--system', 'fleet', '-S', f'sysfs_root={tmp_path / "sys"}', config=str(config),
                   checks='reframe-checks/system/fleet_sweep.py')
    assert proc.returncode == (0 if result == 'pass' else 1), output(proc)
    report = json.loads(sorted((reframe.home / 'run-reports').rglob('*.json'))[-1].read_text())
    (case,) = [c for run in report['runs'] for c in run['testcases'] if c['result'] != 'skip']
    assert case['result'] == result and len(case['fleet_state']) == 1
    if result == 'fail':
        assert re.search(r'1 fault\(s\) on 1 node\(s\): \S+:pcie:0000:3b:00\.0-0000:3a:00\.0: PCIe link degraded '
                         r'\(trained to 16 GT/s x8; both ends can 16 GT/s x16 \(mlx5_0\)\)', case['fail_reason'])
        assert case['fleet_faults'][0]['fault'] == 'PCIe link degraded'


def test_every_state_fault_of_the_fixture_set_is_named_and_the_legal_cap_and_mlx4_are_not(tmp_path):
    """Issue 28 item 6b, one tree per fault, each judged alone: exactly the fault is named, on its component."""
    def judged(name, topo, expected=EXPECTED):
        faults, skipped = fleet_sweep.judge(name, topo, expected)
        return [(f['component'], f['fault']) for f in faults], skipped

    def behind_switch(root, uplink_width):
        # root port, the switch's upstream port (its uplink trained to ``uplink_width``), downstream port, card
        fn = pcie_chain(root, [('0000:3a:00.0', 16.0, 16, 16.0, 16), ('0000:3b:00.0', 16.0, uplink_width, 16.0, 16),
                               ('0000:3c:00.0', 16.0, 16, 16.0, 16), ('0000:3d:00.0', 16.0, 16, 16.0, 16)])
        dev = ib_device(root, 'mlx5_0', {1: (*ACTIVE, HDR, 'InfiniBand')}, function=fn)
        for name in ('symbol_error', 'link_downed'):
            write(dev / 'ports' / '1' / 'counters' / name, '0')
        return topology.read_sysfs(root)

    ndr = {**EXPECTED, 'expected_port': {'width': 4, 'speed': 'NDR'}}
    assert judged('a', node(tmp_path / 'a', state=DOWN))[0] == [('a:mlx5_0/1', 'port not active')]
    assert judged('b', node(tmp_path / 'b', rate='100 Gb/sec (2X HDR)'))[0] == [('b:mlx5_0/1', 'port width')]
    assert judged('c', node(tmp_path / 'c'), ndr)[0] == [('c:mlx5_0/1', 'port speed')]          # NDR -> HDR
    assert judged('d', node(tmp_path / 'd', width=8))[0] == [('d:pcie:0000:3b:00.0-0000:3a:00.0', 'PCIe link degraded')]
    assert judged('e', behind_switch(tmp_path / 'e', 8))[0] == [('e:pcie:0000:3b:00.0-0000:3a:00.0',
                                                                 'PCIe link degraded')]   # the switch's uplink
    assert judged('e2', behind_switch(tmp_path / 'e2', 16)) == ([], [])
    assert judged('f', node(tmp_path / 'f', numa=1))[0] == [('f:mlx5_0', 'HCA NUMA node')]
    states = {f'g{i}': node(tmp_path / f'g{i}') for i in range(3)}
    states['g3'] = node(tmp_path / 'g3', fw='20.31.1014')
    assert [(f['component'], f['fault']) for f in fleet_sweep.sweep(states, EXPECTED)['faults']] == [
        ('g3:mlx5_0', 'firmware differs from the fleet')]
    assert [f['fault'] for f in fleet_sweep.counter_faults('h', node(tmp_path / 'h1'), node(
        tmp_path / 'h2', counters={'symbol_error': 9, 'link_downed': 0}))] == ['error counters rose']
    # not faults: an NDR card capped by its Gen4 slot (test above), and an mlx4 adapter without the files
    fn = pcie_chain(tmp_path / 'cap', [('0000:3a:00.0', 16.0, 16, 16.0, 16), ('0000:3b:00.0', 16.0, 16, 32.0, 16)])
    ib_device(tmp_path / 'cap', 'mlx5_0', {1: (*ACTIVE, '400 Gb/sec (4X NDR)', 'InfiniBand')}, function=fn)
    assert judged('cap', topology.read_sysfs(tmp_path / 'cap'), {'rdma_devices': ['mlx5_0']})[0] == []
    ib_device(tmp_path / 'm4', 'mlx4_0', {p: (*ACTIVE, '40 Gb/sec (4X QDR)', 'InfiniBand') for p in (1, 2)})
    faults, skipped = judged('m4', topology.read_sysfs(tmp_path / 'm4'),
                             {'rdma_devices': ['mlx4_0'], 'ib_ports': 2, 'expected_port': {'width': 4, 'speed': 'QDR'}})
    assert faults == [] and 'm4:mlx4_0: no PCI function: PCIe path and NUMA node not judged' in skipped


def _gpu(root, chain, vendor='0x10de', klass='0x030200'):
    """A GPU's PCI function under ``chain`` (pcie_chain), with the class and vendor the kernel shows, and its
    ``bus/pci/devices`` link as Linux lays it out."""
    fn = pcie_chain(root, chain)
    write(fn / 'vendor', vendor)
    write(fn / 'class', klass)
    devices = root / 'bus' / 'pci' / 'devices'
    devices.mkdir(parents=True, exist_ok=True)
    (devices / fn.name).symlink_to(fn)
    return fn


def test_a_gpu_trained_below_its_path_is_a_degraded_pcie_link(tmp_path):
    """A Gen4 x16 GPU in a Gen4 x16 slot that trained to x8: named as the PCIe link it is, with the GPU."""
    _gpu(tmp_path, [('0000:3a:00.0', 16.0, 8, 16.0, 16), ('0000:3b:00.0', 16.0, 8, 16.0, 16)])
    topo = topology.read_sysfs(tmp_path)
    assert [(g['name'], g['vendor']) for g in topo['gpus']] == [('0000:3b:00.0', 'NVIDIA')]
    faults, _ = fleet_sweep.judge('gn01', topo, {})
    assert [(f['component'], f['fault'], f['evidence']) for f in faults] == [
        ('gn01:pcie:0000:3b:00.0-0000:3a:00.0', 'PCIe link degraded',
         'trained to 16 GT/s x8; both ends can 16 GT/s x16 (GPU 0000:3b:00.0)')]


def test_the_h200_of_the_shared_fixture_at_gen5_x16_is_no_fault(tmp_path):
    # its sysfs (tests/fixtures/nvbandwidth/0.8-h200/sysfs-gpu-pcie-link.txt): 32.0 GT/s x16 current and max; a
    # root port of the same (the guest shows none above the GPU: the path is then not judged, and said so)
    line = (Path(__file__).parent / 'fixtures' / 'nvbandwidth' / '0.8-h200' / 'sysfs-gpu-pcie-link.txt').read_text()
    assert 'class=0x030200 vendor=0x10de cur=32.0 GT/s PCIe/x16 max=32.0 GT/s PCIe/x16' in line
    _gpu(tmp_path / 'a', [('0000:00:05.0', 32.0, 16, 32.0, 16), ('0000:00:06.0', 32.0, 16, 32.0, 16)])
    faults, skipped = fleet_sweep.judge('vm', topology.read_sysfs(tmp_path / 'a'), {})
    assert faults == [] and skipped == []
    _gpu(tmp_path / 'b', [('0000:00:06.0', 32.0, 16, 32.0, 16)])
    faults, skipped = fleet_sweep.judge('vm', topology.read_sysfs(tmp_path / 'b'), {})
    assert faults == [] and skipped == ['vm:gpu:0000:00:06.0: no PCIe link attributes above it: path not judged']


def test_other_pci_functions_are_no_gpus(tmp_path):
    _gpu(tmp_path, [('0000:3a:00.0', 16.0, 16, 16.0, 16), ('0000:3b:00.0', 16.0, 16, 16.0, 16)], vendor='0x15b3',
         klass='0x020700')     # an InfiniBand controller
    assert topology.read_sysfs(tmp_path)['gpus'] == []


def test_a_dry_run_of_the_sweep_asks_slurm_nothing(reframe, tmp_path):
    """A site's first `--dry-run` of its configuration runs where Slurm may not answer: the sweep's flexible job
    would ask scontrol for the idle nodes and fail the dry run. Dry, it is one task on each node the partition
    declares, and scontrol (a tripwire here, first on PATH) is never called."""
    tripwire = tmp_path / 'bin'
    tripwire.mkdir()
    (tripwire / 'scontrol').write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/called\nexit 1\n')
    (tripwire / 'scontrol').chmod(0o755)
    done = reframe('--dry-run', '--system', 'example-cluster:hdr', '-n', 'FleetSweep',
                   config='configs/example-cluster.py', checks='reframe-checks/system/fleet_sweep.py',
                   env={'PATH': f'{tripwire}:{os.environ["PATH"]}'})
    assert done.returncode == 0, output(done)
    assert not (tmp_path / 'called').exists()
    (script,) = [p.read_text() for p in reframe.home.rglob('rfm_job.sh')]
    assert {'#SBATCH --ntasks=16', '#SBATCH --ntasks-per-node=1', '#SBATCH --exclusive'} <= set(script.splitlines())
    assert script.splitlines()[-1].endswith('-m ibrepro.cli fleet node --sysfs /sys'), script

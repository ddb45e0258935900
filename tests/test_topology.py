"""ibrepro.topology on small sysfs trees (built in tmp dirs, laid out and worded as Linux does)
and on the real `ibv_devinfo -v` output of three soft-RoCE devices."""

import json
from pathlib import Path

import pytest

from ibrepro import cli, topology

FIXTURES = Path(__file__).parent / 'fixtures' / 'perftest' / '4.5-0.17-rxe'


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + '\n')


def pci_function(root, address, speed='8.0 GT/s PCIe', width=16, max_speed=None, max_width=None,
                 numa=0):
    """A PCIe function under /sys/devices; speed None: a function without PCIe link attributes."""
    fn = root / 'devices' / 'pci0000:00' / address
    fn.mkdir(parents=True)
    write(fn / 'vendor', '0x15b3')
    write(fn / 'device', '0x1017')
    write(fn / 'numa_node', str(numa))
    if speed:
        write(fn / 'current_link_speed', speed)
        write(fn / 'current_link_width', str(width))
        write(fn / 'max_link_speed', max_speed or speed)
        write(fn / 'max_link_width', str(max_width or width))
    return fn


def ib_device(root, name, ports, function=None, parent=None, node_desc=None, netdevs=()):
    """ports: {number: (state, phys_state, rate, link_layer)}."""
    dev = root / 'class' / 'infiniband' / name
    write(dev / 'node_type', '1: CA')
    write(dev / 'fw_ver', '16.35.2000' if function else '0.0.0')
    write(dev / 'node_guid', 'b859:9f03:00d4:a1b2')
    write(dev / 'sys_image_guid', 'b859:9f03:00d4:a1b2')
    write(dev / 'node_desc', node_desc or f'node1 {name}')
    if function:
        write(dev / 'hca_type', 'MT4119')
        write(dev / 'board_id', 'MT_0000000010')
        (dev / 'device').symlink_to(function)
        for nd in netdevs:
            (function / 'net' / nd).mkdir(parents=True)
    if parent:
        write(dev / 'parent', parent)
    for number, (state, phys, rate, layer) in ports.items():
        p = dev / 'ports' / str(number)
        write(p / 'state', state)
        write(p / 'phys_state', phys)
        write(p / 'rate', rate)
        write(p / 'link_layer', layer)
        write(p / 'gids' / '0', 'fe80:0000:0000:0000:b859:9f03:00d4:a1b2')
        if layer == 'Ethernet' and (parent or netdevs):
            write(p / 'gid_attrs' / 'ndevs' / '0', parent or netdevs[0])
    return dev


ACTIVE = ('4: ACTIVE', '5: LinkUp')
DOWN = ('1: DOWN', '3: Disabled')


def netdev(root, name, speed, function=None):
    nd = root / 'class' / 'net' / name
    write(nd / 'speed', str(speed))
    if function:
        virtio = function / 'virtio0'
        virtio.mkdir()
        (nd / 'device').symlink_to(virtio)


def test_single_port_edr_hca_on_pcie_gen3_x16(tmp_path):
    fn = pci_function(tmp_path, '0000:3b:00.0', numa=1)
    ib_device(tmp_path, 'mlx5_0', {1: (*ACTIVE, '100 Gb/sec (4X EDR)', 'InfiniBand')},
              function=fn, netdevs=['ib0'])
    topo = topology.read_sysfs(tmp_path)

    dev, = topo['devices']
    assert (dev['kind'], dev['hca_type'], dev['fw_ver'], dev['vendor_id']) == ('hca', 'MT4119', '16.35.2000', '0x15b3')
    assert dev['pci']['address'] == '0000:3b:00.0' and dev['pci']['numa_node'] == 1
    assert (dev['pci']['bus_spec'], dev['pci']['downtrained']) == ('pcie:gen3:x16', False)
    port, = dev['ports']
    assert (port['state'], port['phys_state'], port['width'], port['speed']) == ('ACTIVE', 'LinkUp', 4, 'EDR')
    assert port['link']['spec'] == 'ib:edr:4x' and port['netdevs'] == ['ib0']
    adapter, = topo['adapters']
    # 12.5 GB/s of 4X EDR < 15.75 GB/s of PCIe 3.0 x16
    assert adapter['bound']['per_direction'] == pytest.approx(12.5e9)
    assert adapter['bound']['bottleneck_per_direction'] == ['ib:edr:4x']
    assert topology.partition_features(topo) == ['ib', 'ib-edr']
    s = topology.summary(topo)
    assert (s['hca'], s['ports'], s['link_gbps'], s['bus']) == ('mlx5_0', 1, 100, 'pcie:gen3:x16')


def test_dual_port_qdr_hca_is_bound_by_pcie_gen2_x8(tmp_path):
    fn = pci_function(tmp_path, '0000:04:00.0', speed='5.0 GT/s PCIe', width=8)
    ib_device(tmp_path, 'mlx4_0', {1: (*ACTIVE, '40 Gb/sec (4X QDR)', 'InfiniBand'),
                                   2: (*ACTIVE, '40 Gb/sec (4X QDR)', 'InfiniBand')}, function=fn)
    topo = topology.read_sysfs(tmp_path)

    adapter, = topo['adapters']
    assert adapter['active_ports'] == ['mlx4_0/1', 'mlx4_0/2']
    # two 4X QDR ports carry 8 GB/s per direction, PCIe 2.0 x8 only 4 GB/s
    assert adapter['bound']['per_direction'] == pytest.approx(4e9)
    assert adapter['bound']['both_directions'] == pytest.approx(8e9)
    assert adapter['bound']['bottleneck_per_direction'] == ['pcie:gen2:x8']
    assert topology.partition_features(topo) == ['ib', 'ib-qdr', 'dual-port']
    assert topology.summary(topo)['hca_ports'] == {'mlx4_0': [1, 2]}


def test_two_functions_of_one_card_share_its_pcie_link(tmp_path):
    for function in (0, 1):
        fn = pci_function(tmp_path, f'0000:3b:00.{function}')
        ib_device(tmp_path, f'mlx5_{function}', {1: (*ACTIVE, '100 Gb/sec (4X EDR)', 'InfiniBand')},
                  function=fn)
    topo = topology.read_sysfs(tmp_path)

    adapter, = topo['adapters']
    assert adapter['devices'] == ['mlx5_0', 'mlx5_1'] and adapter['pci_slot'] == '0000:3b:00'
    # 2 x 12.5 GB/s of links behind one PCIe 3.0 x16 (15.75 GB/s)
    assert adapter['bound']['per_direction'] == pytest.approx(16 * 8e9 * 128 / 130 / 8)
    assert adapter['bound']['bottleneck_per_direction'] == ['pcie:gen3:x16']
    assert 'dual-port' in topology.partition_features(topo)


def test_rxe_on_a_netdev_takes_link_and_bus_from_the_netdev(tmp_path):
    fn = pci_function(tmp_path, '0000:00:03.0', speed=None)    # virtio-net: no PCIe link attributes
    netdev(tmp_path, 'eth0', 25000, function=fn)
    ib_device(tmp_path, 'rxe0', {1: (*ACTIVE, '25 Gb/sec (1X EDR)', 'Ethernet')}, parent='eth0',
              node_desc='rxe')
    topo = topology.read_sysfs(tmp_path)

    dev, = topo['devices']
    assert (dev['kind'], dev['parent_netdev']) == ('rxe', 'eth0')
    assert dev['pci']['via'] == 'netdev eth0' and dev['pci']['bus_spec'] is None
    port, = dev['ports']
    assert (port['netdevs'], port['netdev_speed_Mbps']) == (['eth0'], 25000)
    assert (port['link']['spec'], port['link_note']) == ('roce:25g', 'netdev speed')
    adapter, = topo['adapters']
    assert adapter['bus'] is None and 'host bus unknown' in adapter['bound_note']
    assert adapter['bound']['per_direction'] == pytest.approx(25e9 / 8)
    assert topology.partition_features(topo) == ['roce', 'rxe']


def test_ethernet_port_of_unknown_speed_uses_the_kernels_rate(tmp_path):
    netdev(tmp_path, 'dummy0', -1)
    ib_device(tmp_path, 'rxe0', {1: (*ACTIVE, '2.5 Gb/sec (1X SDR)', 'Ethernet')}, parent='dummy0')
    ib_device(tmp_path, 'rxe1', {1: (*ACTIVE, '10 Gb/sec (1X FDR10)', 'Ethernet')}, parent='veth0')
    topo = topology.read_sysfs(tmp_path)

    links = [d['ports'][0]['link']['spec'] for d in topo['devices']]
    assert links == ['roce:1g', 'roce:10g']   # 1X SDR is what the kernel shows for <= 1 GbE
    assert 'inferred' in topo['devices'][0]['ports'][0]['link_note']


def test_down_port_is_not_counted(tmp_path):
    fn = pci_function(tmp_path, '0000:3b:00.0')
    ib_device(tmp_path, 'mlx5_0', {1: (*ACTIVE, '200 Gb/sec (4X HDR)', 'InfiniBand'),
                                   2: (*DOWN, '10 Gb/sec (4X SDR)', 'InfiniBand')}, function=fn)
    topo = topology.read_sysfs(tmp_path)

    assert [p['state'] for p in topo['devices'][0]['ports']] == ['ACTIVE', 'DOWN']
    assert topo['adapters'][0]['active_ports'] == ['mlx5_0/1']
    # 4X HDR (25 GB/s) is faster than PCIe 3.0 x16
    assert topo['adapters'][0]['bound']['bottleneck_per_direction'] == ['pcie:gen3:x16']
    assert topology.partition_features(topo) == ['ib', 'ib-hdr']


def test_all_ports_down_gives_no_features(tmp_path):
    ib_device(tmp_path, 'mlx5_0', {1: (*DOWN, '10 Gb/sec (4X SDR)', 'InfiniBand')},
              function=pci_function(tmp_path, '0000:3b:00.0'))
    topo = topology.read_sysfs(tmp_path)
    assert topology.partition_features(topo) == []
    assert topo['adapters'][0]['bound'] is None
    assert topology.summary(topo)['hca'] == ''


def test_downtrained_link_and_old_kernel_rate(tmp_path):
    fn = pci_function(tmp_path, '0000:3b:00.0', speed='2.5 GT/s', width=8, max_speed='8 GT/s', max_width=16)
    ib_device(tmp_path, 'mlx4_0', {1: (*ACTIVE, '10 Gb/sec (4X)', 'InfiniBand')}, function=fn)
    topo = topology.read_sysfs(tmp_path)

    pci = topo['devices'][0]['pci']
    assert (pci['bus_spec'], pci['max_bus_spec'], pci['downtrained']) == ('pcie:gen1:x8', 'pcie:gen3:x16', True)
    assert topo['devices'][0]['ports'][0]['speed'] == 'SDR'   # old kernels print no name for SDR
    assert 'DOWNTRAINED' in topology.format_topology(topo)


def test_no_rdma_devices(tmp_path, capsys):
    topo = topology.read_sysfs(tmp_path)
    assert topo['devices'] == [] and 'absent' in topo['message']
    assert topology.partition_features(topo) == []
    assert topology.summary(topo) == {'hcas': [], 'hca': '', 'ports': 0, 'hca_ports': {},
                                      'link_gbps': 0, 'bus': '', 'limit_MBps': 0,
                                      'limit_bidir_MBps': 0}

    assert cli.main(['topology', '--sysfs', str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == \
        f'no RDMA devices found ({tmp_path}/class/infiniband absent)'

    (tmp_path / 'class' / 'infiniband').mkdir(parents=True)
    assert 'is empty' in topology.read_sysfs(tmp_path)['message']


def test_cli_json_carries_features_and_summary(tmp_path, capsys):
    fn = pci_function(tmp_path, '0000:3b:00.0')
    ib_device(tmp_path, 'mlx5_0', {1: (*ACTIVE, '100 Gb/sec (4X EDR)', 'InfiniBand')}, function=fn)
    assert cli.main(['topology', '--sysfs', str(tmp_path), '--json']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['features'] == ['ib', 'ib-edr'] and data['summary']['limit_MBps'] == pytest.approx(12500)

    assert cli.main(['topology', '--sysfs', str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert 'mlx5_0  hca   1     ACTIVE' in out and '12,500 MB/s [ib:edr:4x]' in out


# -- ibv_devinfo -v ----------------------------------------------------------------------------

def test_real_rxe_ibv_devinfo():
    topo = topology.parse_ibv_devinfo((FIXTURES / 'ibv_devinfo.txt').read_text(), 'ibv_devinfo.txt')

    assert [d['name'] for d in topo['devices']] == ['rxe0', 'rxe_a', 'rxe_b']
    rxe0 = topo['devices'][0]
    assert (rxe0['kind'], rxe0['vendor_id'], rxe0['node_guid']) == ('rxe', '0xffffff', '90c6:3bff:fe66:9b82')
    port, = rxe0['ports']
    assert (port['state'], port['phys_state'], port['link_layer']) == ('ACTIVE', 'LinkUp', 'Ethernet')
    assert (port['width'], port['speed'], port['gid0']) == (1, 'SDR', 'fe80::90c6:3bff:fe66:9b82')
    # rxe_a/rxe_b sit on a veth pair (10 Gb/s): the kernel shows 1X FDR10, i.e. 10 GbE
    assert [d['ports'][0]['link']['spec'] for d in topo['devices']] == ['roce:1g', 'roce:10g', 'roce:10g']
    assert topology.partition_features(topo) == ['roce', 'rxe', 'dual-port']
    assert topology.summary(topo)['hcas'] == ['rxe0', 'rxe_a', 'rxe_b']


def test_ibv_devinfo_cli_and_bad_input(tmp_path, capsys):
    assert cli.main(['topology', '--ibv-devinfo', str(FIXTURES / 'ibv_devinfo.txt'), '--json']) == 0
    assert len(json.loads(capsys.readouterr().out)['devices']) == 3

    # environment.txt is real output of the same guest, but not ibv_devinfo's
    assert cli.main(['topology', '--ibv-devinfo', str(FIXTURES / 'environment.txt')]) == 1
    assert 'environment.txt: not ibv_devinfo output' in capsys.readouterr().err
    assert cli.main(['topology', '--ibv-devinfo', str(tmp_path / 'absent.txt')]) == 1
    assert 'cannot read' in capsys.readouterr().err


def _two_hdr_hcas_and_a_management_nic(root):
    """The issue's node: two HDR HCAs (PCIe 4.0 x16 each) and a RoCE-capable 25 GbE management NIC."""
    for i, slot in enumerate(('0000:3b:00.0', '0000:d8:00.0')):
        fn = pci_function(root, slot, speed='16.0 GT/s PCIe', numa=i)
        ib_device(root, f'mlx5_{i}', {1: (*ACTIVE, '200 Gb/sec (4X HDR)', 'InfiniBand')}, function=fn)
    fn = pci_function(root, '0000:01:00.0', speed='8.0 GT/s PCIe', width=8)
    ib_device(root, 'bnxt_re0', {1: (*ACTIVE, '25 Gb/sec (1X EDR)', 'Ethernet')}, function=fn, netdevs=['eno1'])
    netdev(root, 'eno1', 25000)
    return topology.read_sysfs(root)


def test_a_management_nic_beside_infiniband_hcas_is_no_rail(tmp_path):
    from ibrepro import compare

    topo = _two_hdr_hcas_and_a_management_nic(tmp_path)
    assert len(topo['adapters']) == 3                              # recorded as it is...
    assert [d['name'] for d in topology.fabric_devices(topo)] == ['mlx5_0', 'mlx5_1']
    assert topology.partition_features(topo) == ['ib', 'ib-hdr', 'dual-port']     # ...but no `roce` from it
    assert topology.summary(topo)['hcas'] == ['mlx5_0', 'mlx5_1']
    # the node's fabric: 2 x 25 GB/s of 4X HDR (not 53,125 MB/s with the NIC's 3,125)
    assert compare.limit_now(topo, False) == (pytest.approx(50000.0), None)
    # the rails a case used, per direction: one HDR rail is 25,000 MB/s one way, 50,000 both ways
    assert compare.limit_now(topo, False, devices={'mlx5_0'}) == (pytest.approx(25000.0), None)
    assert compare.limit_now(topo, True, devices={'mlx5_0'}) == (pytest.approx(50000.0), None)
    assert compare.limit_now(topo, False, devices={'mlx5_0', 'mlx5_1'}) == (pytest.approx(50000.0), None)
    assert compare.limit_now(topo, False, devices={'mlx5_9'}) == (None, 'rail mlx5_9 not in the recorded topology')


def test_the_rails_of_a_case_come_from_its_flow_windows():
    from ibrepro import compare

    windows = [{'side': 'server', 'device': 'mlx5_0'}, {'side': 'client', 'device': 'mlx5_0'}]
    assert compare.case_devices({'flow_windows': windows}) == {'mlx5_0'}
    # a side on perftest's default device, or an MPI case left to choose its rails: unknown
    assert compare.case_devices({'flow_windows': [*windows, {'side': 'client', 'device': None}]}) is None
    assert compare.case_devices({'name': 'OSUBandwidth', 'mpi_rail': ''}) is None
    # an MPI case kept on one rail (ibrepro.rfm.launch.one_rail): that rail's device
    assert compare.case_devices({'name': 'OSUBandwidth', 'mpi_rail': 'mlx5_1:1'}) == {'mlx5_1'}


def test_a_roce_only_node_keeps_its_roce_rails(tmp_path):
    fn = pci_function(tmp_path, '0000:3b:00.0')
    ib_device(tmp_path, 'mlx5_0', {1: (*ACTIVE, '100 Gb/sec (4X EDR)', 'Ethernet')}, function=fn, netdevs=['ens1'])
    netdev(tmp_path, 'ens1', 100000)
    topo = topology.read_sysfs(tmp_path)
    assert topology.partition_features(topo) == ['roce'] and topology.summary(topo)['hcas'] == ['mlx5_0']


def pcie_chain(root, chain):
    """Functions nested as the kernel nests them (root port first): [(address, speed, width, max_speed, max_width)]."""
    path = root / 'devices' / f'pci0000:{chain[0][0][5:7]}'
    for address, speed, width, max_speed, max_width in chain:
        path = path / address
        write(path / 'current_link_speed', f'{speed} GT/s PCIe')
        write(path / 'current_link_width', str(width))
        write(path / 'max_link_speed', f'{max_speed} GT/s PCIe')
        write(path / 'max_link_width', str(max_width))
    write(path / 'vendor', '0x15b3')
    write(path / 'device', '0x101b')
    write(path / 'numa_node', '0')
    return path


def test_the_pcie_path_names_a_degraded_link_and_not_a_capped_one(tmp_path):
    # an HDR card (Gen4 x16) in a Gen4 x16 root port that trained to x8: degraded, at the card's link
    narrow = pcie_chain(tmp_path / 'a', [('0000:3a:00.0', 16.0, 8, 16.0, 16), ('0000:3b:00.0', 16.0, 8, 16.0, 16)])
    (link,) = topology.pcie_path(narrow)
    assert (link['lower'], link['upper'], link['width'], link['can_width'], link['degraded']) == (
        '0000:3b:00.0', '0000:3a:00.0', 8, 16, True)
    # a Gen5 card (NDR) in a Gen4 slot: capped by the slot, trained to what the slot can: no fault
    capped = pcie_chain(tmp_path / 'b', [('0000:3a:00.0', 16.0, 16, 16.0, 16), ('0000:3b:00.0', 16.0, 16, 32.0, 16)])
    assert [(link['can_speed'], link['degraded']) for link in topology.pcie_path(capped)] == [(16.0, False)]
    # behind a switch (root port, upstream port, downstream port, card): the card's link and the switch's uplink,
    # the uplink at Gen3 where both ends can Gen4
    behind = pcie_chain(tmp_path / 'c', [('0000:16:00.0', 8.0, 16, 16.0, 16), ('0000:17:00.0', 8.0, 16, 16.0, 16),
                                         ('0000:18:00.0', 16.0, 16, 16.0, 16), ('0000:19:00.0', 16.0, 16, 16.0, 16)])
    assert [(link['lower'], link['upper'], link['speed'], link['can_speed'], link['degraded'])
            for link in topology.pcie_path(behind)] == [('0000:19:00.0', '0000:18:00.0', 16.0, 16.0, False),
                                                      ('0000:17:00.0', '0000:16:00.0', 8.0, 16.0, True)]


def test_port_error_counters_are_read_where_the_driver_has_them(tmp_path):
    fn = pci_function(tmp_path, '0000:3b:00.0')
    dev = ib_device(tmp_path, 'mlx5_0', {1: (*ACTIVE, '200 Gb/sec (4X HDR)', 'InfiniBand')}, function=fn)
    for name, value in (('symbol_error', 12), ('link_downed', 1), ('port_rcv_errors', 0)):
        write(dev / 'ports' / '1' / 'counters' / name, str(value))
    ib_device(tmp_path, 'mlx4_0', {1: (*ACTIVE, '40 Gb/sec (4X QDR)', 'InfiniBand')}, function=fn)
    topo = topology.read_sysfs(tmp_path)
    counters = {d['name']: d['ports'][0]['counters'] for d in topo['devices']}
    assert counters == {'mlx5_0': {'symbol_error': 12, 'link_downed': 1, 'port_rcv_errors': 0}, 'mlx4_0': None}

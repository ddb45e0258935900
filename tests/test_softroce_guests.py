"""How the soft-RoCE guests are put together, without starting them (ibrepro.softroce.guests, .fabric): what
listens where, what reaches the guests and how, and the Slurm nodes' configuration lines."""

from pathlib import Path

import pytest

from ibrepro.softroce import fabric, guests


@pytest.fixture
def image(tmp_path):
    (tmp_path / 'image').mkdir()
    (tmp_path / 'image' / 'vmlinux').touch()
    return tmp_path / 'image'


def _command(image, run_dir, name, net, params, fw_cfg):
    return guests.qemu_command(image, name, net, params, '/share', run_dir, fw_cfg)


def test_pair_guests_listen_only_where_qemu_binds_or_in_the_private_run_dir(image, tmp_path):
    key = tmp_path / 'run' / 'agent.key'
    cmds = [_command(image, tmp_path / 'run', *guests._pair_guest(i, 2, tmp_path / 'run'), {'agent.key': key})
            for i in (0, 1)]
    for i, cmd in enumerate(cmds):
        line = ' '.join(cmd)
        # the agent's forward: QEMU binds 127.0.0.1 port 0 itself (the kernel picks the port; read over QMP)
        assert 'hostfwd=tcp:127.0.0.1:0-203.0.113.200:7000' in line and 'restrict=on' in line
        assert f'unix:{tmp_path}/run/n{i}.qmp,server=on' in line
        # the link between the guests: a unix socket in the run directory, not a TCP port
        server = 'on' if i == 0 else 'off'
        assert f'stream,id=link,server={server},addr.type=unix,addr.path={tmp_path}/run/link.sock' in line
        assert 'socket,' not in line and 'listen=' not in line
        # the key goes by file (fw_cfg), never on the command line
        assert f'name=opt/org.ibrepro/agent.key,file={key}' in line
        assert 'ibr_agent=203.0.113.200:7000' in cmd[-1]
        # the kernel's crypto self-tests stalled a TCG boot in CI; the guests use no kernel crypto
        assert cmd[-1].split()[:5] == ['console=ttyS0', 'panic=-1', 'quiet', 'no_timer_check', 'cryptomgr.notests']


def test_slurm_nodes_have_a_tap_per_network_and_no_host_port(image, tmp_path):
    name, net, params = guests._slurm_guest(2)
    cmd = _command(image, tmp_path, name, net, params, {'agent.key': tmp_path / 'k', 'munge.key': tmp_path / 'm',
                                                        'hosts': tmp_path / 'h'})
    line = ' '.join(cmd)
    assert name == 'rxnode2'
    for network in ('mgmt', 'fab0', 'fab1'):
        assert f'tap,id={network},ifname=ibrx2-{network},script=no,downscript=no' in line
    assert 'hostfwd' not in line and 'user,' not in line
    assert params == {'ibr_agent': '198.18.0.12:7000',
                      'ibr_nic0': '52:54:00:10:00:02,mgmt0,198.18.0.12/24',
                      'ibr_nic1': '52:54:00:11:00:02,fab0,198.18.1.12/24,rxe0',
                      'ibr_nic2': '52:54:00:12:00:02,fab1,198.18.2.12/24,rxe1'}
    for fname in ('agent.key', 'munge.key', 'hosts'):
        assert f'name=opt/org.ibrepro/{fname},file=' in line


def test_fabric_names_fit_linux_interface_names_for_every_node():
    names = fabric.links(fabric.MAX_NODES)
    assert len(names) == len(set(names)) == 3 + 3 * fabric.MAX_NODES
    assert max(len(n) for n in names) <= 15            # IFNAMSIZ - 1
    assert len({fabric.mac(i, net) for i in range(1, fabric.MAX_NODES + 1) for net in fabric.NETWORKS}) == \
        3 * fabric.MAX_NODES
    assert fabric.address(200, 'fab1') == '198.18.2.210'
    with pytest.raises(fabric.FabricError, match='1 to 200 nodes'):
        fabric.up(201, [])


def test_slurm_node_lines_and_hosts_are_parametric_in_the_node_count():
    conf = fabric.slurm_nodes(4, smp=3)
    assert conf.splitlines() == [
        f'NodeName=rxnode{i} NodeAddr=198.18.0.{10 + i} CPUs=3 Boards=1 SocketsPerBoard=1 CoresPerSocket=3 '
        'ThreadsPerCore=1 Feature=rxe,rails2 State=UNKNOWN' for i in range(1, 5)] + [
        'PartitionName=rxe Nodes=rxnode[1-4] Default=YES MaxTime=INFINITE State=UP']
    assert fabric.hosts(2, 'vm') == '198.18.0.1 vm\n198.18.0.11 rxnode1\n198.18.0.12 rxnode2\n'


def test_the_slurm_system_takes_its_size_from_the_running_cluster(tmp_path):
    from ibrepro.softroce import config

    (tmp_path / 'guests').mkdir()
    (tmp_path / 'guests' / 'slurm-nodes.conf').write_text(fabric.slurm_nodes(5, smp=2))
    partition, = config.slurm_system(tmp_path)['partitions']
    assert (partition['scheduler'], partition['launcher'], partition['access']) == (
        'slurm', 'srun', ['--partition=rxe'])
    extras = partition['extras']
    assert (extras['nodes'], extras['cores_per_node'], extras['rdma_devices'], extras['python']) == \
        (5, 2, ['rxe0', 'rxe1'], '/usr/bin/python3')
    assert not {'perftest_addresses', 'rdma_addresses', 'node_exec'} & set(extras)   # found at run time
    assert config.slurm_system(tmp_path)['prefix'] == str(Path(tmp_path) / 'share' / 'reframe')

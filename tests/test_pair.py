"""The pair runner (ibrepro.pair): spec checks, rail discovery, rounds, barrier, placement and failure handling.

Orchestration runs real processes (tests/programs/tcp_peer.py, a TCP client/server) as the sides, and real runner
processes as the nodes of a job (the launcher's rank variables), because no RDMA device exists here; the verbs
families run the same runner with perftest in the soft-RoCE guests (tests/test_softroce*.py).
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import output, old_python
from ibrepro import pair

PEER = str(Path(__file__).parent / 'programs' / 'tcp_peer.py')
RUNNER = pair.__file__
PERFTEST = shutil.which('ib_write_lat')
needs_perftest = pytest.mark.skipif(not PERFTEST, reason='perftest not installed (apt-get install perftest)')
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which('unshare'),
                                reason='host-name namespaces need root and unshare (util-linux)')


def spec(**kw):
    base = {'version': 2, 'program': 'ib_write_lat', 'options': ['-F', '-n', '100'],
            'rails': [['rxe_a', 1], ['rxe_b', 1]], 'nodes': 2,
            'flows': [{'id': 0, 'port': 18515, 'server': {'node': 0, 'rail': 0}, 'client': {'node': 1, 'rail': 1}}],
            'timeout': 20}
    return pair.check_spec({**base, **kw})


def peer_flows(n, base_port, seconds=0.6, server_node=1, client_node=0):
    return [{'id': i, 'port': base_port + i,
             'server': {'node': server_node, 'argv': [sys.executable, PEER, 'server', str(base_port + i)]},
             'client': {'node': client_node, 'argv': [sys.executable, PEER, 'client', str(base_port + i),
                                                      '127.0.0.1', str(seconds)]}} for i in range(n)]


def peer_spec(n=1, base_port=19300, **kw):
    # orchestration tests: this machine may have fewer CPUs than sides (binding: the tests near the end)
    return pair.check_spec({'version': 2, 'rails': [[None, None]], 'nodes': 2, 'flows': peer_flows(n, base_port),
                            'timeout': 60, 'connect_timeout': 10, 'cpu_sharing': True, **kw})


def start_node(tmp_path, spec_, rank, env=None, prefix=()):
    path = tmp_path / 'flows.json'
    path.write_text(json.dumps(spec_))
    env = {**os.environ, 'IBREPRO_NODE_RANK': str(rank), 'IBREPRO_NODES': str(spec_['nodes']), **(env or {})}
    return subprocess.Popen([*prefix, sys.executable, RUNNER, str(path)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def status(tmp_path, name):
    return json.loads((tmp_path / f'{name}.status.json').read_text())


# -- the spec --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('env, nodes', [
    ({}, [0, 1]),                                              # alone: plays both ends
    ({'SLURM_PROCID': '1', 'SLURM_NTASKS': '2'}, [1]),        # srun, second task
    ({'PMI_RANK': '0', 'PMI_SIZE': '2'}, [0]),                # MPICH / Intel MPI hydra
    ({'OMPI_COMM_WORLD_RANK': '1', 'OMPI_COMM_WORLD_SIZE': '2'}, [1]),
    ({'SLURM_PROCID': '0', 'SLURM_NTASKS': '1'}, [0, 1]),     # one task: still both ends
])
def test_node_comes_from_the_launcher(env, nodes):
    assert pair.my_nodes(spec(), env) == nodes


def test_a_rank_beyond_the_flows_is_refused():
    with pytest.raises(pair.PairFailed, match='rank 2 .*span 2 node'):
        pair.my_nodes(spec(), {'SLURM_PROCID': '2', 'SLURM_NTASKS': '3'})


@pytest.mark.parametrize('text, reason', [
    ('garbage', 'not JSON'),
    ('[1, 2]', 'a spec is a JSON object, not list'),
    ('{"version": 1, "flows": []}', "field 'version' must be 2"),
    ('{"version": 2}', "missing field 'flows'"),
    ('{"version": 2, "flows": []}', "field 'flows' is empty"),
    ('{"version": 2, "flows": [{"id": 0, "port": 1, "server": {"node": 0}, "client": {"node": 1}}]}',
     "missing field 'program'"),
    ('{"version": 2, "program": "x", "flows": [{"id": 0, "port": "1", "server": {"node": 0}, '
     '"client": {"node": 1}}]}', "field 'port' must be int"),
    ('{"version": 2, "program": "x", "flows": [{"id": 0, "port": 1, "server": {"node": 0, "rail": 3}, '
     '"client": {"node": 1}}]}', 'server rail 3 is not an index'),
    ('{"version": 2, "program": "x", "nodes": 1, "flows": [{"id": 0, "port": 1, "server": {"node": 0}, '
     '"client": {"node": 1}}]}', "names node 1, but 'nodes' is 1"),
    ('{"version": 2, "program": "x", "timeout": -1, "flows": [{"id": 0, "port": 1, "server": {"node": 0}, '
     '"client": {"node": 1}}]}', "'timeout' must be positive"),
])
def test_a_bad_spec_is_named_with_its_field(tmp_path, text, reason):
    path = tmp_path / 'flows.json'
    path.write_text(text)
    with pytest.raises(pair.SpecError, match=reason):
        pair.load_spec(path)
    proc = subprocess.run([sys.executable, RUNNER, str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and str(path) in proc.stderr and 'Traceback' not in proc.stderr


def test_perftest_sides_carry_device_port_size_and_the_published_server_address(tmp_path):
    runner = pair.Runner(spec(), tmp_path, nodes=[0, 1], log=lambda m: None)
    runner.info = {0: {'host': 'a', 'rails': [{'address': '198.18.1.1'}, {'address': '198.18.2.1'}]},
                   1: {'host': 'b', 'rails': [{'address': None}, {'address': '198.18.2.2'}]}}
    flow = runner.spec['flows'][0]
    assert runner.side_command(flow, 'server') == ['ib_write_lat', '-F', '-n', '100', '-d', 'rxe_a', '-i', '1',
                                                   '-p', '18515']
    assert runner.side_command(flow, 'client', 4096)[-9:] == ['-d', 'rxe_b', '-i', '1', '-p', '18515', '-s',
                                                              '4096', '198.18.1.1']
    argv = {'node': 1, 'argv': ['x', '{server_rails}', '--source', '{addr:1:1},{addr:1:0}']}
    assert runner.side_command({**flow, 'client': argv}, 'client') == ['x', '198.18.1.1,198.18.2.1', '--source',
                                                                       '198.18.2.2,b']


# -- what a node has ---------------------------------------------------------------------------------------

def sysfs_rail(root, device, port=1, link_layer='Ethernet', gids=(), numa=None, cpulist=None):
    port_dir = root / 'class' / 'infiniband' / device / 'ports' / str(port)
    (port_dir / 'gids').mkdir(parents=True)
    (port_dir / 'gid_attrs' / 'types').mkdir(parents=True)
    (port_dir / 'link_layer').write_text(link_layer + '\n')
    for index, (gid, kind) in enumerate(gids):
        (port_dir / 'gids' / str(index)).write_text(gid + '\n')
        (port_dir / 'gid_attrs' / 'types' / str(index)).write_text(kind + '\n')
    dev = root / 'class' / 'infiniband' / device / 'device'
    dev.mkdir(exist_ok=True)
    if numa is not None:
        (dev / 'numa_node').write_text(f'{numa}\n')
        (dev / 'local_cpulist').write_text(f'{cpulist}\n')


def test_a_roce_rail_is_reached_at_its_ipv4_roce_v2_gid(tmp_path):
    # as rdma_rxe lays out its GID table: a link-local v1/v2 pair, then the IPv4-mapped v1/v2 pair
    sysfs_rail(tmp_path, 'rxe0', gids=[('fe80:0000:0000:0000:5054:00ff:fe12:3456', 'IB/RoCE v1'),
                                       ('fe80:0000:0000:0000:5054:00ff:fe12:3456', 'RoCE v2'),
                                       ('0000:0000:0000:0000:0000:ffff:c612:0102', 'IB/RoCE v1'),
                                       ('0000:0000:0000:0000:0000:ffff:c612:0102', 'RoCE v2')])
    assert pair.rail_address('rxe0', 1, tmp_path) == ('198.18.1.2', 'RoCE GID 3 (RoCE v2)')


def test_a_rail_without_an_address_says_why(tmp_path):
    sysfs_rail(tmp_path, 'rxe0', gids=[('fe80:0000:0000:0000:5054:00ff:fe12:3456', 'RoCE v2')])
    sysfs_rail(tmp_path, 'mlx5_0', link_layer='InfiniBand')
    assert pair.rail_address('rxe0', 1, tmp_path) == (None, 'rxe0 port 1 has no IPv4 GID (no IPv4 address on '
                                                             'its network interface?)')
    assert pair.rail_address('mlx5_0', 1, tmp_path)[1] == 'mlx5_0 port 1 has no IPoIB interface with an IPv4 address'
    assert 'does not exist' in pair.rail_address('mlx5_9', 1, tmp_path)[1]


def test_cpus_near_the_device_within_what_the_launcher_allows(tmp_path):
    sysfs_rail(tmp_path, 'mlx5_1', numa=1, cpulist='8-11,24-27')
    assert pair.near_cpus('mlx5_1', {0, 1, 9, 10, 25}, tmp_path) == ([9, 10, 25], 1)
    assert pair.near_cpus('mlx5_1', {0, 1}, tmp_path) == ([], 1)            # none near: none (the case fails)
    sysfs_rail(tmp_path, 'rxe0', numa=-1, cpulist='')
    assert pair.near_cpus('rxe0', {2, 3}, tmp_path) == (None, None)         # soft-RoCE: locality unknown


# -- running flows -----------------------------------------------------------------------------------------

def test_one_task_plays_both_nodes_in_rounds_pinned_and_timed(tmp_path):
    lines = []
    rc = pair.run(peer_spec(2, 19310, sizes=[1024, 65536]), tmp_path, log=lines.append)
    assert rc == 0, lines
    for size in (1024, 65536):
        clients = [status(tmp_path, f'flow-{i}.s{size}.client') for i in (0, 1)]
        assert all(c['returncode'] == 0 and c['size'] == size and c['cpu'] in os.sched_getaffinity(0)
                   for c in clients)
        # the two flows of a round start together (barrier) and measure at the same time
        assert abs(clients[0]['start'] - clients[1]['start']) < 0.3
        assert min(c['end'] for c in clients) > max(c['start'] for c in clients)
        out = (tmp_path / f'flow-0.s{size}.client.out').read_text().splitlines()
        assert out[0].startswith('# client: ') and out[1].startswith('# ibrepro pair: pinned to cpu ')
        assert out[2].endswith(f'cpus [{clients[0]["cpu"]}]')      # the side really ran bound to it
    # rounds run one after the other
    assert status(tmp_path, 'flow-0.s65536.client')['start'] >= status(tmp_path, 'flow-0.s1024.server')['end'] - 0.1


def test_two_runner_processes_meet_through_the_work_directory(tmp_path):
    nodes = [start_node(tmp_path, peer_spec(2, 19320), rank) for rank in (0, 1)]
    outs = [n.communicate(timeout=60)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [0, 0], outs
    info = json.loads((tmp_path / 'node-1.json').read_text())
    assert info['host'] and info['cpus'] and info['rails'][0]['address'] is None
    clients = [status(tmp_path, f'flow-{i}.client') for i in (0, 1)]
    assert {c['node'] for c in clients} == {0} and abs(clients[0]['start'] - clients[1]['start']) < 0.3


def test_a_layout_over_two_hosts_refuses_to_run_on_one(tmp_path):
    t0 = time.monotonic()
    nodes = [start_node(tmp_path, peer_spec(1, 19330, distinct_hosts=True), rank) for rank in (0, 1)]
    outs = [n.communicate(timeout=60)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [1, 1], outs
    assert time.monotonic() - t0 < 10
    assert 'nodes 0 and 1 both run on host' in outs[0] and 'one task per node' in outs[0]
    assert not list(tmp_path.glob('flow-*.out'))        # nothing was started


def test_a_server_that_cannot_start_stops_its_peer_within_seconds(tmp_path):
    s = peer_spec(1, 19340)
    s['flows'][0]['server']['argv'] = [sys.executable, PEER, 'server', 'not-a-port']
    t0 = time.monotonic()
    nodes = [start_node(tmp_path, s, rank) for rank in (0, 1)]
    outs = [n.communicate(timeout=60)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [1, 1], outs
    assert time.monotonic() - t0 < 10
    failed = json.loads((tmp_path / 'failed-1.json').read_text())
    assert 'flow 0: server on' in failed['reason'] and "invalid literal for int() with base 10: 'not-a-port'" \
        in failed['reason']
    assert 'node 1 (' in outs[0] and 'failed: flow 0: server on' in outs[0]     # the peer says whose fault


def test_a_peer_that_never_starts_fails_the_node_at_the_connect_timeout(tmp_path):
    t0 = time.monotonic()
    node = start_node(tmp_path, peer_spec(1, 19350, connect_timeout=2), 0)
    out = node.communicate(timeout=60)[0]
    assert node.returncode == 1 and time.monotonic() - t0 < 10, out
    assert 'waiting for the other nodes to start: no node-1.json after 2 s' in out


def test_a_garbage_rendezvous_file_is_named_and_nothing_is_left_running(tmp_path):
    (tmp_path / 'node-1.json').write_text('\x00garbage')
    node = start_node(tmp_path, peer_spec(1, 19360, nodes=2), 0)
    out = node.communicate(timeout=60)[0]
    assert node.returncode == 1, out
    assert f'{tmp_path}/node-1.json (what node 1 published) is not JSON' in out
    (tmp_path / 'node-1.json').write_text('')
    node = start_node(tmp_path, peer_spec(1, 19361, nodes=2), 0)
    out = node.communicate(timeout=60)[0]
    assert node.returncode == 1 and 'not JSON' in out, out


def test_a_killed_runner_stops_what_it_started_and_tells_the_peers(tmp_path):
    s = peer_spec(1, 19370)
    s['flows'][0]['client']['argv'][-1] = '30'          # a long measurement
    nodes = [start_node(tmp_path, s, rank) for rank in (0, 1)]
    deadline = time.monotonic() + 20
    while not (tmp_path / 'flow-0.client.out').exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    nodes[0].terminate()                                  # what srun does to a step it cancels
    outs = [n.communicate(timeout=30)[0] for n in nodes]
    assert nodes[0].returncode == 1 and nodes[1].returncode == 1, outs
    assert 'terminated by signal 15' in json.loads((tmp_path / 'failed-0.json').read_text())['reason']
    assert status(tmp_path, 'flow-0.client')['returncode'] == 'killed'
    pids = [int(line.split()[2]) for name in ('client', 'server')
            for line in (tmp_path / f'flow-0.{name}.out').read_text().splitlines() if ' pid ' in line]
    assert pids and not any(Path(f'/proc/{pid}').exists() for pid in pids)


def test_a_runner_stopped_because_a_peer_failed_passes_the_peers_reason_on(tmp_path):
    """srun --kill-on-bad-exit stops the other tasks when one fails: their markers carry the first reason."""
    node = start_node(tmp_path, peer_spec(1, 19390, connect_timeout=30), 0)
    deadline = time.monotonic() + 20
    while not (tmp_path / 'node-0.json').exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (tmp_path / 'failed-1.json').write_text(json.dumps({'node': 1, 'host': 'cn2', 'time': time.time(),
                                                        'reason': 'RDMA device rxe9 not found (it has: rxe0)',
                                                        'run': pair.run_id(tmp_path / 'flows.json')}))
    node.terminate()
    out = node.communicate(timeout=30)[0]
    assert node.returncode == 1, out
    assert 'node 1 (cn2) failed: RDMA device rxe9 not found' in json.loads((tmp_path / 'failed-0.json').read_text())[
        'reason'], out


def test_a_missing_program_is_reported_to_the_peers(tmp_path):
    lines = []
    rc = pair.run(spec(program='ib_no_such_test'), tmp_path, nodes=[0], log=lines.append)
    assert rc == 127
    assert "'ib_no_such_test' not found on PATH" in lines[0]
    assert 'not found on PATH' in json.loads((tmp_path / 'failed-0.json').read_text())['reason']


@needs_root
def test_two_hosts_pass_the_placement_check(tmp_path):
    """Two runners in their own UTS namespaces (two host names, as on two nodes) run a flow between them."""
    nodes = [start_node(tmp_path, peer_spec(1, 19380, distinct_hosts=True), rank,
                        prefix=['unshare', '--uts', 'sh', '-c', f'hostname node{rank} && exec "$@"', 'sh'])
             for rank in (0, 1)]
    outs = [n.communicate(timeout=60)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [0, 0], outs
    assert status(tmp_path, 'flow-0.server')['host'] == 'node1'
    assert status(tmp_path, 'flow-0.client')['host'] == 'node0'


@needs_perftest
def test_a_rail_device_the_node_lacks_fails_at_the_probe_naming_it(tmp_path):
    lines = []
    t0 = time.monotonic()
    rc = pair.run(spec(), tmp_path, log=lines.append)
    assert rc == 1 and time.monotonic() - t0 < 5, lines
    have = ', '.join(sorted(os.listdir('/sys/class/infiniband'))) if os.path.isdir('/sys/class/infiniband') else ''
    assert any(f'RDMA device rxe_a, rxe_b not found (it has: {have or "none, no /sys/class/infiniband"})' in line
               for line in lines), lines
    assert not list(tmp_path.glob('flow-*'))        # nothing was started
    assert 'RDMA device rxe_a, rxe_b not found' in json.loads((tmp_path / 'failed-0.json').read_text())['reason']


def test_a_server_that_dies_while_its_client_retries_ends_the_flow(tmp_path):
    """Nodes reached through node_exec (emulated nodes): servers get a 1 s grace, then their clients retry while
    they are not listening. A server that dies after the grace ends the flow at once, with its own output."""
    s = peer_spec(1, 19380, node_exec=['env'], python=sys.executable, wait_listen=False)
    s['flows'][0]['server']['argv'] = [sys.executable, '-c', 'import sys, time; time.sleep(2); '
                                       'print("server: lost its device"); sys.exit(3)']
    s['flows'][0]['client']['argv'] = [sys.executable, '-c',
                                       'import sys; print("Couldn\'t connect to 127.0.0.1:19370"); sys.exit(1)']
    lines = []
    t0 = time.monotonic()
    rc = pair.run(s, tmp_path, log=lines.append)
    assert rc == 1 and time.monotonic() - t0 < 10, lines
    assert any('flow 0: server on' in line and 'exited with 3 before a client connected: server: lost its device'
               in line for line in lines), lines
    assert status(tmp_path, 'flow-0.server')['returncode'] == 3


@needs_perftest
@pytest.mark.integration
def test_verbs_family_on_a_partition_without_the_device_says_so(reframe):
    """A partition that declares RoCE devices its nodes lack: the checks fail before perftest starts, naming the
    devices and what the node has."""
    proc = reframe('-r', '-n', 'PerftestLatency%operation=rdma_write', '-S', 'iterations=100',
                   config='tests/configs/declared_rdma.py')
    assert proc.returncode == 1, output(proc)
    assert 'Reason: sanity error: flow 0: the client never ran' in proc.stdout, output(proc)
    assert 'RDMA device rxe_a, rxe_b not found (it has: ' in proc.stdout, output(proc)


# -- the oldest Python a compute node may have -------------------------------------------------------------

def test_the_runner_needs_at_most_python_3_6():
    vermin = Path(sys.executable).parent / 'vermin'
    if not vermin.exists():
        pytest.skip('vermin not installed (pip install -e .[test])')
    done = subprocess.run([str(vermin), '--no-tips', '--violations', '-t=3.6-', RUNNER], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'Minimum required versions: 3.6' in done.stdout or 'Minimum required versions: 3.' in done.stdout


@pytest.mark.skipif(not old_python('3.6'), reason='no Python 3.6 here (pyenv install 3.6)')
def test_the_runner_runs_flows_under_python_3_6(tmp_path):
    """The runner itself under 3.6 (the sides are this test's own programs), both nodes in one task."""
    path = tmp_path / 'flows.json'
    path.write_text(json.dumps(peer_spec(2, 19390)))
    done = subprocess.run([old_python('3.6'), RUNNER, str(path)], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k not in ('SLURM_PROCID', 'PMI_RANK')})
    assert done.returncode == 0, done.stdout
    assert all(status(tmp_path, f'flow-{i}.client')['returncode'] == 0 for i in (0, 1))
    assert (tmp_path / 'flow-0.client.out').read_text().splitlines()[1].startswith('# ibrepro pair: pinned to cpu ')


def test_a_client_that_cannot_reach_a_listening_server_gives_up_after_the_connect_timeout(tmp_path):
    """A firewalled or mis-routed rail: the server listens, its client is refused. The runner stops retrying
    `connect_timeout` seconds after the barrier (not at the 60 s time limit) and names the address and rail."""
    s = peer_spec(1, 19400, connect_timeout=2, timeout=300)
    s['flows'][0]['client']['argv'][3] = '19401'          # refused: nothing listens there
    lines = []
    t0 = time.monotonic()
    rc = pair.run(s, tmp_path, log=lines.append)
    assert rc == 1 and time.monotonic() - t0 < 150, lines     # long before the 300 s time limit
    reason = json.loads((tmp_path / 'failed-0.json').read_text())['reason']
    host = json.loads((tmp_path / 'node-1.json').read_text())['host']
    assert f'could not connect to its server at {host} port 19400' in reason
    assert '(node 1, rail 0: default device port 1) for 2 s after every server was started' in reason
    assert 'Connection refused' in reason
    assert status(tmp_path, 'flow-0.server')['returncode'] == 'killed'      # nothing is left running


# -- binding that is true or fails: a fake sysfs and a restricted affinity mask ----------------------------

def _binding_spec(tmp_path, cpulists, flows, **kw):
    """Rails on devices whose PCI functions have the given local_cpulist (None: no PCI function, as soft-RoCE)."""
    sysfs = tmp_path / 'sys'
    for i, cpulist in enumerate(cpulists):
        if cpulist is None:
            (sysfs / 'class' / 'infiniband' / f'rxe{i}').mkdir(parents=True)
        else:
            sysfs_rail(sysfs, f'mlx5_{i}', numa=i, cpulist=cpulist)
    names = [f'rxe{i}' if c is None else f'mlx5_{i}' for i, c in enumerate(cpulists)]
    return pair.check_spec({'version': 2, 'rails': [[n, 1] for n in names], 'nodes': 2, 'flows': flows,
                            'timeout': 60, 'connect_timeout': 10, 'wait_listen': False, 'sysfs': str(sysfs), **kw})


def _run_confined(tmp_path, spec_, cpus):
    """The runner as one task confined to ``cpus`` (as a cgroup cpuset of srun -c N would), both nodes."""
    path = tmp_path / 'flows.json'
    path.write_text(json.dumps(spec_))
    return subprocess.run([sys.executable, RUNNER, str(path)], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60,
                          preexec_fn=lambda: os.sched_setaffinity(0, cpus),
                          env={k: v for k, v in os.environ.items() if k not in ('SLURM_PROCID', 'PMI_RANK')})


def _peer(side, port, node, rail, **extra):
    argv = [sys.executable, PEER, side, str(port)] + (['127.0.0.1', '0.3'] if side == 'client' else [])
    return {'node': node, 'rail': rail, 'argv': argv, **extra}


needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason='needs two CPUs')


@needs_two_cpus
def test_each_side_runs_on_its_own_cpu_near_its_device(tmp_path):
    cpu0, cpu1 = sorted(os.sched_getaffinity(0))[:2]
    flows = [{'id': 0, 'port': 19410, 'server': _peer('server', 19410, 1, 0), 'client': _peer('client', 19410, 0, 1)}]
    done = _run_confined(tmp_path, _binding_spec(tmp_path, [str(cpu0), str(cpu1)], flows), {cpu0, cpu1})
    assert done.returncode == 0, done.stdout
    server, client = status(tmp_path, 'flow-0.server'), status(tmp_path, 'flow-0.client')
    assert (server['cpus'], client['cpus']) == ([cpu0], [cpu1])
    assert server['binding'] == 'near mlx5_0 (NUMA node 0)' and client['binding'] == 'near mlx5_1 (NUMA node 1)'
    assert (tmp_path / 'flow-0.client.out').read_text().splitlines()[2].endswith(f'cpus [{cpu1}]')   # really


@needs_two_cpus
def test_a_side_that_cannot_get_a_cpu_near_its_device_fails_the_case_saying_why(tmp_path):
    """The issue's measurement: the device on NUMA node 1, the task confined to a CPU of node 0 (srun -c 1 under
    task/cgroup): the runner used to fall back to the far CPU silently; now nothing starts and the reason is
    recorded for the check."""
    cpu0, cpu1 = sorted(os.sched_getaffinity(0))[:2]
    flows = [{'id': 0, 'port': 19420, 'server': _peer('server', 19420, 1, 0), 'client': _peer('client', 19420, 0, 0)}]
    done = _run_confined(tmp_path, _binding_spec(tmp_path, [str(cpu1)], flows), {cpu0})
    assert done.returncode == 1, done.stdout
    reason = json.loads((tmp_path / 'failed-0.json').read_text())['reason']
    assert f'needs 1 CPU(s) of its own near mlx5_0 (CPUs {cpu1} are local to it)' in reason
    assert f'this task may use only CPUs {cpu0}' in reason and 'srun --whole' in reason
    assert not list(tmp_path.glob('flow-*.out'))        # nothing measured far from the HCA


def test_two_sides_never_share_a_cpu_on_a_real_partition(tmp_path):
    cpu = sorted(os.sched_getaffinity(0))[0]
    flows = [{'id': 0, 'port': 19430, 'server': _peer('server', 19430, 1, 0), 'client': _peer('client', 19430, 0, 0)}]
    done = _run_confined(tmp_path, _binding_spec(tmp_path, [str(cpu)], flows), {cpu})
    assert done.returncode == 1 and 'needs 1 CPU(s) of its own near mlx5_0' in done.stdout, done.stdout
    # emulated nodes may share (cpu_sharing), and their status says so
    emulated = tmp_path / 'emulated'
    emulated.mkdir()
    done = _run_confined(emulated, _binding_spec(emulated, [str(cpu)], flows, cpu_sharing=True), {cpu})
    assert done.returncode == 0, done.stdout
    assert 'shares CPUs' in status(emulated, 'flow-0.client')['binding']


@needs_two_cpus
def test_a_device_without_pci_locality_says_the_numa_node_is_unknown(tmp_path):
    flows = [{'id': 0, 'port': 19440, 'server': _peer('server', 19440, 1, 0), 'client': _peer('client', 19440, 0, 0)}]
    done = _run_confined(tmp_path, _binding_spec(tmp_path, [None], flows), set(os.sched_getaffinity(0)))
    assert done.returncode == 0, done.stdout
    binding = status(tmp_path, 'flow-0.server')['binding']
    assert binding.startswith('rxe0: HCA NUMA node unknown')


#: A side that forks two busy processes (as ibrepro_rdma -P 2 does); each says which CPUs it may run on once the
#: runner has pinned it (or after 20 s).
FORKER = (
    'import os, sys, time\n'
    'kids = []\n'
    'for i in range(2):\n'
    '    pid = os.fork()\n'
    '    if pid == 0:\n'
    '        until = time.time() + 20\n'
    '        while len(os.sched_getaffinity(0)) > 1 and time.time() < until:\n'
    '            time.sleep(0.05)\n'
    '        os.write(1, ("child %s\\n" % sorted(os.sched_getaffinity(0))).encode())   # one write: no interleaving\n'
    '        os._exit(0)\n'
    '    kids.append(pid)\n'
    'os.write(1, ("parent %s\\n" % sorted(os.sched_getaffinity(0))).encode())\n'
    'for pid in kids:\n'
    '    os.waitpid(pid, 0)\n')


#: A server that ends once its client has (the runner fails a flow whose server ends first).
WAIT_FOR_CLIENT = ('import os, time\n'
                   'while not os.path.exists("flow-0.client.status.json"):\n'
                   '    time.sleep(0.05)\n')


@needs_two_cpus
def test_each_forked_process_of_a_side_gets_its_own_cpu(tmp_path):
    """ibrepro_rdma -P 2 forks its pairs: pinning the side to one CPU put both busy pollers on it (inherited mask).
    Two runner processes (one per node), each with two CPUs near the device."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    flows = [{'id': 0, 'port': 19450,
              'server': {'node': 1, 'rail': 0, 'argv': [sys.executable, '-c', WAIT_FOR_CLIENT]},
              'client': {'node': 0, 'rail': 0, 'argv': [sys.executable, '-c', FORKER], 'processes': 2}}]
    spec_ = _binding_spec(tmp_path, [','.join(map(str, cpus))], flows)
    nodes = [start_node(tmp_path, spec_, rank) for rank in (0, 1)]
    outs = [n.communicate(timeout=60)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [0, 0], outs
    client = status(tmp_path, 'flow-0.client')
    assert client['cpus'] == cpus and sorted(client['process_cpus'].values()) == cpus
    lines = (tmp_path / 'flow-0.client.out').read_text().splitlines()
    assert f'parent {cpus}' in lines                                     # the side: both CPUs, shared by none
    assert sorted(line for line in lines if line.startswith('child')) == [f'child [{c}]' for c in cpus]


# -- what the check makes of concurrent flows -----------------------------------------------------------------

def test_a_starved_concurrent_flow_fails_the_case_on_a_real_partition():
    """A real output with a 0.00 MiB/sec row (a starved window under emulation, at 2048 B) beside a flow that moved
    data: summed, the 0 would pass as half the traffic."""
    from ibrepro.parsers import parse_file
    from ibrepro.rfm import perftest
    from reframe.core.exceptions import SanityError

    fixtures = Path(__file__).parent / 'fixtures' / 'perftest' / '26.04.17-rxe'
    stalled = parse_file(fixtures / 'ib_write_bw.all.txt').table()
    moving = parse_file(fixtures / 'ib_write_bw.txt').table()
    with pytest.raises(SanityError, match=r'flow 1 at 2048 B \(bw, msgrate 0\).*not simultaneous traffic'):
        perftest.starved([moving, stalled], [0, 1])
    # emulated partitions record it, and the sum goes on (their numbers are not performance data)
    assert perftest.starved([moving, stalled], [0, 1], emulated=True) == ['flow 1 at 2048 B (bw, msgrate 0)']
    assert perftest.starved([moving, moving], [0, 1]) == []


def test_a_single_flow_that_moved_nothing_is_not_a_measurement():
    """One flow's 0.00 row (the same real output): a real partition fails it; an emulated one records it when other
    sizes measured, and fails when nothing did (the case would store 0 MB/s as its figure, as a soft-RoCE run once
    did)."""
    from ibrepro.parsers import parse_file
    from ibrepro.rfm import pair_runner
    from reframe.core.exceptions import SanityError

    fixtures = Path(__file__).parent / 'fixtures' / 'perftest' / '26.04.17-rxe'
    stalled = parse_file(fixtures / 'ib_write_bw.all.txt').table()
    with pytest.raises(SanityError, match=r'flow 0 at 2048 B \(bw, msgrate 0\).*not a measurement'):
        pair_runner.unmeasured(stalled, 0)
    assert pair_runner.unmeasured(stalled, 0, emulated=True) == ['flow 0 at 2048 B (bw, msgrate 0)']
    only = dataclasses.replace(stalled, rows=[r for r in stalled.rows if r[stalled.size_key] == 2048])
    with pytest.raises(SanityError, match='not a measurement'):
        pair_runner.unmeasured(only, 0, emulated=True)
    assert pair_runner.unmeasured(parse_file(fixtures / 'ib_write_bw.txt').table(), 0) == []


def test_each_node_and_side_records_its_locked_memory_limit(tmp_path):
    """ulimit -l: RDMA registers memory in locked pages; a job started from a shell with a small limit fails or
    measures less, so every node and side says what it had (here: a real limit set in the child, in bytes)."""
    path = tmp_path / 'flows.json'
    path.write_text(json.dumps(peer_spec(1, 19460)))
    code = ('import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_MEMLOCK, (65536, 65536)); '
            f'sys.argv = ["ibrepro_pair.py", {str(path)!r}]; runpy.run_path({RUNNER!r}, run_name="__main__")')
    done = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k not in ('SLURM_PROCID', 'PMI_RANK')})
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / 'node-0.json').read_text())['memlock'] == 65536
    assert status(tmp_path, 'flow-0.client')['memlock'] == 65536


def test_a_side_that_cannot_be_pinned_does_not_run_elsewhere(tmp_path):
    marker = tmp_path / 'ran'
    done = subprocess.run([sys.executable, RUNNER, '--pin', '4095', '--', 'touch', str(marker)],
                          capture_output=True, text=True)
    assert done.returncode == 126 and 'could not pin to cpu 4095' in done.stdout
    assert not marker.exists()


# -- hostile rendezvous files ------------------------------------------------------------------------------

@pytest.mark.parametrize('name', ['node-1.json', 'failed-1.json'])
def test_binary_garbage_in_a_rendezvous_file_is_named_and_the_peers_are_told(tmp_path, name):
    """Not a UnicodeDecodeError, and a failure marker is written: the real peer does not wait its whole timeout."""
    s = peer_spec(1, 19400)
    (tmp_path / 'flows.json').write_text(json.dumps(s))
    (tmp_path / name).write_bytes(b'\xff\xfe\x00\x81garbage' * 64)
    node = start_node(tmp_path, s, 0)
    out = node.communicate(timeout=60)[0]
    assert node.returncode == 1 and 'Traceback' not in out, out
    assert f'{tmp_path}/{name} (' in out and 'is binary data, not JSON text' in out, out
    assert 'is binary data' in json.loads((tmp_path / 'failed-0.json').read_text())['reason']


def test_a_stale_rendezvous_from_an_earlier_job_is_not_used(tmp_path):
    """node-1.json and a failure marker an earlier job left in the same directory: not this job's peer."""
    first = [start_node(tmp_path, peer_spec(1, 19410), rank) for rank in (0, 1)]
    assert [n.communicate(timeout=60) and n.returncode for n in first] == [0, 0]
    (tmp_path / 'failed-1.json').write_text(json.dumps({'node': 1, 'host': 'old', 'reason': 'an earlier job',
                                                        'time': 0, 'run': pair.run_id(tmp_path / 'flows.json')}))
    time.sleep(0.01)
    node = start_node(tmp_path, peer_spec(1, 19411, connect_timeout=2), 0)     # its peer never comes
    out = node.communicate(timeout=60)[0]
    assert node.returncode == 1 and 'waiting for the other nodes to start: no node-1.json after 2 s' in out, out
    assert 'an earlier job' not in out


def test_a_number_published_as_an_address_is_named(tmp_path):
    node = start_node(tmp_path, peer_spec(1, 19420), 0)       # its peer, of the same job, publishes a number
    peer = {'host': 'cn2', 'cpus': [0], 'rails': [{'address': 167772161, 'near_cpus': [0]}],
            'run': pair.run_id(tmp_path / 'flows.json')}
    (tmp_path / 'node-1.json').write_text(json.dumps(peer))
    out = node.communicate(timeout=60)[0]
    assert node.returncode == 1 and 'Traceback' not in out, out
    assert f'{tmp_path}/node-1.json: rail 0 address 167772161 is not a host name or IP address' in out, out


def test_a_missing_or_shared_workdir_is_named(tmp_path):
    proc = subprocess.run([sys.executable, RUNNER, '--workdir', str(tmp_path / 'none'), str(_spec_file(tmp_path))],
                          capture_output=True, text=True, timeout=60, env={**os.environ, 'IBREPRO_NODE_RANK': '0',
                                                                           'IBREPRO_NODES': '2'})
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc
    assert f'work directory {tmp_path}/none: No such file or directory' in proc.stdout, proc
    shared = tmp_path / 'shared'
    shared.mkdir()
    shared.chmod(0o1777)
    lines = []
    assert pair.run(peer_spec(1, 19430), shared, nodes=[0], log=lines.append) == 2
    assert f'work directory {shared} is shared' in lines[0] and not list(shared.iterdir())


def test_a_link_planted_as_a_rendezvous_file_is_not_followed(tmp_path):
    s = peer_spec(1, 19440)
    (tmp_path / 'flows.json').write_text(json.dumps(s))
    elsewhere = tmp_path / 'elsewhere.json'
    elsewhere.write_text(json.dumps({'host': 'cn9', 'cpus': [0], 'rails': [{'address': '10.0.0.9', 'near_cpus': [0]}],
                                     'run': pair.run_id(tmp_path / 'flows.json')}))
    (tmp_path / 'node-1.json').symlink_to(elsewhere)
    node = start_node(tmp_path, s, 0)
    out = node.communicate(timeout=60)[0]
    assert node.returncode == 1 and 'node-1.json (what node 1 published) is a symbolic link' in out, out


def _spec_file(tmp_path):
    path = tmp_path / 'flows.json'
    path.write_text(json.dumps(peer_spec(1, 19450)))
    return path


def test_an_end_stopped_while_it_sets_up_still_says_why(tmp_path, monkeypatch):
    """Both ends lack the device: the first to fail has srun stop the other, which may still be setting up its
    runner. It leaves its own marker (naming its peer's reason), as an end stopped later does."""
    s = peer_spec(1, 19460)
    (tmp_path / 'flows.json').write_text(json.dumps(s))
    run = pair.run_id(tmp_path / 'flows.json')
    (tmp_path / 'failed-0.json').write_text(json.dumps({'node': 0, 'host': 'cn1', 'reason': 'RDMA device rxe9 not '
                                                        'found', 'time': 0, 'run': run}))

    my_nodes, signals = pair.my_nodes, []

    def stopped_while_setting_up(*args, **kw):      # srun's SIGTERM, delivered while the runner is being built
        if not signals:
            signals.append(pair.signal.SIGTERM)
            os.kill(os.getpid(), pair.signal.SIGTERM)
            time.sleep(1)
            raise AssertionError('SIGTERM was not handled')
        return my_nodes(*args, **kw)
    monkeypatch.setattr(pair, 'my_nodes', stopped_while_setting_up)
    monkeypatch.setenv('IBREPRO_NODE_RANK', '1')
    monkeypatch.setenv('IBREPRO_NODES', '2')
    lines = []
    assert pair.run(s, tmp_path, nodes=None, log=lines.append, run_id=run) == 1
    assert 'terminated by signal 15' in lines[0] and 'node 0 (cn1) failed: RDMA device rxe9 not found' in lines[0]
    marker = json.loads((tmp_path / 'failed-1.json').read_text())
    assert marker['run'] == run and 'rxe9 not found' in marker['reason']


def test_each_rail_records_its_link_layer_and_roce_traffic_class(tmp_path):
    """A RoCE run's priority (the port's default traffic class, set by sites through mlx5's tc/<port>/traffic_class
    for a lossless PFC class) decides whether it sees drops under load: recorded as the node says it, raw."""
    sysfs_rail(tmp_path, 'mlx5_0', gids=[('0000:0000:0000:0000:0000:ffff:c612:0102', 'RoCE v2')])
    tc = tmp_path / 'class' / 'infiniband' / 'mlx5_0' / 'tc' / '1'
    tc.mkdir(parents=True)
    (tc / 'traffic_class').write_text('Global tclass=106\n')
    sysfs_rail(tmp_path, 'mlx5_1', link_layer='InfiniBand')
    rails = pair.probe([['mlx5_0', 1], ['mlx5_1', 1]], tmp_path)['rails']
    assert [(r['link_layer'], r['traffic_class']) for r in rails] == [('Ethernet', 'Global tclass=106'),
                                                                       ('InfiniBand', None)]

"""The fleet's pair rounds as a job runs them (ibrepro.fleet.rounds), without a cluster: the plan and the pair runner's
specs of a night on the proving ground's fat tree, the topology's spines, the TCP rail, and ``ibrepro fleet
analyse`` on a real night of the 8-node namespace fat tree (tests/data/fleet/, MANIFEST.md)."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import output
from ibrepro import pair
from ibrepro.fleet import localise as fleet_localise
from ibrepro.fleet import plan as fleet_plan
from ibrepro.fleet import rounds as fleet_rounds
from ibrepro.fleet import night as fleet_night
from ibrepro.fleet import history as fleet_history

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / 'tests' / 'data' / 'fleet'
FABRIC_SH = ROOT / 'ci' / 'cluster' / 'fabric.sh'
FATTREE_ENV = {'IBREPRO_CLUSTER_NODES': '8', 'IBREPRO_CLUSTER_FABRIC': 'fattree', 'IBREPRO_CLUSTER_PREFIX': 'ibt-',
               'IBREPRO_CLUSTER_DIR': '/tmp/ibrepro-fattree-unit', 'PATH': '/usr/sbin:/usr/bin:/sbin:/bin'}


def _fabric_sh(*args, **env):
    return subprocess.run(['bash', str(FABRIC_SH), *args], env={**FATTREE_ENV, **env}, capture_output=True,
                          text=True, timeout=30)


def test_fabric_sh_topology_is_what_the_plan_reads():
    done = _fabric_sh('topology')
    assert done.returncode == 0, done.stderr
    leaves, spines = fleet_night.load_topology(done.stdout)
    assert leaves == {'leaf1': [f'node{i}' for i in range(1, 5)], 'leaf2': [f'node{i}' for i in range(5, 9)]}
    assert spines == 2


def test_fabric_sh_refuses_what_is_not_its_fabric():
    assert _fabric_sh('links', IBREPRO_CLUSTER_FABRIC='none').returncode == 2
    assert _fabric_sh('links', IBREPRO_CLUSTER_NODES='4').returncode == 2         # a fat tree has 8 nodes here
    assert _fabric_sh('links', IBREPRO_CLUSTER_FABRIC_RATE='1gbit').returncode == 2
    bad = _fabric_sh('degrade', 'cable node9 up; reboot', '10')
    assert bad.returncode == 2 and 'no such link' in bad.stderr
    assert _fabric_sh('degrade', 'cable node3 up', '100').returncode == 2


def test_fabric_sh_links_are_the_localisers_components():
    links = _fabric_sh('links').stdout.splitlines()
    fabric = fleet_plan.fabric_from_leaves(*fleet_night.load_topology(_fabric_sh('topology').stdout))
    components = {c.replace(':fab0/1', '') for s in fabric.nodes for d in fabric.nodes if s != d
                  for c in fabric.components(s, d, ('fab0', 1))}
    assert len(links) == 16 + 8 and set(links) <= components


def test_a_night_is_one_job_of_three_rounds_with_its_own_confirmation():
    fabric, rounds, jobs = fleet_night.night(*fleet_night.load_topology(_fabric_sh('topology').stdout))
    assert len(jobs) == 1
    plan = fleet_rounds.plan(fabric, rounds, jobs[0], seconds=3)
    assert plan['confirm'] and [r['number'] for r in plan['rounds']] == [0, 1, 2]
    for r in plan['rounds']:
        spec = pair.check_spec(fleet_rounds.round_spec(plan, r['pairs']))
        nodes = [n for p in r['pairs'] for n in p]
        assert sorted(nodes) == sorted(set(nodes)) == plan['nodes']          # disjoint, every node once
        flows = [(f['src'], f['dst']) for f in spec['flows']]
        assert sorted(flows) == sorted(fleet_plan.flows_of(r['pairs']))      # both directions of each pair
        assert len({f['port'] for f in spec['flows']}) == len(flows)
        for f in spec['flows']:
            assert plan['nodes'][f['client']['node']] == f['src'] and plan['nodes'][f['server']['node']] == f['dst']
            assert f['client']['argv'][:3] == ['iperf3', '-c', '{server_addr}']
        assert spec['rails'] == [['netdev:fab0', None]]


PERFTEST = ROOT / 'tests' / 'fixtures' / 'perftest' / '26.04.17-rxe'
RAILS = [('rxe0', 1), ('rxe1', 1)]


def _rdma_night(tmp_path):
    fabric, rounds, jobs = fleet_night.night({'leaf1': ['node1', 'node2', 'node3', 'node4']})
    plan = fleet_rounds.plan(fabric, rounds, jobs[0], seconds=3, rails=RAILS, perftest_options=['-u', '20'])
    fleet_rounds.prepare(tmp_path, plan)
    return plan


def test_an_rdma_round_is_perftest_on_every_rail_then_each_pairs_latency_alone(tmp_path):
    plan = _rdma_night(tmp_path)
    assert plan['transport'] == 'rdma' and 'netdev' not in plan
    for r in plan['rounds']:
        d = tmp_path / f'round-{r["number"]}'
        bw = pair.check_spec(json.loads((d / 'spec.json').read_text()))
        # -D: the plan's 3 s measured, perftest's 2 s margins at both ends left out
        assert bw['program'] == 'ib_write_bw' and bw['options'] == ['-F', '-D', '7', '-u', '20']
        assert bw['rails'] == [list(x) for x in RAILS] and bw['pin']
        # every pair, every rail, both directions at once; the client and server of a flow on the same rail
        assert sorted((f['src'], f['dst'], f['client']['rail']) for f in bw['flows']) == sorted(
            (s, t, k) for s, t in fleet_plan.flows_of(r['pairs']) for k in range(len(RAILS)))
        assert all(f['client']['rail'] == f['server']['rail'] for f in bw['flows'])
        assert len({f['port'] for f in bw['flows']}) == len(bw['flows'])
        lat = pair.check_spec(json.loads((d / fleet_rounds.LATENCY / 'spec.json').read_text()))
        assert lat['program'] == 'ib_send_lat' and lat['options'] == ['-F', '-u', '20']
        assert sorted((f['src'], f['dst'], f['client']['rail']) for f in lat['flows']) == sorted(
            (a, b, k) for a, b in r['pairs'] for k in range(len(RAILS)))


def _output(path, text):
    path.write_text(f'# client: the runner\'s command line\n# binding: any\n{text}')


def test_flow_records_of_real_perftest_outputs(tmp_path):
    """Each flow's output is a real perftest run's (ib_write_bw -D and ib_send_lat over soft-RoCE, the fixtures of
    tests/fixtures/perftest/26.04.17-rxe): its average bandwidth in MB/s (10^6 bytes), its pair's and rail's typical
    latency; a flow whose client printed a failure is a record with its error."""
    _rdma_night(tmp_path)
    d = tmp_path / 'round-0'
    spec = json.loads((d / 'spec.json').read_text())
    for f in spec['flows']:
        _output(d / f'flow-{f["id"]}.client.out', (PERFTEST / 'ib_write_bw.duration.txt').read_text())
    lat = json.loads((d / fleet_rounds.LATENCY / 'spec.json').read_text())
    for f in lat['flows']:
        _output(d / fleet_rounds.LATENCY / f'flow-{f["id"]}.client.out', (PERFTEST / 'ib_send_lat.txt').read_text())
    _output(d / 'flow-1.client.out', (PERFTEST / 'ib_write_bw.wrongdev.txt').read_text())
    (d / fleet_rounds.LATENCY / 'flow-0.client.out').unlink()         # that pair's latency on rail 0: nothing
    records = fleet_rounds.flow_records(d, 0)
    assert len(records) == len(spec['flows'])
    for f, rec in zip(spec['flows'], records):
        rail = RAILS[f['client']['rail']]
        assert (rec['host'], rec['peer'], rec['device'], rec['port']) == (f['src'], f['dst'], *rail)
        if f['id'] == 1:
            assert 'bw' not in rec and 'flow-1.client.out' in rec['error']
            continue
        assert rec['bw'] == pytest.approx(13.99 * 2 ** 20 / 1e6)     # printed: BW average[MiB/sec] 13.99
        if {f['src'], f['dst']} == {lat['flows'][0]['src'], lat['flows'][0]['dst']} and f['client']['rail'] == 0:
            assert 'lat' not in rec
        else:
            assert rec['lat'] == 3993.4                                  # printed: t_typical[usec] 3993.40
    named = fleet_localise.read_flows(records)
    assert {f['rail'] for f in named} == set(RAILS)


def test_a_real_rdma_round_whose_perftest_could_not_time_the_clock_says_so():
    """Round 0 of a real night in the soft-RoCE guests (perftest 4.5, TCG): both rxe0 clients printed
    "Correlation coefficient r^2: ... < 0.9" and 0.00 MB/s (perftest failed to estimate the CPU clock on busy
    emulated CPUs), the rxe1 flows moved data. A zero is no measurement: each is a record with an error naming the
    cause (the check fails naming it), never a value."""
    records = fleet_rounds.flow_records(FIXTURES / 'rdma-round-0', 0)
    assert [(r['host'], r['peer'], r['device']) for r in records] == [
        ('rxnode2', 'rxnode3', 'rxe0'), ('rxnode3', 'rxnode2', 'rxe0'),
        ('rxnode2', 'rxnode3', 'rxe1'), ('rxnode3', 'rxnode2', 'rxe1')]
    for r in records[:2]:
        assert 'bw' not in r and '0.0 MB/s measured' in r['error'] and 'CPU clock' in r['error']
    assert all(r['bw'] > 0 and r['lat'] == 5882.21 for r in records[2:])    # printed: rxe1's t_typical 5882.21
    assert len(fleet_localise.read_flows(records)) == 2


@pytest.mark.parametrize('slurm_node, expected', [
    ('{host}', '{host}'),                        # launched by Slurm: its Slurm name, whatever its hostname
    (None, '{host}.cluster.example'),            # not launched by Slurm: its hostname
    ('$(reboot)', '{host}.cluster.example'),     # not a node name: not taken
])
def test_a_flow_names_its_nodes_as_slurm_and_the_topology_do(tmp_path, slurm_node, expected):
    """A site whose hostnames are FQDNs: the real soft-RoCE round with each node's published hostname made
    ``<name>.cluster.example``; the flows still name the nodes as the topology (Slurm's NodeName) does, from the
    ``SLURMD_NODENAME`` the node published, else by its hostname."""
    shutil.copytree(FIXTURES / 'rdma-round-0', tmp_path / 'round-0')
    hosts = {}
    for path in sorted((tmp_path / 'round-0').glob('node-*.json')):
        info = json.loads(path.read_text())
        hosts[info['node']] = host = info['host']
        info['host'] = f'{host}.cluster.example'
        info['slurm_node'] = slurm_node and slurm_node.format(host=host)
        path.write_text(json.dumps(info))
    spec = json.loads((tmp_path / 'round-0' / 'spec.json').read_text())
    records = fleet_rounds.flow_records(tmp_path / 'round-0', 0)
    assert [(r['host'], r['peer']) for r in records] == [
        (expected.format(host=hosts[f['client']['node']]), expected.format(host=hosts[f['server']['node']]))
        for f in spec['flows']]


def test_a_node_publishes_its_slurm_name(monkeypatch):
    monkeypatch.setenv('SLURMD_NODENAME', 'cn0042')
    assert pair.probe([])['slurm_node'] == 'cn0042'
    monkeypatch.delenv('SLURMD_NODENAME')
    assert pair.probe([])['slurm_node'] is None


def test_a_task_runs_from_the_copied_modules_without_numpy_or_sqlite3(tmp_path):
    """A compute node's own interpreter (extras ``python``; the soft-RoCE guests' has no _sqlite3) runs the copy:
    the standard library only, no database module."""
    fleet_rounds.copy_node_modules(tmp_path)
    code = ('import sys; sys.modules.update(numpy=None, sqlite3=None, _sqlite3=None); sys.path.insert(0, sys.argv[1]); '
            'import ibrepro, ibrepro.fleet.rounds as r; '
            'assert ibrepro.__file__.startswith(sys.argv[1]), ibrepro.__file__; sys.exit(r.main([]))')
    done = subprocess.run([sys.executable, '-I', '-c', code, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and 'usage: python -m ibrepro.fleet.rounds' in done.stderr, done.stderr
    assert not (tmp_path / 'ibrepro' / 'results.py').exists()


def test_tcp_rail_is_the_address_of_its_interface():
    assert pair.rail_address('netdev:lo', None) == ('127.0.0.1', 'network interface lo')
    address, how = pair.rail_address('netdev:nonexistent0', None)
    assert address is None and 'no IPv4 address' in how
    assert pair.rail_address('netdev:a;b', None)[0] is None


def test_spines_of_a_topology_conf():
    text = ('SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n[3-4]\nSwitchName=s0 Switches=l[1-2]\n'
            'SwitchName=s1 Switches=l[1-2]\nSwitchName=s2 Switches=l[1-2]\nSwitchName=top Switches=s[0-2]\n')
    assert fleet_plan.parse_topology_spines(text) == 3
    assert fleet_plan.parse_topology_spines('SwitchName=l1 Nodes=n[1-2]\n') == 0


@pytest.mark.parametrize('name,component', [('uplink-leaf1-spine1-10', 'uplink leaf1>spine1'),
                                            ('uplink-leaf1-spine1-25', 'uplink leaf1>spine1'),
                                            ('downlink-spine0-leaf2-25', 'downlink spine0>leaf2'),
                                            ('clean', None)])
def test_fleet_analyse_names_the_slow_link_of_a_real_night(tmp_path, name, component):
    case = FIXTURES / f'fattree-{name}.fleet.json'
    out = tmp_path / 'out.json'
    done = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'fleet', 'analyse', str(case), '--json', str(out)],
                          capture_output=True, text=True, timeout=60)
    named = [s['name'] for s in json.loads(out.read_text())['named']]
    if component:
        assert done.returncode == 1, done.stdout + done.stderr
        assert len(named) == 1 and component in named[0].split(' = ')
    else:
        assert done.returncode == 0 and named == [], done.stdout
    # the same from the session's run report (the check's loggable variables)
    report = FIXTURES / f'fattree-{name}.report.json'
    again = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'fleet', 'analyse', str(report)],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == done.returncode, again.stdout + again.stderr
    assert again.stdout == done.stdout


@pytest.mark.parametrize('name,component', [('cable-rxnode3-rxe1-down', 'cable rxnode3:rxe1/1 down'),
                                            ('clean', None)])
def test_fleet_analyse_of_a_real_rdma_night(name, component):
    """Real RDMA nights of the check on the soft-RoCE Slurm guests (two rails, perftest 4.5): one with rxnode3's
    rxe1 tap shaped to 4 Mbit/s inbound names that rail's cable, and only it; a night without names nothing. Each
    flow carries its rail and its pair's latency, judged too (one latency flow per pair and rail): a bandwidth
    shaper does not slow a ping-pong, and neither night names anything by latency."""
    report = FIXTURES / f'softroce-rdma-{name}.report.json'
    data = fleet_history.from_report(json.loads(report.read_text()))
    assert {f['device'] for f in data['flows']} == {'rxe0', 'rxe1'} and all(f['lat'] > 0 for f in data['flows'])
    flows = fleet_localise.read_flows(data['flows'])
    result = fleet_rounds.analyse(data['flows'], fleet_history.night_fabric(data, flows), data['confirmation'])
    assert len(fleet_localise.latency_flows(flows)) == len(flows) // 2 and result.latency_scale > 0
    assert not [s for s in result.named if s.metric == fleet_localise.LATENCY]
    done = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'fleet', 'analyse', str(report)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == (1 if component else 0), done.stdout + done.stderr
    assert data['named'] == ([component] if component else [])        # what the check named that night
    if component:
        assert component in done.stdout


def test_fleet_analyse_refuses_a_report_without_pair_rounds(tmp_path):
    report = tmp_path / 'r.json'
    report.write_text(json.dumps({'session_info': {}, 'runs': [{'testcases': [{'name': 'x', 'system': 's',
                                                                              'partition': 'p', 'environ': 'e'}]}]}))
    done = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'fleet', 'analyse', str(report)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and 'no pair-round case' in done.stderr


def test_flow_records_of_a_real_round():
    """Round 1 of the real night with leaf1>spine1 at -10 %: the receiver's bandwidth of each iperf3 client, keyed by
    the hosts the nodes published; the two flows up leaf1>spine1 are the slowest."""
    flows = fleet_rounds.flow_records(FIXTURES / 'round-1', 1)
    assert len(flows) == 8 and all(f['direction'] == 'send' and f['device'] == 'fab0' for f in flows)
    assert {(f['host'], f['peer']) for f in flows} == set(fleet_plan.flows_of(
        [('node1', 'node5'), ('node2', 'node6'), ('node3', 'node7'), ('node4', 'node8')]))
    assert all(0 < f['bw'] < 5.0 for f in flows)          # MB/s, below the 40 Mbit/s (5 MB/s) of a cable
    fabric = fleet_rounds.fabric_of(json.loads((FIXTURES / 'round-1' / 'plan.json').read_text()))
    up = [f for f in flows if 'leaf1>spine1' in fabric.directed_links(f['host'], f['peer'])]
    assert len(up) == 2


def test_a_flow_that_measured_nothing_is_named(tmp_path):
    d = tmp_path / 'round-1'
    d.mkdir()
    for f in (FIXTURES / 'round-1').iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    (d / 'flow-3.client.out').write_text('# client: iperf3 ...\n')     # a client that printed nothing
    flows = fleet_rounds.flow_records(d, 1)
    assert 'bw' not in flows[3] and 'flow-3.client.out' in flows[3]['error']
    (d / 'flow-3.client.out').write_text('{"error": "unable to connect to server"}')
    assert fleet_rounds.flow_records(d, 1)[3]['error'] == 'unable to connect to server'


def test_a_job_whose_tasks_never_reached_the_stage_directory_says_so(tmp_path):
    """A stage directory the nodes do not share (ReFrame's --prefix on a login node's /tmp, as happened by hand on
    the soft-RoCE cluster): every flow measured nothing, and the check says why instead of listing missing files."""
    d = tmp_path / 'round-1'
    d.mkdir()
    for f in (FIXTURES / 'round-1').iterdir():
        if not f.name.startswith(('node-', 'flow-')):
            (d / f.name).write_bytes(f.read_bytes())
    assert all('error' in f for f in fleet_rounds.flow_records(d, 1))
    assert 'must be on a filesystem the nodes share' in fleet_rounds.no_task_ran(tmp_path)
    (d / 'node-0.json').write_bytes((FIXTURES / 'round-1' / 'node-0.json').read_bytes())
    assert fleet_rounds.no_task_ran(tmp_path) == ''


def test_a_real_night_with_an_unevenly_shared_trunk_clears_the_node_it_suspected(tmp_path):
    """leaf1>spine1 at -25 %: TCP shared the slowed trunk unevenly, so node6's cable was suspected too (as in the CI
    night that named nothing when node6 was kept out of the trunk's re-run). The link round loaded the trunk with
    two flows, node6 one of them; node6's own rounds (good partners) cleared it."""
    data = json.loads((FIXTURES / 'fattree-uplink-leaf1-spine1-25.fleet.json').read_text())
    suspects = {s['name']: s for s in data['result']['suspects']}
    assert suspects['cable node6:fab0/1 down']['confirmed'] is False
    link = suspects['uplink leaf1>spine1 = downlink spine1>leaf2']
    assert link['confirmed'] is True
    assert {f['round'] for f in link['confirmation']} == {'confirmation-links'}
    assert {f['dst'] for f in link['confirmation']} == {'node6', 'node8'}
    # and the library, from the stored flows, decides the same
    fabric = fleet_rounds.fabric_of(data)
    result = fleet_rounds.analyse(data['flows'], fabric, data['confirmation'])
    assert [s.name for s in result.named] == ['uplink leaf1>spine1 = downlink spine1>leaf2']


def test_a_node_is_not_confirmed_by_flows_through_a_suspect_link():
    """downlink spine0>leaf2 at -25 % (a real night): node7's and node2's cables were suspected too, and their
    other-leaf re-runs (node1->node7, node2->node5, at once) both crossed the slowed link: the night named all three.
    Judged again, the cables are no suspects (not every flow they carried was slow); judged as suspects, they
    stand on their re-run flows through no suspect link and are cleared."""
    data = json.loads((FIXTURES / 'fattree-downlink-spine0-leaf2-25.fleet.json').read_text())
    assert len(data['result']['named']) == 3              # what that night's run decided
    fabric = fleet_rounds.fabric_of(data)
    result = fleet_rounds.analyse(data['flows'], fabric, data['confirmation'])
    assert [s.name for s in result.named] == ['uplink leaf1>spine0 = downlink spine0>leaf2']
    assert not any(s.name.startswith('cable') for s in result.suspects)
    # the night's own suspects, re-judged by today's confirmation
    flows = fleet_localise.read_flows(data['flows'])
    night = fleet_localise.localise(flows, fabric)
    stored = {s['name'] for s in data['result']['suspects']}
    bw = fleet_localise._Metric(fleet_localise.BANDWIDTH, flows, fabric, night.method, None, {}, None)
    night.suspects = [bw.suspect(n, -0.25, 0.0, 0.0) for n in sorted(stored)]
    fleet_localise.confirm(night, fleet_localise.read_flows(data['confirmation']), fabric)
    cables = [s for s in night.suspects if s.name.startswith('cable')]
    assert len(cables) == 2 and all(s.confirmed is False for s in cables)
    assert all(f['round'] == 'confirmation' for s in cables for f in s.confirmation)
    assert [s.name for s in night.named] == ['uplink leaf1>spine0 = downlink spine0>leaf2']


def test_a_components_history_comes_from_the_stored_nights_it_was_not_named_in():
    """The three real nights as stored sessions: every component gets one effect per night that measured it, except
    from a night that named it (the downlink night, as stored, named its link and two cables: they miss that
    night); another partition's nights are not this one's."""
    reports = [json.loads((FIXTURES / f'fattree-{n}.report.json').read_text())
               for n in ('clean', 'uplink-leaf1-spine1-25', 'downlink-spine0-leaf2-25')]
    both, used = fleet_history.stored_history(reports, 'fattree-cluster', 'fabric')
    assert used == [r['session_info']['uuid'] for r in reports]
    assert set(both) == {fleet_localise.BANDWIDTH}                       # TCP nights measure no latency
    history = both[fleet_localise.BANDWIDTH]
    assert len(history['cable node1:fab0/1 up']) == 3
    downlink_night = json.loads((FIXTURES / 'fattree-downlink-spine0-leaf2-25.fleet.json').read_text())
    named = {m for s in downlink_night['result']['named'] for m in s['name'].split(' = ')}
    assert 'cable node7:fab0/1 down' in named and len(history['cable node7:fab0/1 down']) == 2
    assert len(history['uplink leaf1>spine0']) == 2                      # named too that night
    assert len(history['uplink leaf1>spine1']) == 2                      # named by the uplink night
    assert len(history['downlink spine1>leaf1']) == 3                    # named by none
    assert fleet_history.stored_history(reports, 'fattree-cluster', 'other') == ({}, [])
    assert fleet_history.stored_history(reports, 'fattree-cluster', 'fabric', nights=1)[1] == used[-1:]


def test_real_rdma_nights_give_each_component_a_latency_history_too():
    """The two real RDMA nights: each component gets a bandwidth and a latency effect per night; a ping-pong crosses
    both directions, so rxnode1's cable down has latency effects as its cable up does; the cable the second night
    named misses that night in both."""
    reports = [json.loads((FIXTURES / f'softroce-rdma-{n}.report.json').read_text())
               for n in ('clean', 'cable-rxnode3-rxe1-down')]
    both, used = fleet_history.stored_history(reports, 'softroce-slurm', 'rxe')
    assert used == [r['session_info']['uuid'] for r in reports]
    bw, lat = both[fleet_localise.BANDWIDTH], both[fleet_localise.LATENCY]
    assert len(lat['cable rxnode1:rxe0/1 down']) == len(lat['cable rxnode1:rxe0/1 up']) == 2
    assert len(bw['node rxnode2']) == len(lat['node rxnode2']) == 2
    assert len(bw['cable rxnode3:rxe1/1 down']) == len(lat['cable rxnode3:rxe1/1 down']) == 1
    assert all(math.isfinite(e) for effects in lat.values() for e in effects)


def test_a_cable_always_a_little_slow_is_judged_against_its_history():
    """The clean real night with node2's cable up 8 % slower in every flow (scaled from the real values): named
    without history; with three past nights where it was as slow, it is its normal."""
    data = json.loads((FIXTURES / 'fattree-clean.fleet.json').read_text())
    flows = [{**f, 'bw': f['bw'] * (0.92 if f['host'] == 'node2' else 1.0)} for f in data['flows']]
    fabric = fleet_rounds.fabric_of(data)
    assert [s.name for s in fleet_rounds.analyse(flows, fabric).named] == ['cable node2:fab0/1 up']
    effects = fleet_localise.component_effects(fleet_localise.read_flows(flows), fabric)
    history = {fleet_localise.BANDWIDTH: {c: [e] * 3 for c, e in effects.items()}}
    assert fleet_rounds.analyse(flows, fabric, history=history).named == []


def test_a_night_s_job_gives_each_task_its_whole_node_and_the_task_binds(reframe, tmp_path):
    """The site template's RDMA night as ReFrame generates it (--dry-run): whole nodes, one task each on the
    topology's nodes, and a step that sees its node's CPUs (--whole, no -c, which would imply --exact: under
    ConstrainCores one CPU, where a rail's client and server each need one near the HCA), bound by the pair
    runner, not srun; no --kill-on-bad-exit (a node whose flow failed must not end the others' later rounds)."""
    topology = tmp_path / 'topology.json'
    topology.write_text(json.dumps({'leafA': ['cn01', 'cn02'], 'leafB': ['cn03', 'cn04']}))
    done = reframe('--dry-run', '--system', 'example-cluster:hdr', '-n', 'FleetPairs',
                   config='configs/example-cluster.py', checks='reframe-checks/system/fleet_pairs.py',
                   env={'IBREPRO_FLEET_TOPOLOGY': str(topology)})
    assert done.returncode == 0, output(done)
    (script,) = [p.read_text() for p in reframe.home.rglob('rfm_job.sh')]
    lines = script.splitlines()
    assert {'#SBATCH --exclusive', '#SBATCH --ntasks=4', '#SBATCH --ntasks-per-node=1',
            '#SBATCH --nodelist=cn01,cn02,cn03,cn04'} <= set(lines), script
    step = lines[-1].split()
    assert step[:3] == ['srun', '--whole', '--cpu-bind=none'], script
    assert step[-4:] == ['-m', 'ibrepro.fleet.rounds', 'node', 'plan.json'], script
    assert not [o for o in step if o.startswith(('-c', '--cpus-per-task', '--exact', '--kill-on-bad-exit'))], script
    plan = json.loads(next(reframe.home.rglob('plan.json')).read_text())
    assert plan['transport'] == 'rdma' and plan['rails'] == [['mlx5_0', 1], ['mlx5_1', 1]]
    spec = json.loads(next(reframe.home.rglob('round-0/spec.json')).read_text())
    assert spec['pin'] and not spec['cpu_sharing']       # each side on a CPU of its own near its rail's HCA
    sides = [f[s]['node'] for f in spec['flows'] for s in ('server', 'client')]
    assert {sides.count(n) for n in range(4)} == {2 * len(plan['rails'])}     # what each task needs of its node
    assert not list(reframe.home.rglob('FleetConfirmation*'))      # one job holds every node: it confirms itself


def test_a_night_of_several_jobs_has_a_confirmation_job_after_them_all(reframe, tmp_path):
    """More nodes than a job's budget (here IBREPRO_FLEET_JOB_NODES=1 on four two-node leaves): one case per job
    and FleetConfirmation, which ReFrame runs after every one of them (a dependency on each); in a dry run nothing
    ran, so it has no suspects to re-test and is skipped, saying so."""
    topology = tmp_path / 'topology.json'
    topology.write_text(json.dumps({'leaves': {x: [f'cn{x}{i}' for i in (1, 2)] for x in 'abcd'}, 'spines': 2}))
    done = reframe('--dry-run', '--system', 'example-cluster:hdr', '-p', 'openmpi', '-n', 'FleetConfirmation',
                   config='configs/example-cluster.py', checks='reframe-checks/system/fleet_pairs.py',
                   env={'IBREPRO_FLEET_TOPOLOGY': str(topology), 'IBREPRO_FLEET_JOB_NODES': '1'})
    assert done.returncode == 0, output(done)
    assert done.stdout.count('DRY     ') == 5 and 'FleetConfirmation' in done.stdout, output(done)
    assert "Dependencies (actual)" not in done.stdout
    assert 'no suspects tonight: nothing to confirm' in done.stdout, output(done)
    plans = [json.loads(p.read_text()) for p in reframe.home.rglob('FleetPairs*/plan.json')]
    assert sorted(len(p['nodes']) for p in plans) == [4, 4, 4, 4] and not any(p['confirm'] for p in plans)


@pytest.mark.parametrize('topology, job_nodes, said', [
    ('topology.json', '0; reboot', "IBREPRO_FLEET_JOB_NODES='0; reboot': expected a number of nodes"),
    ('missing.conf', '16', 'No such file or directory'),
])
def test_a_night_whose_plan_cannot_be_made_fails_saying_why(reframe, tmp_path, topology, job_nodes, said):
    """Not a check that vanishes from the run (ReFrame passes a run whose check did not load): its case fails."""
    (tmp_path / 'topology.json').write_text(json.dumps({'leaf1': ['cn01', 'cn02']}))
    done = reframe('--dry-run', '--system', 'example-cluster:hdr', '-p', 'openmpi', config='configs/example-cluster.py',
                   checks='reframe-checks/system/fleet_pairs.py',
                   env={'IBREPRO_FLEET_TOPOLOGY': str(tmp_path / topology), 'IBREPRO_FLEET_JOB_NODES': job_nodes})
    assert done.returncode == 1 and said in done.stdout, output(done)


@pytest.mark.parametrize('job_nodes', ['²', '9' * 5000, '0; reboot', '0', '-4', ''])
def test_a_job_size_that_is_no_number_of_nodes_is_the_nights_problem_not_a_check_that_fails_to_load(tmp_path,
                                                                                                   job_nodes):
    (tmp_path / 'topology.json').write_text(json.dumps({'leaf1': ['cn01', 'cn02']}))
    env = {'IBREPRO_FLEET_TOPOLOGY': str(tmp_path / 'topology.json'), 'IBREPRO_FLEET_JOB_NODES': job_nodes}
    fabric, rounds, jobs, problem = fleet_night.night_from_environment(env)
    assert fabric is None and problem.startswith('IBREPRO_FLEET_JOB_NODES=') and 'expected a number of nodes' in problem
    fabric, rounds, jobs, problem = fleet_night.night_from_environment({**env, 'IBREPRO_FLEET_JOB_NODES': '16'})
    assert problem is None and fabric.nodes == ['cn01', 'cn02'] and len(jobs) == 1
    assert fleet_night.night_from_environment({}) == (None, [], [], None)


def test_a_topology_that_is_a_fifo_too_large_or_no_fabric_is_the_nights_problem(tmp_path):
    import os
    fifo = tmp_path / 'fifo'
    os.mkfifo(fifo)                            # reading it would block every ReFrame run that loads the check
    cases = [(fifo, 'not a regular file'),
             ('SwitchName=leaf1 Nodes=n[0-99999999999]\n', 'names more than'),
             (json.dumps({'leaves': {'leaf1': ['cn01']}, 'spines': 1e999}).replace('Infinity', '1e999'),
              'spines: inf is not a number of spine switches'),
             ('[' * 100000 + ']' * 100000, 'IBREPRO_FLEET_TOPOLOGY='),
             (b'SwitchName=leaf1 Nodes=n\xff\n', "can't decode")]
    for k, (topology, said) in enumerate(cases):
        path = topology if isinstance(topology, Path) else tmp_path / f'topology-{k}'
        if not isinstance(topology, Path):
            path.write_bytes(topology if isinstance(topology, bytes) else topology.encode())
        fabric, _, _, problem = fleet_night.night_from_environment({'IBREPRO_FLEET_TOPOLOGY': str(path)})
        assert fabric is None and problem and said in problem, (k, problem)


@pytest.mark.parametrize('state, why', [
    ('idle', None), ('mix', None), ('alloc', None), ('comp', None), ('idle~', None), ('idle#', None),
    ('drain', 'state drain'), ('drng', 'state drng'), ('down*', 'state down* (not responding)'),
    ('maint', 'state maint'),
    ('idle*', 'state idle* (not responding)'), ('idle$', 'state idle$ (in a maintenance reservation)'),
    ('resv', 'state resv'), ('fail', 'state fail'), ('unk*', 'state unk* (not responding)'),
])
def test_a_node_runs_the_night_only_in_a_state_that_runs_jobs(state, why):
    """Slurm's short node states (sinfo %t, with its flags): a node the night's job cannot have is left out with
    the state it is in; one the partition does not hold, as such."""
    assert fleet_night.left_out(['n1'], {'n1': state}, 'fabric') == ({'n1': why} if why else {})
    assert fleet_night.left_out(['n2'], {'n1': state}, 'fabric') == {'n2': 'not in Slurm partition fabric'}


def test_a_plan_without_a_node_drops_its_pairs_and_keeps_every_route(tmp_path):
    """Leaving nodes out never moves another node: the fabric (each node's port order, so its spine) is the
    planned one, and every pair without a left-out node runs as planned, in its round."""
    fabric, rounds, jobs = fleet_night.night({'leaf1': ['n1', 'n2', 'n3', 'n4'], 'leaf2': ['n5', 'n6', 'n7', 'n8']},
                                              spines=2)
    (job,) = jobs
    whole = fleet_rounds.plan(fabric, rounds, job)
    plan = fleet_night.without(whole, {'n2': 'state drain', 'n9': 'not in Slurm partition p'})
    assert plan['left_out'] == {'n2': 'state drain'} and 'n2' not in plan['nodes']
    assert plan['leaves'] == whole['leaves'] and plan['spines'] == whole['spines']
    for kept, planned in zip(plan['rounds'], whole['rounds']):
        assert kept['number'] == planned['number']
        assert kept['pairs'] == [p for p in planned['pairs'] if 'n2' not in p]
    assert fleet_night.without(whole, {}) is whole


def test_slurm_that_cannot_be_asked_is_said(monkeypatch, tmp_path):
    monkeypatch.setenv('PATH', str(tmp_path))          # no sinfo here
    with pytest.raises(OSError, match='sinfo: not found'):
        fleet_night.node_states('fabric')

"""The fabric's own routing (ibrepro.fleet.routes) from real infiniband-diags 44.0 output on an ibsim fat tree
(tests/fixtures/infiniband-diags/*/MANIFEST.md), and the plan that follows it (fleet_plan.fabric_from_routes)."""

import os
import sys
from pathlib import Path

import pytest

from ibrepro.fleet import plan as fleet_plan

from ibrepro.fleet import routes as fleet_routes

FIXTURES = Path(__file__).parent / 'fixtures' / 'infiniband-diags'
#: Slurm's topology.conf of the CI fat tree (ci/cluster/fabric.sh): nodes in their names' order.
TOPOLOGY_CONF = {'leaf1': ['node1', 'node2', 'node3', 'node4'], 'leaf2': ['node5', 'node6', 'node7', 'node8']}


def fabric_tables(name):
    return ((FIXTURES / name / 'ibnetdiscover.txt').read_text(), (FIXTURES / name / 'dump_lfts.txt').read_text())


def test_the_tree_and_its_routes_as_the_fabric_prints_them():
    found = fleet_routes.read(*fabric_tables('44.0-ibsim-fattree8'))
    assert found['leaves'] == TOPOLOGY_CONF and found['spines'] == ['spine0', 'spine1']
    # MANIFEST: leaf1 reaches LIDs 9 and 11 (node5, node7) through spine0, 10 and 12 (node6, node8) through spine1
    assert [found['routes'][('leaf1', n)] for n in TOPOLOGY_CONF['leaf2']] == ['spine0', 'spine1', 'spine0', 'spine1']
    assert [found['routes'][('leaf2', n)] for n in TOPOLOGY_CONF['leaf1']] == ['spine0', 'spine1', 'spine0', 'spine1']
    assert fleet_routes.differences(found, TOPOLOGY_CONF) == []          # OpenSM's minhop agrees with the model here


def test_cabling_out_of_the_names_order_is_found_and_followed():
    found = fleet_routes.read(*fabric_tables('44.0-ibsim-fattree8-swapped'))
    assert found['leaves']['leaf2'] == ['node6', 'node5', 'node7', 'node8']           # port order
    assert fleet_routes.differences(found, TOPOLOGY_CONF) == [
        ('leaf1', 'node5', 'spine0', 'spine1'), ('leaf1', 'node6', 'spine1', 'spine0')]
    assumed = fleet_plan.fabric_from_leaves(TOPOLOGY_CONF, 2)
    measured = fleet_plan.fabric_from_routes(found)
    assert 'uplink leaf1>spine0' in assumed.components('node1', 'node5')
    assert 'uplink leaf1>spine1' in measured.components('node1', 'node5')
    assert measured.directed_links('node2', 'node6') == ['node2>leaf', 'leaf>node6', 'leaf1>spine0', 'spine0>leaf2']


@pytest.mark.parametrize('link', ['uplink leaf1>spine0', 'uplink leaf1>spine1', 'downlink spine0>leaf2',
                                  'downlink spine1>leaf2', 'spine link leaf2-spine1'])
def test_a_link_is_confirmed_by_flows_that_cross_it_under_the_measured_routes(link):
    fabric = fleet_plan.fabric_from_routes(fleet_routes.read(*fabric_tables('44.0-ibsim-fattree8-swapped')))
    pairs = fleet_plan.link_confirmation_pairs([link], fabric, good=fabric.nodes)
    own = fleet_plan._directed([link])
    assert pairs and all(own & set(fabric.directed_links(a, b)) for a, b in pairs)


def test_tables_that_do_not_describe_a_two_level_tree_are_refused_named():
    ibnd, lfts = fabric_tables('44.0-ibsim-fattree8')
    with pytest.raises(fleet_routes.RoutesError, match='no forwarding table'):
        fleet_routes.read(ibnd, '')
    # leaf1's table without its entries for node5 (LID 9): its route is not in the fabric's tables
    without = '\n'.join(line for line in lfts.splitlines() if not (line.startswith('0x0009') and 'node5' in line))
    with pytest.raises(fleet_routes.RoutesError, match=r'no route for leaf\d -> node5 \(LID 9\)'):
        fleet_routes.read(ibnd, without)
    with pytest.raises(fleet_routes.RoutesError, match='no switch'):
        fleet_routes.read('# nothing here\n', lfts)


def test_a_night_follows_the_tables_a_site_names_and_stores_them(tmp_path):
    """IBREPRO_FLEET_ROUTES: the night's plan routes as the fabric does, stores the routes with the night, and the
    stored night's fabric (what the report judges on) is the same; tables of other nodes are refused, named."""
    from ibrepro.fleet import rounds as fleet_rounds
    from ibrepro.fleet import night as fleet_night
    from ibrepro.fleet import history as fleet_history
    conf = tmp_path / 'topology.conf'
    conf.write_text('SwitchName=leaf1 Nodes=node[1-4]\nSwitchName=leaf2 Nodes=node[5-8]\n'
                    'SwitchName=spine0 Switches=leaf[1-2]\nSwitchName=spine1 Switches=leaf[1-2]\n')
    tables = FIXTURES / '44.0-ibsim-fattree8-swapped'
    fabric, rounds, jobs, problem = fleet_night.night_from_environment(
        {'IBREPRO_FLEET_TOPOLOGY': str(conf), 'IBREPRO_FLEET_ROUTES': str(tables)})
    assert problem is None and 'uplink leaf1>spine1' in fabric.components('node1', 'node5')
    plan = fleet_rounds.plan(fabric, rounds, jobs[0])
    # the fabric's leaves in port order explain its routes: no route to store beside them
    assert plan['routes'] == [] and plan['leaves']['leaf2'] == ['node6', 'node5', 'node7', 'node8']
    stored = fleet_history.night_fabric({'leaves': plan['leaves'], 'spines': plan['spines'],
                                        'routes': plan['routes']}, [])
    assert stored.routes == fabric.routes and 'uplink leaf1>spine1' in stored.components('node1', 'node5')
    assert fleet_rounds.fabric_of(plan).routes == fabric.routes

    conf.write_text('SwitchName=leaf1 Nodes=node[1-4]\nSwitchName=leaf2 Nodes=node[5-9]\n')
    _, _, _, problem = fleet_night.night_from_environment(
        {'IBREPRO_FLEET_TOPOLOGY': str(conf), 'IBREPRO_FLEET_ROUTES': str(tables)})
    assert 'its HCAs are not the nodes of IBREPRO_FLEET_TOPOLOGY' in problem
    _, _, _, problem = fleet_night.night_from_environment(
        {'IBREPRO_FLEET_TOPOLOGY': str(conf), 'IBREPRO_FLEET_ROUTES': str(tmp_path / 'absent')})
    assert problem.startswith('IBREPRO_FLEET_ROUTES=') and 'No such file' in problem


def test_a_night_stores_only_the_routes_that_differ_and_bad_ones_are_refused():
    same = fleet_plan.fabric_from_routes(fleet_routes.read(*fabric_tables('44.0-ibsim-fattree8')))
    swapped = fleet_plan.fabric_from_routes(fleet_routes.read(*fabric_tables('44.0-ibsim-fattree8-swapped')))
    # read, and none differs from destination-mod-k over the leaves in port order (the swapped cabling included)
    assert fleet_plan.routes_json(same) == [] == fleet_plan.routes_json(swapped) and len(same.routes) == 8
    # a route that does differ (another engine) is stored, and the stored night routes as the fabric did
    other = fleet_plan.fabric_from_leaves(TOPOLOGY_CONF, 2, routes=[['leaf1', 'node5', 1]])
    assert fleet_plan.routes_json(other) == [['leaf1', 'node5', 1]]
    again = fleet_plan.fabric_from_leaves(TOPOLOGY_CONF, 2, routes=fleet_plan.routes_json(other))
    assert again.routes == other.routes and 'uplink leaf1>spine1' in again.components('node2', 'node5')
    assert fleet_plan.routes_json(fleet_plan.fabric_from_leaves(TOPOLOGY_CONF, 2)) is None     # assumed
    leaves = dict(TOPOLOGY_CONF)
    for routes, message in (([['leaf9', 'node5', 0]], 'no leaf to a node of another leaf'),
                            ([['leaf1', 'node2', 0]], 'no leaf to a node of another leaf'),
                            ([['leaf1', 'node5', 7]], 'spine 7 is not one of the 2 spines'),
                            ({'leaf1': 1}, 'not a list')):
        with pytest.raises(ValueError, match=message):
            fleet_plan.fabric_from_leaves(leaves, 2, routes=routes)


def test_managed_switches_descriptions_become_names_the_components_can_carry():
    """Switches that describe themselves as ``MF0;ibsw-leaf1:MQM8700/U1``: named by the host name part, '-' made '_'
    (a component name is split on '-'), and the link components keep their shape."""
    found = fleet_routes.read(*fabric_tables('44.0-ibsim-fattree8-managed-names'))
    assert list(found['leaves']) == ['ibsw_leaf1', 'ibsw_leaf2'] and found['spines'] == ['ibsw_spine0', 'ibsw_spine1']
    fabric = fleet_plan.fabric_from_routes(found)
    assert 'spine link ibsw_leaf1-spine0' in fabric.components('node1', 'node5')
    pairs = fleet_plan.link_confirmation_pairs(['spine link ibsw_leaf2-spine1'], fabric, good=fabric.nodes)
    assert pairs and all({'ibsw_leaf2>spine1', 'spine1>ibsw_leaf2'} & set(fabric.directed_links(a, b))
                         for a, b in pairs)
    assert fleet_routes.switch_name('MF0;;:x', 'S-0000000000200001') == 'sw_0000000000200001'


# -- ibrepro fleet routes --collect: the two tables read from the fabric, written for the night --------------------

TOPOLOGY = 'SwitchName=leaf1 Nodes=node[1-4]\nSwitchName=leaf2 Nodes=node[5-8]\nSwitchName=spine0 Switches=leaf[1-2]\n'


def _serving(tmp_path, name, dump_status=0):
    """A PATH whose ``ibnetdiscover`` and ``dump_fts`` print the recorded real outputs of fixture ``name``
    (``dump_status`` non-zero: ``dump_fts`` exits with it, as without access to the umad device)."""
    bin_ = tmp_path / 'bin'
    bin_.mkdir(exist_ok=True)
    for command, text in (('ibnetdiscover', 'ibnetdiscover.txt'), ('dump_fts', 'dump_lfts.txt')):
        script = bin_ / command
        failing = command == 'dump_fts' and dump_status
        script.write_text('#!/bin/sh\n' + (f'exit {dump_status}\n' if failing else f"cat '{FIXTURES / name / text}'\n"))
        script.chmod(0o755)
    return str(bin_)


def test_routes_are_collected_read_and_written_for_the_night_or_nothing_is(tmp_path, monkeypatch, capsys):
    from ibrepro.cli import main
    topology, out = tmp_path / 'topology.conf', tmp_path / 'routes'
    topology.write_text(TOPOLOGY)
    out.mkdir(mode=0o755)
    monkeypatch.setenv('PATH', _serving(tmp_path, '44.0-ibsim-fattree8-swapped') + ':/usr/bin:/bin')
    assert main(['fleet', 'routes', '--collect', str(out), '--topology', str(topology)]) == 0
    assert '2 differ from destination-mod-k' in capsys.readouterr().out
    for name in fleet_routes.FILES:
        assert (out / name).read_text() == (FIXTURES / '44.0-ibsim-fattree8-swapped' / name).read_text()
    kept = {name: (out / name).read_text() for name in fleet_routes.FILES}
    topology.write_text(TOPOLOGY.replace('node[5-8]', 'node[5-7]'))      # not the fabric's nodes: nothing written
    assert main(['fleet', 'routes', '--collect', str(out), '--topology', str(topology)]) == 2
    assert 'are not the nodes of' in capsys.readouterr().err
    monkeypatch.setenv('PATH', _serving(tmp_path, '44.0-ibsim-fattree8', dump_status=3) + ':/usr/bin:/bin')
    assert main(['fleet', 'routes', '--collect', str(out)]) == 2
    assert 'dump_fts: exit 3' in capsys.readouterr().err
    monkeypatch.setenv('PATH', str(tmp_path / 'nothing'))
    assert main(['fleet', 'routes', '--collect', str(out)]) == 2
    assert 'ibnetdiscover: not found on PATH' in capsys.readouterr().err
    assert {name: (out / name).read_text() for name in fleet_routes.FILES} == kept


def test_routes_collected_from_a_real_subnet_manager_on_a_simulated_fabric(tmp_path, monkeypatch):
    """The real programs (OpenSM, ibnetdiscover, dump_fts) against ibsim's model of the CI tree with node5 and node6
    swapped on leaf2's ports (the fixture's ibsim.net), then a night planned on what was collected."""
    import shutil
    import subprocess
    import time
    from ibrepro.fleet import night as fleet_night
    sim_so = Path('/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so')
    if not (shutil.which('ibsim') and shutil.which('opensm') and shutil.which('ibnetdiscover') and sim_so.exists()):
        pytest.skip('ibsim-utils, opensm and infiniband-diags are not installed (the CI installs them)')
    net = tmp_path / 'ibsim.net'
    shutil.copy(FIXTURES / '44.0-ibsim-fattree8-swapped' / 'ibsim.net', net)
    sim = subprocess.Popen(['ibsim', '-s', str(net)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        # OpenSM's caches in the test's directory: /var/cache/opensm is root's
        env = {**os.environ, 'LD_PRELOAD': str(sim_so), 'OSM_CACHE_DIR': str(tmp_path), 'OSM_TMP_DIR': str(tmp_path)}
        for _ in range(50):      # the simulator accepts clients once it has read its net file
            sm = subprocess.run(['opensm', '-o', '-f', str(tmp_path / 'opensm.log')], env=env, capture_output=True,
                                text=True, timeout=60)
            if 'MASTER' in sm.stdout:
                break
            time.sleep(0.2)
        assert 'MASTER' in sm.stdout, sm.stdout + sm.stderr
        out = tmp_path / 'routes'
        out.mkdir()
        topology = tmp_path / 'topology.conf'
        topology.write_text(TOPOLOGY)
        done = subprocess.run([sys.executable, '-m', 'ibrepro', 'fleet', 'routes', '--collect', str(out),
                               '--topology', str(topology)], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert '2 differ from destination-mod-k' in done.stdout
    finally:
        sim.kill()
        sim.wait()
    fabric, _, _, problem = fleet_night.night_from_environment({'IBREPRO_FLEET_TOPOLOGY': str(topology),
                                                                'IBREPRO_FLEET_ROUTES': str(out)})
    assert problem is None
    assert 'uplink leaf1>spine1' in fabric.components('node1', 'node5')      # as the fabric routes it

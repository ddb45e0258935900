"""ibrepro.fleet.plan: Slurm hostlists and topology.conf, the pair rounds (every leaf-spine link one flow per
direction in the leaf-shift rounds under destination-mod-k), the job cut and the confirmation pairs."""

import math
import re

import pytest

from ibrepro.fleet import plan as fp
from ibrepro.fleet.component import Component


def test_hostlists_expand_as_slurm_does():
    assert fp.expand_hostlist('n[01-03,07],m1') == ['n01', 'n02', 'n03', 'n07', 'm1']
    assert fp.expand_hostlist('r[1-2]n[8-9]') == ['r1n8', 'r1n9', 'r2n8', 'r2n9']
    with pytest.raises(ValueError):
        fp.expand_hostlist('n[01-03')


def test_topology_conf_gives_the_leaves_and_rejects_a_node_on_two_leaves():
    text = ('# a site\nSwitchName=leaf1 Nodes=n[01-16] LinkSpeed=200\nSwitchName=leaf2 Nodes=n[17-32]\n'
            'SwitchName=spine Switches=leaf[1-2]\n')
    leaves = fp.parse_topology_conf(text)
    assert list(leaves) == ['leaf1', 'leaf2'] and leaves['leaf2'][0] == 'n17' and len(leaves['leaf1']) == 16
    with pytest.raises(ValueError, match='also on leaf'):
        fp.parse_topology_conf('SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n2\n')


@pytest.mark.parametrize('nodes', [32, 64, 96, 256, 1024])
def test_every_leaf_spine_link_carries_one_flow_per_direction_in_each_shift_round(nodes):
    fabric = fp.fat_tree(nodes)
    shifts = [r for r in fp.pair_rounds(fabric) if r.kind == 'leaf-shift']
    assert len(shifts) == 2
    for r in shifts:
        loads = fp.link_loads(fabric, r.pairs)
        spine_links = {k: v for k, v in loads.items() if 'spine' in k}
        assert set(spine_links.values()) == {1}
        # every uplink and downlink of every leaf is used (even number of leaves here)
        assert len(spine_links) == 2 * len(fabric.leaves) * fabric.spines
        assert set(loads.values()) == {1}          # node cables too: one flow per direction
        nodes_in = [n for p in r.pairs for n in p]
        assert len(nodes_in) == len(set(nodes_in)) == nodes       # disjoint pairs covering every node


def test_the_second_shift_meets_another_uplink_than_the_first():
    fabric = fp.fat_tree(64)
    r1, r2 = [r for r in fp.pair_rounds(fabric) if r.kind == 'leaf-shift']
    spine = {r.number: {s: fabric.spine_for(d) for s, d in fp.flows_of(r.pairs)} for r in (r1, r2)}
    assert all(spine[1][n] != spine[2][n] for n in fabric.nodes)


@pytest.mark.parametrize('nodes', [1, 2, 3, 5, 16, 17, 33, 48, 100, 4096])
def test_at_most_four_rounds_and_the_job_budget_for_any_n(nodes):
    fabric = fp.fat_tree(nodes)
    rounds = fp.pair_rounds(fabric)
    jobs = fp.slurm_jobs(fabric, rounds)
    assert len(rounds) <= 4
    confirmation = 1 if fp.confirmation_job_needed(fabric, jobs) else 0
    assert len(jobs) + confirmation + 1 <= math.ceil(nodes / 16) + 1      # + the sweep
    for r in rounds:                       # pairs of a round are disjoint
        members = [n for p in r.pairs for n in p]
        assert len(members) == len(set(members))
    covered = {n for j in jobs for n in j['nodes']}
    assert covered == set(fabric.nodes)


@pytest.mark.parametrize('leaves, job_nodes', [
    ([16] * 8, 16), ([16] * 64, 16), ([2] * 4, 1), ([16, 16, 12, 7, 16], 16), ([4, 3, 4, 3, 2, 4], 2)])
def test_jobs_that_may_run_at_once_share_no_leaf_so_no_leaf_spine_link(leaves, job_nodes):
    """Why the night's jobs need no ordering: each is whole leaves (a cell is a leaf pair's every node, uneven
    leaves included), so two jobs either share a node, and exclusive allocations run one after the other, or share
    no leaf, and no leaf-spine link carries both; every round's pairs run inside one job."""
    names = iter(range(1, sum(leaves) + 1))
    fabric = fp.fabric_from_leaves({f'leaf{i}': [f'n{next(names)}' for _ in range(size)]
                                    for i, size in enumerate(leaves)}, 0)
    rounds = fp.pair_rounds(fabric)
    jobs = fp.slurm_jobs(fabric, rounds, job_nodes=job_nodes)
    assert len(jobs) + fp.confirmation_job_needed(fabric, jobs) <= math.ceil(len(fabric.nodes) / job_nodes)
    for j in jobs:
        assert all(set(fabric.leaves[fabric.leaf_of(n)]) <= set(j['nodes']) for n in j['nodes'])
    for a in jobs:
        for b in jobs:
            if a is not b and not set(a['nodes']) & set(b['nodes']):
                assert not {fabric.leaf_of(n) for n in a['nodes']} & {fabric.leaf_of(n) for n in b['nodes']}
    for r in rounds:
        for pair in r.pairs:
            assert any(set(pair) <= set(j['nodes']) and r.number in j['rounds'] for j in jobs), (r.number, pair)


def test_without_topology_three_round_robin_rounds_and_nodes_only():
    fabric = fp.no_topology([f'c{i}' for i in range(10)])
    rounds = fp.pair_rounds(fabric)
    assert [r.kind for r in rounds] == ['all-nodes'] * 3
    pairs = [frozenset(p) for r in rounds for p in r.pairs]
    assert len(pairs) == len(set(pairs)) == 15
    assert fabric.components('c1', 'c2') == ['node c1', 'node c2']
    assert fp.NO_TOPOLOGY == 'no topology: localised to node'


def test_confirmation_pairs_a_suspect_with_a_good_node_on_its_leaf_else_through_no_suspect_link():
    fabric = fp.fat_tree(64)
    suspect = fabric.leaves['leaf001'][3]
    good = [n for n in fabric.nodes if n != suspect]
    rounds = fp.confirmation_pairs([f'cable {suspect}:mlx5_0/1 up'], fabric, good)
    assert len(rounds) == 1 and [fabric.leaf_of(b) for a, b in rounds[0] if a == suspect] == ['leaf001']
    # no good node on its leaf: a partner on another leaf, routed through no suspect link
    good = [n for n in fabric.nodes if fabric.leaf_of(n) != 'leaf001']
    rounds = fp.confirmation_pairs([f'cable {suspect}:mlx5_0/1 up'], fabric, good,
                                   suspect_links=['uplink leaf001>spine0', 'downlink spine1>leaf001'])
    (a, b), = rounds[0]
    assert fabric.leaf_of(b) != 'leaf001' and fabric.spine_for(b) not in (0,) and fabric.spine_for(a) != 1
    with pytest.raises(ValueError, match='not a node-side'):
        fp.confirmation_pairs(['uplink leaf002>spine5'], fabric, good)


def test_a_night_with_suspects_that_fit_is_four_pair_rounds():
    """Three rounds and one confirmation round: the suspect links loaded and each node-side suspect with a good
    partner on its own leaf, all at once, disjoint in nodes and no trunk beyond its cables."""
    fabric = fp.fat_tree(128)
    suspects = ['uplink leaf002>spine3', f'cable {fabric.leaves["leaf005"][2]}:mlx5_0/1 down',
                f'port {fabric.leaves["leaf002"][9]}:mlx5_0/1']
    hosts = {fabric.leaves['leaf005'][2], fabric.leaves['leaf002'][9]}
    rounds = fp.confirmation_rounds(suspects, fabric, [n for n in fabric.nodes if n not in hosts])
    assert len(fp.pair_rounds(fabric)) + len(rounds) == 4
    (r,) = rounds
    nodes = [n for p in r.pairs for n in p]
    assert len(nodes) == len(set(nodes)) and r.name == 'confirmation'
    assert r.roles.count(fp.LINK_CONFIRMATION) == fabric.trunk_width('leaf002') and r.roles.count('confirmation') == 2
    assert all(fabric.leaf_of(a) == fabric.leaf_of(b) for (a, b), role in zip(r.pairs, r.roles)
               if role == 'confirmation')
    assert [r.label(k) for k in range(2 * len(r.pairs))][::2] == list(r.roles)
    trunk = {k: v for k, v in fp.link_loads(fabric, r.pairs).items() if 'spine' in k}
    assert all(v <= fabric.link_width(k) for k, v in trunk.items())


#: the namespace fat tree of make fleet-test: two leaves of four, two spines (trunks of two cables)
EMULATED = fp.fabric_from_leaves({'leaf1': ['node1', 'node2', 'node3', 'node4'],
                                  'leaf2': ['node5', 'node6', 'node7', 'node8']}, 2)


def test_a_suspect_link_is_loaded_with_one_flow_per_cable_of_its_trunk_suspected_nodes_included():
    """The night CI saw: the uplink leaf1>spine1 slowed, node6's cable also suspected (TCP had shared the trunk
    unevenly). The link round still loads the trunk with two flows at once, node6 one of the receivers."""
    assert EMULATED.trunk_width('leaf1') == 2 and fp.fat_tree(64).trunk_width('leaf001') == 1
    good = [n for n in EMULATED.nodes if n != 'node6']
    rounds = fp.confirmation_rounds(['cable node6:mlx5_0/1 down', 'uplink leaf1>spine1'], EMULATED, good)
    # node6 is one of the two receivers the link needs (the leaf2 nodes routed through spine1): its own re-run
    # waits for a second round
    assert [r.name for r in rounds] == ['confirmation', 'confirmation-1']
    for r in rounds:
        nodes = [n for p in r.pairs for n in p]
        assert len(nodes) == len(set(nodes)), r.name          # a round's pairs are disjoint
    links = [p for r in rounds for p, role in zip(r.pairs, r.roles) if role == fp.LINK_CONFIRMATION]
    up = [(s, d) for s, d in fp.flows_of(links) if 'uplink leaf1>spine1' in EMULATED.components(s, d)]
    assert len(up) == 2 and {d for _, d in up} == {'node6', 'node8'}
    # node6 with a good partner on its own leaf (no trunk)
    (pair,) = [p for r in rounds for p, role in zip(r.pairs, r.roles) if role != fp.LINK_CONFIRMATION]
    assert pair[0] == 'node6' and EMULATED.leaf_of(pair[1]) == 'leaf2' and pair[1] in good
    down = fp.link_confirmation_pairs(['downlink spine0>leaf2'], EMULATED, EMULATED.nodes)
    assert {b for _, b in down} == {'node5', 'node7'} and {EMULATED.leaf_of(a) for a, _ in down} == {'leaf1'}


def test_node_confirmations_never_load_a_trunk_beyond_its_cables():
    """Every node of leaf1 suspected, the good partners on other leaves all routed through spine0: with their flows
    on one leaf-spine link at once, a healthy trunk of two cables would slow them (as a CI night's re-runs through
    one link, a slowed one there, confirmed two good cables)."""
    fabric = fp.fabric_from_leaves({f'leaf{j}': [f'node{4 * j + i}' for i in range(4)] for j in range(3)}, 2)
    suspects = [f'cable node{i}:mlx5_0/1 up' for i in range(4)]
    good = [n for n in fabric.nodes if fabric.leaf_of(n) != 'leaf0' and fabric.spine_for(n) == 0]
    rounds = fp.confirmation_pairs(suspects, fabric, good)
    for pairs in rounds:
        trunk = {k: v for k, v in fp.link_loads(fabric, pairs).items() if 'spine' in k}
        assert trunk and all(v <= 2 for v in trunk.values()), (pairs, trunk)
    assert sum(len(pairs) for pairs in rounds) >= 2


def _overloads(fabric, rounds, suspects):
    """How the confirmation ``rounds`` break their promise: a node in two pairs, a leaf-spine link with more flows
    than cables, or a flow of a link-loading pair through two suspect links (a list; empty when they keep it)."""
    problems = []
    links = [s for s in suspects if Component(s).is_link]
    for r in rounds:
        nodes = [n for p in r.pairs for n in p]
        if len(nodes) != len(set(nodes)):
            problems.append(f'{r.name}: a node in two pairs')
        for link, flows in fp.link_loads(fabric, r.pairs).items():
            if 'spine' in link and flows > fabric.link_width(link):
                problems.append(f'{r.name}: {link} carries {flows} flows, {fabric.link_width(link)} cable(s)')
        loaded = [p for p, role in zip(r.pairs, r.roles) if role == fp.LINK_CONFIRMATION]
        for a, b in fp.flows_of(loaded):
            crossed = fp._directed(links) & set(fabric.directed_links(a, b))
            if len(crossed) > 1:
                problems.append(f'{r.name}: flow {a}->{b} crosses the suspect links {sorted(crossed)}')
    return problems


def test_two_suspect_uplinks_are_confirmed_each_by_its_own_flows_never_by_a_reverse_one():
    """At N = 128 the pairs (n0000, n0017) for leaf000>spine1 and (n0016, n0032) for leaf001>spine0 both put a flow
    on leaf001>spine0 (n0017 -> n0000 climbs it too): two flows on one cable, -69 % against one flow's expectation,
    a healthy link confirmed. Each suspect uplink now carries its own pair's flow and nothing else."""
    fabric = fp.fat_tree(128)
    suspects = ['uplink leaf000>spine1', 'uplink leaf001>spine0']
    (r,) = fp.confirmation_rounds(suspects, fabric, fabric.nodes)
    assert _overloads(fabric, [r], suspects) == []
    loads = fp.link_loads(fabric, r.pairs)
    assert loads['leaf000>spine1'] == loads['leaf001>spine0'] == 1
    for suspect in suspects:
        flows = [f for f in fp.flows_of(r.pairs) if suspect in fabric.components(*f)]
        assert len(flows) == 1 and fabric.leaf_of(flows[0][0]) == suspect.split(' ')[1].split('>')[0]


def _random_case(rng):
    """A random fat tree (leaves of 2-16 nodes, the last one may be short, 1-8 spines), a random set of suspects
    (leaf-spine links in every form, nodes, ports, cables) and the good nodes."""
    leaf_size = rng.randint(2, 16)
    nodes = rng.randint(leaf_size + 1, leaf_size * rng.randint(2, 9))
    fabric = fp.fat_tree(nodes, leaf_size=leaf_size, spines=rng.randint(1, leaf_size))
    leaves = list(fabric.leaves)
    suspects = set()
    for _ in range(rng.randint(1, 6)):
        leaf, q = rng.choice(leaves), rng.randrange(fabric.spines)
        host = rng.choice(fabric.nodes)
        suspects.add(rng.choice([f'uplink {leaf}>spine{q}', f'downlink spine{q}>{leaf}', f'spine link {leaf}-spine{q}',
                                 f'node {host}', f'port {host}:mlx5_0/1', f'cable {host}:mlx5_0/1 up']))
    suspects = sorted(suspects)
    hosts = {Component(s).host for s in suspects if not Component(s).is_link}
    return fabric, suspects, [n for n in fabric.nodes if n not in hosts]


def test_no_confirmation_round_overloads_a_link_or_mixes_suspects_on_random_fabrics():
    import random
    rng = random.Random(20261129)
    for case in range(2000):
        fabric, suspects, good = _random_case(rng)
        rounds = fp.confirmation_rounds(suspects, fabric, good)
        assert _overloads(fabric, rounds, suspects) == [], (case, sorted(fabric.leaves.items()), suspects)


@pytest.mark.parametrize('text', ['n[0-99999999999]', 'r[1-1000]n[1-1000]', 'n[1-60000],m[1-60000]',
                                  'n[0-1' + '0' * 5000 + ']'])
def test_a_hostlist_of_more_nodes_than_any_cluster_is_refused_before_it_is_expanded(text):
    with pytest.raises(ValueError, match=f'more than {fp.MAX_NODES} hosts|bad range'):
        fp.expand_hostlist(text)
    with pytest.raises(ValueError):
        fp.parse_topology_conf(f'SwitchName=leaf1 Nodes={text}\n')
    assert len(fp.expand_hostlist(f'n[1-{fp.MAX_NODES}]')) == fp.MAX_NODES


@pytest.mark.parametrize('leaves, spines, said', [
    ({'leaf1': ['n1', 'n2']}, float('inf'), 'spines: inf is not a number'),
    ({'leaf1': ['n1', 'n2']}, -1, 'spines: -1'), ({'leaf1': ['n1', 'n2']}, True, 'spines: True'),
    ({'leaf1': ['n1', '$(reboot)']}, 2, "'$(reboot)' is not a host name"),
    ({'leaf1': 'n1,n2'}, 2, 'expected {leaf: [nodes]}'), (['n1'], 2, 'expected {leaf: [nodes]}')])
def test_a_fabric_of_data_that_is_no_fabric_is_refused_saying_what(leaves, spines, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        fp.fabric_from_leaves(leaves, spines) if isinstance(leaves, dict) else fp.Fabric(leaves, spines)
    assert fp.spines_of(2.0) == 2 and fp.spines_of(None) == 0

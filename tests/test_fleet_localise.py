"""ibrepro.fleet.localise on constructed nights (seeded noise of CV 1 %): a single degraded component is named
exactly, a fault-free night names nothing, explain-away keeps a bad cable's uplink out, a confirmation clears."""

import json
import math
import random

from ibrepro.fleet import localise as fl

from ibrepro.fleet import plan as fp

from ibrepro.fleet import rounds as fr

from ibrepro.fleet import simulate as fs
from ibrepro.cli import main

MODEL = fs.Model(64, noise_cv=0.01)


def night(fabric, fault, seed, loss=0.10):
    rng = random.Random(seed)
    f = fs.Fault('test', fault[0], fault[1], loss) if fault else None
    return [x for r in fp.pair_rounds(fabric) for x in fs.simulate_flows(fabric, r.pairs, MODEL, f, rng, r.number)]


def named(result):
    return [s.name for s in result.named]


def test_a_fault_free_night_names_nothing():
    fabric = fp.fat_tree(64)
    for seed in range(5):
        assert named(fl.localise(night(fabric, None, seed), fabric)) == []


def test_each_single_degraded_component_is_named_exactly():
    fabric = fp.fat_tree(64)
    cases = [('cable n0005:mlx5_0/1 up', ('n0005>leaf',)), ('cable n0040:mlx5_0/1 down', ('leaf>n0040',)),
             ('uplink leaf001>spine7', ('leaf001>spine7',)), ('downlink spine2>leaf003', ('spine2>leaf003',))]
    for seed, (component, links) in enumerate(cases):
        result = fl.localise(night(fabric, (component, links), seed), fabric)
        assert named(result) == [component], (component, named(result))
        assert result.suspects[0].effect < -0.05
        assert all({'round', 'src', 'dst', 'bw', 'residual'} <= set(f) for f in result.suspects[0].flows)
    port = fl.localise(night(fabric, ('port', ('n0017>leaf', 'leaf>n0017')), 9), fabric)
    assert named(port) == ['port n0017:mlx5_0/1 = node n0017']     # one rail: the port is its node's only one


def test_explain_away_a_bad_node_cable_does_not_name_its_leafs_uplink():
    fabric = fp.fat_tree(64)
    flows = night(fabric, ('cable', ('n0003>leaf',)), 11, loss=0.25)
    result = fl.localise(flows, fabric)
    assert named(result) == ['cable n0003:mlx5_0/1 up']
    # the uplinks its flows crossed were slow in those flows, yet not named
    uplinks = {c for f in flows if f['src'] == 'n0003' for c in fabric.components(f['src'], f['dst'])
               if c.startswith('uplink')}
    assert uplinks and not uplinks & {m for s in result.suspects for m in s.members}


def test_a_suspect_cleared_by_its_confirmation_is_not_named_and_a_confirmed_one_is():
    fabric = fp.fat_tree(64)
    flows = night(fabric, ('cable', ('n0005>leaf',)), 3)
    result = fl.localise(flows, fabric)
    assert named(result) == ['cable n0005:mlx5_0/1 up']
    rounds = fp.confirmation_pairs([result.suspects[0].members[0]], fabric,
                                   [n for n in fabric.nodes if n != 'n0005'])
    healthy = [x for r in rounds for x in fs.simulate_flows(fabric, r, MODEL, None, random.Random(4))]
    fl.confirm(result, healthy, fabric)
    assert result.suspects[0].confirmed is False and named(result) == []
    result = fl.localise(flows, fabric)
    still = fs.Fault('cable', 'cable n0005:mlx5_0/1 up', ('n0005>leaf',), 0.10)
    again = [x for r in rounds for x in fs.simulate_flows(fabric, r, MODEL, still, random.Random(5))]
    fl.confirm(result, again, fabric)
    assert result.suspects[0].confirmed is True and named(result) == ['cable n0005:mlx5_0/1 up']


TREE8 = fp.fabric_from_leaves({'leaf1': [f'node{i}' for i in range(1, 5)], 'leaf2': [f'node{i}' for i in range(5, 9)]},
                               2)


def _confirmed_night(night, truth, seed, fabric=TREE8):
    """A night of a small tree (``night(flows)`` makes its slowdowns) and its confirmation, planned as the check
    plans it (fleet_rounds.confirmation_plan) and run on the fabric as it is (``truth``). Modelled flows."""
    def records(flows):              # as the check records them (host -> peer)
        return [{'round': f['round'], 'host': f['src'], 'peer': f['dst'], 'device': f['rail'][0],
                 'port': f['rail'][1], 'direction': 'send', 'bw': f['bw']} for f in flows]
    flows = night([x for r in fp.pair_rounds(fabric)
                   for x in fs.simulate_flows(fabric, r.pairs, MODEL, None, random.Random(seed), r.number)])
    plan = {'nodes': fabric.nodes, 'leaves': fabric.leaves, 'spines': fabric.spines}
    rounds, _ = fr.confirmation_plan(plan, records(flows))
    again = [{**f, 'round': r.label(k)} for r in rounds
             for k, f in enumerate(fs.simulate_flows(fabric, r.pairs, MODEL, truth, random.Random(seed + 1), r.name))]
    return fl.localise(flows, fabric), again, rounds


DOWNLINK = 'downlink spine0>leaf2'          # every flow to node5 and node7 from leaf1 (destination-mod-k)


def _uneven(fabric):
    """The downlink is 10 % slow, but TCP gave its trunk's loss to node5 alone (node7 kept its cable's rate; seen
    in a CI night)."""
    def night(flows):
        return [{**f, 'bw': f['bw'] * 0.8} if f['dst'] == 'node5' and f['src'] in fabric.leaves['leaf1'] else f
                for f in flows]
    return night


def test_a_trunk_whose_loss_went_to_one_receiver_is_suspected_as_the_trunk():
    """What the trunk's flows got together was slow in each round, while node5's flow from its own leaf was not:
    the downlink is the suspect, not node5's cable, and its loaded re-run names it."""
    truth = fs.Fault('downlink', DOWNLINK, ('spine0>leaf2',), 0.10)
    result, again, rounds = _confirmed_night(_uneven(TREE8), truth, 21)
    assert [s.name for s in result.suspects] == ['uplink leaf1>spine0 = downlink spine0>leaf2']
    assert any(fp.LINK_CONFIRMATION in r.roles for r in rounds)
    fl.confirm(result, again, TREE8)
    assert named(result) == ['uplink leaf1>spine0 = downlink spine0>leaf2']


def test_a_receivers_downlink_is_re_tested_beside_it_and_named_when_it_is_the_slow_one():
    """node5's pair within its leaf measured nothing (a failed pair): every flow it received crossed the downlink,
    so its cable explains them best; the downlink, with another receiver, is re-tested beside it: an alternative,
    named only when its loaded re-run is slow. It is, and node5's own re-run clears its cable."""
    def night(flows):
        return [f for f in _uneven(TREE8)(flows) if {f['src'], f['dst']} != {'node5', 'node8'}]
    truth = fs.Fault('downlink', DOWNLINK, ('spine0>leaf2',), 0.10)
    result, again, rounds = _confirmed_night(night, truth, 21)
    cable, link = result.suspects
    assert cable.name == 'cable node5:mlx5_0/1 down' and link.alternative_to == cable.name
    assert DOWNLINK in link.members and link.singled_out == f'alternative to {cable.name}'
    assert named(result) == [cable.name]                   # not re-tested: an alternative is no finding
    assert any(fp.LINK_CONFIRMATION in r.roles for r in rounds)
    fl.confirm(result, again, TREE8)
    assert named(result) == [link.name] and cable.confirmed is False


def test_a_receivers_cable_slow_on_its_own_leaf_too_has_no_alternative():
    """node5's cable is slow: its flows from its own leaf were slow too, so the downlink is no alternative (no
    link round, no fifth round); node5's re-run confirms its cable."""
    cable = fs.Fault('cable', 'cable node5:mlx5_0/1 down', ('leaf>node5',), 0.125)
    def slow(flows):
        return [{**f, 'bw': f['bw'] * 0.875} if f['dst'] == 'node5' else f for f in flows]
    result, again, rounds = _confirmed_night(slow, cable, 31)
    assert [s.name for s in result.suspects] == ['cable node5:mlx5_0/1 down']
    assert not any(fp.LINK_CONFIRMATION in r.roles for r in rounds) and len(rounds) == 1
    fl.confirm(result, again, TREE8)
    assert named(result) == ['cable node5:mlx5_0/1 down']


def test_history_makes_a_components_usual_slowness_its_normal():
    fabric = fp.fat_tree(64)
    flows = night(fabric, ('cable', ('n0005>leaf',)), 3, loss=0.08)
    assert named(fl.localise(flows, fabric)) == ['cable n0005:mlx5_0/1 up']
    usual = {'cable n0005:mlx5_0/1 up': [-0.085, -0.08, -0.09, -0.082]}
    assert named(fl.localise(flows, fabric, history={fl.BANDWIDTH: usual})) == []
    assert named(fl.localise(flows, fabric, history={fl.LATENCY: usual})) == ['cable n0005:mlx5_0/1 up']


def test_the_cli_analyses_flow_records_with_and_without_topology(tmp_path, capsys):
    fabric = fp.fat_tree(32)
    flows = night(fabric, ('cable', ('n0020>leaf',)), 7, loss=0.25)
    records = [{'round': f['round'], 'host': f['src'], 'device': 'mlx5_0', 'port': 1, 'peer': f['dst'],
                'direction': 'send', 'bw': f['bw']} for f in flows]
    (tmp_path / 'flows.json').write_text(json.dumps(records))
    (tmp_path / 'topology.conf').write_text('SwitchName=leaf000 Nodes=n[0000-0015]\n'
                                            'SwitchName=leaf001 Nodes=n[0016-0031]\n')
    out = tmp_path / 'out.json'
    assert main(['fleet', 'analyse', str(tmp_path / 'flows.json'), '--topology', str(tmp_path / 'topology.conf'),
                 '--json', str(out)]) == 1
    assert [s['name'] for s in json.loads(out.read_text())['named']] == ['cable n0020:mlx5_0/1 up']
    assert main(['fleet', 'analyse', str(tmp_path / 'flows.json')]) == 1
    printed = capsys.readouterr().out
    assert 'no topology: localised to node' in printed and 'NAMED node n0020' in printed


def test_a_loaded_trunk_is_judged_on_what_its_flows_get_together():
    """Two leaves of four, two spines (trunks of two cables, as make fleet-test's fabric). Both suspects of the night
    CI saw, node6's cable and the uplink leaf1>spine1, re-run by their confirmation rounds: with the uplink slowed
    the uplink alone is confirmed; with node6's cable slowed instead the cable alone (its confirmed loss is taken
    out of the trunk's flows, or the trunk would look 15 % slow)."""
    fabric = fp.fabric_from_leaves({'leaf1': ['node1', 'node2', 'node3', 'node4'],
                                    'leaf2': ['node5', 'node6', 'node7', 'node8']}, 2)
    model = fs.Model(8, noise_cv=0.01, link_capacity=5.0)
    suspects = ['cable node6:mlx5_0/1 down', 'uplink leaf1>spine1 = downlink spine1>leaf2']
    faults = {'uplink': fs.Fault('uplink', suspects[1], ('leaf1>spine1',), 0.25),
              'cable': fs.Fault('cable', suspects[0], ('leaf>node6',), 0.30)}
    for seed, (slowed, fault) in enumerate(faults.items()):
        result = fl.Result([fl.Suspect(n, tuple(n.split(' = ')), -0.2, 1e-6, 1e-5, []) for n in suspects],
                           {'intra-leaf': 5.0, 'inter-leaf': 5.0}, 0.01, 40)
        rounds = fp.confirmation_rounds([s.members[0] for s in result.suspects], fabric,
                                        [n for n in fabric.nodes if n != 'node6'])
        again = [{**f, 'round': r.label(k)} for r in rounds
                 for k, f in enumerate(fs.simulate_flows(fabric, r.pairs, model, fault, random.Random(seed), r.name))]
        fl.confirm(result, again, fabric)
        assert named(result) == [suspects[0] if slowed == 'cable' else suspects[1]], slowed
        link = result.suspects[1]
        assert {f['round'] for f in link.confirmation} == {fp.LINK_CONFIRMATION} and len(link.confirmation) == 2


LATENCY_MODEL = fs.Model(64, noise_cv=0.01, latency_cv=0.02)
NODE_17 = 'cable n0017:mlx5_0/1 down = cable n0017:mlx5_0/1 up = port n0017:mlx5_0/1 = node n0017'


def latency_night(fabric, fault, seed, increase=0.4, model=LATENCY_MODEL, rounds=None):
    rng = random.Random(seed)
    f = fs.Fault('test', fault[0], fault[1], 0.0, latency=increase) if fault else None
    return [x for r in rounds or fp.pair_rounds(fabric)
            for x in fs.simulate_flows(fabric, r.pairs, model, f, rng, r.number)]


def test_a_slower_pair_latency_names_its_node_side_by_latency_and_nothing_by_bandwidth():
    fabric = fp.fat_tree(64)
    for seed in range(3):                                  # latencies on every flow, nothing slow: nothing named
        quiet = fl.localise(latency_night(fabric, None, seed), fabric)
        assert named(quiet) == [] and quiet.latency_scale > 0 and set(quiet.latency_references) == {
            'intra-leaf', 'inter-leaf'}
    result = fl.localise(latency_night(fabric, ('cable n0017:mlx5_0/1 up', ('n0017>leaf',)), 7), fabric)
    # a ping-pong crosses both directions: the node's cables, port and node are one latency hypothesis
    assert named(result) == [NODE_17]
    s = result.named[0]
    assert s.metric == fl.LATENCY and s.effect > 0.2 and s.change.startswith('latency +')
    assert all({'round', 'src', 'dst', 'lat', 'residual'} <= set(f) for f in s.flows)
    assert all('n0017' in (f['src'], f['dst']) for f in s.flows)
    assert fl.as_json(result)['named'][0]['metric'] == 'latency'


def test_history_makes_a_components_usual_latency_its_normal():
    """A node whose ping-pongs are always 40 % slower (a longer cable, a deeper C-state) is named without history;
    with three past nights where it was as slow (its latency effects, both directions of each ping-pong), it is its
    normal. A bandwidth history does not mute latency, and a night 40 % slower than its usual is named again."""
    fabric = fp.fat_tree(64)
    fault = ('cable n0017:mlx5_0/1 up', ('n0017>leaf',))
    flows = latency_night(fabric, fault, 7)
    assert named(fl.localise(flows, fabric)) == [NODE_17]
    effects = fl.component_effects(flows, fabric, metric=fl.LATENCY)
    assert set(effects) >= set(NODE_17.split(' = ')) and effects['node n0017'] < -0.2
    assert fl.component_effects(flows, fabric)['node n0017'] > -0.05      # its bandwidth is its fleet's
    past = {c: [e] * 3 for c, e in effects.items()}
    assert named(fl.localise(flows, fabric, history={fl.LATENCY: past})) == []
    node_side = {c: past[c] for c in NODE_17.split(' = ')}
    assert named(fl.localise(flows, fabric, history={fl.BANDWIDTH: node_side})) == [NODE_17]
    worse = latency_night(fabric, fault, 8, increase=1.4 * 1.4 - 1)       # 1.4 x its usual 1.4
    assert named(fl.localise(worse, fabric, history={fl.LATENCY: past})) == [NODE_17]


def test_a_slower_uplink_latency_is_named_as_its_link():
    fabric = fp.fat_tree(64)
    result = fl.localise(latency_night(fabric, ('uplink leaf001>spine7', ('leaf001>spine7',)), 2), fabric)
    assert len(result.named) == 1 and 'uplink leaf001>spine7' in result.named[0].members
    assert result.named[0].metric == fl.LATENCY


def test_a_latency_suspect_is_named_only_when_its_re_run_latency_is_slow_again():
    fabric = fp.fat_tree(64)
    fault = fs.Fault('test', 'cable n0017:mlx5_0/1 up', ('n0017>leaf',), 0.0, latency=0.4)
    flows = latency_night(fabric, (fault.component, fault.links), 5)
    good = [n for n in fabric.nodes if n != 'n0017']
    rounds = fp.confirmation_rounds(['cable n0017:mlx5_0/1 down'], fabric, good)
    for truth, expect in ((None, False), (fault, True)):
        result = fl.localise(flows, fabric)
        again = [{**x, 'round': r.label(k)} for r in rounds for k, x in enumerate(
            fs.simulate_flows(fabric, r.pairs, LATENCY_MODEL, truth, random.Random(6), r.name))]
        fl.confirm(result, again, fabric)
        assert [s.confirmed for s in result.suspects] == [expect]
        assert named(result) == ([NODE_17] if expect else [])
        assert result.suspects[0].confirmation and all('lat' in f for f in result.suspects[0].confirmation)


def test_latencies_that_are_not_positive_numbers_are_not_judged():
    fabric = fp.fat_tree(64)
    flows = latency_night(fabric, None, 1)
    for f, bad in zip(flows, ['1.5', True, -2.0, 0, None, float('nan'), float('inf')] * len(flows)):
        f['lat'] = bad
    result = fl.localise(flows, fabric)
    assert result.latency_scale is None and result.latency_references == {} and named(result) == []
    assert fl.latency_flows(flows) == []


def _leafy_night(fabric, slow_leaf, factor, fault=None, seed=3):
    """A night of the world (modelled noise 1 %) with one leaf's flows ``factor`` slower for the whole night."""
    world = fs.world_of(fabric, MODEL)
    night = world.night([fault] if fault else [], random.Random(seed))
    night.leaf_factor[slow_leaf] = factor
    return [x for r in fp.pair_rounds(fabric) for x in night.measure(r.pairs, r.number)]


def test_a_leaf_slower_for_a_night_is_taken_out_not_blamed_on_its_parts():
    """Every flow touching leaf001 4 % slower (its switch's load, its rack): without a leaf reference its nodes'
    flows look slow together; taken out, nothing healthy is suspected, and a node cable 10 % slow in that leaf is
    still named alone. (16 leaves: with a few, one leaf's flows move the fleet's median too.)"""
    fabric = fp.fat_tree(256)
    flows = _leafy_night(fabric, 'leaf001', 0.96)
    bw = fl._Metric(fl.BANDWIDTH, flows, fabric, fl.Method(), None, {}, None)
    assert abs(bw.leaf_effects['leaf001'] - math.log(0.96)) < 0.01
    assert fl.localise(flows, fabric).suspects == []
    cable = fs.Fault('cable', 'cable n0020:mlx5_0/1 up', ('n0020>leaf',), 0.10)
    assert named(fl.localise(_leafy_night(fabric, 'leaf001', 0.96, cable), fabric)) == ['cable n0020:mlx5_0/1 up']
    assert fl.localise(_leafy_night(fp.fat_tree(32), 'leaf001', 0.96), fp.fat_tree(32)).slow_leaves == {}  # 2 leaves


def _analyse_cli(tmp_path, flows, fabric):
    """``ibrepro fleet analyse`` of modelled flows as the check records them, with the fabric's leaves as its
    topology; its JSON in ``tmp_path / 'out.json'``. Its exit status."""
    records = [{'round': f['round'], 'host': f['src'], 'device': 'mlx5_0', 'port': 1, 'peer': f['dst'],
                'direction': 'send', 'bw': f['bw']} for f in flows]
    (tmp_path / 'flows.json').write_text(json.dumps(records))
    (tmp_path / 'topology.json').write_text(json.dumps(fabric.leaves))
    return main(['fleet', 'analyse', str(tmp_path / 'flows.json'), '--topology', str(tmp_path / 'topology.json'),
                 '--json', str(tmp_path / 'out.json')])


def test_a_leaf_slower_than_a_named_effect_is_said_not_blamed_on_its_parts(capsys, tmp_path):
    """Every flow touching leaf002 10 % slower (a slow switch): no part of it is suspected, the leaf is said."""
    fabric = fp.fat_tree(256)
    flows = _leafy_night(fabric, 'leaf002', 0.90)
    result = fl.localise(flows, fabric)
    assert result.suspects == [] and set(result.slow_leaves) == {'leaf002'}
    assert abs(result.slow_leaves['leaf002'] + 0.10) < 0.01
    assert _analyse_cli(tmp_path, flows, fabric) == 0
    assert 'SLOW LEAF leaf002: bandwidth -' in capsys.readouterr().out
    assert set(json.loads((tmp_path / 'out.json').read_text())['slow_leaves']) == {'leaf002'}


def test_a_spine_slower_than_a_named_effect_is_said_not_blamed_on_its_links(capsys, tmp_path):
    """Spine switch 3 10 % slow (every link to and from it): none of its 32 links is suspected, the spine is said;
    a downlink of another spine is still named alone beside it."""
    fabric = fp.fat_tree(256)                    # 16 leaves, 16 spines: 32 inter-leaf flows through each
    spine = fs.world_of(fabric, MODEL).spine_fault(3, 0.10)
    flows = [x for r in fp.pair_rounds(fabric) for x in fs.simulate_flows(fabric, r.pairs, MODEL, spine,
                                                                          random.Random(8), r.number)]
    result = fl.localise(flows, fabric)
    assert result.suspects == [] and set(result.slow_spines) == {'spine3'} and result.slow_leaves == {}
    assert abs(result.slow_spines['spine3'] + 0.10) < 0.01
    assert _analyse_cli(tmp_path, flows, fabric) == 0
    assert 'SLOW SPINE spine3: bandwidth -' in capsys.readouterr().out
    assert set(json.loads((tmp_path / 'out.json').read_text())['slow_spines']) == {'spine3'}
    downlink = named(fl.localise(night(fabric, ('downlink spine2>leaf003', ('spine2>leaf003',)), 5), fabric))
    assert downlink == ['downlink spine2>leaf003']


def test_the_analysis_says_its_routing_assumption_and_what_no_flow_crossed(capsys, tmp_path):
    fabric = fp.fat_tree(32)
    flows = [f for f in night(fabric, None, 2) if f['round'] == 0]       # the leaf-shift rounds lost: no link seen
    missed = fl.untested(flows, fabric)
    seen = {c for f in flows for c in fabric.components(f['src'], f['dst'], f['rail'])}
    assert missed and not set(missed) & seen
    assert fl.untested(night(fabric, None, 2), fabric) == []             # the three rounds cross everything
    assert _analyse_cli(tmp_path, flows, fabric) == 0
    printed = capsys.readouterr().out
    assert 'routing: destination-mod-k' in printed
    assert f'untested tonight (no flow crossed them): {len(missed)}' in printed
    out = json.loads((tmp_path / 'out.json').read_text())
    assert out['untested'] == missed and out['routing'].startswith('destination-mod-k')


def _flapping_night(fabric, fault, slow_rounds, seed):
    """A night whose ``fault`` is there in the rounds ``slow_rounds`` only (modelled flows)."""
    rng = random.Random(seed)
    return [x for r in fp.pair_rounds(fabric)
            for x in fs.simulate_flows(fabric, r.pairs, MODEL, fault if r.number in slow_rounds else None, rng,
                                       r.number)]


CABLE = 'cable n0005:mlx5_0/1 up'


def test_a_cable_slow_in_two_of_three_rounds_is_named_as_flapping_only_when_a_repeat_is_slow_again():
    fabric = fp.fat_tree(64)
    fault = fs.Fault('cable', CABLE, ('n0005>leaf',), 0.10)
    flows = _flapping_night(fabric, fault, (0, 2), 1)
    result = fl.localise(flows, fabric)
    # not steady (round 1 was not slow), nor its port, node or the uplinks its slow flows crossed: explained away
    assert [(s.name, s.flapping, s.slow_rounds) for s in result.suspects] == [(CABLE, True, [['0', '2'], 3])]
    assert 'flapping: slow in round(s) 0, 2 of 3' in result.suspects[0].change
    good = [n for n in fabric.nodes if n != 'n0005']
    rounds = fp.confirmation_rounds([CABLE], fabric, good, flapping=[CABLE])
    assert [r.name for r in rounds] == ['confirmation', 'confirmation-repeat-2', 'confirmation-repeat-3']
    assert [fp.repetition(r.label(0)) for r in rounds] == [1, 2, 3]

    def confirmed(present):              # the fault there in the repetitions ``present`` only
        again = [{**f, 'round': r.label(k)} for j, r in enumerate(rounds, 1)
                 for k, f in enumerate(fs.simulate_flows(fabric, r.pairs, MODEL, fault if j in present else None,
                                                         random.Random(j), r.name))]
        return fl.confirm(fl.localise(flows, fabric), again, fabric)
    once = confirmed({3})
    assert [(s.name, s.flapping, s.confirmed) for s in once.named] == [(CABLE, True, True)]
    assert {fp.repetition(f['round']) for f in once.named[0].confirmation} == {1, 2, 3}
    healthy = confirmed(set())
    assert healthy.suspects[0].confirmed is False and healthy.named == []


def test_a_steady_suspect_is_judged_on_the_first_confirmation_only_and_gets_no_repeats():
    fabric = fp.fat_tree(64)
    good = [n for n in fabric.nodes if n != 'n0005']
    assert [r.name for r in fp.confirmation_rounds([CABLE], fabric, good)] == ['confirmation']
    result = fl.localise(night(fabric, (CABLE, ('n0005>leaf',)), 3), fabric)
    assert [(s.name, s.flapping) for s in result.suspects] == [(CABLE, False)]
    rounds = fp.confirmation_rounds([CABLE], fabric, good)
    slow = fs.Fault('cable', CABLE, ('n0005>leaf',), 0.10)
    healthy_first = [{**f, 'round': r.label(k)} for r in rounds
                     for k, f in enumerate(fs.simulate_flows(fabric, r.pairs, MODEL, None, random.Random(6), r.name))]
    # a slow flow labelled as a repeat is not this suspect's evidence: the first confirmation cleared it
    repeat = [{**f, 'round': f'confirmation{fp.REPEAT}2'} for r in rounds
              for f in fs.simulate_flows(fabric, r.pairs, MODEL, slow, random.Random(7), r.name)]
    fl.confirm(result, healthy_first + repeat, fabric)
    assert result.suspects[0].confirmed is False


def test_repetition_labels_and_the_flapping_p():
    assert fp.repetition('confirmation-links-repeat-2') == 2 and fp.base_label('confirmation-links-repeat-2') == \
        fp.LINK_CONFIRMATION
    assert fp.repetition('confirmation-1') == fp.repetition(0) == fp.repetition('x-repeat-y') == 1
    assert fp.base_label('confirmation-1') == 'confirmation-1' and fp.base_label(2) == 2
    # slow in no round, in all (steady) or in one (either end of that round's pair): not flapping
    assert fl.flap_p([1, 1, 1]) == fl.flap_p([1e-3] * 3) == fl.flap_p([1e-9, 1, 1]) == 1.0
    assert math.isclose(fl.flap_p([1e-3, 2e-3, 1]), 3 * 2e-3 ** 2 * (1 - 2e-3) + 2e-3 ** 3)
    assert math.isclose(fl.flap_p([1e-3, 2e-3, 1, 1]), 2 * (6 * 2e-3 ** 2 * (1 - 2e-3) ** 2 + 4 * 2e-3 ** 3 *
                                                            (1 - 2e-3) + 2e-3 ** 4))

"""ibrepro.fleet.world: the simulated fabric the fleet simulation measures, written apart from the judge. Each test
holds the world to a property of the fabric it stands for (contention, routing, faults), with its noise off."""

import math
import random

import pytest

from ibrepro.fleet import plan as fp

from ibrepro.fleet import world as fw

FABRIC = fp.fat_tree(64)                      # 4 leaves of 16, 16 spines


def world(**kw):
    model = fw.Model(64, 1e-12, **kw)
    return fw.World(FABRIC.leaves, model, seed=3)


def measured(w, faults=(), round_number=1, seed=0):
    return w.night(list(faults), random.Random(seed)).measure(fp.pair_rounds(FABRIC)[round_number].pairs)


def share(f):
    return round(f['bw'] / fw.NOMINAL_LINK_MBPS, 6)


def test_a_non_blocking_shift_round_is_contention_free_under_any_lft():
    for routing in ('plan', 'permuted'):
        assert {share(f) for f in measured(world(routing=routing))} == {1.0}, routing


def test_a_permuted_lft_sends_a_slow_uplinks_loss_to_other_flows_than_the_plan_expects():
    plan, permuted = world(), world(routing='permuted')
    fault = plan.fault_choices()['leaf uplink'][0]
    fault = fw.Fault('leaf uplink', *fault[:2], 0.10)
    slow = {w: {(f['src'], f['dst']) for f in measured(w, [fault]) if share(f) < 1} for w in (plan, permuted)}
    assert len(slow[plan]) == len(slow[permuted]) == 1          # one flow a round crosses an uplink
    expected = {(s, d) for s, d in slow[plan] if FABRIC.spine_for(d) == 0}
    assert slow[plan] == expected and slow[permuted] != slow[plan]


def test_adaptive_routing_spreads_a_slow_uplinks_loss_over_its_leafs_flows():
    w = world(routing='adaptive')
    fault = fw.Fault('leaf uplink', 'uplink leaf000>spine0', ('leaf000>spine0',), 0.16)
    flows = measured(w, [fault])
    from_leaf0 = {share(f) for f in flows if w.leaf_of(f['src']) == 'leaf000'}
    assert from_leaf0 == {1 - 0.16 / 16}                         # a sixteenth of the loss on each
    assert {share(f) for f in flows if w.leaf_of(f['src']) != 'leaf000'} == {1.0}


def test_an_oversubscribed_leaf_halves_a_shift_rounds_flows_which_the_plan_believes_non_blocking():
    w = world(oversubscription=2)
    assert w.spines == 8 and set(w.cables.values()) == {1}
    plan = fp.fat_tree(64, spines=8)
    assert plan.trunk_width('leaf000') == 2                      # what topology.conf's spines alone suggest
    assert {share(f) for f in fw.World(plan.leaves, fw.Model(64, 1e-12, oversubscription=2)).night(
        [], random.Random(0)).measure(fp.pair_rounds(plan)[1].pairs)} == {0.5}


def test_a_slow_leaf_switch_slows_every_flow_through_it_once():
    w = world()
    fault = w.switch_fault('leaf001', 0.10)
    assert fault.component == 'switch leaf001' and 'port n0016:mlx5_0/1' in fault.parts
    for f in measured(w, [fault], round_number=0) + measured(w, [fault]):
        through = 'leaf001' in (w.leaf_of(f['src']), w.leaf_of(f['dst']))
        assert share(f) == (0.9 if through else 1.0)


def test_a_slow_spine_switch_slows_every_flow_through_it_once():
    w = world()
    fault = w.spine_fault(3, 0.10)
    assert fault.component == 'switch spine3' and 'downlink spine3>leaf002' in fault.parts
    flows = measured(w, [fault])
    through = [f for f in flows if FABRIC.leaf_of(f['src']) != FABRIC.leaf_of(f['dst'])
               and FABRIC.spine_for(f['dst']) == 3]
    assert through and {share(f) for f in through} == {0.9}
    assert {share(f) for f in flows if f not in through} == {1.0}


def test_a_flapping_fault_is_present_in_some_rounds_only():
    w = world(flap=0.5)
    fault = fw.Fault('HCA port', 'port n0000:mlx5_0/1', ('n0000>leaf', 'leaf>n0000'), 0.10, 'n0000')
    night = w.night([fault], random.Random(1))
    hit = [any(share(f) < 1 for f in night.measure(fp.pair_rounds(FABRIC)[1].pairs)) for _ in range(60)]
    assert 0 < sum(hit) < 60


def test_the_noise_is_drawn_from_the_residuals_given_and_the_tail_and_leaf_factors_apply():
    w = world(residuals=(-0.05, 0.0, 0.02))
    values = {round(math.log(f['bw'] / fw.NOMINAL_LINK_MBPS), 9) for f in measured(w)}
    assert values <= {-0.05, 0.0, 0.02} and len(values) > 1
    tail = world(tail=1.0, tail_effect=0.3)
    assert {share(f) for f in measured(tail)} == {0.7}
    leafy = world(leaf_cv=0.05)
    assert len({share(f) for f in measured(leafy)}) > 1


def test_a_model_refuses_what_no_fabric_is():
    for bad in ({'routing': 'ecmp'}, {'oversubscription': 0.5}, {'flap': 0}, {'tail': 2}, {'leaf_cv': -1}):
        with pytest.raises(ValueError):
            fw.Model(64, 0.01, **bad)

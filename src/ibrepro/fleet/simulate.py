"""``ibrepro fleet simulate``: the pair rounds, the localiser and the confirmation driven by a simulated fabric
(:mod:`ibrepro.fleet.world`, written apart from the judge), injected faults, with two baselines in the same
harness. Results are simulated.

The world
---------
* Fabric: the plan's :func:`ibrepro.fleet.plan.fat_tree` names (``N`` nodes, ``leaf_size`` (16) per leaf,
  ``spines`` = ``leaf_size / oversubscription`` unless given); the world (:class:`ibrepro.fleet.world.World`) has
  its own routing (``plan``: destination-mod-k; ``permuted``: another LFT; ``adaptive``), its own cables per
  leaf-spine link (fewer than the plan believes when oversubscribed), links of ``link_capacity`` (MB/s; the
  default 25000 is 200 Gb/s, 4x HDR signalling: a nominal rate, not a measurement).
* A flow's bandwidth = the narrowest share of its path (capacity / flows on the link in this round) times the
  noise: drawn from the log residuals of stored fault-free pair-round nights (``--noise-from``:
  :func:`stored_residuals`, each flow against its round's median that night: the tails a fabric really has), or
  without them lognormal of CV ``noise_cv``: the CLI's default (0.01) is **modelled**, an assumption (the
  repository's run reports hold no repeated bandwidth of one flow); then per-leaf factors per night
  (``--leaf-noise``) and per round (``--round-noise``), and a tail (``--tail P:EFFECT``).
* Faults per fault night (``--faults``, default 1), chosen at random: a kind among node cable (one direction, as
  ``tc`` shapes one direction), HCA port (both directions of the node's rail), leaf uplink, leaf downlink (the last
  two only with >= 2 leaves), then an instance; or a whole leaf switch (``--fault switch:<loss>%``) or spine
  switch (``--fault spine:<loss>%``); their links' capacity times ``1 - loss``, present in each round with
  probability ``--flap`` (1: always). Plus ``fault_free_nights`` without.
* Latency (``latency_cv`` given, as an RDMA night's ``ib_send_lat`` per pair; ``--fault latency:<increase>%``):
  every measured pair's latency is 1 (relative units: the localiser judges each flow kind against its own
  median, so a hop count would cancel) times a lognormal noise factor of CV ``latency_cv``, times ``1 + increase``
  when either direction's path crosses the faulted links (a latency fault leaves bandwidth alone). The default
  CV (0.02) is **modelled**, an assumption: no stored night holds repeated latencies.

The harnesses
-------------
* ibrepro: the three rounds of :func:`ibrepro.fleet.plan.pair_rounds`, :func:`ibrepro.fleet.localise.localise`,
  then for the suspects one confirmation run (:func:`ibrepro.fleet.plan.confirmation_rounds`, simulated with the
  fault still there and fresh noise, contention counted) and :func:`ibrepro.fleet.localise.confirm`.
* ClusterKit-like: all N-1 round-robin rounds of pairs, both directions; a pair is bad when either direction is
  below 93 % of the best pair's (or, with latencies, its latency above 2.1x the best pair's); a node is named
  when most of its pairs are bad. (The halving re-test rounds are
  not modelled.)
* LinkTest-like: the same N-1 rounds of N/2 pairs; the slowest pairs below a fixed minimum bandwidth
  (``linktest_min`` x the link capacity; LinkTest has no default, the admin sets one) are re-tested serially (at
  most N of them, fresh noise); a node is named when it is in two or more pairs that stay below the minimum.
* Both baselines measure every pair contention-free (as if each pair ran alone): in favour of the baselines,
  since concurrent round-robin rounds contend under destination-mod-k routing. They name nodes only: a leaf-spine
  link fault is never named exactly by them.

Scores: ``named_exactly`` = fault nights where every injected fault is named by a hypothesis holding it and
nothing else is named; ``wrong_per_night`` = named hypotheses holding no injected component and no part of one,
over all nights (fault and fault-free), with the exact Poisson (Garwood) 95 % upper bound; ``inside_per_night`` =
named hypotheses holding a part inside a fault instead of it (a slow leaf switch's ports);
``fault_free_alarm_nights`` = fault-free nights naming anything. The baselines are modelled only in the world the
plan assumes (plan routing, non-blocking, one steady fault, no leaf, round or tail noise).
"""

import dataclasses
import math
import random
import statistics

import numpy as np

from .. import results, stats
from . import localise as fleet_localise
from . import plan as fleet_plan
from . import world as fleet_world
from .world import FAULT_KINDS, NOMINAL_LINK_MBPS, Fault, Model  # noqa: F401  (the CLI's and tests' names)

#: Modelled default noise CV (an assumption, not a measurement: see the module doc).
MODELLED_NOISE_CV = 0.01
#: Modelled default latency noise CV when latencies are simulated (an assumption, not a measurement).
MODELLED_LATENCY_CV = 0.02
CLUSTERKIT_FRACTION = 0.93
CLUSTERKIT_LATENCY = 2.1


def _fault_free_nights(reports):
    """Per report, per system: the pair-round nights (:func:`ibrepro.fleet.history.from_report`) that named
    nothing (a fault is not noise)."""
    from . import history as fleet_history
    for report in reports:
        systems = {str(c.get('system')) for c in results.testcases(report) if results.PAIR_ROUND_FLOWS in c}
        for system in sorted(systems):
            try:
                night = fleet_history.from_report(report, system)
            except ValueError:
                continue                   # stored variables not as the check stores them: no night
            if not night['named']:
                yield system, night


def stored_residuals(reports):
    """``(residuals, nights)``: the log residuals of the flows of the stored fault-free pair-round nights, each
    flow against its round's median that night (a round is one kind of flow: within a leaf, or between two),
    centred on their median: the noise a night's flows really have, heavy tails and all, for the world to draw
    from (:class:`ibrepro.fleet.world.Model` ``residuals``). Rounds of fewer than 4 flows say little about a
    median and are left out."""
    out, nights = [], 0
    for _system, night in _fault_free_nights(reports):
        by_round = {}
        for f in night['flows']:
            bw = f.get('bw')
            if isinstance(bw, (int, float)) and not isinstance(bw, bool) and 0 < bw < math.inf:
                by_round.setdefault(str(f.get('round')), []).append(math.log(bw))
        used = [v for v in by_round.values() if len(v) >= 4]
        nights += bool(used)
        for values in used:
            middle = statistics.median(values)
            out += [v - middle for v in values]
    if out:
        middle = statistics.median(out)
        out = [v - middle for v in out]
    return tuple(out), nights


def robust_scale(residuals):
    """1.4826 MAD of log residuals: their noise level as a relative CV (what one Gaussian would have)."""
    return stats.MAD_TO_SIGMA * stats.mad(list(residuals))


def poisson_upper(count, exposure, confidence=0.95):
    """Exact (Garwood) upper end of the two-sided interval of a Poisson rate: ``count`` events in ``exposure``."""
    if not exposure:
        return None
    tail = (1 - confidence) / 2

    def cdf(lam):           # P(X <= count; lam), summed in log space (exp(-lam) underflows past lam ~ 745)
        if lam <= 0:
            return 1.0
        logs = [-lam + i * math.log(lam) - math.lgamma(i + 1) for i in range(count + 1)]
        top = max(logs)
        return math.exp(top) * sum(math.exp(v - top) for v in logs)
    lo, hi = 0.0, count + 10 * math.sqrt(count + 1) + 10
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) > tail else (lo, mid)
    return hi / exposure


def world_of(fabric, model, seed=0):
    """The world (:class:`ibrepro.fleet.world.World`) of the plan's ``fabric``: its leaves and spine count (names
    are data), everything else the model's own."""
    if model.spines != fabric.spines:
        model = dataclasses.replace(model, spines=fabric.spines)
    return fleet_world.World(fabric.leaves, model, seed, fabric.rails[0])


def simulate_flows(fabric, pairs, model, fault, rng, round_number=0):
    """The directed flows of one round of ``pairs`` (both directions at once) in the world of ``fabric`` with
    ``fault`` (or None): flow dicts with bandwidths, and with the pair's latency when the model has a latency
    CV."""
    return world_of(fabric, model).night([fault] if fault else [], rng).measure(pairs, round_number)


class IbreproHarness:
    """The plan, the localiser and the confirmation on one fabric (the plan and hypotheses built once)."""

    def __init__(self, fabric, method=fleet_localise.Method()):
        self.fabric, self.method = fabric, method
        self.rounds = fleet_plan.pair_rounds(fabric)
        self.jobs = fleet_plan.slurm_jobs(fabric, self.rounds)
        self._hyps = None

    def night(self, night):
        """Judge one :class:`ibrepro.fleet.world.Night`: its rounds measured, localised, the suspects re-run in
        the same night (the faults still there) and confirmed."""
        flows = [f for r in self.rounds for f in night.measure(r.pairs, r.number)]
        if self._hyps is None:
            self._hyps = {fleet_localise.BANDWIDTH: fleet_localise.hypotheses_of(flows, self.fabric),
                          fleet_localise.LATENCY: fleet_localise.hypotheses_of(
                              fleet_localise.latency_flows(flows), self.fabric)}
        result = fleet_localise.localise(flows, self.fabric, method=self.method, hypotheses=self._hyps)
        confirmation_rounds = []
        if result.suspects:
            suspect_hosts = fleet_localise.suspect_hosts(result.suspects, self.fabric)
            good = [n for n in self.fabric.nodes if n not in suspect_hosts]
            confirmation_rounds = fleet_plan.confirmation_rounds(
                [s.members[0] for s in result.suspects], self.fabric, good,
                flapping=[s.members[0] for s in result.suspects if s.flapping])
            again = []
            for r in confirmation_rounds:
                flows = night.measure(r.pairs, r.name)
                again += [{**f, 'round': r.label(k)} for k, f in enumerate(flows)]
            fleet_localise.confirm(result, again, self.fabric)
        return {'named': [s.members for s in result.named],
                'slow_switches': sorted([*result.slow_leaves, *result.slow_spines]),
                'flapping': [s.members for s in result.named if s.flapping],
                'rounds': len(self.rounds) + len(confirmation_rounds),
                'jobs': len(self.jobs) + 1 +    # + the sweep
                (1 if confirmation_rounds and fleet_plan.confirmation_job_needed(self.fabric, self.jobs) else 0)}


def _fault_mask(fabric, fault, n):
    """(rows, cols) index arrays of the directed flows i -> j the fault slows, as boolean row/col masks."""
    index = {h: i for i, h in enumerate(fabric.nodes)}
    rows, cols = np.zeros(n, bool), np.zeros(n, bool)
    pairs = []
    for link in fault.links:
        a, b = link.split('>')
        if b == 'leaf':                      # h>leaf: every flow from h
            rows[:] = False
            rows[index[a]] = True
            pairs.append((rows.copy(), np.ones(n, bool)))
        elif a == 'leaf':                    # leaf>h: every flow to h
            cols[:] = False
            cols[index[b]] = True
            pairs.append((np.ones(n, bool), cols.copy()))
        elif b.startswith('spine'):          # A>spine q: from leaf A to position q elsewhere
            q = int(b[5:])
            r = np.array([fabric.leaf_of(h) == a for h in fabric.nodes])
            c = np.array([fabric.leaf_of(h) != a and fabric.spine_for(h) == q for h in fabric.nodes])
            pairs.append((r, c))
        else:                                # spine q>B: to position q on B from elsewhere
            q = int(a[5:])
            c = np.array([fabric.leaf_of(h) == b and fabric.spine_for(h) == q for h in fabric.nodes])
            r = np.array([fabric.leaf_of(h) != b for h in fabric.nodes])
            pairs.append((r, c))
    return pairs


def _all_pairs_matrix(fabric, model, fault, nprng):
    """Directed bandwidths i -> j of every pair, each measured alone (contention-free), diagonal NaN."""
    n = len(fabric.nodes)
    if model.residuals:
        m = np.exp(nprng.choice(np.asarray(model.residuals, np.float32), (n, n)))
    else:
        m = np.exp(nprng.standard_normal((n, n), dtype=np.float32) * np.float32(model.sigma))
    m *= np.float32(model.link_capacity)
    if fault:
        for r, c in _fault_mask(fabric, fault, n):
            m[np.ix_(r, c)] *= np.float32(1 - fault.loss)
    np.fill_diagonal(m, np.nan)
    return m


def _all_pairs_latency(fabric, model, fault, nprng):
    """Latency of every pair (symmetric, relative units), each measured alone, diagonal NaN."""
    n = len(fabric.nodes)
    m = np.exp(nprng.standard_normal((n, n), dtype=np.float32) * np.float32(model.latency_sigma))
    m = np.triu(m, 1) + np.triu(m, 1).T
    if fault and fault.latency:
        hit = np.zeros((n, n), bool)
        for r, c in _fault_mask(fabric, fault, n):
            hit[np.ix_(r, c)] = True
        m[hit | hit.T] *= np.float32(1 + fault.latency)
    np.fill_diagonal(m, np.nan)
    return m


def clusterkit_night(fabric, model, fault, nprng):
    """ClusterKit-like: pairs below 93 % of the best pair's bandwidth (or above 2.1x its latency) are bad; a node
    with most pairs bad is named."""
    m = _all_pairs_matrix(fabric, model, fault, nprng)
    pair = np.fmin(m, m.T)
    best = np.nanmax(pair)
    bad = pair < CLUSTERKIT_FRACTION * best
    if model.latency_cv:
        lat = _all_pairs_latency(fabric, model, fault, nprng)
        bad |= lat > CLUSTERKIT_LATENCY * np.nanmin(lat)
    n = len(fabric.nodes)
    flagged = np.nonzero(bad.sum(axis=1) > (n - 1) / 2)[0]
    return {'named': [(f'node {fabric.nodes[i]}',) for i in flagged], 'rounds': n - 1 if n % 2 == 0 else n,
            'jobs': 1}


def linktest_night(fabric, model, fault, nprng):
    """LinkTest-like: pairs below the fixed minimum re-tested serially (the slowest N at most); a node in two or
    more pairs still below it is named."""
    m = _all_pairs_matrix(fabric, model, fault, nprng)
    n = len(fabric.nodes)
    pair = np.fmin(m, m.T)
    minimum = model.linktest_min * model.link_capacity
    iu = np.triu_indices(n, 1)
    values = pair[iu]
    below = np.nonzero(values < minimum)[0]
    below = below[np.argsort(values[below])][:n]
    again = _all_pairs_matrix(fabric, model, fault, nprng) if len(below) else None
    counts = np.zeros(n, int)
    for k in below:
        i, j = iu[0][k], iu[1][k]
        if min(again[i, j], again[j, i]) < minimum:
            counts[i] += 1
            counts[j] += 1
    flagged = np.nonzero(counts >= 2)[0]
    return {'named': [(f'node {fabric.nodes[i]}',) for i in flagged], 'rounds': n - 1 if n % 2 == 0 else n,
            'jobs': 1, 'serial_retests': int(len(below))}


def _score(faults, named):
    """``(exact, wrong, inside)`` of a night with ``faults`` (a list, maybe empty): every fault named by a
    hypothesis holding it and nothing else named; hypotheses holding no fault and no part of one (a healthy part
    named); hypotheses naming a part inside a fault instead of it (a leaf switch's ports). A baseline's
    'node h' holds any node-side fault of h (it names nodes only)."""
    def holds(fault, members):
        if fault.component in members:
            return True
        return fault.host is not None and len(members) == 1 and members[0] == f'node {fault.host}'

    right = [m for m in named if any(holds(f, m) for f in faults)]
    inside = [m for m in named if m not in right and any(set(m) & f.parts for f in faults)]
    exact = bool(faults) and len(right) == len(named) and all(any(holds(f, m) for m in named) for f in faults)
    return exact, len(named) - len(right) - len(inside), len(inside)


def run(model, nights, loss, *, latency=0.0, seed=0, fault_free_nights=20, baselines=True,
        method=fleet_localise.Method(), progress=None, faults_per_night=1, fault_kind=None, fabric=None):
    """Simulate ``nights`` fault nights (each with ``faults_per_night`` faults losing ``loss`` of their capacity,
    or adding ``latency`` to their pairs' latency; ``fault_kind`` 'leaf switch' for switches, else a random kind
    each) and ``fault_free_nights`` fault-free ones; the scores per harness. ``fabric``: a site's own (its
    topology), instead of the model's fat tree of ``nodes``."""
    fabric = fabric or fleet_plan.fat_tree(model.nodes, model.leaf_size, model.spine_count)
    world = world_of(fabric, model, seed)
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    harnesses = {'ibrepro': IbreproHarness(fabric, method).night}
    if baselines:
        if not (model.plan_world and faults_per_night == 1 and fault_kind is None):
            raise ValueError('the baselines are modelled only in the world the plan assumes (plan routing, '
                             'non-blocking, one steady fault a night, no leaf or round noise, no tail): '
                             'add --no-baselines')
        harnesses['clusterkit'] = lambda n: clusterkit_night(fabric, model, (n.faults or [None])[0], nprng)
        harnesses['linktest'] = lambda n: linktest_night(fabric, model, (n.faults or [None])[0], nprng)
    tallies = {name: {'exact': 0, 'wrong': 0, 'inside': 0, 'rounds': 0, 'jobs': 0, 'alarms': 0, 'retests': 0,
                      'flapping': 0, 'within4': 0,
                      'switches_right': 0, 'switches_wrong': 0, 'by_kind': {}} for name in harnesses}
    schedule = [world.random_faults(faults_per_night, loss, rng, latency, fault_kind) for _ in range(nights)] \
        + [[]] * fault_free_nights
    for number, faults in enumerate(schedule):
        for name, harness in harnesses.items():
            out = harness(world.night(faults, rng))
            exact, wrong, inside = _score(faults, out['named'])
            t = tallies[name]
            t['exact'] += exact
            t['wrong'] += wrong
            t['inside'] += inside
            t['rounds'] += out['rounds']
            t['jobs'] += out['jobs']
            t['retests'] += out.get('serial_retests', 0)
            t['flapping'] += len(out.get('flapping', ()))
            t['within4'] += out['rounds'] <= 4
            switches = {f.component for f in faults if f.kind in ('leaf switch', 'spine switch')}
            said = {f'switch {x}' for x in out.get('slow_switches', ())}
            t['switches_right'] += len(said & switches)
            t['switches_wrong'] += len(said - switches)
            if not faults:
                t['alarms'] += bool(out['named'])
            for f in faults:       # per kind: one fault named exactly; of several, each one named at all
                kind = t['by_kind'].setdefault(f.kind, [0, 0])
                kind[0] += exact if len(faults) == 1 else any(f.component in m for m in out['named'])
                kind[1] += 1
        if progress:
            progress(number + 1, len(schedule))
    total = len(schedule)
    results = {}
    for name, t in tallies.items():
        low, high = stats.clopper_pearson(t['exact'], nights) if nights else (None, None)
        results[name] = {
            'named_exactly': t['exact'] / nights if nights else None,
            'named_exactly_ci95': [low, high],
            'wrong_per_night': t['wrong'] / total,
            'wrong_per_night_upper95': poisson_upper(t['wrong'], total),
            'wrong_total': t['wrong'],
            'inside_per_night': t['inside'] / total,
            'slow_switches_said_right': t['switches_right'],       # a slow leaf or spine said of a faulted switch
            'slow_switches_said_wrong_per_night': t['switches_wrong'] / total,
            'rounds': t['rounds'] / total,
            'nights_within_4_rounds': t['within4'] / total,         # the share of nights of at most 4 rounds
            'jobs': t['jobs'] / total,
            'fault_free_alarm_nights': t['alarms'],
            'named_flapping_per_night': t['flapping'] / total,     # named, said to be flapping
            'named_exactly_by_kind': {k: v[0] / v[1] for k, v in sorted(t['by_kind'].items())},
        }
        if name == 'linktest':
            results[name]['serial_retests_per_night'] = t['retests'] / total
    results['simulation'] = {
        'nodes': len(fabric.nodes), 'leaf_size': max(len(v) for v in fabric.leaves.values()),
        'leaves': len(fabric.leaves), 'spines': fabric.spines,
        'fault_nights': nights, 'fault_free_nights': fault_free_nights, 'loss': loss, 'latency_increase': latency,
        'faults_per_night': faults_per_night, 'fault_kind': fault_kind or 'random',
        'seed': seed, 'noise_cv': model.noise_cv, 'latency_cv': model.latency_cv,
        'noise': f'{len(model.residuals)} stored residuals' if model.residuals else 'lognormal',
        'routing': model.routing, 'oversubscription': model.oversubscription,
        'cables_per_leaf_spine_link': model.cables(model.leaf_size), 'leaf_cv': model.leaf_cv,
        'round_cv': model.round_cv, 'tail': model.tail, 'tail_effect': model.tail_effect, 'flap': model.flap,
        'min_latency_increase': method.min_latency_increase, 'link_capacity_MBps': model.link_capacity,
        'linktest_min_fraction': model.linktest_min, 'alpha': method.alpha, 'min_effect': method.min_effect,
        'upper95': 'exact Poisson (Garwood), two-sided 95 %, per night; named_exactly_ci95: Clopper-Pearson',
        'note': 'simulated (flow-level model), not measured on hardware',
    }
    return results


#: the naming levels ``ibrepro fleet calibrate`` replays by default
CALIBRATION_ALPHAS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
#: the false names a night it calibrates to by default: at most one wrong component in 30 nights (95 % upper bound)
CALIBRATION_TARGET = 1 / 30


def calibrate(model, fault_free_nights, *, alphas=CALIBRATION_ALPHAS, target=CALIBRATION_TARGET, fault_nights=0,
              loss=0.10, seed=0, fabric=None, progress=None):
    """The naming level of a partition, calibrated by replay: for each level in ``alphas`` the same seeded nights
    (the same noise draws: common random numbers) on ``fabric`` (default the model's fat tree) with the model's
    noise (drawn from the partition's stored fault-free nights), ``fault_free_nights`` of them, plus
    ``fault_nights`` with one random fault of ``loss`` (what a level costs in power). Returns ``{'levels': [{alpha,
    wrong_per_night, wrong_per_night_upper95, fault_free_alarm_nights, named_exactly}], 'alpha': the largest
    level whose 95 % upper bound of false names a night is at most ``target`` (None when none is), ...}``."""
    if fault_free_nights < 1 or not alphas or not all(0 < a <= fleet_localise.Method.screen_alpha for a in alphas):
        raise ValueError(f'calibration: at least one fault-free night and levels in (0, '
                         f'{fleet_localise.Method.screen_alpha}]')
    levels = []
    for k, alpha in enumerate(sorted(set(alphas))):
        r = run(model, fault_nights, loss, seed=seed, fault_free_nights=fault_free_nights, baselines=False,
                method=fleet_localise.method_of(alpha), fabric=fabric)
        s = r['ibrepro']
        levels.append({'alpha': alpha, 'wrong_per_night': s['wrong_per_night'],
                       'wrong_per_night_upper95': s['wrong_per_night_upper95'],
                       'fault_free_alarm_nights': s['fault_free_alarm_nights'],
                       'named_exactly': s['named_exactly']})
        simulation = r['simulation']
        if progress:
            progress(k + 1, len(set(alphas)))
    meets = [row['alpha'] for row in levels if row['wrong_per_night_upper95'] <= target]
    return {'levels': levels, 'alpha': max(meets) if meets else None, 'target_wrong_per_night': target,
            'simulation': {**simulation, 'alpha': None,
                           'note': 'replayed: flow-level model with noise drawn from stored nights, not measured'}}


def parse_fault(text):
    """``(loss, latency increase, kind)`` of a fault: ``random:10%`` -> (0.10, 0.0, None), a bandwidth fault of a
    random kind; ``switch:10%`` -> (0.10, 0.0, 'leaf switch'), a whole leaf switch; ``spine:10%`` -> (0.10, 0.0,
    'spine switch'), a whole spine switch; ``latency:30%`` -> (0.0, 0.30, None), a latency fault (pairs crossing it
    30 % slower)."""
    kind, _, amount = text.partition(':')
    if kind not in ('random', 'switch', 'spine', 'latency') or not amount.endswith('%'):
        raise ValueError('--fault: expected random:<loss>%, switch:<loss>%, spine:<loss>% or latency:<increase>%, '
                         f'not {text!r}')
    try:
        value = float(amount[:-1]) / 100
    except ValueError:
        raise ValueError(f'--fault: {amount!r} is not a percentage') from None
    if kind in ('random', 'switch', 'spine'):
        if not 0 < value < 1:
            raise ValueError('--fault: the loss must be between 0 and 100 %')
        return value, 0.0, {'switch': 'leaf switch', 'spine': 'spine switch'}.get(kind)
    if not 0 < value <= 10:
        raise ValueError('--fault: the latency increase must be above 0 and at most 1000 %')
    return 0.0, value, None


def parse_tail(text):
    """``(share, loss)`` of ``--tail P:EFFECT``: ``0.2%:30%`` -> (0.002, 0.30): that share of flows lose that
    much (a congestion spike, another job's traffic)."""
    share, _, effect = text.partition(':')
    try:
        if not (share.endswith('%') and effect.endswith('%')):
            raise ValueError
        share, effect = float(share[:-1]) / 100, float(effect[:-1]) / 100
    except ValueError:
        raise ValueError(f'--tail: expected <share>%:<loss>% (e.g. 0.2%:30%), not {text!r}') from None
    if not (0 < share <= 1 and 0 < effect < 1):
        raise ValueError('--tail: the share must be above 0 and at most 100 %, the loss between 0 and 100 %')
    return share, effect

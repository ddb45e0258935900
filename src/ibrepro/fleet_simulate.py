"""``ibrepro fleet simulate``: the pair rounds, the localiser and the confirmation driven by a flow-level model of a
two-level fat tree, one injected fault per night, with two baselines in the same harness. Results are simulated.

The model
---------
* Fabric: :func:`ibrepro.fleet_plan.fat_tree`: ``N`` nodes, ``leaf_size`` (16) per leaf, one uplink per spine,
  ``spines`` = ``leaf_size`` unless given; routing destination-mod-k (:mod:`ibrepro.fleet_plan`).
* Links are directed: node cable up (``h>leaf``) and down (``leaf>h``), leaf uplink (``A>spineq``), leaf downlink
  (``spineq>B``), a cable of capacity ``link_capacity`` (MB/s; the default 25000 is 200 Gb/s, 4x HDR signalling: a
  nominal rate, not a measurement); a leaf-spine link a trunk of :meth:`~ibrepro.fleet_plan.Fabric.trunk_width`
  cables (one with ``spines`` = ``leaf_size``).
* A flow's bandwidth = min over its path's links of capacity / (flows on that link in this round), times a
  lognormal noise factor of median 1 and coefficient of variation ``noise_cv``. The CV is a parameter: the stored
  run reports (tests/data/run-reports) hold no repeated bandwidth values of one test (one run each, intra-node,
  and their manifest calls them "not performance data"), so the CLI's default (0.01) is **modelled**, an
  assumption. ``--noise-from`` fits it (:func:`stored_noise_cv`) from the pair-round nights stored in the results
  database, or ``--noise-from REPORT...`` from run reports: each flow's robust CV across the nights that named
  nothing, the median over flows with >= 3 nights (what the model's noise is: one flow's scatter from night to
  night).
* Faults, one per fault night, chosen at random: a kind among node cable (one direction, as ``tc`` shapes one
  direction), HCA port (both directions of the node's rail), leaf uplink, leaf downlink (the last two only with
  >= 2 leaves), then an instance; its links' capacity times ``1 - loss``. Plus ``fault_free_nights`` without.
* Latency (``latency_cv`` given, as an RDMA night's ``ib_send_lat`` per pair; ``--fault latency:<increase>%``):
  every measured pair's latency is 1 (relative units: the localiser judges each flow kind against its own
  median, so a hop count would cancel) times a lognormal noise factor of CV ``latency_cv``, times ``1 + increase``
  when either direction's path crosses the faulted links (a latency fault leaves bandwidth alone). The default
  CV (0.02) is **modelled**, an assumption: no stored night holds repeated latencies.

The harnesses
-------------
* ibrepro: the three rounds of :func:`ibrepro.fleet_plan.pair_rounds`, :func:`ibrepro.fleet_localise.localise`,
  then for the suspects one confirmation run (:func:`ibrepro.fleet_plan.confirmation_rounds`, simulated with the
  fault still there and fresh noise, contention counted) and :func:`ibrepro.fleet_localise.confirm`.
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

Scores: ``named_exactly`` = fault nights where exactly one hypothesis was named and it holds the injected
component; ``wrong_per_night`` = named hypotheses without the injected component, over all nights (fault and
fault-free), with the exact Poisson (Garwood) 95 % upper bound; ``fault_free_alarm_nights`` = fault-free nights
naming anything.
"""

import dataclasses
import math
import random
import statistics

import numpy as np

from . import fleet_localise, fleet_plan, results, stats

#: Modelled default noise CV (an assumption, not a measurement: see the module doc).
MODELLED_NOISE_CV = 0.01
#: Nominal 4x HDR signalling rate in MB/s (200 Gb/s / 8): a nominal value, not a measurement.
NOMINAL_LINK_MBPS = 25000.0
#: Modelled default latency noise CV when latencies are simulated (an assumption, not a measurement).
MODELLED_LATENCY_CV = 0.02
CLUSTERKIT_FRACTION = 0.93
CLUSTERKIT_LATENCY = 2.1
FAULT_KINDS = ('node cable', 'HCA port', 'leaf uplink', 'leaf downlink')


def stored_noise_cv(reports, min_values=3):
    """``(cv, series, nights)``: the median robust CV of the repeated bandwidth series in ReFrame run reports
    (dicts, oldest first), how many series and how many pair-round nights gave them; ``(None, 0, 0)`` when no
    series has ``min_values`` values. A series is one flow of the pair rounds across nights (system, partition,
    round, host, rail, peer, direction: :func:`ibrepro.fleet_rounds.from_report`), a night that named a component
    left out (a fault is not noise), or one test case's ``bw`` performance variable across sessions."""
    from . import fleet_rounds
    series, nights = {}, 0
    for report in reports:
        cases = results.testcases(report)
        for case in cases:
            perfvalues = case.get('perfvalues')
            if 'fleet_flows' in case or not isinstance(perfvalues, dict):
                continue                   # a pair-round case's flows are read per night below
            for key, value in perfvalues.items():
                if str(key).rsplit(':', 1)[-1].startswith('bw') and isinstance(value, list) and value \
                        and isinstance(value[0], (int, float)) and value[0] > 0:
                    series.setdefault((case.get('display_name') or case.get('name'), key), []).append(value[0])
        for system in sorted({str(c.get('system')) for c in cases if 'fleet_flows' in c}):
            try:
                night = fleet_rounds.from_report(report, system)
            except ValueError:
                continue                   # stored variables not as the check stores them: no night
            if night['named']:
                continue
            nights += 1
            for f in night['flows']:
                bw = f.get('bw')
                if isinstance(bw, (int, float)) and bw > 0:
                    key = ('fleet', system, night['partition'], str(f.get('round')), f.get('host'),
                           f.get('device'), f.get('port'), f.get('peer'), f.get('direction'))
                    series.setdefault(key, []).append(bw)
    cvs = [stats.robust_cv(v) for v in series.values() if len(v) >= min_values]
    return (statistics.median(cvs), len(cvs), nights) if cvs else (None, 0, nights)


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


@dataclasses.dataclass(frozen=True)
class Model:
    nodes: int
    noise_cv: float
    leaf_size: int = 16
    spines: int = 0
    link_capacity: float = NOMINAL_LINK_MBPS
    linktest_min: float = 0.95
    latency_cv: float | None = None    # None: flows without latency (TCP nights)

    @property
    def sigma(self):
        return math.sqrt(math.log1p(self.noise_cv ** 2))

    @property
    def latency_sigma(self):
        return math.sqrt(math.log1p(self.latency_cv ** 2))


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: str
    component: str       # as fleet_plan.Fabric.components names it
    links: tuple         # directed links whose capacity it lowers
    loss: float               # its links' lost fraction of capacity
    host: str | None = None
    latency: float = 0.0      # the relative latency increase of a pair crossing its links (either direction)


def fault_choices(fabric):
    """Per fault kind, the faults one can inject: [(component, links, host)]."""
    rail = '{}/{}'.format(*fabric.rails[0])
    out = {'node cable': [], 'HCA port': [], 'leaf uplink': [], 'leaf downlink': []}
    for h in fabric.nodes:
        out['node cable'] += [(f'cable {h}:{rail} up', (f'{h}>leaf',), h),
                              (f'cable {h}:{rail} down', (f'leaf>{h}',), h)]
        out['HCA port'].append((f'port {h}:{rail}', (f'{h}>leaf', f'leaf>{h}'), h))
    if len(fabric.leaves) > 1:
        for leaf in fabric.leaves:
            for q in range(fabric.spines):
                out['leaf uplink'].append((f'uplink {leaf}>spine{q}', (f'{leaf}>spine{q}',), None))
                out['leaf downlink'].append((f'downlink spine{q}>{leaf}', (f'spine{q}>{leaf}',), None))
    return {k: v for k, v in out.items() if v}


def random_fault(fabric, loss, rng, latency=0.0):
    choices = fault_choices(fabric)
    kind = rng.choice(sorted(choices))
    component, links, host = rng.choice(choices[kind])
    return Fault(kind, component, links, loss, host, latency)


def simulate_flows(fabric, pairs, model, fault, rng, round_number=0):
    """The directed flows of one round of ``pairs`` (both directions at once) as flow dicts with bandwidths, and
    with the pair's latency when the model has a latency CV."""
    flows = fleet_plan.flows_of(pairs)
    paths = [fabric.directed_links(s, d) for s, d in flows]
    loads = {}
    for path in paths:
        for link in path:
            loads[link] = loads.get(link, 0) + 1
    slow = set(fault.links) if fault else set()

    def capacity(link):             # a leaf-spine link is a trunk of several cables (Fabric.link_width)
        return model.link_capacity * fabric.link_width(link) * ((1 - fault.loss) if link in slow else 1.0)

    latency = {}
    if model.latency_cv:
        for a, b in pairs:
            crossed = set(fabric.directed_links(a, b)) | set(fabric.directed_links(b, a))
            latency[frozenset((a, b))] = math.exp(rng.gauss(0.0, model.latency_sigma)) * (
                1 + fault.latency if fault and fault.latency and crossed & slow else 1.0)
    out = []
    for (s, d), path in zip(flows, paths):
        share = min(capacity(link) / loads[link] for link in path)
        out.append({'round': round_number, 'src': s, 'dst': d, 'rail': fabric.rails[0],
                    'bw': share * math.exp(rng.gauss(0.0, model.sigma)), 'lat': latency.get(frozenset((s, d)))})
    return out


class IbreproHarness:
    """The plan, the localiser and the confirmation on one fabric (the plan and hypotheses built once)."""

    def __init__(self, fabric, method=fleet_localise.Method()):
        self.fabric, self.method = fabric, method
        self.rounds = fleet_plan.pair_rounds(fabric)
        self.jobs = fleet_plan.slurm_jobs(fabric, self.rounds)
        self._hyps = None

    def night(self, model, fault, rng):
        flows = [f for r in self.rounds for f in simulate_flows(self.fabric, r.pairs, model, fault, rng, r.number)]
        if self._hyps is None:
            self._hyps = {fleet_localise.BANDWIDTH: fleet_localise.hypotheses_of(flows, self.fabric),
                          fleet_localise.LATENCY: fleet_localise.hypotheses_of(
                              fleet_localise.latency_flows(flows), self.fabric)}
        result = fleet_localise.localise(flows, self.fabric, method=self.method, hypotheses=self._hyps)
        confirmation_rounds = []
        if result.suspects:
            suspect_hosts = fleet_localise.suspect_hosts(result.suspects, self.fabric)
            good = [n for n in self.fabric.nodes if n not in suspect_hosts]
            confirmation_rounds = fleet_plan.confirmation_rounds([s.members[0] for s in result.suspects],
                                                                 self.fabric, good)
            again = []
            for r in confirmation_rounds:
                flows = simulate_flows(self.fabric, r.pairs, model, fault, rng, r.name)
                again += [{**f, 'round': r.label(k)} for k, f in enumerate(flows)]
            fleet_localise.confirm(result, again, self.fabric)
        return {'named': [s.members for s in result.named],
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


def _score(injected, named):
    """(exact, wrong): exactly one hypothesis holding the injected component; hypotheses without it.
    A baseline's 'node h' holds any node-side fault of h (it names nodes only)."""
    def holds(members):
        if injected is None:
            return False
        if injected.component in members:
            return True
        return injected.host is not None and f'node {injected.host}' in members and len(members) == 1 \
            and members[0].startswith('node ')
    right = [m for m in named if holds(m)]
    return len(named) == 1 and len(right) == 1, len(named) - len(right)


def run(model, nights, loss, *, latency=0.0, seed=0, fault_free_nights=20, baselines=True,
        method=fleet_localise.Method(), progress=None):
    """Simulate ``nights`` fault nights (each fault losing ``loss`` of its capacity, or adding ``latency`` to its
    pairs' latency) and ``fault_free_nights`` fault-free ones; the scores per harness."""
    fabric = fleet_plan.fat_tree(model.nodes, model.leaf_size, model.spines or None)
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    harnesses = {'ibrepro': IbreproHarness(fabric, method).night}
    if baselines:
        harnesses['clusterkit'] = lambda mod, f, r: clusterkit_night(fabric, mod, f, nprng)
        harnesses['linktest'] = lambda mod, f, r: linktest_night(fabric, mod, f, nprng)
    tallies = {name: {'exact': 0, 'wrong': 0, 'rounds': 0, 'jobs': 0, 'alarms': 0, 'retests': 0,
                      'by_kind': {}} for name in harnesses}
    schedule = [random_fault(fabric, loss, rng, latency) for _ in range(nights)] + [None] * fault_free_nights
    for night, fault in enumerate(schedule):
        for name, harness in harnesses.items():
            out = harness(model, fault, rng)
            exact, wrong = _score(fault, out['named'])
            t = tallies[name]
            t['exact'] += exact
            t['wrong'] += wrong
            t['rounds'] += out['rounds']
            t['jobs'] += out['jobs']
            t['retests'] += out.get('serial_retests', 0)
            if fault is None:
                t['alarms'] += bool(out['named'])
            else:
                kind = t['by_kind'].setdefault(fault.kind, [0, 0])
                kind[0] += exact
                kind[1] += 1
        if progress:
            progress(night + 1, len(schedule))
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
            'rounds': t['rounds'] / total,
            'jobs': t['jobs'] / total,
            'fault_free_alarm_nights': t['alarms'],
            'named_exactly_by_kind': {k: v[0] / v[1] for k, v in sorted(t['by_kind'].items())},
        }
        if name == 'linktest':
            results[name]['serial_retests_per_night'] = t['retests'] / total
    results['simulation'] = {
        'nodes': model.nodes, 'leaf_size': model.leaf_size, 'leaves': len(fabric.leaves), 'spines': fabric.spines,
        'fault_nights': nights, 'fault_free_nights': fault_free_nights, 'loss': loss, 'latency_increase': latency,
        'seed': seed, 'noise_cv': model.noise_cv, 'latency_cv': model.latency_cv,
        'min_latency_increase': method.min_latency_increase, 'link_capacity_MBps': model.link_capacity,
        'linktest_min_fraction': model.linktest_min, 'alpha': method.alpha, 'min_effect': method.min_effect,
        'upper95': 'exact Poisson (Garwood), two-sided 95 %, per night; named_exactly_ci95: Clopper-Pearson',
        'note': 'simulated (flow-level model), not measured on hardware',
    }
    return results


def parse_fault(text):
    """``(loss, latency increase)`` of a fault: ``random:10%`` -> (0.10, 0.0), a bandwidth fault;
    ``latency:30%`` -> (0.0, 0.30), a latency fault (pairs crossing it 30 % slower)."""
    kind, _, amount = text.partition(':')
    if kind not in ('random', 'latency') or not amount.endswith('%'):
        raise ValueError(f'--fault: expected random:<loss>% or latency:<increase>%, not {text!r}')
    try:
        value = float(amount[:-1]) / 100
    except ValueError:
        raise ValueError(f'--fault: {amount!r} is not a percentage') from None
    if kind == 'random':
        if not 0 < value < 1:
            raise ValueError('--fault: the loss must be between 0 and 100 %')
        return value, 0.0
    if not 0 < value <= 10:
        raise ValueError('--fault: the latency increase must be above 0 and at most 1000 %')
    return 0.0, value

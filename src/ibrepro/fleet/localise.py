"""The fleet's localiser: which component made the night's slow flows slow.

Input: the night's flows (:func:`read_flows`), each keyed by round, host, device, port, peer and direction
('send': host -> peer, 'recv': peer -> host), with its bandwidth (and optionally latency), and the fabric
(:class:`ibrepro.fleet.plan.Fabric`: leaves, spines, destination-mod-k routing). Each flow crosses a known set of
components (:meth:`Fabric.components`: its two nodes, HCA ports, the sender's cable up, the receiver's cable down,
between leaves an uplink, a downlink and two leaf-spine cables).

Method (:func:`localise`):

1. Residuals: ``r = log(bw) - log(reference)``, the reference the partition's expected bandwidth when given,
   else the night's fleet median of the flows of the same kind (within a leaf / between leaves). Negative =
   slower. Bandwidth: each leaf's effect for the night (:func:`leaf_effects`, the median over the flows touching
   it) taken out of its flows' residuals; a leaf slower than ``min_effect`` is said (``slow_leaves``: its switch,
   its rack or its load), its parts not blamed. Then each spine's (:func:`spine_effects`, the median over the
   inter-leaf flows through it) the same way: a spine slower than ``min_effect`` is said (``slow_spines``), its
   links not blamed. Noise scale ``s`` = 1.4826 * MAD of the residuals (most flows are healthy), floored at
   ``min_cv``.
2. Components whose flows are the same set (one rail: a node and its HCA port) cannot be told apart by traffic:
   they are one hypothesis, named together (``port n01:mlx5_0/1 = node n01``; the state sweep tells which).
3. Per hypothesis ``c`` with flows ``F_c``: effect ``e_c`` = mean residual. With the component's own history
   (past effects, log units, >= 3 nights) the effect is taken relative to the history's median (a cable that is
   always 3 % slow is its normal). Its p is the larger of two: the Gaussian ``Phi(sum(r) / (s sqrt(|F_c|)))`` (a
   few flows say little about tails) and the night's own noise (:class:`Noise`: the distribution of the night's
   other residuals, each smoothed by the scale ``s``) for "every flow at least as slow as the least slow of
   ``F_c``", ``F(max r) ** |F_c|``. p is 1 unless every flow of ``F_c`` is slower than half ``min_effect``
   (:func:`consistent`; on a node those of one direction, on a link the aggregate of each round's flows): a
   steady fault slows all its flows, a real fabric's heavy-tailed noise (the stored fault-free nights: 10 of 240
   flows beyond 4 robust sigmas) one of them now and then.
4. Explain-away, greedily: among hypotheses with Benjamini-Hochberg q <= ``screen_alpha`` (over all hypotheses,
   as :func:`ibrepro.stats.benjamini_hochberg`) and an effect of at least ``min_effect``, take the one explaining
   the most squared residual (``|F_c| e_c^2``), subtract its effect from its flows, and start again. A bad node
   cable slows the flows of its uplink too, but after the cable's effect is taken out the uplink has nothing left.
5. Final test: each chosen hypothesis is re-tested with the others' effects taken out; BH over all hypotheses
   again; the suspects are those with q <= ``screen_alpha`` and the effect. They go to the confirmation, which
   alone names them (:func:`confirm`); a night without one names only suspects with q <= ``alpha``.
6. Alternatives: beside a suspect on a node's receiving side, the downlink all its inter-leaf flows arrive
   through (destination-mod-k) is re-tested too, and named only when its confirmation confirms it
   (:func:`_downlink_alternatives`): a trunk shared unevenly can make its loss look like one receiver's cable.

7. Flapping (bandwidth): a component slow in some of the night's rounds and not in others fails step 3's "every flow
   slow". Per round, its flows are judged as step 3 judges a night's (a group all slower than half ``min_effect``,
   its mean beyond it; p the noise's for as slow a group, times the groups); a hypothesis slow in ``k`` of its ``n``
   rounds, ``2 <= k < n``, has p = ``(n - 2) * P(Binomial(n, p_k) >= k)`` with ``p_k`` the largest p of its slow
   rounds (``k`` slow rounds each at most that likely, over the ``n - 2`` values ``k`` may take; one slow round of a
   pair is either end of it, and a leaf-spine link, crossed in two rounds, is never found flapping). Each leaf's
   effect in each round is taken out first (a leaf's load moves all its flows). Explain-away and Benjamini-Hochberg
   as steps 4-5 (at ``flap_alpha``), on the flows through no steady suspect; a flapping suspect is re-tested
   ``FLAP_REPEATS`` times with a good partner (:func:`ibrepro.fleet.plan.confirmation_rounds`) and named as flapping
   when slow in ``k >= 1`` of them with ``m * P(Binomial(m, p_k) >= k) <= alpha`` (:func:`_judge_flapping`).

Latency (RDMA nights, whose flows carry the pair's ``ib_send_lat``): the same steps 1-5 over one latency flow per
pair, rail and round (:func:`latency_flows`), with ``r = log(reference) - log(lat)`` (negative = slower again), a
reference per flow kind from the night's fleet median, its own noise scale and its own false discovery family,
and ``min_latency_increase`` for the effect. A ping-pong crosses both directions' components, so a node's cables,
port and node are one latency hypothesis, as are the two directions of a path. Latency has its own history, as
bandwidth's (a component's past latency effects): a node whose ping-pongs are always slower is its normal.

Confirmation (:func:`confirm`): the suspects' re-run flows (:func:`ibrepro.fleet.plan.confirmation_rounds`:
leaf-spine links loaded with as many flows as they have cables, beside them node-side suspects with known-good
partners)
against the same reference and the night's noise (the suspects' own flows left out): a suspect is named only
when its re-run flows are again slower, each of them (:func:`consistent`), with p <= ``alpha`` (the larger of
step 3's two; one pre-selected test per suspect, as :func:`ibrepro.stats.confirmation_test`) and the effect.
A suspect cleared by its confirmation is not named.
"""

import bisect
import collections
import math
import statistics
from typing import Optional

from .. import stats
from ..compat import dataclasses, fmean
from .component import Component, component_or_none
from .plan import LINK_CONFIRMATION, NO_TOPOLOGY, base_label, repetition


@dataclasses.dataclass(frozen=True)
class Method:
    alpha: float = 0.01        # level of a confirmation's test; false discovery rate (Benjamini-Hochberg) of what a
                               # night names on its own (no confirmation ran)
    screen_alpha: float = 0.2  # false discovery rate of the suspects sent to the confirmation (which alone names)
    flap_alpha: float = 0.01   # the same of flapping suspects (step 7), each re-tested FLAP_REPEATS times: the
                               # fabric's tails put two flows of some healthy cable at -9 % a tenth of the nights
    min_effect: float = 0.05   # smallest relative bandwidth loss named
    min_latency_increase: float = 0.20   # smallest relative latency increase named (chosen: a C-state or NUMA
                                         # penalty is tens of %; ClusterKit flags 2.1x the best pair)
    min_cv: float = 0.005      # floor of the noise scale (relative)
    min_history: int = 3       # fewer past nights of a component: its history is not used


def method_of(alpha=None):
    """The method of a partition whose naming level was calibrated (``ibrepro fleet calibrate``: the partition's
    extras ``fleet_alpha``, stored with each night): ``alpha`` for a confirmation's test and for flapping suspects'
    (the screen is the confirmation's, unchanged); the default method without one. ValueError unless ``alpha`` is
    a number in (0, screen_alpha] (a stored night is data)."""
    if alpha is None:
        return Method()
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= Method.screen_alpha:
        raise ValueError(f'alpha: {alpha!r:.40} is not a level in (0, {Method.screen_alpha}]')
    return Method(alpha=float(alpha), flap_alpha=float(alpha))


def read_flows(records, fabric=None):
    """Normalise flow records to dicts ``{round, src, dst, rail, bw, lat}``: each record has ``round``, ``host``,
    ``device``, ``port``, ``peer``, ``direction`` ('send' or 'recv'), ``bw`` (MB/s) and optionally ``lat`` (us).
    Records without a finite positive bandwidth are skipped (a failed pair is the pair runner's verdict, not a
    residual)."""
    flows = []
    for rec in records:
        bw = rec.get('bw')
        if not _measured(bw):
            continue
        host, peer = rec['host'], rec['peer']
        src, dst = (host, peer) if rec.get('direction', 'send') == 'send' else (peer, host)
        flows.append({'round': rec.get('round', 0), 'src': src, 'dst': dst,
                      'rail': (rec.get('device', 'mlx5_0'), int(rec.get('port', 1))),
                      'bw': float(bw), 'lat': rec.get('lat')})
    return flows


def _measured(value):
    """A value a flow measured: a finite positive number (a stored record may hold anything)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf


BANDWIDTH, LATENCY = 'bandwidth', 'latency'
#: a flow dict's value of each metric, and its unit
VALUE = {BANDWIDTH: 'bw', LATENCY: 'lat'}
UNIT = {BANDWIDTH: 'MB/s', LATENCY: 'us'}


def latency_flows(flows):
    """One latency flow per measured pair, rail and round: ``{round, src, dst, rail, lat, both: True}`` (the
    pair's bandwidth flows, one per direction, carry the same ping-pong latency; a ping-pong crosses both
    directions' components: :func:`crossed`)."""
    out = {}
    for f in flows:
        lat = f.get('lat')
        if _measured(lat):
            key = (f['round'], frozenset((f['src'], f['dst'])), f['rail'])
            out.setdefault(key, {'round': f['round'], 'src': f['src'], 'dst': f['dst'], 'rail': f['rail'],
                                 'lat': float(lat), 'both': True})
    return list(out.values())


def crossed(fabric, f):
    """The components a flow crosses: its direction's (:meth:`~ibrepro.fleet.plan.Fabric.components`), a
    ping-pong's (``both``) both directions'."""
    out = fabric.components(f['src'], f['dst'], f['rail'])
    if f.get('both'):
        out = list(dict.fromkeys([*out, *fabric.components(f['dst'], f['src'], f['rail'])]))
    return out


def residual(metric, value, reference):
    """The log change of a flow against its reference, negative = worse: less bandwidth, more latency."""
    return math.log(value / reference) if metric == BANDWIDTH else math.log(reference / value)


def change(metric, effect):
    """The relative change of the metric an effect (log units, :func:`residual`) is: bandwidth -0.1 = 10 % less,
    latency +0.25 = 25 % more."""
    return math.expm1(effect) if metric == BANDWIDTH else math.expm1(-effect)


def _threshold(metric, method):
    """The largest effect (log units) named."""
    return math.log1p(-method.min_effect) if metric == BANDWIDTH else -math.log1p(method.min_latency_increase)


def consistent(residuals, threshold):
    """Every residual at least half ``threshold`` (the largest effect named, log units, negative) on its side: what
    a steady fault does to every flow through it, and what the noise rarely does to all of a component's flows at
    once. The noise of a real fabric has heavy tails (the stored fault-free nights of the namespace fat tree: 10 of
    240 flows beyond 4 robust sigmas, one at -9.6 %): one tail hit among a link's two flows makes their mean look
    like a fault to a Gaussian test, never all of them slow."""
    return all(r <= threshold / 2 for r in residuals)


def _leaves(fabric, f):
    """The leaves a flow touches: its two nodes' (one within a leaf)."""
    return {fabric.leaf_of(f['src']), fabric.leaf_of(f['dst'])}


def leaf_effects(flows, residuals, fabric, min_flows=8):
    """{leaf: the night's effect of a leaf on every flow touching it} (log units), taken out of the residuals: a
    leaf's flows move together for a night (its switch's load, its rack's power or cooling) and the fleet median
    does not follow, so its healthy parts would look slow or fast together. Each leaf's effect is the median over
    its flows (>= ``min_flows``) of their residual less the other leaf's effect, three passes. A leaf slower than a
    named effect is said (:attr:`Result.slow_leaves`): a slow switch is no noise, but no part of it is to blame."""
    if not fabric.has_topology or len(fabric.leaves) < 3:
        return {}            # two leaves: every inter-leaf flow touches both; only intra-leaf flows tell them apart
    touched = [sorted(_leaves(fabric, f)) for f in flows]
    effects = {}
    for _ in range(3):
        per_leaf = {}
        for leaves, r in zip(touched, residuals):
            for leaf in leaves:
                per_leaf.setdefault(leaf, []).append(r - sum(effects.get(x, 0.0) for x in leaves if x != leaf))
        effects = {leaf: statistics.median(v) for leaf, v in per_leaf.items() if len(v) >= min_flows}
    return effects


def _spine_of(fabric, f):
    """The spine an inter-leaf flow crosses (the plan's routing, or the fabric's routes); None within a leaf."""
    a = fabric.leaf_of(f['src'])
    return None if a == fabric.leaf_of(f['dst']) else fabric.spine_for(f['dst'], a)


def spine_effects(flows, residuals, fabric, min_flows=16):
    """{spine q: the night's effect of spine switch q on every flow crossing it} (log units; the median over its
    inter-leaf flows, >= ``min_flows``): a slow spine slows a sixteenth of a leaf's inter-leaf flows, which its
    leaf's median does not follow, so that each of its links would look slow. A spine slower than a named effect
    is said (:attr:`Result.slow_spines`): a slow switch, none of its links to blame. One spine carries every
    inter-leaf flow, so its effect is the inter-leaf reference's: nothing to say."""
    if not fabric.has_topology or len(fabric.leaves) < 3 or fabric.spines < 2:
        return {}
    per_spine = {}
    for f, r in zip(flows, residuals):
        q = _spine_of(fabric, f)
        if q is not None:
            per_spine.setdefault(q, []).append(r)
    return {q: statistics.median(v) for q, v in per_spine.items() if len(v) >= min_flows}


def _common_host(flows, idx):
    """The one node in every flow ``idx`` (a node-side hypothesis's), or None (a link's: no node in all)."""
    common = set.intersection(*({flows[i]['src'], flows[i]['dst']} for i in idx)) if idx else set()
    return common.pop() if len(common) == 1 else None


def _directions(flows, idx, res, metric):
    """A hypothesis's residuals in groups a steady one-directional fault slows alike: on bandwidth, when one node is
    in every flow, what it sends and what it receives; on a link (no node in every flow), per round the aggregate
    of its flows, ``log(mean(exp(r)))``; on latency, every flow."""
    if metric != BANDWIDTH or not idx:
        return [[res[i] for i in idx]]
    host = _common_host(flows, idx)
    if host is not None:
        return [g for g in ([res[i] for i in idx if flows[i]['src'] == host],
                            [res[i] for i in idx if flows[i]['src'] != host]) if g]
    rounds = {}
    for i in idx:
        rounds.setdefault(str(flows[i]['round']), []).append(math.exp(res[i]))
    return [[math.log(fmean(v)) for v in rounds.values()]]


def _round_groups(flows, idx, res):
    """A hypothesis's bandwidth residuals per round, in :func:`_directions`' groups: ``{round: [(group's flow
    indices, group's residuals)]}``; on a link each round's flows as one aggregate."""
    host = _common_host(flows, idx)
    by_round = {}
    for i in idx:
        by_round.setdefault(str(flows[i]['round']), []).append(i)
    out = {}
    for r, ids in by_round.items():
        if host is None:
            out[r] = [(ids, [math.log(fmean(math.exp(res[i]) for i in ids))])]
        else:       # each direction (a cable), and both together when it has both (a port or node: both slow)
            split = ([i for i in ids if flows[i]['src'] == host], [i for i in ids if flows[i]['src'] != host])
            out[r] = [(g, [res[i] for i in g]) for g in split if g]
            if len(out[r]) == 2:
                out[r].append((ids, [res[i] for i in ids]))
    return out


def slow_in_some(ps, least, most):
    """The p of being slow in ``k`` of ``n`` rounds (or repetitions), from each one's p (1: not slow in it), when
    ``least <= k <= most``: each of the ``k`` at most ``p_k`` likely (the largest of theirs),
    ``(most - least + 1) * P(Binomial(n, p_k) >= k)`` (Bonferroni over the values ``k`` may take); else 1."""
    slow = sorted(p for p in ps if p < 1)
    k = len(slow)
    if not least <= k <= most:
        return 1.0
    return min(1.0, (most - least + 1) * stats.binomial_sf(k, len(ps), slow[-1]))


def flap_p(round_ps):
    """The p of a hypothesis slow in some rounds only: slow in ``k`` of its ``n`` rounds, ``2 <= k < n``
    (:func:`slow_in_some`: ``(n - 2) * P(Binomial(n, p_k) >= k)``); 1 when it was slow in one round (a pair slow
    both ways in one round is either end: only another round with another partner tells which), in none, or in all
    (a steady one: step 3's)."""
    return slow_in_some(round_ps, 2, len(round_ps) - 1)


#: step 7's test of a hypothesis (:meth:`_Metric.flap_test`)
_Flap = collections.namedtuple('_Flap', 'effect p slow rounds flows explained')
_NOT_SLOW = _Flap(0.0, 1.0, [], 0, [], 0.0)


def _phi(z):
    return 0.5 * math.erfc(-z / math.sqrt(2))


class Noise:
    """A night's own noise of one metric as the fabric has it: the distribution of its residuals (most flows are
    healthy), each smoothed by a Gaussian kernel of the robust noise scale, so that a value beyond every residual
    still has a probability and one within the tails gets the tails' share, not a Gaussian's. Without residuals
    (a result built without a night), the Gaussian of the scale."""

    def __init__(self, residuals, scale):
        self.pool, self.scale = sorted(residuals), scale

    def cdf(self, x, exclude=()):
        """P(a healthy flow's residual <= x), the residuals ``exclude`` (a hypothesis's own flows) left out."""
        h, pool = self.scale, self.pool
        n = len(pool) - len(exclude)
        if n <= 0:
            return _phi(x / h)
        lo, hi = bisect.bisect_left(pool, x - 8 * h), bisect.bisect_right(pool, x + 8 * h)
        mass = lo + sum(_phi((x - r) / h) for r in pool[lo:hi]) - sum(_phi((x - r) / h) for r in exclude)
        return min(1.0, max(mass, 0.0) / n)

    def p_all(self, values, exclude=()):
        """The probability that as many healthy flows would all be at least as slow as ``values`` (residuals,
        negative = slower): ``cdf(max(values)) ** len(values)``. One slow flow among fast ones scores as the fast
        ones do: what a steady fault does to all its flows, the noise's tails do to one."""
        return self.cdf(max(values), exclude) ** len(values)


@dataclasses.dataclass
class Suspect:
    name: str                 # the hypothesis: its components joined by ' = '
    members: tuple            # the components
    effect: float             # relative change of its metric: bandwidth negative = slower, latency positive
    p: float
    q: Optional[float]
    flows: list               # evidence: [{round, src, dst, bw or lat, residual}]
    confirmed: Optional[bool] = None   # None: not re-tested
    confirmation: list = dataclasses.field(default_factory=list)
    alternative_to: str = ''  # a link re-tested beside this receiver-side suspect (:func:`localise`, 6): named only
                              # when its confirmation confirms it
    metric: str = BANDWIDTH   # what slowed: BANDWIDTH or LATENCY
    flapping: bool = False    # slow in some of the night's rounds only (:func:`localise`, 7); ``effect`` is theirs
    slow_rounds: list = dataclasses.field(default_factory=list)   # flapping: [the slow rounds, of how many]

    @property
    def change(self):
        """What slowed and by how much: 'bandwidth -10.0%', 'latency +40.0%', 'bandwidth -10.0% when slow,
        flapping: slow in rounds 0, 2 of 3'."""
        if self.flapping:
            rounds, total = self.slow_rounds
            return (f'{self.metric} {self.effect:+.1%} when slow, flapping: slow in round(s) '
                    f'{", ".join(map(str, rounds))} of {total}')
        return f'{self.metric} {self.effect:+.1%}'

    @property
    def singled_out(self):
        """How the night singled it out: its q, or the suspect it is re-tested beside."""
        return f'alternative to {self.alternative_to}' if self.alternative_to else f'q={self.q:.2g}'


@dataclasses.dataclass
class Result:
    suspects: list            # Suspect, most evidence first
    references: dict          # flow kind -> reference bandwidth (MB/s)
    scale: float              # noise scale, log units
    hypotheses: int           # how many were tested (bandwidth's BH family, and latency's)
    statement: str = ''       # NO_TOPOLOGY when the fabric has none
    method: Method = Method()
    latency_references: dict = dataclasses.field(default_factory=dict)   # flow kind -> reference latency (us)
    latency_scale: Optional[float] = None   # the latency residuals' noise scale; None: no flow had a latency
    noise: dict = dataclasses.field(default_factory=dict)   # metric -> the night's Noise (its residuals)
    slow_leaves: dict = dataclasses.field(default_factory=dict)   # leaf -> its bandwidth change on every flow
                                                                 # touching it, when a named effect or more
    slow_spines: dict = dataclasses.field(default_factory=dict)   # 'spine<q>' -> the same of a spine switch

    def noise_of(self, metric):
        """The night's :class:`Noise` of a metric (the Gaussian of its scale when the result holds none)."""
        return self.noise.get(metric) or Noise((), self.scale if metric == BANDWIDTH else self.latency_scale)

    def reference(self, metric, kind):
        """The reference of a flow kind for a metric (the median of the kinds' when the night had none of it)."""
        refs = self.references if metric == BANDWIDTH else self.latency_references
        return refs.get(kind) or statistics.median(refs.values())

    @property
    def named(self):
        """The suspects named: confirmed ones when a confirmation ran, else those with q <= ``alpha`` (a suspect
        is screened at ``screen_alpha`` for the confirmation; the night alone names at ``alpha``), no alternative."""
        return [s for s in self.suspects if s.confirmed is not False and
                (s.confirmed or not s.alternative_to and all(x.confirmed is None for x in self.suspects)
                 and s.q is not None and s.q <= self.method.alpha)]


def flow_kind(fabric, src, dst):
    """The reference a flow is measured against: 'intra-leaf', 'inter-leaf', or 'flow' without a topology."""
    if not fabric.has_topology:
        return 'flow'
    return 'intra-leaf' if fabric.leaf_of(src) == fabric.leaf_of(dst) else 'inter-leaf'


def references(flows, fabric, expected=None, metric=BANDWIDTH):
    """Reference per flow kind of a metric: ``expected`` (the partition's, MB/s) when given, else the fleet
    median."""
    kinds = {}
    for f in flows:
        kinds.setdefault(flow_kind(fabric, f['src'], f['dst']), []).append(f[VALUE[metric]])
    return {k: float(expected) if expected else statistics.median(v) for k, v in kinds.items()}


def component_effects(flows, fabric, expected=None, metric=BANDWIDTH):
    """{component: the mean residual (log units) of the night's ``metric`` flows crossing it}: what a night adds to
    each component's history of that metric (:func:`localise`'s ``history``). Latency: one flow per ping-pong
    (:func:`latency_flows`, both directions' components) against the night's fleet median."""
    if metric == LATENCY:
        flows, expected = latency_flows(flows), None
    refs = references(flows, fabric, expected, metric)
    sums = {}
    for f in flows:
        r = residual(metric, f[VALUE[metric]], refs[flow_kind(fabric, f['src'], f['dst'])])
        for c in crossed(fabric, f):
            total, n = sums.get(c, (0.0, 0))
            sums[c] = (total + r, n + 1)
    return {c: total / n for c, (total, n) in sums.items()}


def night_effects(flows, fabric):
    """{metric: :func:`component_effects`} of a night, for each metric its flows measured."""
    found = {m: component_effects(flows, fabric, metric=m) for m in (BANDWIDTH, LATENCY)}
    return {m: effects for m, effects in found.items() if effects}


def hypotheses_of(flows, fabric):
    """{name: (members, [flow indices])}: components grouped by identical flow sets."""
    by_component = {}
    for i, f in enumerate(flows):
        for c in crossed(fabric, f):
            by_component.setdefault(c, []).append(i)
    by_flows = {}
    for c, idx in by_component.items():
        by_flows.setdefault(tuple(idx), []).append(c)
    out = {}
    for idx, members in by_flows.items():
        members = tuple(sorted(members, key=_specificity))
        out[' = '.join(members)] = (members, list(idx))
    return out


def _specificity(component):
    """Most specific first: a cable before a port before a node."""
    order = ('cable', 'uplink', 'downlink', 'spine link', 'port', 'node')
    kind = getattr(component_or_none(component), 'kind', None)
    return (order.index(kind) if kind in order else len(order), component)


def _stat(residuals, idx, scale, baseline=0.0):
    values = [residuals[i] for i in idx]
    effect = fmean(values) - baseline
    z = effect * math.sqrt(len(values)) / scale
    return effect, _phi(z)


def localise(flows, fabric, *, expected=None, history=None, method=Method(), hypotheses=None):
    """The night's suspects (see the module doc): bandwidth's, then latency's when flows carry one. ``flows`` from
    :func:`read_flows`; ``expected`` the partition's bandwidth (MB/s) or None; ``history`` {metric: {component:
    [past effects, log units]}} (:func:`night_effects` of past nights) or None; ``hypotheses`` {metric: the
    grouping of :func:`hypotheses_of`} for the same flow list (and its :func:`latency_flows`), to reuse it."""
    hypotheses, history = hypotheses or {}, history or {}
    bw = _Metric(BANDWIDTH, flows, fabric, method, expected, history.get(BANDWIDTH, {}), hypotheses.get(BANDWIDTH))
    suspects = bw.suspects()
    suspects += _downlink_alternatives(suspects, fabric, bw)
    suspects += bw.flapping(suspects)
    lat = None
    pings = latency_flows(flows)
    if pings:
        lat = _Metric(LATENCY, pings, fabric, method, None, history.get(LATENCY, {}), hypotheses.get(LATENCY))
        suspects += lat.suspects()
    return Result(suspects, bw.refs, bw.scale, len(bw.names) + (len(lat.names) if lat else 0),
                  '' if fabric.has_topology else NO_TOPOLOGY, method,
                  lat.refs if lat else {}, lat.scale if lat else None,
                  {m.metric: m.noise for m in (bw, lat) if m}, bw.slow_leaves, bw.slow_spines)


class _Metric:
    """One metric's night (steps 1-5): its flows' residuals, noise scale, hypotheses and their baselines."""

    def __init__(self, metric, flows, fabric, method, expected, history, hyps):
        self.metric, self.flows, self.method = metric, flows, method
        self.refs = references(flows, fabric, expected, metric)
        self.residuals = [residual(metric, f[VALUE[metric]], self.refs[flow_kind(fabric, f['src'], f['dst'])])
                          for f in flows]
        self.leaf_effects = leaf_effects(flows, self.residuals, fabric) if metric == BANDWIDTH else {}
        # a leaf slower than a named effect on every flow touching it: said, not blamed on its parts
        self.slow_leaves = {leaf: change(metric, e) for leaf, e in self.leaf_effects.items()
                            if e <= _threshold(metric, method)}
        if self.leaf_effects:
            self.residuals = [r - sum(self.leaf_effects.get(leaf, 0.0) for leaf in _leaves(fabric, f))
                              for f, r in zip(flows, self.residuals)]
        spines = spine_effects(flows, self.residuals, fabric) if metric == BANDWIDTH else {}
        self.slow_spines = {f'spine{q}': change(metric, e) for q, e in sorted(spines.items())
                            if e <= _threshold(metric, method)}
        if spines:
            self.residuals = [r - spines.get(_spine_of(fabric, f), 0.0) for f, r in zip(flows, self.residuals)]
        # step 7 judges rounds: each leaf's effect in each round taken out too (a leaf's load moves all its flows
        # in one round, which is no component flapping)
        self.round_residuals = list(self.residuals)
        if self.leaf_effects:
            by_round = {}
            for i, f in enumerate(flows):
                by_round.setdefault(str(f['round']), []).append(i)
            for ids in by_round.values():
                effects = leaf_effects([flows[i] for i in ids], [self.residuals[i] for i in ids], fabric)
                for i in ids:
                    self.round_residuals[i] -= sum(effects.get(leaf, 0.0) for leaf in _leaves(fabric, flows[i]))
        self.scale = max(stats.MAD_TO_SIGMA * stats.mad(self.residuals) if len(flows) > 1 else 0.0, method.min_cv)
        self.noise = Noise(self.residuals, self.scale)
        self.hyps = hyps or hypotheses_of(flows, fabric)
        self.names = list(self.hyps)
        self.baselines = {}
        for name, (members, _) in self.hyps.items():
            past = [v for m in members for v in history.get(m, ())]
            self.baselines[name] = statistics.median(past) if len(past) >= method.min_history else 0.0
        self.threshold = _threshold(metric, method)
        self.steady_flows = set()      # step 7 leaves the steady suspects' flows out

    def stat(self, res, name):
        return _stat(res, self.hyps[name][1], self.scale, self.baselines[name])

    def test(self, res, name):
        """``(effect, p)`` of a hypothesis on residuals ``res``: its mean effect, and the larger of its Gaussian p
        (:meth:`stat`: a few flows say little about tails) and the probability under the
        night's noise (:meth:`Noise.p_all`) that healthy flows would all be as slow as its flows are (on a node,
        those of one direction: a cable up, without a topology a node, slows only what it sends; on a link, what
        its flows got together in each round: a shared trunk's loss may go to one of its flows, as TCP shares).
        p is 1 unless the effect reaches the method's and every flow of such a group is slow (:func:`consistent`):
        what a steady fault does."""
        idx, baseline = self.hyps[name][1], self.baselines[name]
        effect, gaussian = self.stat(res, name)
        if effect > self.threshold:
            return effect, 1.0
        groups = [[v - baseline for v in g] for g in _directions(self.flows, idx, res, self.metric)]
        steady = [g for g in groups if consistent(g, self.threshold)]
        if not steady:
            return effect, 1.0
        own = [self.residuals[i] for i in idx]
        return effect, max(gaussian, min(1.0, len(groups) * min(self.noise.p_all(g, own) for g in steady)))

    def suspects(self):
        """Steps 3-5: explain-away, then each chosen hypothesis re-tested with the others' effects taken out."""
        hyps, names, alpha = self.hyps, self.names, self.method.screen_alpha
        current = list(self.residuals)
        chosen, effects = [], {}
        while True:
            out = [self.test(current, n) for n in names]
            qs = stats.benjamini_hochberg([p for _, p in out])
            best, gain = None, 0.0
            for n, (effect, _), q in zip(names, out, qs):
                if n in effects or q > alpha or effect > self.threshold:
                    continue
                explained = len(hyps[n][1]) * effect ** 2
                if explained > gain:
                    best, gain = n, explained
            if best is None:
                break
            effect = out[names.index(best)][0]
            effects[best] = effect
            chosen.append(best)
            for i in hyps[best][1]:
                current[i] -= effect
        if not chosen:
            return []
        final = []
        for n in chosen:                        # each chosen one with the others' effects taken out
            res = list(current)
            for i in hyps[n][1]:
                res[i] += effects[n]
            final.append(self.test(res, n))
        others = [self.test(current, n)[1] for n in names if n not in effects]
        qs = stats.benjamini_hochberg([p for _, p in final] + others)
        return [self.suspect(n, effect, p, q) for n, (effect, p), q in zip(chosen, final, qs)
                if q <= alpha and effect <= self.threshold]

    def round_test(self, res, name):
        """Step 7 per round of a hypothesis: ``{round: (p, effect, flow indices of its slow group)}``, p 1 and no
        flows where the round was not slow (no group of it all slower than half the named effect with its mean
        beyond it)."""
        idx, baseline = self.hyps[name][1], self.baselines[name]
        own = [self.residuals[i] for i in idx]
        out = {}
        for r, groups in _round_groups(self.flows, [i for i in idx if i not in self.steady_flows], res).items():
            best = (1.0, 0.0, [])
            for ids, values in groups:
                values = [v - baseline for v in values]
                if consistent(values, self.threshold) and fmean(values) <= self.threshold:
                    p = min(1.0, len(groups) * self.noise.p_all(values, own))
                    best = min(best, (p, fmean(values), ids))
            out[r] = best
        return out

    def flap_test(self, res, name):
        """Step 7: a :data:`_Flap`: the effect the mean of its slow groups', its p (:func:`flap_p`), its slow rounds
        of how many, the slow groups' flow indices, and explained, the squared residual of all its flows in its slow
        rounds (a port whose cable up flapped is slow in those rounds in half its flows: its cable explains more)."""
        per_round = self.round_test(res, name)
        slow = sorted(r for r, (p, _, _) in per_round.items() if p < 1)
        p = flap_p([x[0] for x in per_round.values()])
        effect = fmean(per_round[r][1] for r in slow) if slow else 0.0
        within = [i for i in self.hyps[name][1] if str(self.flows[i]['round']) in slow and i not in self.steady_flows]
        explained = len(within) * (fmean(res[i] - self.baselines[name] for i in within) ** 2) if within else 0.0
        return _Flap(effect, p, slow, len(per_round), [i for r in slow for i in per_round[r][2]], explained)

    def flapping(self, steady):
        """Step 7: the hypotheses slow in some of the night's rounds only, none holding a component of a
        ``steady`` suspect, found by explain-away on the flows through no steady suspect (whose loss is that
        suspect's, however unevenly its flows shared it)."""
        if self.metric != BANDWIDTH:
            return []
        current = list(self.round_residuals)
        self.steady_flows = {i for s in steady for i in self.hyps[s.name][1]}
        taken = {m for s in steady for m in s.members}
        names = [n for n in self.names if not taken & set(self.hyps[n][0])]
        chosen = {}

        def tests(res):           # a round is slow only where a flow is slower than half the named effect
            slow = {i for i, r in enumerate(res) if r <= self.threshold / 2 and i not in self.steady_flows}
            return [self.flap_test(res, n) if slow.intersection(self.hyps[n][1]) or self.baselines[n] else _NOT_SLOW
                    for n in names]
        while True:
            out = tests(current)
            qs = stats.benjamini_hochberg([t.p for t in out])
            best, gain = None, 0.0
            for n, t, q in zip(names, out, qs):
                if n in chosen or q > self.method.flap_alpha or t.effect > self.threshold:
                    continue
                if t.explained > gain:
                    best, gain = n, t.explained
            if best is None:
                break
            t = out[names.index(best)]
            chosen[best] = t
            for i in t.flows:
                current[i] -= t.effect
        found = []
        for n, t in chosen.items():           # each with the others' effects taken out
            res = list(current)
            for i in t.flows:
                res[i] += t.effect
            found.append((n, self.flap_test(res, n)))
        others = [t.p for n, t in zip(names, tests(current)) if n not in chosen]
        qs = stats.benjamini_hochberg([t.p for _, t in found] + others)
        return [self.suspect(n, t.effect, t.p, q, flapping=True, slow_rounds=[t.slow, t.rounds])
                for (n, t), q in zip(found, qs) if q <= self.method.flap_alpha and 2 <= len(t.slow) < t.rounds
                and t.effect <= self.threshold]

    def suspect(self, name, effect, p, q, **extra):
        return Suspect(name, self.hyps[name][0], change(self.metric, effect), p, q,
                       [evidence(self.metric, self.flows[i], self.residuals[i]) for i in self.hyps[name][1]],
                       metric=self.metric, **extra)


def evidence(metric, f, res):
    """A flow as a suspect's evidence (its night's flows, its confirmation's): what it measured and its residual."""
    return {'round': f['round'], 'src': f['src'], 'dst': f['dst'], VALUE[metric]: f[VALUE[metric]], 'residual': res}


def _node_side(member, host):
    """The component ``member`` is on ``host``'s side (the node, its port, its cable up or down)."""
    c = component_or_none(member)
    return c is not None and c.on_host(host)


def suspect_hosts(suspects, fabric):
    """The nodes whose own side a suspect holds (not good partners for a confirmation). Matched against the
    fabric's nodes, not parsed out of the names (a stored name may hold anything)."""
    return {host for host in fabric.nodes for s in suspects if any(_node_side(m, host) for m in s.members)}


def _receiver(members, fabric):
    """The node whose receiving side a suspect holds (its cable down, its port, the node itself), or None. Matched
    against the fabric's nodes, not parsed out of the names (a stored name may hold anything)."""
    for host in fabric.nodes:
        for m in members:
            if _node_side(m, host) and Component(m).direction != 'up':
                return host
    return None


def _downlink_alternatives(suspects, fabric, bw):
    """Step 6: under destination-mod-k every flow to a node arrives through one downlink (its spine's), so a
    receiver's cable and that downlink differ only in the flows to the link's other receivers, which a shared trunk
    may slow unevenly (TCP does). Beside each receiver-side suspect the downlink's hypothesis, when it is not a
    suspect, its night's flows were slower, it has other receivers and the suspect's flows that did not cross it
    (from its own leaf) were not slow, is an alternative: re-tested by loading the link (:func:`confirm`), named
    only when confirmed. (A node alone behind its downlink, as on a leaf with a spine per node, differs from it in
    its own leaf's flows, which the night measured and its re-run repeats.)"""
    if not fabric.has_topology or len(fabric.leaves) < 2:
        return []
    hyps, flows, residuals = bw.hyps, bw.flows, bw.residuals
    out, taken = [], {m for s in suspects for m in s.members}
    for s in suspects:
        host = _receiver(s.members, fabric)
        if host is None:
            continue
        q, leaf = fabric.spine_for(host), fabric.leaf_of(host)
        if not [n for n in fabric.leaves[leaf] if n != host and fabric.spine_for(n) == q]:
            continue                  # the link's only receiver: tonight's flows told them apart already
        link = Component.downlink(q, leaf)
        name = next((n for n, (members, _) in hyps.items() if link in members), None)
        if name is None or link in taken:
            continue                  # no flow crossed it tonight, or it is a suspect already
        beside = [residuals[i] for i, f in enumerate(flows)
                  if f['dst'] == host and link not in fabric.components(f['src'], f['dst'], f['rail'])]
        if beside and fmean(beside) <= bw.threshold:
            continue                  # its flows that did not cross the link were slow too: its own side is
        effect, p = bw.stat(residuals, name)
        if effect >= 0:
            continue                  # its flows were not slower tonight: nothing to take from the receiver
        out.append(bw.suspect(name, effect, p, None, alternative_to=s.name))
        taken |= set(hyps[name][0])
    return out


def is_link(suspect):
    """A leaf-spine link hypothesis (its most specific member is one): confirmed by loading the link."""
    return getattr(component_or_none(suspect.members[0]), 'is_link', False)


def confirm(result, confirmation_flows, fabric):
    """Mark each suspect of ``result`` confirmed or cleared by its re-run flows (in place; returns ``result``),
    against the night's reference and noise scale of its metric; confirmed when p <= alpha and the effect is at
    least the method's. A suspect without re-run flows stays not re-tested.

    Node-side bandwidth suspects: the mean residual of the flows crossing them outside the link round and through
    no suspect link (whose loss they would carry). Leaf-spine links
    (:func:`is_link`): the flows that loaded them (labelled ``confirmation-links``, as many at once as the link
    has cables) as one aggregate, ``log(sum bw) - log(sum expected)``: a shared link's loss is
    in what its flows get together, however unevenly TCP shares it; a flow's expected bandwidth is the reference
    times the confirmed effect of a node-side suspect it crosses. Without loaded flows (an older night's records)
    a link is judged like a node-side suspect. Latency suspects: the mean residual of every re-run pair's latency
    crossing them (a round's latency runs after its bandwidth flows, unloaded)."""
    method = result.method
    first = [f for f in confirmation_flows if repetition(f['round']) == 1]    # a flapping suspect's repeats: its own
    loaded = [f for f in first if f['round'] == LINK_CONFIRMATION]
    unloaded = [f for f in first if f['round'] != LINK_CONFIRMATION]

    def reference(f, metric=BANDWIDTH):
        return result.reference(metric, flow_kind(fabric, f['src'], f['dst']))

    def res(f, metric=BANDWIDTH):
        return residual(metric, f[VALUE[metric]], reference(f, metric))

    def crossing(s, flows):
        return [f for f in flows if set(s.members) & set(crossed(fabric, f))]

    # the night's noise without the suspects' own flows (a fault's flows are not noise)
    suspected = {m: list({(f['round'], f['src'], f['dst']): f['residual'] for x in result.suspects if x.metric == m
                          for f in x.flows}.values()) for m in (BANDWIDTH, LATENCY)}

    def judge(s, flows, effect, aggregate=False):
        threshold = _threshold(s.metric, method)
        values = [effect] if aggregate else [res(f, s.metric) for f in flows]
        noise = result.noise_of(s.metric)
        s.confirmed = effect <= threshold and consistent(values, threshold) \
            and max(_phi(effect * math.sqrt(len(flows)) / noise.scale),
                    noise.p_all(values, suspected[s.metric])) <= method.alpha
        s.confirmation = [evidence(s.metric, f, res(f, s.metric)) for f in flows]

    bandwidth = [s for s in result.suspects if s.metric == BANDWIDTH and not s.flapping]
    # a node-side suspect's flows through a suspect link would carry that link's loss: left out of its judgement
    links = {m for s in bandwidth if is_link(s) for m in s.members} if loaded else set()
    for s in [s for s in result.suspects if s.flapping]:
        _judge_flapping(s, confirmation_flows, fabric, result, links, suspected[BANDWIDTH])
    clear = [f for f in unloaded if not links & set(crossed(fabric, f))]
    taken = []         # (members, effect in log units) of confirmed node-side suspects
    for s in [s for s in bandwidth if not is_link(s) or not loaded]:
        flows = crossing(s, unloaded if is_link(s) else clear)
        if flows:
            effect = fmean(res(f) for f in flows)
            judge(s, flows, effect)
            if s.confirmed and not is_link(s):
                taken.append((set(s.members), effect))
    for s in [s for s in bandwidth if is_link(s) and loaded]:
        flows = crossing(s, loaded)
        if flows:
            expected = sum(reference(f) * math.exp(sum(
                e for members, e in taken if members & set(crossed(fabric, f)))) for f in flows)
            judge(s, flows, math.log(sum(f['bw'] for f in flows)) - math.log(expected), aggregate=True)
    pings = latency_flows(confirmation_flows)
    for s in [s for s in result.suspects if s.metric == LATENCY]:
        flows = crossing(s, pings)
        if flows:
            judge(s, flows, fmean(res(f, LATENCY) for f in flows))
    return result


def _judge_flapping(s, flows, fabric, result, links, suspected):
    """Confirm or clear a flapping suspect (:func:`localise`, 7) by its repetitions (its flows' labels,
    :func:`ibrepro.fleet.plan.repetition`): each repetition's flows through it as one aggregate against their
    references (a link: the flows that loaded it; a node side: those through no suspect link), slow when beyond the
    named effect, with the noise's p of one so slow; confirmed when slow in ``k >= 1`` of the ``m`` repetitions
    with ``m * P(Binomial(m, p_k) >= k) <= alpha`` (:func:`slow_in_some`)."""
    method, noise = result.method, result.noise_of(BANDWIDTH)
    threshold = _threshold(BANDWIDTH, method)
    reps = {}
    for f in flows:
        through = set(crossed(fabric, f))
        if not set(s.members) & through:
            continue
        if is_link(s) if base_label(f['round']) == LINK_CONFIRMATION else not (links & through):
            reps.setdefault(repetition(f['round']), []).append(f)
    if not reps:
        return
    ps = []
    for _, mine in sorted(reps.items()):
        refs = [result.reference(BANDWIDTH, flow_kind(fabric, f['src'], f['dst'])) for f in mine]
        value = math.log(sum(f['bw'] for f in mine)) - math.log(sum(refs))
        ps.append(noise.p_all([value], suspected) if value <= threshold else 1.0)
    s.confirmed = slow_in_some(ps, 1, len(ps)) <= method.alpha
    s.confirmation = [evidence(BANDWIDTH, f, residual(BANDWIDTH, f['bw'], result.reference(
        BANDWIDTH, flow_kind(fabric, f['src'], f['dst'])))) for _, mine in sorted(reps.items()) for f in mine]


#: What the localiser assumes of the routing (it reads none from the fabric): said beside every finding.
ROUTING_ASSUMED = ('destination-mod-k in the port order of the topology (assumed, not read from the fabric: '
                   'another LFT or adaptive routing sends a link\'s flows elsewhere)')


def untested(flows, fabric):
    """The components of the fabric on the night's rails that no measured flow crossed (sorted): nothing is known
    of them tonight."""
    rails = sorted({f['rail'] for f in flows}) or list(fabric.rails)
    seen = {c for f in flows for c in fabric.components(f['src'], f['dst'], f['rail'])}
    every = set()
    for device, port in rails:
        for h in fabric.nodes:
            every.add(Component.node(h))
            if fabric.has_topology:
                every |= {Component.port(h, (device, port)), Component.cable(h, (device, port), 'up'),
                          Component.cable(h, (device, port), 'down')}
    if fabric.has_topology and len(fabric.leaves) > 1:
        for leaf in fabric.leaves:
            for q in range(fabric.spines):
                every |= {Component.uplink(leaf, q), Component.downlink(q, leaf), Component.spine_link(leaf, q)}
    return sorted(every - seen)


def as_json(result, fabric=None):
    """The named components with their evidence, JSON-ready; with ``fabric``, its nodes (``fabric_nodes``: what
    ``ibrepro fleet verdict`` may drain)."""
    return {'named': [dataclasses.asdict(s) for s in result.named],
            'fabric_nodes': fabric.nodes if fabric is not None else None,
            'suspects': [dataclasses.asdict(s) for s in result.suspects],
            'references': result.references, 'noise_scale': result.scale, 'hypotheses': result.hypotheses,
            'latency_references': result.latency_references, 'latency_noise_scale': result.latency_scale,
            'statement': result.statement, 'slow_leaves': result.slow_leaves, 'slow_spines': result.slow_spines,
            'routing': ROUTING_ASSUMED if fabric is not None and fabric.has_topology else None,
            'alpha': result.method.alpha}

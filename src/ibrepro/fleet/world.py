"""The world ``ibrepro fleet simulate`` measures: what a two-level fat tree delivers to the pair rounds' flows,
written apart from the judge.

Nothing here is imported from the plan's routing (:mod:`ibrepro.fleet.plan`) or the localiser's noise model
(:mod:`ibrepro.fleet.localise`): a simulation that shares the judge's assumptions can only agree with it. The world
shares with them only the names of things (hosts, leaves, ``spine<q>``, and the localiser's component names, to
score what was named), and it can be harder than the judge assumes:

* **Routing** (``routing``): ``plan``, destination-mod-k on the port a destination is cabled to (what the plan
  assumes); ``permuted``, each destination leaf's LFT a random permutation of that assignment (another subnet
  manager's order, fixed for the fabric); ``adaptive``, ideal adaptive routing, an inter-leaf flow's bytes spread
  over all spines, so a flow gets its share of the sender leaf's whole up-trunk and the receiver leaf's whole
  down-trunk (one slow uplink among ``spines`` costs each flow a ``1/spines`` part of its loss).
* **Oversubscription** (``oversubscription`` R): each leaf-spine link has ``leaf_size / (spines * R)`` cables (at
  least one), where the plan, reading only ``topology.conf``, believes a non-blocking ``leaf_size / spines``.
* **Noise**: a flow's bandwidth times ``exp(e)``, ``e`` drawn from ``residuals`` (log residuals of real fault-free
  nights: heavy tails as the fabric has them; :func:`ibrepro.fleet.simulate.stored_residuals`) or, without them,
  Gaussian of the lognormal CV ``noise_cv`` (a **modelled** noise). On top: per night a factor per leaf
  (``leaf_cv``), per round a factor per leaf (``round_cv``), both lognormal and applied to every flow touching the
  leaf (its sender's and receiver's leaf); and a tail, a share ``tail`` of flows losing ``tail_effect`` (a
  congestion spike, another job's traffic).
* **Faults** (:class:`Fault`): a directed node cable, an HCA port (both directions), a leaf uplink or downlink, a
  whole leaf or spine switch (every link through it), or a latency fault; each present in a round with probability
  ``flap`` (1: always; 0.5: a link flapping in half the rounds), drawn again for every round, confirmation rounds
  included.

Bandwidth of a flow in a round: its path's narrowest share (a link's capacity over the flows on it in that round),
times the noise. Latency (``latency_cv``): 1 (relative units) times lognormal noise, times ``1 + latency`` when
either direction crosses an active latency fault.
"""

import math
import random

from ..compat import dataclasses
from .component import Component

ROUTINGS = ('plan', 'permuted', 'adaptive')
#: Nominal 4x HDR signalling rate in MB/s (200 Gb/s / 8): a nominal value, not a measurement.
NOMINAL_LINK_MBPS = 25000.0
FAULT_KINDS = ('node cable', 'HCA port', 'leaf uplink', 'leaf downlink')


@dataclasses.dataclass(frozen=True)
class Model:
    """The simulated fabric and its noise (see the module doc)."""

    nodes: int
    noise_cv: float
    leaf_size: int = 16
    spines: int = 0                  # 0: leaf_size / oversubscription
    link_capacity: float = NOMINAL_LINK_MBPS
    linktest_min: float = 0.95
    latency_cv: float = None         # None: flows without latency (TCP nights)
    residuals: tuple = ()            # log residuals to draw the noise from; empty: lognormal noise_cv
    routing: str = 'plan'
    oversubscription: float = 1.0
    leaf_cv: float = 0.0
    round_cv: float = 0.0
    tail: float = 0.0
    tail_effect: float = 0.0
    flap: float = 1.0

    def __post_init__(self):
        if self.routing not in ROUTINGS:
            raise ValueError(f'routing: {self.routing!r} is not one of {", ".join(ROUTINGS)}')
        if not self.oversubscription >= 1:
            raise ValueError('oversubscription: expected a ratio >= 1 (1: non-blocking)')
        for name in ('noise_cv', 'leaf_cv', 'round_cv'):
            if not 0 <= getattr(self, name) < 10:
                raise ValueError(f'{name}: expected a coefficient of variation from 0 to 10')
        if not (0 <= self.tail <= 1 and 0 <= self.tail_effect < 1):
            raise ValueError('tail: expected a share of flows from 0 to 1 and a loss below 100 %')
        if not 0 < self.flap <= 1:
            raise ValueError('flap: expected the probability (0, 1] that a fault is present in a round')

    @property
    def sigma(self):
        return _sigma(self.noise_cv)

    @property
    def latency_sigma(self):
        return _sigma(self.latency_cv)

    @property
    def spine_count(self):
        return self.spines or max(1, int(self.leaf_size / self.oversubscription))

    def cables(self, leaf_nodes):
        """Cables in each leaf-spine link of a leaf of ``leaf_nodes`` nodes, as the world has them."""
        return max(1, int(leaf_nodes / (self.spine_count * self.oversubscription)))

    @property
    def plan_world(self):
        """True when the world is the one the plan assumes (the baselines are modelled only there)."""
        return (self.routing == 'plan' and self.oversubscription == 1 and self.flap == 1
                and not (self.leaf_cv or self.round_cv or self.tail))


def _sigma(cv):
    return math.sqrt(math.log1p(cv ** 2)) if cv else 0.0


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: str
    component: str       # the localiser's name of the broken part ('switch leaf003' for a leaf switch)
    links: tuple         # directed links whose capacity it lowers
    loss: float          # its links' lost fraction of capacity
    host: str = None
    latency: float = 0.0  # the relative latency increase of a pair crossing its links (either direction)
    parts: frozenset = frozenset()   # the localiser's names of what lies inside it (a switch's ports and links)


class World:
    """The fabric's leaves (host names in port order, as the plan has them: names are data), its spines and
    cables, its routing (fixed for the world: a permuted LFT is drawn once from ``seed``) and its noise."""

    def __init__(self, leaves, model, seed=0, rail=('mlx5_0', 1)):
        self.leaves = {leaf: list(nodes) for leaf, nodes in leaves.items()}
        self.model, self.rail = model, rail
        self.spines = model.spine_count
        self.cables = {leaf: model.cables(len(nodes)) for leaf, nodes in self.leaves.items()}
        self._leaf = {h: leaf for leaf, nodes in self.leaves.items() for h in nodes}
        routing_rng = random.Random(f'routing {seed}')
        self._spine = {}
        for leaf, nodes in self.leaves.items():
            order = list(range(len(nodes)))
            if model.routing == 'permuted':
                routing_rng.shuffle(order)
            for i, h in enumerate(nodes):
                self._spine[h] = order[i] % self.spines

    def leaf_of(self, host):
        return self._leaf[host]

    def path(self, src, dst):
        """The directed links a flow's bytes cross (adaptive: every spine's)."""
        out = [f'{src}>leaf', f'leaf>{dst}']
        a, b = self._leaf[src], self._leaf[dst]
        if a != b:
            spines = range(self.spines) if self.model.routing == 'adaptive' else (self._spine[dst],)
            out += [x for q in spines for x in (f'{a}>spine{q}', f'spine{q}>{b}')]
        return out

    # -- faults ------------------------------------------------------------------------------------

    def fault_choices(self):
        """Per fault kind, the faults one can inject: [(component, links, host)]."""
        rail = self.rail
        out = {'node cable': [], 'HCA port': [], 'leaf uplink': [], 'leaf downlink': []}
        for h in self._leaf:
            out['node cable'] += [(Component.cable(h, rail, 'up'), (f'{h}>leaf',), h),
                                  (Component.cable(h, rail, 'down'), (f'leaf>{h}',), h)]
            out['HCA port'].append((Component.port(h, rail), (f'{h}>leaf', f'leaf>{h}'), h))
        if len(self.leaves) > 1:
            for leaf in self.leaves:
                for q in range(self.spines):
                    out['leaf uplink'].append((Component.uplink(leaf, q), (f'{leaf}>spine{q}',), None))
                    out['leaf downlink'].append((Component.downlink(q, leaf), (f'spine{q}>{leaf}',), None))
        return {k: v for k, v in out.items() if v}

    def random_faults(self, count, loss, rng, latency=0.0, kind=None):
        """``count`` distinct faults; ``kind`` 'leaf switch' or 'spine switch' for switches, else a random kind
        each."""
        if kind == 'leaf switch':
            leaves = rng.sample(sorted(self.leaves), min(count, len(self.leaves)))
            return [self.switch_fault(leaf, loss) for leaf in leaves]
        if kind == 'spine switch':
            return [self.spine_fault(q, loss) for q in rng.sample(range(self.spines), min(count, self.spines))]
        choices = self.fault_choices()
        out, taken = [], set()
        while len(out) < count:
            k = rng.choice(sorted(choices))
            component, links, host = rng.choice(choices[k])
            if component not in taken and not taken & set(links):
                taken |= {component, *links}
                out.append(Fault(k, component, links, loss, host, latency))
        return out

    def switch_fault(self, leaf, loss):
        """Leaf switch ``leaf`` slow: every link through it, both directions."""
        rail, links, parts = self.rail, [], set()
        for h in self.leaves[leaf]:
            links += [f'{h}>leaf', f'leaf>{h}']
            parts |= {Component.node(h), Component.port(h, rail), Component.cable(h, rail, 'up'),
                      Component.cable(h, rail, 'down')}
        if len(self.leaves) > 1:
            for q in range(self.spines):
                links += [f'{leaf}>spine{q}', f'spine{q}>{leaf}']
                parts |= _trunk(leaf, q)
        return Fault('leaf switch', f'switch {leaf}', tuple(links), loss, None, 0.0, frozenset(parts))

    def spine_fault(self, q, loss):
        """Spine switch ``q`` slow: every leaf's links to and from it."""
        links, parts = [], set()
        for leaf in self.leaves:
            links += [f'{leaf}>spine{q}', f'spine{q}>{leaf}']
            parts |= _trunk(leaf, q)
        return Fault('spine switch', f'switch spine{q}', tuple(links), loss, None, 0.0, frozenset(parts))

    # -- a night -----------------------------------------------------------------------------------

    def night(self, faults, rng):
        """A night with these faults (a list, maybe empty): its per-leaf noise drawn now."""
        return Night(self, list(faults), rng)

    def capacity(self, link):
        a, _, b = link.partition('>')
        leaf = b if a.startswith('spine') and b in self.leaves else a if b.startswith('spine') and a in self.leaves \
            else None
        return self.model.link_capacity * (self.cables[leaf] if leaf else 1)


class Night:
    """One night of the world: rounds measured one after another (:meth:`measure`)."""

    def __init__(self, world, faults, rng):
        self.world, self.faults, self.rng = world, faults, rng
        m = world.model
        self.leaf_factor = {leaf: math.exp(rng.gauss(0.0, _sigma(m.leaf_cv))) if m.leaf_cv else 1.0
                            for leaf in world.leaves}

    def _noise(self):
        m, rng = self.world.model, self.rng
        e = rng.choice(m.residuals) if m.residuals else rng.gauss(0.0, m.sigma)
        if m.tail and rng.random() < m.tail:
            e += math.log1p(-m.tail_effect)
        return math.exp(e)

    def measure(self, pairs, round_label=0):
        """The directed flows of one round of ``pairs`` (both directions at once) as flow dicts ``{round, src,
        dst, rail, bw, lat}``."""
        world, m, rng = self.world, self.world.model, self.rng
        active = [f for f in self.faults if m.flap >= 1 or rng.random() < m.flap]
        loss = {}
        for f in active:
            for link in f.links:
                loss[link] = max(loss.get(link, 0.0), f.loss)
        round_factor = {leaf: math.exp(rng.gauss(0.0, _sigma(m.round_cv))) for leaf in world.leaves} \
            if m.round_cv else None
        flows = [f for a, b in pairs for f in ((a, b), (b, a))]
        paths = [world.path(s, d) for s, d in flows]
        loads = {}
        for path in paths:
            share = 1.0 / max(1, (len(path) - 2) // 2) if m.routing == 'adaptive' else 1.0
            for k, link in enumerate(path):
                loads[link] = loads.get(link, 0.0) + (1.0 if k < 2 else share)

        def capacity(link):
            return world.capacity(link) * (1 - loss.get(link, 0.0))

        latency = {}
        if m.latency_cv:
            slow = [f for f in active if f.latency]
            for a, b in pairs:
                crossed = set(world.path(a, b)) | set(world.path(b, a))
                increase = max((f.latency for f in slow if crossed & set(f.links)), default=0.0)
                latency[frozenset((a, b))] = math.exp(rng.gauss(0.0, m.latency_sigma)) * (1 + increase)
        out = []
        for (s, d), path in zip(flows, paths):
            node_share = min(capacity(link) / loads[link] for link in path[:2])
            trunk = path[2:]
            if not trunk:
                share = node_share
            elif m.routing == 'adaptive':     # its bytes spread over every spine: the trunks' aggregate share
                up, down = trunk[0::2], trunk[1::2]
                share = min(node_share, sum(map(capacity, up)) / loads[up[0]] / len(up),
                            sum(map(capacity, down)) / loads[down[0]] / len(down))
            else:
                share = min(node_share, *(capacity(link) / loads[link] for link in trunk))
            factor = self.leaf_factor[world.leaf_of(s)]
            if world.leaf_of(d) != world.leaf_of(s):
                factor *= self.leaf_factor[world.leaf_of(d)]
            if round_factor:
                factor *= round_factor[world.leaf_of(s)]
                if world.leaf_of(d) != world.leaf_of(s):
                    factor *= round_factor[world.leaf_of(d)]
            out.append({'round': round_label, 'src': s, 'dst': d, 'rail': world.rail,
                        'bw': share * factor * self._noise(), 'lat': latency.get(frozenset((s, d)))})
        return out


def _trunk(leaf, q):
    """The components of the trunk between ``leaf`` and spine ``q``: each direction and both."""
    return {Component.uplink(leaf, q), Component.downlink(q, leaf), Component.spine_link(leaf, q)}

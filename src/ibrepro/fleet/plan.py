"""The fleet's pair rounds: which node meets which, in how many rounds and Slurm jobs a night.

Topology
--------
A two-level fat tree: nodes on leaf switches ({leaf: [nodes in port order]}, from Slurm's ``topology.conf``:
:func:`parse_topology_conf`), every leaf with one uplink to each of ``spines`` spine switches.

Routing model (what the rounds are designed for): **destination-mod-k**. A flow from node ``s`` on leaf ``A`` to
node ``d`` on leaf ``B != A`` goes up ``A -> spine q`` and down ``spine q -> B`` with ``q = position(d) mod
spines``, ``position(d)`` the index of ``d`` in its leaf's node list (OpenSM's ftree/updn routing assigns LIDs in
port order, so the port a node is cabled to selects the spine). Within a leaf a flow touches no leaf-spine link.
Every link is full duplex: each direction is a separate link (``tc tbf`` in the namespace testbed shapes one
direction, an InfiniBand lane pair can fail in one direction).

Rounds (:func:`pair_rounds`)
----------------------------
Every round is a set of disjoint node pairs; each pair runs both directions at once (two flows).

* round 0, intra-leaf: each leaf's nodes paired among themselves (the first round of a round-robin tournament);
* rounds 1 and 2, leaf shifts: leaves paired by two different rounds of a round-robin tournament over the leaves;
  in a leaf pair ``(A, B)``, ``A[p]`` meets ``B[(p + shift) mod m]`` with shift 0 in round 1 and 1 in round 2
  (``m`` the smaller leaf's size). With full leaves of ``spines`` nodes, the destination positions of a leaf's
  flows are a permutation of the spines, so every uplink ``A -> spine q`` and every downlink ``spine q -> B``
  carries exactly one flow per direction: no contention, and each measured flow speaks for its own links. The
  shift of 1 in round 2 makes a node's cable meet another uplink than in round 1, so a slow node cable and a slow
  uplink have different flow signatures (explain-away in :mod:`ibrepro.fleet.localise`). A leaf left over (odd
  number of leaves) pairs its nodes within itself in that round.
* one leaf only (or no topology): three rounds of the round-robin tournament over its nodes (three partners per
  node, so a node's cable is seen in three flows per direction).

Without a topology the localiser can only name nodes: "no topology: localised to node" (:data:`NO_TOPOLOGY`).

Slurm jobs (:func:`slurm_jobs`)
-------------------------------
A *cell* is the node set of one leaf pair of one shift round (round 0 runs inside the round-1 cells). A night
has ``J = ceil(N / 16)`` jobs at most: cells with the same node set share a job (two leaves: one job); then the
cells of each shift round are cut into ``max(1, J' // 2)`` contiguous groups (``J' = J - 1`` when ``J >= 3``: one
job is kept for the confirmation run), one job each (with 16-node leaves
that is one job per cell). The jobs need no ordering: each holds whole leaves, so two jobs either share a node
(exclusive allocations run one after the other) or share no leaf, and then no leaf-spine link. ``J == 1``:
everything is one job, which confirms its own suspects; otherwise the confirmation job runs after every other
(``FleetConfirmation`` in reframe-checks/system/fleet_pairs.py: ReFrame dependencies). The per-node sweep is one
more job. ``16`` is :data:`JOB_NODES`, the check's ``IBREPRO_FLEET_JOB_NODES``.
"""

import math
import re

from ..compat import dataclasses
from .component import HOST_NAME, Component

#: What the localiser can say without a topology.
NO_TOPOLOGY = 'no topology: localised to node'

#: Nodes per job budget: at most ceil(N / JOB_NODES) pair-round jobs a night.
JOB_NODES = 16

#: The most nodes a hostlist, a topology or a fabric may name (the largest Slurm clusters have tens of thousands):
#: a 40-byte ``Nodes=n[0-99999999999]`` must be refused, not expanded until memory runs out.
MAX_NODES = 100_000


# -- Slurm hostlists and topology.conf -----------------------------------------------------------------

def expand_hostlist(text):
    """Slurm hostlist syntax to host names, in order: ``n[01-03,07],m1`` -> n01 n02 n03 n07 m1 (several bracket
    groups give their product: ``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2; zero padding kept)."""
    hosts = []
    for item in _split_top(text.strip()):
        if item:
            hosts += _expand_one(item, MAX_NODES - len(hosts))
    return hosts


def _split_top(text):
    """Split at commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == '[':
            depth += 1
        elif ch == ']':
            depth -= 1
            if depth < 0:
                raise ValueError(f'unbalanced brackets in hostlist {text!r}')
        elif ch == ',' and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f'unbalanced brackets in hostlist {text!r}')
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _expand_one(item, room=MAX_NODES, whole=None):
    """The hosts of one item, at most ``room`` of them (ValueError beyond: counted before any is made); ``whole``:
    the item this one is the tail of, for messages."""
    m = re.match(r'([^\[]*)\[([^\]]*)\](.*)$', item)
    if not m:
        if room < 1:
            raise ValueError(f'hostlist names more than {MAX_NODES} hosts')
        return [item]
    prefix, ranges, rest = m.groups()
    bounds = []
    for r in ranges.split(','):
        lo, _, hi = r.strip().partition('-')
        hi = hi or lo
        if not (re.fullmatch(r'[0-9]{1,12}', lo) and re.fullmatch(r'[0-9]{1,12}', hi)) or int(hi) < int(lo):
            raise ValueError(f'bad range {r.strip()!r:.40} in hostlist {(whole or item)[:80]!r}')
        bounds.append((lo, int(lo), int(hi)))
    count = sum(hi - lo + 1 for _, lo, hi in bounds)
    if count > room:
        raise ValueError(f'hostlist {(whole or item)[:80]!r} names more than {MAX_NODES} hosts')
    tails = _expand_one(rest, room // count, whole or item) if rest else ['']
    values = [f'{i:0{len(text) if text.startswith("0") else 0}d}' for text, lo, hi in bounds for i in range(lo, hi + 1)]
    return [prefix + v + t for v in values for t in tails]


def parse_topology_conf(text):
    """``{leaf: [nodes]}`` from a Slurm ``topology.conf`` (tree plugin): the switches with ``Nodes=`` are the leaves
    (``Switches=`` lines, link speeds and comments are ignored). A node on two leaves is an error."""
    leaves, seen = {}, {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        fields = {}
        for token in line.split():
            if '=' in token:
                key, value = token.split('=', 1)
                fields[key.lower()] = value
        if 'switchname' not in fields:
            raise ValueError(f'topology.conf line {number}: no SwitchName')
        if 'nodes' not in fields:
            continue
        nodes = expand_hostlist(fields['nodes'])
        for node in nodes:
            if node in seen:
                raise ValueError(f'topology.conf line {number}: node {node} also on leaf {seen[node]}')
            seen[node] = fields['switchname']
        leaves.setdefault(fields['switchname'], []).extend(nodes)
    return leaves


def parse_topology_spines(text):
    """The number of spines of a two-level fat tree's ``topology.conf``: the switches whose ``Switches=`` list names
    a leaf (a switch with ``Nodes=``); 0 when none does (the :class:`Fabric` default: the leaf size)."""
    leaves = set(parse_topology_conf(text))
    spines = 0
    for line in text.splitlines():
        fields = dict(t.split('=', 1) for t in line.split('#', 1)[0].split() if '=' in t)
        fields = {k.lower(): v for k, v in fields.items()}
        if 'switches' in fields and leaves & set(expand_hostlist(fields['switches'])):
            spines += 1
    return spines


# -- the fabric model ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Fabric:
    """Nodes on leaves, ``spines`` uplinks per leaf (destination-mod-k), rails (device, port) per node.
    ``has_topology`` False (:func:`no_topology`): all nodes on one pseudo-leaf, every flow attributed to its two
    nodes only. ``routes``: the fabric's own routing where it was read (:func:`fabric_from_routes`), ``{(source
    leaf, destination node): spine index}``, instead of destination-mod-k."""

    leaves: dict
    spines: int = 0
    rails: tuple = (('mlx5_0', 1),)
    has_topology: bool = True
    routes: dict = None

    def __post_init__(self):
        _check_fabric(self.leaves, self.spines)
        where = {n: (leaf, i) for leaf, nodes in self.leaves.items() for i, n in enumerate(nodes)}
        object.__setattr__(self, '_where', where)
        if self.spines <= 0:
            object.__setattr__(self, 'spines', max((len(n) for n in self.leaves.values()), default=1))

    @property
    def nodes(self):
        return [n for ns in self.leaves.values() for n in ns]

    def leaf_of(self, node):
        return self._where[node][0]

    def position(self, node):
        return self._where[node][1]

    def spine_for(self, dst, src_leaf=None):
        """The spine a flow to ``dst`` crosses: destination-mod-k, or the fabric's routes (from ``src_leaf``; without
        it, the one spine every other leaf routes ``dst`` through: ValueError where they differ)."""
        if not self.routes:
            return self.position(dst) % self.spines
        if src_leaf is not None:
            return self.routes[(src_leaf, dst)]
        spines = {q for (leaf, d), q in self.routes.items() if d == dst}
        if len(spines) != 1:
            raise ValueError(f'the fabric routes {dst} through {len(spines)} spines, by source leaf')
        return spines.pop()

    def trunk_width(self, leaf):
        """Cables in each of ``leaf``'s leaf-spine links, as a non-blocking leaf has them: its nodes / spines."""
        return max(1, len(self.leaves[leaf]) // self.spines)

    def link_width(self, link):
        """Cables of a directed link of :meth:`directed_links`: a leaf-spine trunk (``A>spineq``, ``spineq>B``)
        has :meth:`trunk_width`, a node's cable one."""
        a, _, b = link.partition('>')
        leaf = a if b.startswith('spine') and a in self.leaves else \
            b if a.startswith('spine') and b in self.leaves else None
        return self.trunk_width(leaf) if leaf else 1

    def components(self, src, dst, rail=None):
        """The components a flow ``src -> dst`` on ``rail`` crosses, most specific last: the two nodes, their HCA
        ports, the sender's cable upward and the receiver's cable downward, and between leaves the uplink
        ``leaf > spine`` and downlink ``spine > leaf`` (and each one's leaf-spine cable, both directions)."""
        device, port = rail or self.rails[0]
        out = [Component.node(src), Component.node(dst)]
        if not self.has_topology:
            return out
        rail = (device, port)
        out += [Component.port(src, rail), Component.port(dst, rail),
                Component.cable(src, rail, 'up'), Component.cable(dst, rail, 'down')]
        a, b = self.leaf_of(src), self.leaf_of(dst)
        if a != b:
            q = self.spine_for(dst, a)
            out += [Component.uplink(a, q), Component.downlink(q, b),
                    Component.spine_link(a, q), Component.spine_link(b, q)]
        return out

    def directed_links(self, src, dst):
        """The directed links of a flow's path (what carries its bytes), for load counting."""
        if not self.has_topology:
            return [f'{src} out', f'{dst} in']
        out = [f'{src}>leaf', f'leaf>{dst}']
        a, b = self.leaf_of(src), self.leaf_of(dst)
        if a != b:
            q = self.spine_for(dst, a)
            out += [f'{a}>spine{q}', f'spine{q}>{b}']
        return out


def _check_fabric(leaves, spines):
    """ValueError saying what is wrong when ``leaves`` is not {leaf name: [host names]} of at most
    :data:`MAX_NODES` nodes, or ``spines`` not a whole number from 0 (the leaf size) to that (a topology or a
    stored night is data: ``spines: 1e999`` must be refused, not crash every report that reads it)."""
    if not isinstance(leaves, dict) or not all(isinstance(k, str) and isinstance(v, (list, tuple))
                                               for k, v in leaves.items()):
        raise ValueError(f'leaves: expected {{leaf: [nodes]}}, not {type(leaves).__name__}')
    if sum(len(v) for v in leaves.values()) > MAX_NODES:
        raise ValueError(f'leaves: more than {MAX_NODES} nodes')
    bad = next((n for v in leaves.values() for n in v if not (isinstance(n, str) and HOST_NAME.fullmatch(n))), None)
    if bad is not None:
        raise ValueError(f'leaves: {bad!r:.80} is not a host name')
    if isinstance(spines, bool) or not isinstance(spines, int) or not 0 <= spines <= MAX_NODES:
        raise ValueError(f'spines: {spines!r:.40} is not a number of spine switches (0 to {MAX_NODES})')


def spines_of(value):
    """A stored or written number of spines as an int (0 when absent); ValueError when it is not a whole number
    in range (``1e999``, ``-1``, ``"2"``)."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    _check_fabric({}, value)
    return value


def no_topology(nodes, rails=(('mlx5_0', 1),)):
    """The fabric of nodes whose leaves are unknown: flows name nodes only (:data:`NO_TOPOLOGY`)."""
    return Fabric({'(no topology)': list(nodes)}, 1, tuple(rails), has_topology=False)


def fabric_from_leaves(leaves, spines=0, rails=(('mlx5_0', 1),), routes=None):
    """A fabric of ``leaves``; with ``routes`` (the fabric's own, as a night stores them, :func:`routes_json`:
    ``[[source leaf, destination, spine index], ...]`` where they differ from destination-mod-k, ``[]`` where none
    does) it follows them. ValueError naming a route of no leaf, no node of another leaf or no spine."""
    _check_fabric(leaves, spines)      # before the copy: a string of nodes is no list of them
    leaves = {k: list(v) for k, v in leaves.items()}
    if routes is None:
        return Fabric(leaves, spines, tuple(rails))
    if not isinstance(routes, list) or not all(isinstance(r, list) and len(r) == 3 for r in routes):
        raise ValueError('routes: not a list of [source leaf, destination node, spine]')
    assumed = Fabric(leaves, spines, tuple(rails))
    table = {(a, d): assumed.spine_for(d) for a in leaves for b, nodes in leaves.items() if b != a for d in nodes}
    for a, d, q in routes:
        if (a, d) not in table:
            raise ValueError(f'routes: {a!r:.80} -> {d!r:.80} is no leaf to a node of another leaf')
        if isinstance(q, bool) or not isinstance(q, int) or not 0 <= q < assumed.spines:
            raise ValueError(f'routes: spine {q!r:.40} is not one of the {assumed.spines} spines')
        table[(a, d)] = q
    return Fabric(leaves, assumed.spines, tuple(rails), routes=table)


def routes_json(fabric):
    """A fabric's own routes as a night stores them (:func:`fabric_from_leaves`): those that differ from
    destination-mod-k over its leaves (``[]``: read, none differs); None when it has none (destination-mod-k
    assumed). A night of a thousand nodes stores its exceptions, not its million routes."""
    if not fabric.routes:
        return None
    return [[a, d, q] for (a, d), q in sorted(fabric.routes.items()) if q != fabric.position(d) % fabric.spines]


def fabric_from_routes(found, rails=(('mlx5_0', 1),)):
    """The fabric as its own tables describe it (:func:`ibrepro.fleet.routes.read`): leaves with their nodes in
    port order, the spines numbered in their names' sorted order, and its routes."""
    index = {name: q for q, name in enumerate(found['spines'])}
    return fabric_from_leaves(found['leaves'], len(found['spines']), rails,
                              [[a, d, index[spine]] for (a, d), spine in sorted(found['routes'].items())])


def fat_tree(nodes, leaf_size=16, spines=None, prefix='n'):
    """A full two-level fat tree of ``nodes`` nodes (``leaf_size`` per leaf, the last leaf may be short), with
    ``spines`` = ``leaf_size`` unless given (one uplink per downlink: non-blocking)."""
    width = max(4, len(str(nodes)))
    names = [f'{prefix}{i:0{width}d}' for i in range(nodes)]
    leaves = {f'leaf{j:03d}': names[j * leaf_size:(j + 1) * leaf_size]
              for j in range(math.ceil(nodes / leaf_size))}
    return Fabric(leaves, spines or leaf_size)


# -- rounds ----------------------------------------------------------------------------------------

def round_robin(items, rounds):
    """The first ``rounds`` rounds of the circle-method round-robin tournament over ``items``: each a list of
    disjoint pairs (an odd item out sits the round out). All pairs of all rounds are distinct."""
    items = list(items)
    if len(items) < 2:
        return [[] for _ in range(rounds)]
    ring = items + ([None] if len(items) % 2 else [])
    n = len(ring)
    out = []
    for r in range(min(rounds, n - 1)):
        order = [ring[0]] + ring[1:][r:] + ring[1:][:r]
        pairs = [(order[i], order[n - 1 - i]) for i in range(n // 2)]
        out.append([p for p in pairs if None not in p])
    while len(out) < rounds:
        out.append([])
    return out


@dataclasses.dataclass(frozen=True)
class Round:
    """One round: its number, kind ('intra-leaf', 'leaf-shift', 'all-nodes', 'confirmation') and pairs."""

    number: int
    kind: str
    pairs: tuple
    cells: tuple = ()         # per leaf pair of a shift round: the node set (for cutting rounds into jobs)


def pair_rounds(fabric):
    """The night's rounds for ``fabric`` (see the module doc): three rounds, each a list of disjoint pairs."""
    if not fabric.has_topology or len(fabric.leaves) == 1:
        return [Round(i, 'all-nodes', tuple(p)) for i, p in enumerate(round_robin(fabric.nodes, 3)) if p]
    leaves = list(fabric.leaves)
    intra = [p for leaf in leaves for p in round_robin(fabric.leaves[leaf], 1)[0]]
    rounds = [Round(0, 'intra-leaf', tuple(intra))]
    leaf_rounds = round_robin(leaves, 2)
    if not leaf_rounds[1]:              # two leaves: both shift rounds pair the same two leaves
        leaf_rounds[1] = leaf_rounds[0]
    for r, (leaf_pairs, shift) in enumerate(zip(leaf_rounds, (0, 1)), 1):
        pairs, cells = [], []
        paired = {x for lp in leaf_pairs for x in lp}
        for a, b in leaf_pairs:
            na, nb = fabric.leaves[a], fabric.leaves[b]
            m = min(len(na), len(nb))
            pairs += [(na[p], nb[(p + shift) % m]) for p in range(m)]
            for rest in (na[m:], nb[m:]):     # the longer leaf's extra nodes meet each other
                pairs += round_robin(rest, 1)[0]
            cells.append(tuple(na) + tuple(nb))
        for leaf in leaves:
            if leaf not in paired:            # an odd leaf out pairs within itself (its spine links idle)
                pairs += round_robin(fabric.leaves[leaf], r + 1)[r]
                cells.append(tuple(fabric.leaves[leaf]))
        rounds.append(Round(r, 'leaf-shift', tuple(pairs), tuple(cells)))
    return rounds


def flows_of(pairs):
    """Each pair's two directed flows (both directions run at once)."""
    return [f for a, b in pairs for f in ((a, b), (b, a))]


def link_loads(fabric, pairs):
    """Flows per directed link of one round's pairs (both directions)."""
    loads = {}
    for src, dst in flows_of(pairs):
        for link in fabric.directed_links(src, dst):
            loads[link] = loads.get(link, 0) + 1
    return loads


# -- jobs ------------------------------------------------------------------------------------------

def slurm_jobs(fabric, rounds, nodes=None, job_nodes=JOB_NODES):
    """The pair-round jobs of a night: a list of ``{'rounds': [numbers], 'nodes': [...]}`` (see the module doc for
    the cut); at most ``ceil(N / job_nodes)`` of them, the confirmation job included: with a budget of 3 or more
    one job is kept for it; otherwise the rounds share one job holding every node, which runs the confirmation
    itself (:func:`confirmation_job_needed`)."""
    all_nodes = nodes or fabric.nodes
    budget = max(1, math.ceil(len(all_nodes) / max(1, int(job_nodes))))
    shift = [r for r in rounds if r.kind == 'leaf-shift']
    if budget == 1 or not shift:
        return [{'rounds': [r.number for r in rounds], 'nodes': sorted(all_nodes)}]
    jobs = []
    usable = budget - 1 if budget >= 3 else budget     # one job of the budget kept for the confirmation run
    per_round = max(1, usable // len(shift))
    for r in shift:
        cells = list(dict.fromkeys(r.cells))
        size = math.ceil(len(cells) / per_round)
        for i in range(0, len(cells), size):
            members = sorted({n for cell in cells[i:i + size] for n in cell})
            same = next((j for j in jobs if j['nodes'] == members), None)
            if same:                      # the same node set: one job runs both rounds
                same['rounds'].append(r.number)
            else:
                jobs.append({'rounds': [r.number], 'nodes': members})
    first = shift[0].number
    for j in jobs:                        # round 0 (intra-leaf) runs inside the first shift round's jobs
        if first in j['rounds']:
            j['rounds'] = sorted(set(j['rounds']) | {r.number for r in rounds if r.kind == 'intra-leaf'})
    return jobs


def confirmation_job_needed(fabric, jobs):
    """False when one job holds every node (it analyses its own flows and re-tests the suspects itself)."""
    return not (len(jobs) == 1 and set(jobs[0]['nodes']) == set(fabric.nodes))


# -- confirmation ----------------------------------------------------------------------------------

#: the confirmation rounds' names (``confirmation``, ``confirmation-1``) and the label of the flows that load a
#: suspect leaf-spine link (flows keep these labels as their ``round``, so
#: :func:`ibrepro.fleet.localise.confirm` judges each suspect on its own flows)
NODE_CONFIRMATION = 'confirmation'
LINK_CONFIRMATION = 'confirmation-links'
#: how many times a flapping suspect (slow in some of the night's rounds only) is re-tested: the first
#: confirmation round and ``FLAP_REPEATS - 1`` more (``confirmation-repeat-2``, ...), so that a component slow in
#: half the rounds is slow in at least one of them 7 times in 8
FLAP_REPEATS = 3
REPEAT = '-repeat-'


def _split_label(label):
    """``(label without its repetition, repetition)`` of a flow's label (its ``round``)."""
    head, sep, j = str(label).rpartition(REPEAT)
    return (head, int(j)) if sep and j.isdigit() else (label, 1)


def repetition(label):
    """Which repetition of the confirmation a flow's label (its ``round``) is from: 1 for the first confirmation
    round (and any night round), ``j`` for a label ending in ``-repeat-j``."""
    return _split_label(label)[1]


def base_label(label):
    """A confirmation flow's label without its repetition (:func:`repetition`): ``confirmation-links-repeat-2`` is
    a link-loading flow as ``confirmation-links`` is."""
    return _split_label(label)[0]


@dataclasses.dataclass(frozen=True)
class ConfirmationRound:
    """One confirmation round: its name, its pairs (disjoint in nodes) and each pair's role (the label of its two
    flows: :data:`LINK_CONFIRMATION` for a pair loading a suspect link, else the round's name)."""

    name: str
    pairs: tuple
    roles: tuple

    def label(self, flow_index, flows_per_pair=2):
        """The label of flow ``flow_index`` of the round: each pair's ``flows_per_pair`` flows in a row (its two
        directions, in :func:`flows_of` order; on each of several rails, RDMA)."""
        return self.roles[flow_index // flows_per_pair]

    def as_json(self):
        return {'name': self.name, 'pairs': [list(p) for p in self.pairs], 'roles': list(self.roles)}

    @classmethod
    def from_json(cls, data):
        """A round of a stored confirmation decision (one written before pairs had roles: each its round's)."""
        pairs = tuple(tuple(p) for p in data['pairs'])
        return cls(data['name'], pairs, tuple(data.get('roles') or [data['name']] * len(pairs)))


def confirmation_rounds(suspects, fabric, good, flapping=()):
    """The confirmation run: :class:`ConfirmationRound` s, one when everything fits (a night of at most four pair
    rounds). Round ``confirmation`` loads every suspect leaf-spine link (:func:`link_confirmation_pairs`) and, in
    the nodes that leaves free, re-tests each node-side suspect with a good partner (:func:`confirmation_pairs`);
    a node-side suspect that does not fit goes to round ``confirmation-1``. The suspects also in ``flapping``
    (slow in some of the night's rounds only) are re-tested ``FLAP_REPEATS - 1`` times more, in rounds of their own
    (``confirmation-repeat-2``, ...; their flows' labels end in ``-repeat-j``, :func:`repetition`): one re-test
    of a component slow half the time says little."""
    out = _confirmation_run(suspects, fabric, good)
    again = [s for s in suspects if s in set(flapping)]
    for j in range(2, FLAP_REPEATS + 1) if again else ():
        out += [ConfirmationRound(f'{r.name}{REPEAT}{j}', r.pairs, tuple(f'{role}{REPEAT}{j}' for role in r.roles))
                for r in _confirmation_run(again, fabric, good, suspect_links=suspects)]
    return out


def _confirmation_run(suspects, fabric, good, suspect_links=None):
    """One re-test of each of ``suspects`` (:func:`confirmation_rounds`); node-side ones through no leaf-spine link
    among ``suspect_links`` (default: the suspects')."""
    suspects = [Component(s) for s in suspects]
    node_side = [s for s in suspects if not s.is_link]
    links = [s for s in suspects if s.is_link]
    avoid = [s for s in (suspects if suspect_links is None else map(Component, suspect_links)) if s.is_link]
    loaded = link_confirmation_pairs(links, fabric, good, avoid=[s for s in avoid if s not in links])
    node_rounds = confirmation_pairs(node_side, fabric, good, taken=loaded, suspect_links=avoid) or [[]]
    out = []
    for i, pairs in enumerate(node_rounds):
        mine = loaded if i == 0 else []
        name = NODE_CONFIRMATION if i == 0 else f'{NODE_CONFIRMATION}-{i}'
        if mine or pairs:
            out.append(ConfirmationRound(name, tuple(mine) + tuple(pairs),
                                         (LINK_CONFIRMATION,) * len(mine) + (name,) * len(pairs)))
    return out


def confirmation_pairs(suspects, fabric, good, *, taken=(), suspect_links=()):
    """Rounds of pairs re-testing node-side ``suspects``, each with one known-good partner: on its own leaf first
    (the flows cross no leaf-spine link, so they speak for the node side alone), else on another leaf through no
    suspect link and no leaf-spine link carrying more flows in the round than its trunk has cables (a healthy
    trunk must not slow them). Round 1 already holds the pairs ``taken`` (the link round's: their nodes are busy,
    their trunks loaded); a suspect that does not fit in a round goes to the next.

    ``suspects``: component names (as :meth:`Fabric.components` names them) of nodes, HCA ports and cables (a
    leaf-spine link is :func:`link_confirmation_pairs`' job). ``good``: nodes not under suspicion. Returns
    ``[[pairs of round 1], [pairs of round 2], ...]`` without the ``taken`` pairs (each round disjoint in nodes)."""
    suspect_links = _directed(suspect_links)
    rounds, busy, loads = [], [], []

    def new_round(pairs=()):
        rounds.append([])
        busy.append({n for p in pairs for n in p})
        loads.append(link_loads(fabric, pairs) if pairs else {})

    def fits(a, b, r):
        return all(loads[r].get(link, 0) < fabric.link_width(link) and link not in suspect_links
                   for link in _trunks(fabric, a, b))

    def place(host, candidates, r):
        partner = None if host in busy[r] else next(
            (n for n in candidates if n not in busy[r] and fits(host, n, r)), None)
        if partner is None:
            return False
        rounds[r].append((host, partner))
        busy[r].update((host, partner))
        for link in _trunks(fabric, host, partner):
            loads[r][link] = loads[r].get(link, 0) + 1
        return True

    new_round(taken)
    for suspect in suspects:
        host = Component(suspect).host
        if host is None:
            raise ValueError(f'not a node-side component: {suspect!r}')
        if fabric.has_topology:
            leaf = fabric.leaf_of(host)
            candidates = ([n for n in good if n != host and fabric.leaf_of(n) == leaf]
                          + [n for n in good if fabric.leaf_of(n) != leaf])
        else:
            candidates = [n for n in good if n != host]
        if not candidates:
            continue
        if not any(place(host, candidates, r) for r in range(len(rounds))):
            new_round()
            if not place(host, candidates, len(rounds) - 1):
                rounds.pop()              # not even an empty round has a partner for it through no suspect link
    while rounds and not rounds[-1]:
        rounds.pop()
    return rounds


def _trunks(fabric, a, b):
    """The leaf-spine links a pair loads: both directions' flows (a pair runs both at once)."""
    return [link for s, d in ((a, b), (b, a)) for link in fabric.directed_links(s, d)[2:]]


def _directed(suspect_links):
    """The directed leaf-spine links (``leaf1>spine0``, ``spine0>leaf2``) of suspect link components."""
    return {d for s in suspect_links for d in Component(s).directed_links()}


def link_confirmation_pairs(links, fabric, good, avoid=()):
    """One round of pairs loading each suspect leaf-spine link with as many flows at once as it has cables
    (:meth:`Fabric.trunk_width`): a trunk of several cables' rate shows a loss only when its flows together ask for
    more than the rate left (one flow is capped by its own cables). For ``uplink A>spine q``: senders on ``A``,
    receivers on other leaves at positions routed through spine ``q``; for ``downlink spine q>B`` (and ``spine link
    B-spine q``) receivers on ``B`` at those positions, senders on other leaves. Good nodes first, then suspected
    ones (their own effect is taken out when the link is judged, :func:`ibrepro.fleet.localise.confirm`).

    A pair runs both directions, so a pair is taken only when, with every pair before it, neither of its flows
    puts more flows on a leaf-spine link than the link has cables (:meth:`Fabric.link_width`) nor crosses another
    suspect's link: a suspect link then carries its own pairs' flows and nothing else, and a healthy one is never
    loaded past its cables (two flows on one cable would read as a loss).
    Returns the round's pairs (disjoint in nodes; a link whose nodes are taken by an earlier one gets fewer).
    ``avoid``: other suspect links no pair may cross (a repeat round's: the suspects it does not re-test)."""
    good = set(good)
    order = {n: i for i, n in enumerate(fabric.nodes)}
    suspect_links = _directed([*links, *avoid])
    busy, pairs, loads = set(), [], {}

    def ranked(nodes):
        return sorted((n for n in nodes if n not in busy), key=lambda n: (n not in good, order[n]))

    def fits(a, b, own):
        return all(loads.get(link, 0) < fabric.link_width(link) and (link not in suspect_links or link in own)
                   for link in _trunks(fabric, a, b))

    for link in links:
        link = Component(link)
        if not link.is_link:
            raise ValueError(f'not a leaf-spine link: {link!r}')
        leaf, q, up = link.leaf, link.spine, link.kind == 'uplink'
        own = link.directed_links()
        on_leaf = [n for n in fabric.nodes if fabric.leaf_of(n) == leaf]
        elsewhere = [n for n in fabric.nodes if fabric.leaf_of(n) != leaf]
        if up:       # senders on the leaf, receivers routed through spine q
            senders, receivers = on_leaf, [n for n in elsewhere if fabric.spine_for(n, leaf) == q]
        else:        # (the fabric's own routes may depend on the sender's leaf: the pair must cross the link)
            senders, receivers = elsewhere, [n for n in on_leaf if any(
                fabric.spine_for(n, fabric.leaf_of(s)) == q for s in elsewhere)]
        for _ in range(fabric.trunk_width(leaf)):
            first, second = ranked(receivers), ranked(senders)
            pair = next(((a, b) for b in first for a in second
                         if a != b and own & set(fabric.directed_links(a, b)) and fits(a, b, own)), None)
            if pair is None:
                break
            pairs.append(pair)
            busy.update(pair)
            for trunk in _trunks(fabric, *pair):
                loads[trunk] = loads.get(trunk, 0) + 1
    return pairs

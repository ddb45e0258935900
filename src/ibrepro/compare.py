"""This system beside the papers: which measurement answers which number of a paper, and how they compare.

A paper entry (``ibrepro.references``) is answered by a test case of a session when

* the case carries the entry's figure tag (``s<seed>-fig<N>``; the figure comes from the entry's ``where``) and one of
  its experiment tags (``exp11``), and reports the entry's metric (latency -> ``lat_*``, bandwidth -> ``bw_*``);
* every parameter the entry states is a parameter of the case with the same value (``operation: MPI_Alltoall``
  matches ``benchmark=Alltoall``, ``placement: intra-node`` a ``1x2`` layout), except ``nodes`` and
  ``processes`` (the process count is noted instead). An entry without ``placement`` was measured between
  nodes, so a case within one node does not answer it.
  An entry about a configuration the check does not model (two ports, striping, a window) is *not comparable*.

The measured value is taken where the paper took its number: at the stated message size; "small" at the smallest
non-zero size; otherwise (large messages, a peak) the best value over the sweep for a rate (bandwidth) and the
value at the largest size for a time.
"""

import re

from . import limits, parsers, references
from . import topology as ibtopology

#: Entry metric -> the prefix of the performance variables that measure it.
METRIC_VARIABLE = {'latency': 'lat', 'bidirectional latency': 'lat', 'bandwidth': 'bw',
                   'bidirectional bandwidth': 'bw', 'time': 'time', 'host overhead': 'overhead'}

#: Entry parameters that need not be parameters of the case: they are compared with its process count.
PROCESS_PARAMETERS = ('nodes', 'processes')

#: Benchmarks whose bandwidth counts both directions together.
BIDIRECTIONAL = re.compile(r'biband|bibw|bidir|sendrecv|exchange', re.I)

_FIGURE = re.compile(r'\b(Fig|Table)s?\.?\s*(\d+)(\([a-z]\))?(?:\s*-\s*(\d+))?')


def figures_of(where):
    """The figure/table tags of an entry's ``where`` and their labels: [("fig<N>", "Fig. <N>(a)"), ...]."""
    tags = []
    for kind, first, sub, last in _FIGURE.findall(where or ''):
        prefix = 'fig' if kind == 'Fig' else 'tab'
        for number in range(int(first), int(last or first) + 1):
            label = 'Fig.' if kind == 'Fig' else 'Table'
            tags.append((f'{prefix}{number}', f'{label} {number}{sub if not last else ""}'))
    return tags


def _norm(value):
    return re.sub(r'^mpi_', '', str(value).strip().lower().replace('-', '_'))


def placement(case):
    """'intra-node' or 'inter-node' from a case's layout (``<nodes>x<per node>``) or tags; None if unknown."""
    layout = str(case.get('layout') or '')
    if 'intra-node' in (case.get('tags') or ()) or layout.startswith('1x'):
        return 'intra-node'
    return 'inter-node' if re.fullmatch(r'\d+x\d+', layout) else None


def direction(case_name, entry_metric=None):
    """'bi' when the measurement counts both directions together, else 'uni'."""
    if entry_metric:
        return 'bi' if entry_metric.startswith('bidirectional') else 'uni'
    return 'bi' if BIDIRECTIONAL.search(case_name) else 'uni'


def related(entry, case):
    """Is the entry about a figure and an experiment the test case reproduces (by its tags)?"""
    tags = set(case.get('tags') or ())
    experiments = entry['experiment'] if isinstance(entry['experiment'], list) else [entry['experiment']]
    return (any(f'exp{e}' in tags for e in experiments if e is not None)
            and any(f's{entry["seed"]}-{tag}' in tags for tag, _ in figures_of(entry['where'])))


def match(entry, case):
    """How a paper entry relates to a test case: None (unrelated), or {'comparable': bool, 'notes': [...]}."""
    prefix = METRIC_VARIABLE.get(entry['metric'])
    if prefix is None or isinstance(entry['value'], str) or not related(entry, case):
        return None
    if not any(key.rsplit(':', 1)[-1].split('_')[0] == prefix for key in case.get('perfvalues') or {}):
        return None

    notes, differs = [], []
    for key, value in (entry.get('parameters') or {}).items():
        if key in PROCESS_PARAMETERS:
            notes.append(f'paper: {value} {key}; here: {case.get("num_tasks")} processes')
            continue
        mine = case.get(key, {'operation': case.get('benchmark'), 'placement': placement(case)}.get(key))
        if mine is None:
            differs.append(f'{key}={value}')
        elif _norm(mine) != _norm(value):
            return None
    if differs:
        notes.append(f'paper configuration {", ".join(differs)} is not a parameter of this check')
    if 'placement' not in (entry.get('parameters') or {}) and placement(case) == 'intra-node':
        # the papers measured between nodes unless they say otherwise
        notes.append('the paper measured between nodes; this case runs within one node')
        differs.append('placement')
    return {'comparable': not differs, 'notes': notes}


def curve(variables, prefix):
    """{size: value} of the ``<prefix>_<size>`` variables of a {variable: value} dict."""
    points = {}
    for name, value in variables.items():
        metric, _, size = name.rpartition('_')
        if metric == prefix and size.isdigit():
            points[int(size)] = value
    return dict(sorted(points.items()))


def measured(entry, variables):
    """``(value, how)`` of a case's {variable: value} at the point the entry describes, or ``(None, why)``."""
    prefix = METRIC_VARIABLE[entry['metric']]
    if prefix in variables:   # a size-less variable (NPB time)
        return variables[prefix], 'as measured'
    points = curve(variables, prefix)
    if not points:
        return None, f'no {prefix}_<size> variables'
    size = entry['message_size']
    if size is not None and str(size).isdigit():
        if int(size) not in points:
            return None, f'not measured at {size} bytes'
        return points[int(size)], f'at {size} B'
    if size == 'small':
        smallest = min((s for s in points if s > 0), default=None)
        return (points[smallest], f'at {smallest} B (smallest)') if smallest else (None, 'no non-zero size')
    if size not in (None, 'large'):
        return None, f'message size "{size}" is a range'
    if parsers.METRIC_BETTER.get(prefix) == 'higher':
        best = max(points, key=points.get)
        return points[best], f'peak, at {best} B'
    largest = max(points)
    return points[largest], f'at {largest} B (largest)'


def limit_then(entry):
    """The theoretical limit (MB/s) of the paper's testbed for a bandwidth entry, or None."""
    if METRIC_VARIABLE.get(entry['metric']) != 'bw' or not entry.get('limits_config'):
        return None
    try:
        return limits.limit_MBps(entry['limits_config'], direction(None, entry['metric']))
    except ValueError:
        return None


def case_devices(case):
    """The RDMA devices a case's sides ran on (its ``flow_windows``: the verbs families; its ``mpi_rail``: the MPI
    families), or None when it did not record them (perftest's default device, an MPI left to choose)."""
    rail = case.get('mpi_rail')
    if isinstance(rail, str) and rail:
        return {rail.split(':')[0]}
    devices = [w.get('device') for w in case.get('flow_windows') or () if isinstance(w, dict)]
    return set(devices) if devices and all(isinstance(d, str) and d for d in devices) else None


def limit_now(topology, bidirectional, intra_node=False, devices=None):
    """``(MB/s, None)`` of the RDMA bound of the rails a case used (``devices``; None: every adapter of the node's
    fabric, :func:`ibrepro.topology.fabric_devices`), in one direction or both, or ``(None, why not)``."""
    if intra_node:
        return None, 'intra-node (shared memory): no link to limit it'
    if not topology:
        return None, 'topology not recorded (run the RdmaTopology check)'
    if not topology.get('devices'):
        return None, 'no RDMA device: limit not applicable'
    if devices:
        per_direction, both, why = ibtopology.rails_bound(topology, sorted(devices))
    else:
        (per_direction, both), why = ibtopology.node_bound(topology), None
    if not per_direction:
        return None, why or 'no active RDMA port with a known rate: limit not applicable'
    return limits.to_MBps(both if bidirectional else per_direction), None


def paper_entries():
    """The papers' results stated for a figure or table: (entries a measurement can answer, the others)."""
    found = [e for e in references.entries(kind='result') if figures_of(e['where'])]
    answerable = [e for e in found if e['metric'] in METRIC_VARIABLE and not isinstance(e['value'], str)]
    return answerable, [e for e in found if e not in answerable]

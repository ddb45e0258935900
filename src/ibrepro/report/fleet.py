"""The report's fleet section: the pair-round nights among the selected sessions (test cases with the loggable
``fleet_flows``: ``reframe-checks/system/fleet_pairs.py``, :mod:`ibrepro.fleet.rounds`; the sessions of one run
are one night, :func:`ibrepro.fleet.history.nights_of`).

Per night, the components named and the suspects cleared, each with its evidence chain (the night's flows that
crossed it, then its confirmation re-runs), judged again from the stored flows by the localiser
(:func:`ibrepro.fleet.rounds.analyse`) with the history the night had: each component's effects in the pair-round
nights stored before it (:func:`ibrepro.fleet.history.stored_history`, the same reading as the check's). For the
newest night a leaf x leaf table in the topology's leaf order (the median change of the flows from one leaf to
another against the night's reference). Over the earlier stored pair-round nights (the last
:data:`~ibrepro.fleet.history.STORED_NIGHTS`) and the selected ones: per component the last night it was verified
(crossed by a measured flow and not suspected; never verified first, then the oldest verifications); over the last
:data:`~ibrepro.fleet.history.HISTORY_NIGHTS` of them and the selected ones, the trend of the components the newest
night suspected or that are slowest in it (each night's effect: the mean change of the flows crossing it).
"""

import math
import statistics

from .. import results

from ..fleet import localise as fleet_localise

from ..fleet import plan as fleet_plan

from ..fleet import rounds as fleet_rounds

from ..fleet import history as fleet_history


def _suspect(s):
    """A suspect with its evidence chain: its slowest flows of the night (8 at most), then its re-runs; each flow's
    ``value`` what it measured (MB/s, or us for a latency suspect) and ``change`` that against the night's
    reference (:func:`ibrepro.fleet.localise.change` of its residual)."""
    def chain(flows):
        return [{**f, 'value': f.get(fleet_localise.VALUE[s.metric]),
                 'change': fleet_localise.change(s.metric, f['residual'])} for f in flows]
    return {'name': s.name, 'metric': s.metric, 'unit': fleet_localise.UNIT[s.metric], 'effect': s.effect, 'q': s.q,
            'confirmed': s.confirmed, 'singled_out': s.singled_out,
            'evidence': chain(sorted(s.flows, key=lambda f: f['residual'])[:8]),
            'confirmation': chain(s.confirmation)}


def _leaf_table(flows, fabric, result):
    """[[leaf, [median relative change of the flows from it to each leaf, or None]]] in the topology's order."""
    cells = {}
    for f in flows:
        ref = result.references.get(fleet_localise.flow_kind(fabric, f['src'], f['dst']))
        if ref:
            cells.setdefault((fabric.leaf_of(f['src']), fabric.leaf_of(f['dst'])), []).append(f['bw'] / ref - 1)
    leaves = list(fabric.leaves)
    return leaves, [[a, [statistics.median(cells[a, b]) if (a, b) in cells else None for b in leaves]]
                    for a in leaves]


#: components shown in the trend besides the newest night's suspects: the slowest in the newest night
TREND_SLOWEST = 5


def _night(report, system):
    """``(uuid, start, data, fabric, flows)`` of a run report's pair-round night on ``system``, or None; ValueError,
    KeyError, TypeError or AttributeError when its stored flows cannot be read."""
    info = report.get('session_info') or {}
    data = fleet_history.from_report(report, system)
    if data is None:
        return None
    flows = fleet_localise.read_flows(data['flows'])
    return info.get('uuid'), str(info.get('time_start') or '?'), data, fleet_history.night_fabric(data, flows), flows


UNJUDGED = (KeyError, TypeError, AttributeError, ValueError, ZeroDivisionError, statistics.StatisticsError)


def section(system, selected, earlier=()):
    """``(the fleet section's model, problems)``: the model None when no selected session has a pair-round case on
    ``system`` that can be judged; a night whose flows cannot be judged is a line in ``problems``. ``selected``:
    run reports, oldest first; ``earlier``: the run reports stored before them (oldest first), whose pair-round
    nights are each selected night's history and feed the verification ages and the trend."""
    nights, verified, problems, trend = [], {}, [], []
    # the sessions of one run (a CI child pipeline stores one per case) are one night
    before = fleet_history.nights_of([r for r in earlier if fleet_history.has_night(r, system)])
    for k, report in enumerate(before):     # each component's last verification; the last nights' trend
        try:
            uuid, when, data, fabric, flows = _night(report, system)
            result = fleet_rounds.analyse(data['flows'], fabric, data['confirmation'], alpha=data['alpha'])
        except UNJUDGED:
            continue                      # an earlier night that cannot be judged adds nothing (it is not shown)
        _verify(verified, flows, fabric, result, when)
        if k >= len(before) - fleet_history.HISTORY_NIGHTS:
            trend.append((when, fleet_localise.component_effects(flows, fabric)))
    for report in fleet_history.nights_of(selected):
        info = report.get('session_info') or {}
        try:
            night = _night(report, system)
            if night is None:
                continue
            uuid, when, data, fabric, flows = night
            history, used = fleet_history.stored_history(
                [b for b in before if results.run_id(b) != results.run_id(report)], system, data['partition'])
            result = fleet_rounds.analyse(data['flows'], fabric, data['confirmation'], history=history,
                                          alpha=data['alpha'])
            effects = fleet_localise.component_effects(flows, fabric)
        except UNJUDGED as err:
            problems.append(f'session {info.get("uuid")}: its pair-round flows cannot be judged: {err!r}')
            continue
        before.append(report)
        _verify(verified, flows, fabric, result, when)
        trend.append((when, effects))
        leaves, table = _leaf_table(flows, fabric, result) if fabric.has_topology else ([], [])
        named = result.named
        nights.append({'uuid': uuid, 'start': when, 'flows': len(flows), 'history': len(used),
                       'noise': result.scale, 'statement': result.statement,
                       'named': [_suspect(s) for s in named],
                       'cleared': [_suspect(s) for s in result.suspects if s not in named],
                       'leaves': leaves, 'leaf_table': table, 'effects': effects,
                       'left_out': sorted(data['left_out'].items()),
                       'routing': _routing(fabric),
                       'suspected': sorted({m for s in result.suspects for m in s.members})})
    if not nights:
        return None, problems
    ages = sorted(verified.items(), key=lambda kv: (kv[1] is not None, kv[1] or '', kv[0]))
    return {'nights': nights, 'newest': nights[-1], 'verified': ages, 'trend': _trend(trend, nights[-1])}, problems


def _routing(fabric):
    """What the night's paths were taken to be: the fabric's own tables, or the model over topology.conf's order."""
    if not fabric.has_topology:
        return 'no topology: every flow is its two nodes\' only'
    if fabric.routes:
        differ = len(fleet_plan.routes_json(fabric))
        return ("the fabric's own forwarding tables (ibnetdiscover and dump_lfts, read for the night): "
                f'{differ} of its {len(fabric.routes)} leaf-to-node routes differ from destination-mod-k')
    return ("assumed, not read: destination-mod-k over topology.conf's node order (the fabric's tables were not "
            'given: IBREPRO_FLEET_ROUTES)')


def _verify(verified, flows, fabric, result, when):
    """Each component a measured flow crossed and the night did not suspect: verified ``when``."""
    suspected = {m for s in result.suspects for m in s.members}
    for f in flows:
        for c in fabric.components(f['src'], f['dst'], f['rail']):
            if c not in suspected:
                verified[c] = when
    for c in suspected:
        verified.setdefault(c, None)


def _trend(nights, newest):
    """``{'starts': [night starts], 'rows': [[component, [change or None per night]]]}``: the newest night's suspects,
    then its :data:`TREND_SLOWEST` slowest other components; a change is ``exp(effect) - 1``."""
    effects = newest['effects']
    slowest = sorted((c for c in effects if c not in newest['suspected']), key=lambda c: (effects[c], c))
    shown = newest['suspected'] + slowest[:TREND_SLOWEST]
    return {'starts': [when for when, _ in nights],
            'rows': [[c, [math.expm1(e[c]) if c in e else None for _, e in nights]] for c in shown]}

"""The report's fleet section: the pair-round nights among the selected sessions (test cases with the loggable
``fleet_flows``: ``reframe-checks/system/fleet_pairs.py``, :mod:`ibrepro.fleet_rounds`).

Per night, the components named and the suspects cleared, each with its evidence chain (the night's flows that
crossed it, then its confirmation re-runs), judged again from the stored flows by the localiser
(:func:`ibrepro.fleet_rounds.analyse`); for the newest night a leaf x leaf table in the topology's leaf order (the
median change of the flows from one leaf to another against the night's reference); and per component the last
night it was verified: crossed by a measured flow and not suspected. Components never verified in the selected
nights come first, then the oldest verifications.
"""

import math
import statistics

from .. import fleet_localise, fleet_plan, fleet_rounds


def _suspect(s):
    """A suspect with its evidence chain: its slowest flows of the night (8 at most), then its re-runs; each flow's
    ``change`` is its bandwidth against the night's reference (the residual ``log(bw / ref)`` as a ratio - 1)."""
    def chain(flows):
        return [{**f, 'change': math.expm1(f['residual'])} for f in flows]
    return {'name': s.name, 'effect': s.effect, 'q': s.q, 'confirmed': s.confirmed,
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


def section(system, selected):
    """``(the fleet section's model, problems)``: the model None when no selected session has a pair-round case on
    ``system`` that can be judged; a night whose flows cannot be judged is a line in ``problems``. ``selected``:
    run reports, oldest first."""
    nights, verified, problems = [], {}, []
    for report in selected:
        info = report.get('session_info') or {}
        when = str(info.get('time_start') or '?')
        try:
            data = fleet_rounds.from_report(report, system)
            if data is None:
                continue
            fabric = (fleet_plan.fabric_from_leaves(data['leaves'], data['spines']) if data['leaves'] else
                      fleet_plan.no_topology(sorted({r['host'] for r in data['flows']} |
                                                    {r['peer'] for r in data['flows']})))
            flows = fleet_localise.read_flows(data['flows'])
            result = fleet_rounds.analyse(data['flows'], fabric, data['confirmation'])
        except (KeyError, TypeError, AttributeError, ValueError, ZeroDivisionError,
                statistics.StatisticsError) as err:
            problems.append(f'session {info.get("uuid")}: its pair-round flows cannot be judged: {err!r}')
            continue
        suspected = {m for s in result.suspects for m in s.members}
        for f in flows:
            for c in fabric.components(f['src'], f['dst'], f['rail']):
                if c not in suspected:
                    verified[c] = when
        for c in suspected:
            verified.setdefault(c, None)
        leaves, table = _leaf_table(flows, fabric, result) if fabric.has_topology else ([], [])
        named = result.named
        nights.append({'uuid': info.get('uuid'), 'start': when, 'flows': len(flows),
                       'noise': result.scale, 'statement': result.statement,
                       'named': [_suspect(s) for s in named],
                       'cleared': [_suspect(s) for s in result.suspects if s not in named],
                       'leaves': leaves, 'leaf_table': table})
    ages = sorted(verified.items(), key=lambda kv: (kv[1] is not None, kv[1] or '', kv[0]))
    return ({'nights': nights, 'newest': nights[-1], 'verified': ages} if nights else None), problems

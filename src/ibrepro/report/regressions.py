"""The regressions part of the report: every variable's and test case's verdict of the history test, the trends."""

import collections
import math

from .. import plots


#: At most this many trend plots (flagged variables first).
MAX_TRENDS = 12

def metric_of(variable):
    return variable.rpartition('_')[0] if variable.rpartition('_')[2].isdigit() else variable


def size_of(variable):
    tail = variable.rpartition('_')[2]
    return int(tail) if tail.isdigit() else -1

def section(every_run, meta, latest, result, dates, method):
    """The variables' and test cases' verdicts, and the trends (``every_run(keys)``: every run of those series)."""
    rows = []
    for key, shift in result.variables.items():
        pv = latest.get(key, meta[key])
        rows.append({
            'key': key, 'partition': pv.partition, 'environ': pv.environ, 'name': pv.name, 'variable': pv.variable,
            'unit': pv.unit, 'value': pv.value if key in latest else None,
            'reframe': ('not run' if key not in latest else 'no reference' if pv.ref is None else pv.result),
            'ref': pv.ref, 'lower': pv.lower, 'upper': pv.upper, 'shift': shift,
            'order': (pv.partition, pv.environ, pv.name, metric_of(pv.variable), size_of(pv.variable)),
        })
    rows.sort(key=lambda r: r['order'])
    flagged = [r for r in rows if r['shift'].verdict in ('regression', 'change', 'improvement')]
    flagged.sort(key=lambda r: (r['shift'].verdict == 'improvement', -abs(r['shift'].change or 0)))
    groups = [{'partition': g[0], 'environ': g[1], 'name': g[2], 'shift': s}
              for g, s in sorted(result.groups.items())]

    trends = []
    chosen = ([r for r in flagged if r['shift'].verdict != 'improvement'] or _headline_variables(rows))[:MAX_TRENDS]
    aligned = every_run({row['key'] for row in chosen})
    for row in chosen:
        shift = row['shift']
        band = ((shift.baseline * math.exp(-2 * shift.noise), shift.baseline * math.exp(2 * shift.noise))
                if shift.baseline and shift.noise else None)
        ref = None
        if row['ref'] is not None:
            ref = (row['ref'], row['ref'] * (1 + row['lower']) if row['lower'] is not None else None,
                   row['ref'] * (1 + row['upper']) if row['upper'] is not None else None)
        title = f'{row["name"]} @{row["partition"]}+{row["environ"]}: {row["variable"]}'
        trends.append({'title': title, 'verdict': shift.verdict,
                       'image': plots.later('trend', title, row['unit'], dates, aligned[row['key']],
                                            method.confirm, band, ref)})
    reframe_fail = [r for r in rows if r['reframe'] == 'fail']
    alarms = [r for r in flagged if r['shift'].verdict == 'change']   # see stats.HistoryResult.alarms
    return {
        'variables': rows, 'flagged': flagged, 'alarms': alarms, 'groups': groups,
        'group_alarms': [g for g in groups if g['shift'].alarm], 'trends': trends,
        'reframe_fail': reframe_fail, 'reframe_judged': sum(1 for r in rows if r['ref'] is not None
                                                             and r['value'] is not None),
        'tested': sum(1 for r in rows if r['shift'].verdict != 'untested'),
        'untested_reasons': collections.Counter(r['shift'].reason for r in rows if r['shift'].verdict == 'untested'),
    }


def _headline_variables(rows):
    """Without flags: per test case the latency at its smallest non-zero size and the bandwidth at its largest."""
    chosen = {}
    for row in rows:
        metric, size = metric_of(row['variable']), size_of(row['variable'])
        if row['value'] is None or (metric in ('lat', 'bw') and size <= 0):
            continue
        group = (row['partition'], row['environ'], row['name'], metric)
        if metric == 'lat' and (group not in chosen or size < size_of(chosen[group]['variable'])):
            chosen[group] = row
        elif metric == 'bw' and (group not in chosen or size > size_of(chosen[group]['variable'])):
            chosen[group] = row
    return list(chosen.values())

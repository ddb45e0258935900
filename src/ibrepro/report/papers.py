"""The papers part of the report: per figure this system's curves beside the papers' numbers and the link limits,
and the headline table (paper value, measured value, ratio, fractions of the limits)."""

import dataclasses
import re

from .. import compare, plots
from .provenance import elsewhere


_UNITS = {'overhead': 'host overhead (us)', 'overlap': 'overlap potential (us)', 'lat': 'latency (us)',
          'bw': 'bandwidth (MB/s = 10^6 B/s)', 'time': 'time (s)'}


@dataclasses.dataclass
class Curve:
    """One case's curve of one metric: its name, where it ran (``partition+environ``), {size: value}."""
    name: str
    where: str
    points: dict


@dataclasses.dataclass
class FigureGroup:
    """The cases that reproduce the same figures, on one metric: one plot of the report."""
    figures: tuple          # the figure tags (``s000-fig15``)
    metric: str             # the variable prefix (``lat``, ``bw``, ...)
    partition: str          # the first case's: its links bound the plot's limit line
    names: list = dataclasses.field(default_factory=list)
    curves: list = dataclasses.field(default_factory=list)          # Curve
    entries: dict = dataclasses.field(default_factory=dict)         # id -> a paper value comparable here
    other: dict = dataclasses.field(default_factory=dict)           # id -> (a value not comparable, why)
    relative: dict = dataclasses.field(default_factory=dict)        # id -> a relative statement of the paper
    intra_node: bool = True
    devices: set = dataclasses.field(default_factory=set)           # rails its cases used; None: not recorded

    def add(self, name, where, case, variables, relative):
        if name not in self.names:
            self.names.append(name)
        self.relative.update(relative)
        self.intra_node &= compare.placement(case) == 'intra-node'
        # the rails its cases used (None once one did not record them: then the node's fabric bounds it)
        devices = compare.case_devices(case)
        self.devices = None if devices is None or self.devices is None else self.devices | devices
        self.curves.append(Curve(name, where, compare.curve(variables, self.metric)))

    @property
    def stated(self):
        """Whether the papers state a value of this metric for these figures."""
        return bool(self.entries or self.other)


def section(current, topologies):
    try:
        entries, statements = compare.paper_entries()
    except Exception as err:   # noqa: BLE001  (broken reference data must not hide the rest of the report)
        return {'headline': [], 'figures': [], 'papers_problem': f'reference data unreadable: {err}'}

    headline, groups = [], {}
    for (partition, environ, name), (case, variables) in sorted(current.items()):
        figure_tags = tuple(sorted(t for t in case.get('tags') or () if re.fullmatch(r's\d{3}-(fig|tab)\d+', t)))
        if not figure_tags:
            continue
        topo = topologies.get(partition)
        relative = {e['id']: e for e in statements if compare.related(e, case)}
        for prefix in _UNITS:   # a figure without a stated value shows the first: a benchmark's own metric
            if not (compare.curve(variables, prefix) or prefix in variables):
                continue
            group = groups.setdefault((figure_tags, prefix), FigureGroup(figure_tags, prefix, partition))
            group.add(name, f'{partition}+{environ}', case, variables, relative)
            for entry in entries:
                if compare.METRIC_VARIABLE[entry['metric']] != prefix:
                    continue
                how = compare.match(entry, case)
                if how is None:
                    continue
                if not how['comparable']:
                    group.other[entry['id']] = (entry, how['notes'])
                    continue
                group.entries[entry['id']] = entry
                headline.append(_headline_row(entry, case, environ, partition, variables, topo, how['notes']))

    figures = [_figure(group, topologies) for group in _figure_groups(groups.values())]
    headline.sort(key=lambda r: (r['seed'], r['figure_order'], r['id'], r['partition'], r['environ']))
    return {'headline': headline, 'figures': figures, 'papers_problem': None}


def _figure_groups(groups):
    """The metrics the papers' figures show: those with a stated value; else the first metric measured."""
    by_figures = {}
    for group in groups:
        by_figures.setdefault(group.figures, []).append(group)
    return [g for same in by_figures.values() for g in ([g for g in same if g.stated] or same[:1])]


def _headline_row(entry, case, environ, partition, variables, topo, notes):
    value, how = compare.measured(entry, variables)
    bidir = compare.direction(case['name'], entry['metric']) == 'bi'
    then = compare.limit_then(entry)
    now, now_note = (compare.limit_now(topo, bidir, compare.placement(case) == 'intra-node', compare.case_devices(case))
                     if compare.METRIC_VARIABLE[entry['metric']] == 'bw' else (None, 'not a bandwidth'))
    paper_si = entry['value_si']
    tags = compare.figures_of(entry['where'])
    return {
        'id': entry['id'], 'seed': entry['seed'], 'where': entry['where'], 'figure_order': tags[0][0],
        'configuration': entry['configuration'], 'message_size': entry['message_size'],
        'metric': entry['metric'], 'qualifier': entry['qualifier'] or '',
        'paper': entry['value'], 'paper_unit': entry['unit'], 'mb_definition': entry['mb_definition'],
        'paper_si': paper_si, 'unit_si': entry['unit_si'], 'quote': entry['quote'],
        'check': case['name'], 'environ': environ, 'partition': partition,
        'measured': value, 'how': how, 'ratio': value / paper_si if value is not None and paper_si else None,
        'limits_config': entry.get('limits_config'), 'limit_then': then,
        'fraction_then': paper_si / then if then else None,
        'limit_now': now, 'fraction_now': value / now if now and value is not None else None,
        'limit_now_note': now_note, 'notes': notes,
        'limit_now_elsewhere': elsewhere(topo, case) if now else '',
    }


def _figure(group, topologies):
    prefix, names = group.metric, group.names
    papers = []
    smallest = min((s for c in group.curves for s in c.points if s > 0), default=None)
    for entry in group.entries.values():
        size = entry['message_size']
        at = int(size) if str(size).isdigit() else smallest if size == 'small' else None
        where = ', '.join(label for _, label in compare.figures_of(entry['where']))
        config = entry['configuration'] if len(entry['configuration']) <= 40 else entry['configuration'][:39] + '~'
        papers.append((entry['seed'], f'{where} {config}: {entry["qualifier"] or ""} {entry["value"]:g} '
                                      f'{entry["unit"]}'.replace('  ', ' '), at, entry['value_si']))
    first = next(iter(group.entries.values()), None)
    limit_now, note = None, None
    if prefix == 'bw':
        bidir = compare.direction(names[0], first['metric'] if first else None) == 'bi'
        limit_now, note = compare.limit_now(topologies.get(group.partition), bidir, group.intra_node, group.devices)
    title_figs = ', '.join(f'{t[1:4]} {label}' for t in group.figures
                           for label in [t.split('-', 1)[1].replace('fig', 'Fig. ').replace('tab', 'Table ')])
    title = names[0] if len(names) == 1 else f'{", ".join(sorted({n.split()[0] for n in names}))} ({len(names)} cases)'
    curves = [((f'{c.name.split(" ", 1)[1] if " " in c.name else c.name} ' if len(names) > 1 else '') + c.where,
               c.points) for c in group.curves]
    image = plots.later('paper_figure', f'{title}: {_UNITS[prefix].split(" (")[0]}\n(papers: {title_figs})',
                        _UNITS[prefix], curves, papers, limit_now, note)
    relative = [{'id': e['id'], 'where': e['where'], 'text': f"{e['qualifier'] or ''} {e['value']} {e['unit']} "
                 f"{e['metric']}".strip(), 'configuration': e['configuration']}
                for e in group.relative.values()]
    return {'name': title, 'cases': names, 'metric': prefix, 'figures': title_figs, 'image': image,
            'relative': relative, 'alt': f'{title} {_UNITS[prefix]} versus message size, with the papers\' values',
            'entries': len(group.entries), 'limit_note': note, 'limit_now': limit_now,
            'other': [{'id': e['id'], 'where': e['where'], 'value': e['value'], 'unit': e['unit'],
                       'configuration': e['configuration'], 'notes': notes}
                      for e, notes in group.other.values()]}

"""The papers' numbers beside the model's values: what was calibrated, what was an input, what the model predicts.

Every result the papers state for a modelled configuration (seeds 000/003, 001, 002; MPI level: the rows the
catalog marks ``modelled`` or ``partial`` on the simulated testbeds) gets a role:

* ``calibrated``: a parameter of the model was fitted on it (``platform``): its error is the fit's residual;
* ``input``: a stated or assumed parameter was taken from it (host overhead, eager threshold, ...);
* ``calibration quantity``: another statement of a calibrated quantity (003's latency for the testbed that 000's
  number calibrated): the model cannot disagree with its calibration, only the papers with each other;
* ``follows from calibration``: a ratio of two calibrated quantities (000's PCIe vs PCI-X latency reduction);
* ``predicted``: nothing of the model was fitted on it: its error counts;
* ``not comparable``: the model cannot produce it, and why (run times need computation, two ports, ...).

The model value is read from the simulated system's test cases as :mod:`ibrepro.compare` reads measurements:
"small" at the smallest non-zero size, a peak at the best size, "up to" as the best over the sizes (or layouts).
Error = (model - paper) / paper, of the number as the paper states it (a reduction in % is compared in %).
"""

import dataclasses
import functools
import re
import statistics
import sys

from .. import catalog, compare, references, results
from . import SYSTEM, platform

ROLES = ('calibrated', 'input', 'calibration quantity', 'follows from calibration', 'predicted', 'not comparable')

#: The quantities the model is compared on: {quantity: (the figure of the papers whose test cases measure it, whether
#: across nodes)}; the first case present wins (catalog.reproducing_figure). Data: reference-data/simulated.yaml.
QUANTITIES = {name: (q['figure'], q['inter_node']) for name, q in platform.COMPARISON['quantities'].items()}


def measuring(quantity):
    """Display names of the test cases that measure ``quantity`` (:data:`QUANTITIES`), in order of preference."""
    return catalog.reproducing_figure(*QUANTITIES[quantity])


#: Relative entries without a ``baseline_testbed``: {entry id: the configurations the paper compares with} (the model
#: compares with the first). Data: reference-data/simulated.yaml.
BASELINES = {entry_id: tuple(configs) for entry_id, configs in platform.COMPARISON['baselines'].items()}

RUN_TIME = ('time', 'run time improvement', 'run time degradation')
NO_COMPUTATION = ('run time: computation is not simulated, the model reports the communication time of the '
                  'application only')

#: NPB problem sizes: keys (IS) ranked per iteration x iterations, for times from Mop/s (more digits than the
#: 2-decimal "Time in seconds").
_IS_KEYS = {'S': 2 ** 16, 'W': 2 ** 20, 'A': 2 ** 23, 'B': 2 ** 25, 'C': 2 ** 27}


@dataclasses.dataclass
class Row:
    entry: dict
    partition: str
    role: str
    model: float | None = None
    how: str = ''
    note: str = ''

    @property
    def error(self):
        paper = self.entry['value_si']
        if self.model is None or not paper or self.role == 'not comparable':
            return None
        return (self.model - paper) / paper

    def to_dict(self):
        e = self.entry
        return {'id': e['id'], 'seed': e['seed'], 'where': e['where'], 'configuration': e['configuration'],
                'metric': e['metric'], 'qualifier': e['qualifier'] or '', 'paper': e['value'], 'unit': e['unit'],
                'paper_si': e['value_si'], 'unit_si': e['unit_si'], 'partition': self.partition, 'role': self.role,
                'model': self.model, 'how': self.how, 'note': self.note, 'error': self.error}


# -- the model's test cases ----------------------------------------------------------------------------

def _norm(name):
    return re.sub(r'\s+', ' ', name.strip())


def cases_of(reports):
    """{(partition, test case name): {variable: value}} of the simulated system's sessions (newest wins)."""
    cases = {}
    for report in sorted(reports, key=lambda r: float(r['session_info'].get('time_start_unix') or 0)):
        for case in results.testcases(report):
            if case.get('system') != SYSTEM or case.get('result') not in ('pass', 'fail'):
                continue
            values = {key.rsplit(':', 1)[-1]: float(entry[0])
                      for key, entry in (case.get('perfvalues') or {}).items() if entry and entry[0] is not None}
            if values:
                cases[(case['partition'], _norm(case['name']))] = values
    return cases


def _find(cases, partition, candidates):
    for candidate in candidates:
        for (part, name), values in cases.items():
            if part == partition and name == _norm(candidate):
                return name, values
    return None, None


def _small(values, prefix):
    points = compare.curve(values, prefix)
    size = min((s for s in points if s > 0), default=None)
    return (points[size], f'{size} B') if size is not None else (None, f'no {prefix}_<size> values')


def _peak(values, prefix):
    points = compare.curve(values, prefix)
    if not points:
        return None, f'no {prefix}_<size> values'
    best = max(points, key=points.get)
    return points[best], f'peak at {best} B'


# -- roles ------------------------------------------------------------------------------------------------

def partitions_of(configuration):
    return [name for name, t in platform.TESTBEDS.items() if configuration in t.configurations]


def model_inputs():
    """{entry id: 'calibrated' | 'input'} of every paper entry a model parameter comes from."""
    return dict(_model_inputs())


@functools.lru_cache(maxsize=None)
def _model_inputs():
    used = {}
    for name in platform.TESTBEDS:
        for prm in platform.model(name).values():
            for entry_id in prm.entries:
                if prm.source == platform.CALIBRATED:
                    used[entry_id] = 'calibrated'
                else:
                    used.setdefault(entry_id, 'input')
    return tuple(used.items())


def in_scope(entry):
    """A result the model takes a parameter from, or a result of a modelled configuration in a row the simulated
    testbeds cover (modelled or partial)."""
    if entry['kind'] != 'result' or entry.get('restates') or isinstance(entry['value'], str):
        return False
    if entry['id'] in model_inputs():
        return True
    if entry['seed'] not in ('000', '001', '002', '003'):
        return False
    exps = entry['experiment'] if isinstance(entry['experiment'], list) else [entry['experiment']]
    statuses = {(catalog.experiment(e).get('simulated') or {}).get('status') for e in exps if e}
    if not statuses & {'modelled', 'partial'}:
        return False
    configs = [entry.get('testbed'), entry.get('baseline_testbed')]
    return any(
        c and (partitions_of(c) or partitions_of(c.replace('-2port', ''))) for c in configs)


def _layouts(entry):
    params = entry.get('parameters') or {}
    nodes, ppn = params.get('nodes'), params.get('processes_per_node', 1)
    return [f'{nodes}x{ppn}'] if nodes else ['4x1', '4x2']


def classify(entry, cases, used):
    """The row of one paper entry."""
    part = (partitions_of(entry.get('testbed') or '') or [''])[0]
    base = (partitions_of(entry.get('baseline_testbed') or BASELINES.get(entry['id'], ('',))[0]) or [''])[0]
    params = entry.get('parameters') or {}
    metric = entry['metric']
    row = Row(entry, part, 'predicted')

    if entry['id'] in used:
        row.role = used[entry['id']]
        row.note = 'a parameter of the model comes from this number'
        _value_of(row, cases, base)
        return row
    if '2port' in (entry.get('testbed') or '') or '2port' in (entry.get('baseline_testbed') or '') \
            or params.get('ports') == 2:
        return dataclasses.replace(row, role='not comparable', note=(
            'two ports: a SimGrid flow follows one route (striping and binding are not modelled)'))
    if metric in RUN_TIME:
        if params.get('benchmark') == 'sweep3D':
            return dataclasses.replace(row, role='not comparable', note='sweep3D is not built (not packaged)')
        return dataclasses.replace(row, role='not comparable', note=NO_COMPUTATION)
    if metric in ('latency', 'bandwidth') and 'operation' not in params:
        row.role = 'calibration quantity'
        row.note = 'the model is calibrated on another statement of this quantity (see the calibrated rows)'
        _value_of(row, cases)
        return row
    if metric == 'latency reduction' and 'operation' not in params:
        row.role = 'follows from calibration'
        row.note = 'follows from two calibrated latencies'
        _value_of(row, cases, base)
        return row
    if metric in ('latency', 'bidirectional latency', 'bidirectional bandwidth', 'latency reduction',
                  'communication time reduction'):
        _value_of(row, cases, base)
        return row
    return dataclasses.replace(row, role='not comparable', note=f'the model has no "{metric}"')


def _value_of(row, cases, base=''):
    """Fill the model's value of a row from the test cases (or say which case is missing): the reader of its
    metric, point to point or collective (:data:`_READERS`); a metric without one keeps no value."""
    collective = 'operation' in (row.entry.get('parameters') or {})
    reader = _READERS.get((row.entry['metric'], collective))
    if reader:
        reader(row, cases, base)


#: Point-to-point metrics read at one size of one curve: metric -> (quantity across nodes, on one node, the reading
#: of the curve, its variable prefix); no quantity: a model input that no test case measures.
_POINT_TO_POINT = {
    'latency': ('latency', 'intra-node latency', _small, 'lat'),
    'bandwidth': ('bandwidth', 'intra-node bandwidth', _peak, 'bw'),
    'bidirectional bandwidth': ('bidirectional bandwidth', 'bidirectional bandwidth', _peak, 'bw'),
    'bidirectional latency': ('bidirectional latency', 'bidirectional latency', _small, 'lat'),
    'host overhead': (None, None, _small, 'overhead'),
}


def _point_to_point(row, cases, base):
    params = row.entry.get('parameters') or {}
    quantity, intra_quantity, pick, prefix = _POINT_TO_POINT[row.entry['metric']]
    chosen = intra_quantity if params.get('placement') == 'intra-node' else quantity
    candidates = measuring(chosen) if chosen else []
    name, values = _find(cases, row.partition, candidates)
    if values is None:
        row.how = f'not run: {candidates[0]} on {row.partition}' if candidates else 'an input, not measured'
        return
    row.model, how = pick(values, prefix)
    row.how = f'{name}: {how}'


def _latency_increase(row, cases, base):
    part = row.partition
    base = (partitions_of(row.entry.get('baseline_testbed') or '') or [''])[0]
    ratio_name, mine = _find(cases, part, measuring('latency'))
    _, theirs = _find(cases, base, measuring('latency'))
    if mine is not None and theirs is not None:
        row.model = _small(mine, 'lat')[0] - _small(theirs, 'lat')[0]
        row.how = f'{ratio_name}: at 1 B, {part} minus {base}'
    else:
        row.how = f'not run: {measuring("latency")[0]} on {part} and {base}'


def _collective_latency(row, cases, base):
    name, values = _find(cases, row.partition, _collective(row.entry))
    if values is None:
        row.how = f'not run: {_collective(row.entry)[0]} on {row.partition}'
        return
    row.model, how = _small(values, 'lat')
    row.how = f'{name}: {how}'


def _latency_reduction(row, cases, base):
    part = row.partition
    if not base:
        row.how = 'the paper names no single configuration it is reduced from'
        return
    name, mine = _find(cases, part, measuring('latency'))
    _, theirs = _find(cases, base, measuring('latency'))
    if mine is None or theirs is None:
        row.how = f'not run: {measuring("latency")[0]} on {part} and {base}'
        return
    a, b = _small(mine, 'lat')[0], _small(theirs, 'lat')[0]
    row.model = b - a if row.entry['unit'] == 'us' else 100 * (1 - a / b)
    row.how = f'{name}: at 1 B, {base} against {part}'


def _collective_reduction(row, cases, base):
    """The best over the message sizes (the paper's "up to")."""
    e, part = row.entry, row.partition
    name, mine = _find(cases, part, _collective(e))
    _, theirs = _find(cases, base, _collective(e))
    if mine is None or theirs is None:
        row.how = f'not run: {_collective(e)[0]} on {part} and {base}'
        return
    a, b = compare.curve(mine, 'lat'), compare.curve(theirs, 'lat')
    best = max((s for s in a if s > 0 and b.get(s)), key=lambda s: 1 - a[s] / b[s], default=None)
    if best is not None:
        row.model = 100 * (1 - a[best] / b[best])
        row.how = f'{name}: best over 1 B..{max(a)} B, at {best} B'


def _communication_reduction(row, cases, base):
    """The best over the paper's layouts (its "up to")."""
    e, part, params = row.entry, row.partition, row.entry.get('parameters') or {}
    program, cls = params.get('benchmark', '').lower(), params.get('npb_class', 'B')
    found = []
    for layout in _layouts(e):
        case = f'NPB %case={program}.{cls}-{layout}'
        _, mine = _find(cases, part, [case])
        _, theirs = _find(cases, base, [case])
        if mine and theirs and mine.get('mops') and theirs.get('mops'):
            # the run's time is inversely proportional to Mop/s, which NPB prints with more digits
            found.append((100 * (1 - theirs['mops'] / mine['mops']), layout))
    if not found:
        row.how = f'not run: NPB %case={program}.{cls}-4x1/4x2 on {part} and {base}'
        return
    row.model, layout = max(found)
    row.how = f'NPB {program.upper()} class {cls}: best of {", ".join(lay for _, lay in found)}, at {layout}'


#: (metric, whether a collective's: the entry names an ``operation``) -> the reader of its model value.
_READERS = {
    **{(metric, False): _point_to_point for metric in _POINT_TO_POINT},
    ('latency increase', False): _latency_increase,
    ('latency', True): _collective_latency,
    ('latency reduction', False): _latency_reduction,
    ('latency reduction', True): _collective_reduction,
    ('communication time reduction', False): _communication_reduction,
    ('communication time reduction', True): _communication_reduction,
}


def _collective(entry):
    """The test cases of a collective's figure (catalog.reproducing_figure), in order of preference."""
    return [name for fig, _ in compare.figures_of(entry['where'])
            for name in catalog.reproducing_figure(f's{entry["seed"]}-{fig}')]


def rows(cases):
    """Every in-scope paper entry as a :class:`Row`, ordered by seed, figure and entry."""
    used = model_inputs()
    found = [classify(e, cases, used) for e in references.entries() if in_scope(e)]
    order = {r: i for i, r in enumerate(ROLES)}
    return sorted(found, key=lambda r: (r.entry['seed'], compare.figures_of(r.entry['where'])[:1], r.entry['id'],
                                        order[r.role]))


def summary(table):
    """Counts per role, the predictions' median absolute error, the three worst predictions."""
    predicted = [r for r in table if r.role == 'predicted' and r.error is not None]
    worst = sorted(predicted, key=lambda r: -abs(r.error))[:3]
    return {
        'counts': {role: sum(1 for r in table if r.role == role) for role in ROLES},
        'predictions': len(predicted),
        'not_run': [r.entry['id'] for r in table if r.role == 'predicted' and r.error is None],
        'median_abs_error': statistics.median(abs(r.error) for r in predicted) if predicted else None,
        'worst': [r.to_dict() for r in worst],
    }


# -- output -----------------------------------------------------------------------------------------------

def _fmt(value):
    if value is None:
        return '-'
    return f'{value:.4g}' if abs(value) < 1e5 else f'{value:.0f}'


def markdown(table):
    """The table and its summary as Markdown (docs/simulation.md)."""
    s = summary(table)
    lines = ['| seed | where | configuration | metric | paper | model | error | role | how / why |',
             '|---|---|---|---|---:|---:|---:|---|---|']
    for r in table:
        d = r.to_dict()
        paper = f"{d['qualifier'] + ' ' if d['qualifier'] else ''}{d['paper']:g} {d['unit']}"
        if d['unit_si'] != d['unit'] or d['paper_si'] != d['paper']:
            paper += f" (= {d['paper_si']:.4g} {d['unit_si']})"
        model = f"{_fmt(d['model'])} {d['unit_si']}" if d['model'] is not None else '-'
        error = f"{d['error']:+.1%}" if d['error'] is not None else ''
        role = f"**{d['role']}**" if d['role'] == 'predicted' else d['role']
        why = '; '.join(x for x in (d['how'], d['note']) if x)
        config = d['configuration'].replace('|', '/')
        where = f" (`{d['partition']}`)" if d['partition'] else ''
        lines.append(f"| {d['seed']} | {d['where']} | {config}{where} | {d['metric']} | {paper} | "
                     f"{model} | {error} | {role} | {why.replace('|', '/')} |")
    med = s['median_abs_error']
    lines += ['', f"{s['predictions']} predictions, median absolute error "
                  f"{'-' if med is None else f'{med:.1%}'}; "
                  + ', '.join(f'{n} {role}' for role, n in s['counts'].items() if n) + '.']
    if s['not_run']:
        lines.append(f"Predictions without a model value (their case did not run): {', '.join(s['not_run'])}.")
    return '\n'.join(lines) + '\n'


def own_testbed(headline):
    """The rows of the report's headline table (a paper number beside a partition) where the partition models the
    number's own testbed (Myrinet's or Quadrics' numbers, for instance, are beside no model)."""
    entries = {e['id']: e for e in references.entries()}
    kept = []
    for row in headline:
        config = (entries.get(row['id']) or {}).get('testbed')
        models = platform.TESTBEDS.get(row['partition'])
        if not config or (models and config in models.configurations):
            kept.append(row)
    return kept


def report_section(system, current):
    """The paper-vs-model section of ``ibrepro report`` for the simulated system (None for a real system).

    ``current``: the report's {(partition, environ, name): (case, {variable: value})}."""
    if system != SYSTEM:
        return None
    cases = {(partition, _norm(name)): variables for (partition, _, name), (_, variables) in current.items()}
    table = rows(cases)
    return {'rows': [r.to_dict() for r in table], 'summary': summary(table),
            'label': 'simulated: SimGrid SMPI models of the papers\' testbeds; values are model values, not '
                     'measurements (NPB times: communication only)'}


def add_cli(subparsers):
    p = subparsers.add_parser('table', help='the papers\' numbers beside the model\'s values, with the errors',
                              description=__doc__, formatter_class=__import__('argparse').RawDescriptionHelpFormatter)
    which = p.add_mutually_exclusive_group()
    which.add_argument('--sessions', nargs='+', metavar='UUID', help='these stored sessions (UUID prefixes)')
    which.add_argument('--last', type=int, metavar='N', default=None,
                       help='the last N stored sessions (default: every stored session of the simulated system; '
                            'the newest value of each test case wins)')
    which.add_argument('--report', nargs='+', metavar='FILE', help='JSON run reports instead of the database')
    p.add_argument('--db', metavar='FILE', help='results database (default: ibrepro where)')
    p.add_argument('--json', action='store_true', help='rows and summary as JSON')
    p.set_defaults(func=_cli)


def _cli(args):
    import json   # noqa: PLC0415
    try:
        if args.report:
            reports = [results.load_report(path) for path in args.report]
        else:
            reports = results.stored_sessions(args.db, uuids=args.sessions, last=args.last)
    except results.ResultsError as err:
        print(f'ibrepro simulated table: {err}', file=sys.stderr)
        return 2
    cases = cases_of(reports)
    if not cases:
        print('ibrepro simulated table: no test case of the simulated system in the selected sessions',
              file=sys.stderr)
        return 2
    table = rows(cases)
    if args.json:
        print(json.dumps({'rows': [r.to_dict() for r in table], 'summary': summary(table)}, indent=1))
    else:
        print(markdown(table), end='')
    return 0

"""``ibrepro baseline``: per-system ReFrame references from stored sessions.

Method: for every performance variable of every test case (system, partition, environment, check, parameters),
the reference value is the MEDIAN of its values over the chosen sessions, and the tolerance is
``max(floor, k * robust CV)`` with robust CV = 1.4826 * MAD / median, capped at ``cap``; with fewer than
``min_samples`` values the spread is not measurable and the tolerance is ``default``. Values that print as 0 get
no reference. The bound is one-sided,
in the direction that means worse: latency and time may not rise above ref * (1 + tol), bandwidth, message rate
and Mop/s may not fall below ref * (1 - tol). The output is ReFrame's ``$ref`` YAML, indexed by
``[$partition, $environ, <the check's parameters>]``.

Only the variables a case judges get a reference: its ``reference_variables`` (small-message latency, the peak of
each rate, the sizes the papers state), so one noisy size of a curve does not fail a night; ``--all-variables``
writes every size (sessions that recorded no ``reference_variables`` give every variable either way).
"""

import collections
import datetime
import functools
import json
import math
import re
import sys
from pathlib import Path

import yaml

from . import parsers, paths, references, results, stats

DEFAULTS = {'k': 3.0, 'floor': 0.10, 'default': 0.25, 'cap': 0.90, 'min_samples': 3}


def _metric(variable):
    return variable.split('_', 1)[0] if variable.split('_', 1)[0] in parsers.METRIC_BETTER else variable


def tolerance(values, *, k, floor, default, cap, min_samples):
    if len(values) < min_samples:
        return default

    return min(cap, max(floor, k * stats.robust_cv(values)))


def reference_entry(variable, values, unit, **method):
    """``[value, lower, upper, unit]`` for one variable (ReFrame's reference tuple)."""
    ref = stats.median(values)
    tol = round(tolerance(values, **method), 3)
    if parsers.METRIC_BETTER.get(_metric(variable)) == 'higher':
        return [_round(ref), -min(tol, 0.99), None, unit]   # a rate cannot fall below zero

    return [_round(ref), None, tol, unit]


def _round(x):
    return float(f'{x:.4g}')


def build(perf_values, all_variables=False, **method):
    """The references document (a dict) for the given PerfValues (their representative ones unless
    ``all_variables``)."""
    method = {**DEFAULTS, **method}
    series = collections.defaultdict(list)
    units = {}
    for pv in perf_values:
        if not (all_variables or pv.representative):
            continue
        series[pv.series_key].append(pv.value)
        units[pv.series_key] = pv.unit

    doc = {}
    for key in sorted(series, key=_series_order):
        if stats.median(series[key]) == 0:
            continue   # printed as 0 (below the tool's resolution): nothing to judge against
        system, partition, environ, check, params, variable = key
        entry = doc.setdefault(check, {'$index': ['$partition', '$environ', *[p for p, _ in params]]})
        node = entry.setdefault(f'{system}:{partition}', {}).setdefault(environ, {})
        for _, value in params:
            node = node.setdefault(value, {})
        node[variable] = reference_entry(variable, series[key], units[key], **method)

    return doc


def _series_order(key):
    *rest, variable = key
    metric, _, size = variable.rpartition('_')
    return repr(rest), (metric, int(size)) if size.isdigit() else (variable, -1)


def merge(old, new):
    """Checks in ``new`` replace the same checks' entries in ``old`` down to the variable."""
    merged = dict(old or {})
    for check, entry in new.items():
        if check in merged and merged[check].get('$index') == entry['$index']:
            _deep_update(merged[check], entry)
        else:
            merged[check] = entry

    return merged


def _deep_update(dst, src):
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _deep_update(dst[key], value)
        else:
            dst[key] = value


@functools.lru_cache(maxsize=None)
def _reframe_name_pattern():
    """ReFrame's own rule for system and partition names, from its configuration schema."""
    import reframe
    schema = json.loads((Path(reframe.__file__).parent / 'schemas' / 'config.json').read_text())
    return schema['defs']['alphanum_ext_string']['pattern']


def system_name_problem(name):
    """Why ``name`` cannot be a ReFrame system name (and so a directory under reference-data/systems), or None."""
    if not isinstance(name, str) or not re.fullmatch(_reframe_name_pattern(), name):
        return f'{name!r:.80} is not a ReFrame system name ({_reframe_name_pattern()})'
    return None


def references_path(system):
    """``reference-data/systems/<system>/references.yaml``; ValueError unless ``system`` is a ReFrame name (a
    stored name such as ``../..`` or ``/etc`` would point anywhere)."""
    problem = system_name_problem(system)
    if problem:
        raise ValueError(problem)
    return paths.system_references_dir(system) / 'references.yaml'


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):   # write every value out: reference files refuse anchors and aliases
        return True


def _finite(node, trail='references'):
    """ValueError naming the place of a number that is not finite (YAML would write .inf or .nan)."""
    if isinstance(node, dict):
        for key, value in node.items():
            _finite(value, f'{trail}.{key}')
    elif isinstance(node, list):
        for value in node:
            _finite(value, trail)
    elif isinstance(node, float) and not math.isfinite(node):
        raise ValueError(f'{trail}: {node} is not a reference')


def write(doc, path, sessions, method):
    _finite(doc)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    method = {**DEFAULTS, **method}
    header = [
        f'# ReFrame references ($ref) written by `ibrepro baseline` on {datetime.date.today()}',
        # a stored UUID is data: only the characters a UUID has reach the comment (a newline would write YAML)
        f'# from {len(sessions)} session(s): ' + ', '.join(
            re.sub(r'[^0-9A-Za-z-]', '?', str(s['session_info'].get('uuid') or '?'))[:8] for s in sessions),
        f'# value = median; tolerance = max({method["floor"]}, {method["k"]} x robust CV) capped at '
        f'{method["cap"]}, or {method["default"]} with fewer than {method["min_samples"]} samples;',
        '# one-sided: latency/time upper bound, bandwidth/rate lower bound.',
    ]
    text = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=120)
    path.write_text('\n'.join(header) + '\n' + text)


def add_cli(subparsers):
    p = subparsers.add_parser(
        'baseline', help='write per-system references from stored sessions',
        description=__doc__, formatter_class=__import__('argparse').RawDescriptionHelpFormatter)
    p.add_argument('--system', help='only this system (default: every system in the sessions)')
    p.add_argument('--sessions', nargs='+', metavar='UUID', help='sessions to use (UUID prefixes)')
    p.add_argument('--last', type=int, default=5, metavar='N',
                   help="use the last N stored nights (default 5): a night's sessions together (a CI child pipeline "
                        'stores one per test case), confirmation re-runs left out')
    p.add_argument('--report', nargs='+', metavar='FILE', help='use JSON run reports instead of the database')
    p.add_argument('--output', help='write here instead of reference-data/systems/<system>/references.yaml')
    p.add_argument('--replace', action='store_true', help='replace the file instead of updating it')
    p.add_argument('--all-variables', action='store_true',
                   help="a reference for every message size, not only each case's reference_variables")
    for name, value in DEFAULTS.items():
        p.add_argument(f'--{name.replace("_", "-")}', type=type(value), default=value,
                       help=f'method parameter (default {value})')
    p.set_defaults(func=_cli)


def _cli(args):
    method = {name: getattr(args, name) for name in DEFAULTS}
    problems = []
    try:
        if args.report:
            sessions = [results.load_report(f) for f in args.report]
        else:
            sessions = (results.stored_sessions(uuids=args.sessions, problems=problems) if args.sessions else
                        results.last_nights(args.last, problems=problems))
    except results.ResultsError as err:
        print(f'ibrepro baseline: {err}', file=sys.stderr)
        return 1

    values = [pv for s in sessions for pv in results.perf_values(s, problems)
              if args.system is None or pv.system == args.system]
    for problem in problems:
        print(f'ibrepro baseline: skipped: {problem}', file=sys.stderr)
    systems = sorted({pv.system for pv in values})
    if not values:
        print('ibrepro baseline: no performance values in the selected sessions', file=sys.stderr)
        return 1
    if args.output and len(systems) > 1:
        print(f'ibrepro baseline: sessions hold several systems ({", ".join(systems)}); use --system',
              file=sys.stderr)
        return 1

    for system in systems:
        mine = [pv for pv in values if pv.system == system]
        try:
            path = Path(args.output) if args.output else references_path(system)
            old = None
            if path.exists() and not args.replace:
                old = references.read_yaml(path)
            doc = build(mine, all_variables=args.all_variables, **method)
            write(merge(old, doc), path, sessions, method)
        except ValueError as err:   # a system name that is no directory of ours, an unreadable old file
            print(f'ibrepro baseline: {err}' + ('; write it elsewhere with --system and --output' if not args.output
                                                 and system_name_problem(system) else ''), file=sys.stderr)
            return 1
        except OSError as err:
            print(f'ibrepro baseline: {path}: {err.strerror}', file=sys.stderr)
            return 1
        judged = {pv.series_key for pv in mine if args.all_variables or pv.representative}
        print(f'{path}: {len(mine)} values from {len(sessions)} session(s), {len(judged)} references '
              f'({len({pv.series_key for pv in mine})} variables stored)')

    return 0

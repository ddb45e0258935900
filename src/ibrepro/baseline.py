"""``ibrepro baseline``: per-system ReFrame references from stored sessions.

Method: for every performance variable of every test case (system, partition, environment, check, parameters),
the reference value is the MEDIAN of its values over the chosen sessions, and the tolerance is
``max(floor, k * robust CV)`` with robust CV = 1.4826 * MAD / median, capped at ``cap``; with fewer than
``min_samples`` values the spread is not measurable and the tolerance is ``default``. Values that print as 0 get no reference. The bound is one-sided,
in the direction that means worse: latency and time may not rise above ref * (1 + tol), bandwidth, message rate
and Mop/s may not fall below ref * (1 - tol). The output is ReFrame's ``$ref`` YAML, indexed by
``[$partition, $environ, <the check's parameters>]``.
"""

import collections
import datetime
import sys
from pathlib import Path

import yaml

from . import parsers, paths, results, stats

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


def build(perf_values, **method):
    """The references document (a dict) for the given PerfValues."""
    method = {**DEFAULTS, **method}
    series = collections.defaultdict(list)
    units = {}
    for pv in perf_values:
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


def write(doc, path, sessions, method):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    method = {**DEFAULTS, **method}
    header = [
        f'# ReFrame references ($ref) written by `ibrepro baseline` on {datetime.date.today()}',
        f'# from {len(sessions)} session(s): ' + ', '.join(s['session_info']['uuid'][:8] for s in sessions),
        f'# value = median; tolerance = max({method["floor"]}, {method["k"]} x robust CV) capped at '
        f'{method["cap"]}, or {method["default"]} with fewer than {method["min_samples"]} samples;',
        '# one-sided: latency/time upper bound, bandwidth/rate lower bound.',
    ]
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120)
    path.write_text('\n'.join(header) + '\n' + text)


def add_cli(subparsers):
    p = subparsers.add_parser(
        'baseline', help='write per-system references from stored sessions',
        description=__doc__, formatter_class=__import__('argparse').RawDescriptionHelpFormatter)
    p.add_argument('--system', help='only this system (default: every system in the sessions)')
    p.add_argument('--sessions', nargs='+', metavar='UUID', help='sessions to use (UUID prefixes)')
    p.add_argument('--last', type=int, default=5, help='use the last N stored sessions (default 5)')
    p.add_argument('--report', nargs='+', metavar='FILE', help='use JSON run reports instead of the database')
    p.add_argument('--output', help='write here instead of reference-data/systems/<system>/references.yaml')
    p.add_argument('--replace', action='store_true', help='replace the file instead of updating it')
    for name, value in DEFAULTS.items():
        p.add_argument(f'--{name.replace("_", "-")}', type=type(value), default=value,
                       help=f'method parameter (default {value})')
    p.set_defaults(func=_cli)


def _cli(args):
    method = {name: getattr(args, name) for name in DEFAULTS}
    try:
        if args.report:
            sessions = [results.load_report(f) for f in args.report]
        else:
            sessions = results.stored_sessions(uuids=args.sessions, last=None if args.sessions else args.last)
    except results.ResultsError as err:
        print(f'ibrepro baseline: {err}', file=sys.stderr)
        return 1

    values = [pv for s in sessions for pv in results.perf_values(s)
              if args.system is None or pv.system == args.system]
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
        path = Path(args.output) if args.output else paths.system_references_dir(system) / 'references.yaml'
        old = None
        if path.exists() and not args.replace:
            old = yaml.safe_load(path.read_text())
        write(merge(old, build(mine, **method)), path, sessions, method)
        print(f'{path}: {len(mine)} values from {len(sessions)} session(s), '
              f'{len({pv.series_key for pv in mine})} references')

    return 0

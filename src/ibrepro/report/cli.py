"""``ibrepro report``: the command line (see :mod:`ibrepro.report`), and the nightly verdict it prints."""

import argparse
import collections
import dataclasses
import gc
import json
import os
import re
import sys
from pathlib import Path

from .. import baseline, paths, references, results, stats, verdict
from . import render
from .model import build
from .selection import DEFAULT_HISTORY, ReportError, parse_since, select, systems_of
from .render import write


def references_problems(system):
    """``(path, problems)`` of the references file ReFrame judges ``system`` against: what makes it unreadable
    (YAML syntax, a refused anchor, file and line) or makes ReFrame skip checks (schema, nesting). No file: none."""
    prefix = os.environ.get('RFM_REFERENCE_PREFIX')
    if prefix:
        path = Path(prefix) / 'references.yaml'
    elif baseline.system_name_problem(system):
        return None, []   # a stored name no ReFrame system can have: it has no references file
    else:
        path = baseline.references_path(system)
    if not path.is_file():
        return path, []
    try:
        doc = references.read_yaml(path)
    except references.DataError as err:
        return path, [str(err.problem)]
    return path, [str(problem) for problem in references.check_reference_document(doc, name=str(path))]

_METHOD_HELP = {
    'window': 'baseline runs before the tested ones',
    'confirm': 'newest runs tested together (their median)',
    'alpha': 'false discovery rate (Benjamini-Hochberg)',
    'min_effect': 'smallest relative change flagged',
    'min_history': 'fewer baseline runs: not tested',
    'min_cv': 'floor of the noise, relative',
}


def _add_options(parser, cls, helps, prefix=''):
    """One option per field of the dataclass ``cls``, typed and defaulted as its defaults."""
    defaults = cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        parser.add_argument(f'--{field.name.replace("_", "-")}', type=type(default), default=default, metavar='X',
                            help=f'{prefix}{helps[field.name]} (default {default})')


def _options_of(args, cls):
    """The ``cls`` of parsed _add_options options (ValueError when out of range)."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def add_method_arguments(parser):
    """One option per parameter of the history test (stats.Method), with its default."""
    _add_options(parser, stats.Method, _METHOD_HELP, 'history test: ')


def method_of(args):
    """The stats.Method of parsed add_method_arguments options (ValueError when out of range)."""
    return _options_of(args, stats.Method)


def add_cli(subparsers):
    p = subparsers.add_parser('report', help='HTML and Markdown reports: the papers, the history, the link limit',
                              description=(sys.modules[__package__].__doc__ + '\n\nThe history test:\n'
                                           + stats.__doc__.split('=\n', 1)[1]),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    which = p.add_mutually_exclusive_group()
    which.add_argument('--sessions', nargs='+', metavar='UUID', help='these stored sessions (UUID prefixes)')
    which.add_argument('--last', type=int, metavar='N',
                       help='the last N stored runs (default 1; a run is a session, or the sessions of one '
                            'nightly run)')
    which.add_argument('--since', metavar='WHEN', help='stored sessions since a date (2026-11-20) or 7d / 12h ago')
    which.add_argument('--report', nargs='+', metavar='FILE', help='JSON run reports instead of the database')
    which.add_argument('--night', metavar='ID', help='the sessions of nightly run ID (their nightly extra) and the '
                       'confirmation of its suspects; its history is what was stored before it')
    p.add_argument('--db', metavar='FILE', help='results database (default: ibrepro where)')
    p.add_argument('--system', help='only this system')
    p.add_argument('-C', '--config', metavar='FILE',
                   help='ReFrame configuration of the system, to say why check families did not run (default: the '
                        'platforms the sessions recorded; the configuration a session names is never imported)')
    p.add_argument('--no-index', action='store_true',
                   help='decode every stored session instead of reading the values index (slow; the same report)')
    p.add_argument('--output-dir', default=str(paths.REPO_ROOT / 'reports'), metavar='DIR',
                   help='write DIR/<system>/<timestamp>/ (default: reports/ of the checkout)')
    p.add_argument('--history', type=int, default=DEFAULT_HISTORY, metavar='N',
                   help=f'runs in trends and available as baseline (default {DEFAULT_HISTORY})')
    add_method_arguments(p)
    add_guard_arguments(p)
    p.add_argument('--nightly', action='store_true',
                   help="print the night's verdict and exit with its status: 0 clean, 1 regression, 2 could not judge, "
                        '3 inconclusive (see above)')
    p.add_argument('--confirmation-problem', metavar='WHY',
                   help='with --nightly: the confirmation ibrepro nightly ran stored nothing (WHY): the suspects '
                        'without one are unverified (not confirmed, not cleared), not unconfirmed')
    p.add_argument('--suspects', metavar='FILE',
                   help='with --nightly: write the test cases to re-run as JSON to FILE (what ibrepro nightly '
                        'confirms)')
    p.set_defaults(func=_cli)


_GUARD_HELP = {
    'max_noise': 'a night whose repetitions disagree by more (sd of the test-case index) is inconclusive',
    'max_pressure': 'a night whose tasks waited for a CPU longer (share of the run) is inconclusive',
    'confirmation_alpha': 'p-value at which a re-run confirms a suspect',
}


def add_guard_arguments(parser):
    """One option per limit of the noise guard and the confirmation (verdict.Guard), with its default."""
    _add_options(parser, verdict.Guard, _GUARD_HELP)


def guard_of(args):
    """The verdict.Guard of parsed add_guard_arguments options (ValueError when out of range)."""
    return _options_of(args, verdict.Guard)


def _cli(args):
    try:
        return _cli_checked(args)
    except Exception as err:   # a crash is "could not judge", never a regression (exit 1) nor a pass
        import traceback
        traceback.print_exc()
        print(f'ibrepro report: crashed ({type(err).__name__}: {err}): could not judge', file=sys.stderr)
        return verdict.EXIT_UNJUDGED


def _cli_checked(args):
    try:
        method = method_of(args)
        guard_of(args)
        history = max(args.history, method.window + method.confirm)
        inputs = select(db=args.db, sessions=args.sessions, last=args.last,
                        since=parse_since(args.since) if args.since else None, report_files=args.report,
                        history=history, use_index=not args.no_index, night=args.night)
    except (ReportError, results.ResultsError, ValueError) as err:
        print(f'ibrepro report: {err}', file=sys.stderr)
        return 2

    try:
        return _report(args, method, inputs)
    except results.ResultsError as err:    # e.g. a damaged values index, met while reading the history
        print(f'ibrepro report: {err}: could not judge', file=sys.stderr)
        return verdict.EXIT_UNJUDGED
    finally:
        inputs.close()


def _report(args, method, inputs):
    gc.freeze()   # the loaded reports live to the end: keep the garbage collector from scanning them again
    for problem in inputs.problems:
        print(f'ibrepro report: skipped: {problem}', file=sys.stderr)
    systems = [s for s in inputs.history if args.system in (None, s)]
    if not systems:
        print('ibrepro report: no session with test cases to report on'
              + (f' for system {args.system}' if args.system else ''), file=sys.stderr)
        return 2

    broken, statuses, suspects = [], [], []
    guard = guard_of(args)
    for system in systems:
        selected = [r for r in inputs.selected if system in systems_of(r)]
        model = build(system, selected, inputs.history[system], method, args.config, guard,
                      inputs.fleet_earlier.get(system, ()), getattr(args, 'confirmation_problem', None))
        model['problems'] = inputs.problems + model['problems']
        target = write(model, args.output_dir)
        print(f'{target / "index.html"}\n{target / "summary.md"}')
        for problem in model['problems'][len(inputs.problems):]:
            print(f'ibrepro report: {problem}', file=sys.stderr)
        refs_file, refs_problems = references_problems(system)
        for problem in refs_problems:
            print(f'ibrepro report: references of {system} unreadable: {problem}', file=sys.stderr)
        if refs_problems:
            broken.append(refs_file)
        if args.nightly:
            statuses.append(_nightly_verdict(system, model, method, inputs, guard))
            suspects += [{'system': system, 'partition': g['partition'], 'environ': g['environ'], 'name': g['name'],
                          'hashcode': _hashcode(selected, g), 'night': model['night'], 'verdict': g['verdict']}
                         for g in model['suspects']]
    if args.nightly and args.suspects:
        Path(args.suspects).write_text(json.dumps({'suspects': suspects}, indent=1) + '\n')
    if args.nightly and broken:   # ReFrame judged nothing against them: the night cannot pass
        print(f'ibrepro report: the references ReFrame judges against cannot be read ({", ".join(map(str, broken))})'
              ': fix them (ibrepro refs validate) before the nightly test can pass', file=sys.stderr)
        return verdict.EXIT_UNJUDGED
    return verdict.combine(statuses) if args.nightly else 0


def _hashcode(selected, group):
    """The ReFrame hash of a test case of the night (what ``reframe -n /HASH`` selects), or None."""
    for report in selected:
        if report['session_info'].get('confirms'):
            continue
        for case in results.readable_cases(report, []):
            if (case['partition'], case['environ'], case['name']) == (group['partition'], group['environ'],
                                                                     group['name']):
                code = case.get('hashcode')
                return code if isinstance(code, str) and re.fullmatch(r'[0-9a-f]{8}', code) else None
    return None


def _nightly_verdict(system, model, method, inputs, guard):
    """Print the night's verdict of one system; its exit status."""
    lines = render.nightly_lines(model)
    run = _inconclusive_run(model, inputs, system, guard) if model['inconclusive'] else 0
    status = verdict.exit_status(model['verdict_objects'], run)
    if model['flaky']:     # passed only on a retry: not a clean night (the retry must not hide it)
        status = verdict.combine([status, verdict.EXIT_INCONCLUSIVE])
    kinds = collections.Counter(v['verdict'] for v in model['case_verdicts'])
    if model['group_alarms'] or model['alarms']:
        print(f'{system}: {len(model["group_alarms"])} test case(s) regressed, {len(model["alarms"])} count(s) changed')
    elif model['unverified']:
        print(f'{system}: {len(model["unverified"])} test case(s) flagged and not confirmed: their confirmation '
              'measured nothing (not cleared)')
    elif model['other_hardware']:
        print(f'{system}: could not judge {len(model["other_hardware"])} test case(s): they ran on other hardware '
              'than their history')
    elif not model['tested'] and model['variables'] and model['runs'] - 1 < method.min_history:
        # a new system (or one whose history was cut): a warning every night until it can be judged, never clean
        print(f'{system}: not judged yet: {model["runs"] - 1} of {method.min_history} nights stored before this '
              f'one; nothing tested: the history has fewer than {method.min_history} earlier runs, no regression '
              'can be detected yet')
        status = verdict.combine([status, verdict.EXIT_INCONCLUSIVE])
    elif not model['tested']:
        print(f'{system}: nothing tested: the history has fewer than {method.min_history} earlier '
              f'runs ({model["runs"]} in all); no regression can be detected yet')
    else:
        print(f'{system}: no regression in {len(model["groups"])} test case(s) ({model["tested"]} tested '
              f'variables, {len(model["variables"])} in all)')
    print(f'  night {model["night"]}: ' + ', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))
          + (f'; confirmation session(s) {", ".join(c["uuid"] for c in model["confirmations"])}'
             if model['confirmations'] else ''))
    alarmed = {(g['partition'], g['environ'], g['name'])
               for g in model['group_alarms'] + model['cleared'] + model['inconclusive'] + model['unverified']}
    moved = [r for r in model['flagged'] if r['shift'].verdict == 'regression'
             and (r['partition'], r['environ'], r['name']) not in alarmed]
    if moved:
        print(f'  not an alarm: {len(moved)} single variable(s) moved while their test case as a whole did '
              f'not (e.g. {moved[0]["name"]} {moved[0]["variable"]} {render.pct(moved[0]["shift"].change)})')
    for line in lines:
        print(f'  {line}')
    for g in model['other_hardware']:
        print(f'  OTHER HARDWARE {g["name"]} @{g["partition"]}+{g["environ"]}: {g["reason"]}; judged again once '
              f'it has {method.min_history} nights there')
    for f in model['flaky']:
        print(f"  FLAKY test case {f['name']} @{f['partition']}+{f['environ']}: passed only on a retry, after "
              + '; '.join(f['earlier']))
    if status == verdict.EXIT_UNJUDGED and model['unverified']:
        print(f'{system}: could not judge: {len(model["unverified"])} suspect(s) whose confirmation measured nothing, '
              f'and the night alone is below the alarm limit (q <= {verdict.ALARM_ALPHA:g})')
    elif status == verdict.EXIT_UNJUDGED and model['other_hardware']:
        print(f'{system}: could not judge: {len(model["other_hardware"])} test case(s) on other hardware than their '
              'history')
    elif status == verdict.EXIT_UNJUDGED:
        print(f'{system}: {verdict.INCONCLUSIVE_LIMIT} inconclusive nights in a row: the nightly test has not judged '
              'this system since; find what disturbs the runs (another job, a noisy node)')
    elif status == verdict.EXIT_INCONCLUSIVE and model['inconclusive']:
        print(f'{system}: inconclusive night ({run + 1} in a row; {verdict.INCONCLUSIVE_LIMIT} fail)')
    elif status == verdict.EXIT_INCONCLUSIVE:
        print(f'{system}: not a clean night: {len(model["flaky"])} test case(s) passed only on a retry')
    return status


def _inconclusive_run(model, inputs, system, guard):
    """How many nights in a row before this one were inconclusive (read from their stored test cases: a night is
    inconclusive when a test case of it was too noisy and no quiet confirmation judged it)."""
    if inputs.index is None:
        return 0
    history = inputs.history[system]
    nights = list(dict.fromkeys(row.night for row in history.sessions))
    earlier = nights[:nights.index(model['night'])] if model['night'] in nights else []
    count = 0
    for night in reversed(earlier[-(verdict.INCONCLUSIVE_LIMIT - 1):]):
        uuids = [row.uuid for row in history.sessions if row.night == night]
        main, again = {}, {}
        for report in results.sessions_by_uuid(uuids, inputs.index.db, problems=[]):
            for case in results.readable_cases(report, []):
                if case['system'] == system:
                    key = (case['partition'], case['environ'], case['name'])
                    (again if report['session_info'].get('confirms') else main)[key] = case
        if not verdict.night_inconclusive(main, again, guard):
            break
        count += 1
    return count

"""``ibrepro charts``: a system's nightly charts (:mod:`ibrepro.charts`) on its own stored nights.

* ``ibrepro charts baseline --nights N``: Phase I. The last N stored nights (nights, not sessions: the sessions of
  one nightly run are one night), stated clean by the person who runs it, become the frozen baseline of every
  chart of the system: levels, noise, the control's limits, and each chart's ``h`` and ``z_big`` calibrated by
  replaying those nights to its share of at most ``--rate`` false alarms per night, system-wide. It prints what
  each chart can catch (the slowdown caught within 1, 3 and 10 nights with probability 0.9). Written to
  ``<IBREPRO_HOME>/charts/<system>.json`` privately (a temporary file, then a rename); an existing baseline is
  replaced only with ``--replace`` (a person accepting a change: the nights after it are the new Phase I).
* ``ibrepro charts status``: the charts over every stored night after the baseline's: per chart tonight's z, the
  evidence ``S/h``, and an alarm with the night it started and by how much. Where Otava is installed (``make
  otava``; :mod:`ibrepro.changepoints`), each chart's nights, Phase I's and the ones since, are also split by Otava:
  an alarm says the night the change began and the re-baseline that accepts it, and every change Otava finds since
  the baseline is listed (the retrospective view; the alarm itself stays the chart's, at its stated rate).

Exit status of ``status``: 0 no alarm, 1 a chart alarmed, 2 could not judge (unreadable data or baseline), 3 not
judged yet (no baseline: ``ibrepro charts baseline`` first).
"""

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

from . import changepoints, charts, ledger, paths, results

EXIT_CLEAN, EXIT_ALARM, EXIT_UNJUDGED, EXIT_NOT_YET = 0, 1, 2, 3


def stored_nights(system, db=None, problems=None):
    """The system's stored nights as ledger records, oldest first: the sessions of one run merged (their test cases
    of ``system``, keyed ``<display name> @<partition>+<environ>``); confirmation sessions left out."""
    reports = results.stored_sessions(db, problems=problems if problems is not None else [])
    runs = {}
    for report in reports:
        info = report.get('session_info') or {}
        if info.get('confirms'):
            continue
        runs.setdefault(results.run_id(report), []).append(report)
    nights = []
    for run, members in runs.items():
        if not run:
            continue
        cases = []
        for report in members:
            for case in results.readable_cases(report, problems if problems is not None else []):
                if case.get('system') == system:
                    cases.append({**case, 'display_name': f'{case.get("display_name") or case.get("name")} '
                                                          f'@{case.get("partition")}+{case.get("environ")}'})
        if not cases:
            continue
        starts = [r['session_info'].get('time_start_unix') for r in members]
        starts = [s for s in starts if isinstance(s, (int, float)) and math.isfinite(s)]
        try:
            nights.append(ledger.night_record({'runs': [{'testcases': cases}]}, run, phase='stored',
                                              schedule={'kind': 'clean'}, started=min(starts, default=0.0),
                                              wall_s=0.0))
        except ledger.LedgerError as err:
            if problems is not None:
                problems.append(f'night {run!r:.80}: {err}')
    return sorted(nights, key=lambda n: n['started'])


def baseline_path(system):
    """``<IBREPRO_HOME>/charts/<system>.json`` (ValueError for a name that is not a system's: it names a file)."""
    if not re.fullmatch(r'[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}', str(system)):
        raise ValueError(f'{system!r:.80} is not a system name')
    return paths.data_home() / 'charts' / f'{system}.json'


def write_private(path, text):
    """Write ``text`` to ``path`` through a private temporary file in the same directory, then rename it."""
    paths.private_dir(path.parent)    # ours alone (ibrepro.trust): mkstemp's file cannot be planted there
    fd, tmp = tempfile.mkstemp(prefix=f'.{path.name}.', dir=path.parent)
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load(system):
    """``(Baseline, {(case, band): Design})`` of the system's frozen baseline file."""
    return charts.Baseline.from_json(json.loads(baseline_path(system).read_text()))


def stated_mde(system):
    """``{"case|band": {"1": x, "3": y, "10": z}}``: what each chart can catch, stated when the baseline was made."""
    try:
        mde = json.loads(baseline_path(system).read_text()).get('mde')
    except (OSError, ValueError, AttributeError):
        return {}
    return mde if isinstance(mde, dict) else {}


def _pct(x):
    return '-' if x is None else f'{x:.1%}'


def cmd_baseline(args):
    try:
        baseline_path(args.system)
    except ValueError as err:
        print(f'ibrepro charts: --system: {err}', file=sys.stderr)
        return EXIT_UNJUDGED
    if not 5 <= args.nights <= 100000:
        print(f'ibrepro charts: --nights {args.nights}: Phase I needs 5 to 100000 nights', file=sys.stderr)
        return EXIT_UNJUDGED
    problems = []
    nights = ([n for n in ledger.read(args.ledger) if n['schedule'].get('kind') == 'clean'] if args.ledger
              else stored_nights(args.system, problems=problems))
    for p in problems:
        print(f'ibrepro charts: warning: {p}', file=sys.stderr)
    if args.accept:             # a person accepts the change that started at that night: the new Phase I from it
        ids = [n['night'] for n in nights]
        if args.accept not in ids:
            print(f'ibrepro charts: --accept {args.accept}: no such night stored for {args.system}', file=sys.stderr)
            return EXIT_UNJUDGED
        nights = nights[ids.index(args.accept):]
        phase1 = nights[:args.nights]
        args.replace = True
    else:
        phase1 = nights[-args.nights:]
    if len(phase1) < args.nights:
        print(f'ibrepro charts: {len(phase1)} night(s) stored for {args.system}'
              f'{f" from {args.accept}" if args.accept else ""}, {args.nights} asked', file=sys.stderr)
        return EXIT_NOT_YET
    path = baseline_path(args.system)
    if path.exists() and not args.replace:
        print(f'ibrepro charts: {path} exists (a frozen baseline): --replace to accept a new one', file=sys.stderr)
        return EXIT_UNJUDGED
    doc = charts.freeze(phase1, rate=args.rate, series=args.series, mean_block=args.mean_block)
    if not doc['charts']:
        print('ibrepro charts: no chart: no case with size bands measured in these nights', file=sys.stderr)
        return EXIT_UNJUDGED
    baseline, by_chart = charts.Baseline.from_json(doc)
    keys = sorted(by_chart)
    designs, replayed = [by_chart[key] for key in keys], doc['predicted_rate']
    for key, design in zip(keys, designs):
        if max(design.h, design.z_big) >= charts.MAX_LIMIT:
            print(f'ibrepro charts: warning: {key[0]} | {key[1]}: even h = {design.h} and z_big = {design.z_big} '
                  'cannot keep it to its share of the false alarms: its nights are too heavy-tailed for the chart '
                  'to promise the rate', file=sys.stderr)
    if replayed > args.rate:
        print(f'ibrepro charts: warning: the charts together alarm on {replayed:.1%} of the replayed nights (asked: '
              f'at most {args.rate:g})', file=sys.stderr)
    described = charts.describe(baseline, phase1, designs, series=args.series,
                                mean_block=doc['replay']['mean_block'])
    doc['mde'] = {f'{row["case"]}|{row["band"]}': row['mde'] for row in described}
    write_private(path, json.dumps(doc, indent=1, sort_keys=True) + '\n')
    print(f'charts of {args.system}: Phase I = {len(phase1)} nights ({phase1[0]["night"]} .. {phase1[-1]["night"]}),'
          f' {replayed:.2%} false alarms per night predicted, system-wide (replayed in blocks of '
          f'{doc["replay"]["mean_block"]:g} nights on average, plus the fitted tails; asked: at most {args.rate:g})')
    kinds = sorted({json.dumps(h, sort_keys=True) for found in baseline.hardware.values() for h in found})
    for kind in kinds:          # what the baseline describes: a night on other hardware is not judged against it
        print('hardware of Phase I: ' + ', '.join(f'{k} {v}' for k, v in json.loads(kind).items()))
    if len(kinds) > 1:
        print(f'ibrepro charts: warning: Phase I ran on {len(kinds)} kinds of hardware: their nights are pooled',
              file=sys.stderr)
    print('case | band | noise (robust sd) | h | z_big | caught within 1 / 3 / 10 nights (90 %)')
    for row in described:
        mde = ' / '.join(_pct(row['mde'][d]) for d in ('1', '3', '10'))
        print(f'{row["case"]} | {row["band"]} | {_pct(row["s0"])} | {row["h"]:g} | {row["z_big"]:g} | {mde}')
    print(f'written: {path}')
    return EXIT_CLEAN


def judge(system, db=None, night=None):
    """``(status, lines)``: the charts of ``system`` over its stored nights since its frozen baseline, as of its
    newest night (or of ``night``: status None when that night measured nothing of the system). A chart *alarms*
    when its CUSUM reaches ``h`` or one night's z reaches ``z_big``; it stays in alarm while the nights since are
    still shifted (their median z at least ``k``: the regression is there), and is *back* once they return.
    Status: :data:`EXIT_ALARM` a chart in alarm, :data:`EXIT_UNJUDGED` the baseline or data cannot be read or the
    night is excluded on every chart (nothing measured it), :data:`EXIT_NOT_YET` no baseline, else
    :data:`EXIT_CLEAN`."""
    try:
        path = baseline_path(system)
    except ValueError as err:
        return EXIT_UNJUDGED, [f'charts: could not judge: {err}']
    if not path.exists():
        return EXIT_NOT_YET, [f'charts of {system}: not judged yet: no baseline (ibrepro charts baseline --nights N)']
    try:
        baseline, designs = load(system)
    except (OSError, ValueError) as err:
        return EXIT_UNJUDGED, [f'charts of {system}: could not judge: {path}: {err}']
    problems = []
    try:
        nights = stored_nights(system, db=db, problems=problems)
    except results.ResultsError as err:
        return EXIT_UNJUDGED, [f'charts of {system}: could not judge: {err}']
    status, lines = judge_nights(system, baseline, designs, nights, night=night, stated=stated_mde(system))
    return status, [f'charts of {system}: warning: {p}' for p in problems] + lines


def judge_nights(system, baseline, designs, nights, night=None, stated=None):
    """:func:`judge` on ``nights`` (ledger records, oldest first: Phase I's and the ones since), with the
    baseline and designs it would load; ``stated``: the detectable effects the baseline stated."""
    stated = stated or {}
    phase1 = set(baseline.nights)
    after = [n for n in nights if n['night'] not in phase1]
    if night is not None:       # as of that night (ibrepro nightly judges its own night, not a later one)
        ids = [n['night'] for n in after]
        if night not in ids:
            return None, [f'charts of {system}: night {night} has none of its cases']
        after = after[:ids.index(night) + 1]
    lines = [f'charts of {system}: {len(after)} night(s) since the baseline of {len(baseline.nights)} nights']
    if not after:
        return EXIT_CLEAN, lines
    series = baseline.series(after)
    keys, rows, scales = charts.rows_of(baseline, after)
    status, measured = EXIT_CLEAN, False
    located, otava_note = _changes(baseline, [n for n in nights if n['night'] in phase1], after, keys)
    for c, key in enumerate(keys):
        zs = [row[c] for row in rows]
        measured = measured or zs[-1] is not None
        design = designs[key]
        path_, at, kind = charts.run_chart(zs, scales[c], design)
        name = f'{key[0]} | {key[1]}'
        if at is not None:
            since = [z for z in zs[at:] if z is not None]
            shifted = statistics.median(since)
            moved = math.expm1(shifted * scales[c])
            if shifted >= design.k_and_clip(scales[c])[0]:
                status = EXIT_ALARM
                how = 'one night beyond the limit' if kind == 'jump' else 'evidence across nights'
                began = [p for p in located.get(key, []) if p['at'] <= at]
                where = (f'; Otava: it began at night {began[-1]["night"]} ({began[-1]["change"]:+.1%}), to accept '
                         f'it: ibrepro charts baseline --accept {began[-1]["night"]} --nights {len(baseline.nights)}'
                         if began else f'; Otava: {otava_note or "no change point yet"}')
                lines.append(f'REGRESSION {name}: since {after[at]["night"]} ({how}), {moved:+.1%} over the '
                             f'{len(since)} night(s) since{where}')
            else:
                lines.append(f'back {name}: alarmed at {after[at]["night"]}, the nights since are back ({moved:+.1%})')
            continue
        tonight = series[key][-1]
        if tonight.value is None:
            lines.append(f'excluded {name}: {tonight.excluded}')
        else:
            can = stated.get(f'{key[0]}|{key[1]}') or {}
            catch = ' / '.join(_pct(can.get(d)) if isinstance(can.get(d), (int, float)) else '-'
                               for d in ('1', '3', '10'))
            lines.append(f'ok {name}: tonight z {zs[-1]:+.2f}, evidence {path_[-1] / design.h:.0%} of an alarm '
                         f'(catches {catch} within 1 / 3 / 10 nights)')
    moved = _other_hardware(baseline, after)
    for case, (why, since) in moved.items():
        lines.append(f'other hardware {case}: night {after[-1]["night"]} ran on other hardware than the baseline '
                     f'({why}): not judged against it; once its nights there are known clean, a person accepts it: '
                     f'ibrepro charts baseline --accept {since} --nights {len(baseline.nights)}')
    if moved and status != EXIT_ALARM:
        status = EXIT_UNJUDGED
    for key in keys:            # the retrospective view: every change Otava finds since the baseline
        lines += [f'change {key[0]} | {key[1]}: Otava finds a change at night {p["night"]} ({p["change"]:+.1%}, '
                  f'p = {p["pvalue"]:.2g})' for p in located.get(key, [])]
    if not measured:            # a standing regression stays one; otherwise nothing says the night was clean
        lines.append(f'charts of {system}: could not judge night {after[-1]["night"]}: no chart measured it')
        status = EXIT_ALARM if status == EXIT_ALARM else EXIT_UNJUDGED
    return status, lines


def _other_hardware(baseline, after):
    """``{case: (how its hardware differs, the first night of the run of nights on it)}`` for the cases whose newest
    night in ``after`` ran on hardware the baseline's Phase I did not."""
    moved = {}
    tonight = after[-1]['cases']
    for case, rec in tonight.items():
        why = baseline.other_hardware(case, rec) if case in baseline.levels else ''
        if not why:
            continue
        here = ledger.hardware_of(rec.get('hardware'))
        since = after[-1]['night']
        for n in reversed(after[:-1]):
            if ledger.hardware_of((n['cases'].get(case) or {}).get('hardware')) != here:
                break
            since = n['night']
        moved[case] = (why, since)
    return moved


def _changes(baseline, phase1, after, keys):
    """``({chart key: [{'night', 'at' (index in after), 'change', 'pvalue'}]}, note)``: Otava's change points since
    the baseline in each chart's night values (Phase I's nights, then ``after``); the note says why there are none
    (Otava not installed or failed), '' when it ran."""
    if not after or changepoints.otava_python() is None:
        return {}, 'not installed (make otava)' if after else ''
    values = baseline.series(phase1 + after)
    try:
        found = changepoints.locate([[v.value for v in values[key]] for key in keys])
    except changepoints.OtavaError as err:
        return {}, str(err)
    located = {}
    for key, points in zip(keys, found):
        for p in points if isinstance(points, list) else []:
            at = p['index'] - len(phase1)
            if at >= 0:
                located.setdefault(key, []).append({'night': after[at]['night'], 'at': at, 'pvalue': p['pvalue'],
                                                    'change': math.expm1(p['after'] - p['before'])})
    return located, ''


def judge_night(night, db=None):
    """``(status, lines)`` of every system with a chart baseline that measured ``night`` (``ibrepro nightly``);
    status None when no system has one."""
    folder = paths.data_home() / 'charts'
    found, lines = [], []
    for path in sorted(folder.glob('*.json')) if folder.is_dir() else []:
        if path.name.startswith('.'):       # a temporary file of write_private
            continue
        status, more = judge(path.stem, db=db, night=night)
        lines += more
        if status is not None:
            found.append(status)
    if not found:
        return None, lines
    return max(found, key=lambda s: {EXIT_ALARM: 3, EXIT_UNJUDGED: 2, EXIT_NOT_YET: 1, EXIT_CLEAN: 0}[s]), lines


def cmd_status(args):
    status, lines = judge(args.system)
    for line in lines:
        print(line)
    return status


def add_cli(subparsers):
    p = subparsers.add_parser('charts', help='the nightly charts: a frozen baseline of stated nights, their status',
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='charts_command', metavar='ACTION')
    b = sub.add_parser('baseline', help='Phase I: the last N nights become the frozen baseline (calibrated)')
    b.add_argument('--system', default='local')
    b.add_argument('--nights', type=int, required=True, help='the last N stored nights, stated clean')
    b.add_argument('--ledger', type=Path, help='a ledger of nights instead of the results database')
    b.add_argument('--rate', type=float, default=charts.RATE,
                   help=f'false alarms per night, system-wide (default {charts.RATE:g})')
    b.add_argument('--series', type=int, default=200, help='bootstrap series of the replay (default 200)')
    b.add_argument('--mean-block', type=float, help='the replay\'s mean block of consecutive nights (default: '
                   'from the nights\' own persistence, the Politis-White rule)')
    b.add_argument('--replace', action='store_true', help='replace the frozen baseline (a person accepts a change)')
    b.add_argument('--accept', metavar='NIGHT', help='accept the change that started at NIGHT: Phase I is the N '
                   'nights from it (replaces the baseline)')
    b.set_defaults(func=cmd_baseline)
    s = sub.add_parser('status', help='the charts over the nights since the baseline')
    s.add_argument('--system', default='local')
    s.set_defaults(func=cmd_status)
    p.set_defaults(func=lambda args: p.print_help() or 2)

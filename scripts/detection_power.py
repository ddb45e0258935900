"""What the nightly verdict catches, measured: controlled slowdowns injected into real runs, judged the way a site's
night is judged (``ibrepro nightly``: the history test, the confirmation re-run, the noise guard).

    .venv/bin/python scripts/detection_power.py --cases 'IMBPointToPoint%benchmark=PingPong%layout=1x2' \\
        --environ impi --history 20 --nights 10 --levels 5 10 20 --json power.json [-- REFRAME OPTIONS]

For each test case (``--cases``: ReFrame ``-n`` patterns, one test case each), in a results database of its own:

1. **History**: ``--history`` K nights without injection (``reframe --mode nightly``, one session each).
2. **Calibration**: per level L (``--levels``, percent), the injection (``-S inject_pct=P``, or ``inject_us`` with
   ``--inject us``) that makes the test case L % slower: its *index* (the median over its variables of the log
   change from their history medians, in the worse direction; what the history test judges) is measured and P is
   adjusted until the slowdown is within ``--tolerance`` points of L (at most ``--calibration-tries`` runs, kept out
   of the history). The injector's overshoot under load makes the asked and the real slowdown differ, so the level is
   always the one measured.
3. **Nights**: ``--nights`` N injected nights per level and as many clean nights (``--clean-nights``), interleaved in
   a shuffled order (``--seed``), each one ``ibrepro nightly`` (run, judge, re-run the suspects, judge): detected =
   exit 1, inconclusive = exit 3 (never a detection), could not judge = exit 2; a night whose check failed in
   ReFrame or that measured nothing (a refused knob, a broken run) is *check failed*, whatever the exit status (a
   failed check exits 1): never a detection nor a false alarm, counted and shown, and a miss in the detection
   rate (:func:`outcome`). An injected night's sessions (the
   night and its confirmation) are deleted after its verdict, so that the history stays clean, as it would after a
   regression was fixed; clean nights stay and grow the history, as at a site.
4. **Change points** (``--otava``): Apache Otava (E-Divisive means, ``apache-otava`` in its own virtual environment
   under ``.deps/otava``) on the same test-case index series: its false alarms on the clean nights (a change point
   among the newest 3 nights), and the nights until it finds a step made of each level's injected nights in a row,
   beside the history test's.

Per level it prints and writes (``--json``): the slowdown really injected (``injected_ratio``: 1 + the median of the
injected nights' measured slowdown), nights detected, inconclusive and unjudged, false alarms and inconclusive clean
nights, each rate with its two-sided 95 % Clopper-Pearson interval, and the wall time of a night (clean and
injected, confirmations included).
"""

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ibrepro import changepoints, parsers, paths, results, stats, verdict

BIN = Path(sys.executable).parent


def log(text):
    print(text, flush=True)


# -- running ------------------------------------------------------------------------------------------

def reframe(args, home, options, logfile):
    """One ReFrame session of the test case; its exit status (output to ``logfile``)."""
    command = [str(BIN / 'reframe'), '-C', args.config, '-c', str(paths.REPO_ROOT / 'reframe-checks'), '-r',
               '-n', args.case, '-p', f'^{args.environ}$', *options, *args.reframe_options]
    with open(logfile, 'a') as out:
        return subprocess.run(command, env=_env(home), stdout=out, stderr=subprocess.STDOUT).returncode


def nightly(args, home, night, options, logfile):
    """One night through ``ibrepro nightly``: ``(exit status, wall seconds)``."""
    command = [sys.executable, '-m', 'ibrepro.cli', 'nightly', '-C', args.config, '--night', night,
               '--output-dir', str(Path(home) / 'reports'), '--',
               '-n', args.case, '-p', f'^{args.environ}$', *options, *args.reframe_options]
    started = time.monotonic()
    with open(logfile, 'a') as out:
        status = subprocess.run(command, env=_env(home), stdout=out, stderr=subprocess.STDOUT).returncode
    return status, time.monotonic() - started


def _env(home):
    return {**os.environ, 'IBREPRO_HOME': str(home), 'RFM_SQLITE_DB_FILE': str(Path(home) / 'results.db')}


def sessions_of(home, night):
    """The run reports stored for ``night`` (its ``nightly`` extra): the night first, then its confirmations."""
    db = Path(home) / 'results.db'
    rows = [row for row in results.session_index(db) if row[3] == night]
    reports = results.sessions_by_uuid([row[0] for row in rows], db)
    return sorted(reports, key=lambda r: bool(r['session_info'].get('confirms')))


def delete_night(args, home, night, logfile):
    with open(logfile, 'a') as out:
        for report in sessions_of(home, night):
            subprocess.run([str(BIN / 'reframe'), '-C', args.config, '--delete-stored-sessions',
                            report['session_info']['uuid']], env=_env(home), stdout=out, stderr=subprocess.STDOUT,
                           check=True)


# -- the test-case index ---------------------------------------------------------------------------------

def case_values(report):
    """{variable: value} of the test case in one run report (its only test case)."""
    return {pv.variable: pv.value for pv in results.perf_values(report)}


def centers(history):
    """{variable: median over the history's sessions}."""
    values = {}
    for report in history:
        for name, value in case_values(report).items():
            values.setdefault(name, []).append(value)
    return {name: statistics.median(xs) for name, xs in values.items() if len(xs) >= len(history) / 2}


def slowdown(report, center):
    """The test case's index against ``center`` as a relative slowdown (0.10 = 10 % slower), or None."""
    devs = []
    for name, value in case_values(report).items():
        better = parsers.METRIC_BETTER.get(name.rsplit('_', 1)[0])
        if better and name in center and value > 0 and center[name] > 0:
            devs.append((-1 if better == 'higher' else 1) * math.log(value / center[name]))
    return math.expm1(statistics.median(devs)) if devs else None


# -- the harness -----------------------------------------------------------------------------------------

def history_noise(history, series):
    """What the noise guard and the history test see in the clean history: the standard deviation of the nights'
    test-case index, and the quartiles of the repetitions' spread and of the CPU pressure."""
    def quartiles(xs):
        xs = sorted(x for x in xs if isinstance(x, (int, float)))
        return [round(statistics.quantiles(xs, n=4)[i], 4) for i in range(3)] if len(xs) >= 4 else xs
    cases = [c for r in history for c in results.testcases(r)]
    logs = [math.log1p(x) for x in series if x is not None]
    return {'index_sd': statistics.stdev(logs) if len(logs) > 1 else 0.0,
            'spread': quartiles(c.get('repetition_spread') for c in cases),
            'cpu_pressure': quartiles(c.get('cpu_pressure') for c in cases)}


def calibrate(args, home, level, center, logfile):
    """The injection that makes the case ``level`` % slower: ``(amount, measured slowdown, trace)``."""
    amount = float(level) if args.inject == 'pct' else args.start_us * level / 10
    trace, best = [], None
    with tempfile.TemporaryDirectory(prefix='ibrepro-calibration-') as scratch:
        for attempt in range(args.calibration_tries):
            night = f'calibration-{level}-{attempt}'
            status = reframe(args, scratch, ['--mode', 'nightly', f'--session-extras=nightly={night}',
                                             '-S', f'inject_{args.inject}={amount:.6g}'], logfile)
            reports = sessions_of(scratch, night) if status == 0 else []
            measured = slowdown(reports[0], center) if reports else None
            trace.append({'inject': round(amount, 6), 'measured': measured, 'status': status})
            log(f'  calibration {level} %: inject_{args.inject}={amount:.4g} -> '
                + (f'{measured:+.1%}' if measured is not None else f'no value (exit {status})'))
            if measured is None:
                break
            if best is None or abs(measured * 100 - level) < abs(best[1] * 100 - level):
                best = (amount, measured)
            if abs(measured * 100 - level) <= args.tolerance:
                break
            # the slowdown grows about linearly with the injection: scale it (bounded steps)
            amount *= min(4.0, max(0.25, level / max(measured * 100, 0.1)))
    return (best[0], best[1], trace) if best else (amount, None, trace)


#: ``ibrepro nightly``'s exit status -> what a night that ran and measured says.
_BY_STATUS = {verdict.EXIT_REGRESSION: 'detected', verdict.EXIT_CLEAN: 'missed',
              verdict.EXIT_INCONCLUSIVE: 'inconclusive', verdict.EXIT_UNJUDGED: 'unjudged'}


def outcome(status, measured, check_failed):
    """What one night of the harness says: 'detected' (exit 1; on a clean night, a false alarm), 'missed' (exit 0),
    'inconclusive' (exit 3), 'unjudged' (exit 2 or anything else), or 'failed': its check failed in ReFrame or it
    measured nothing (``measured`` None: no slowdown was made, so none can be detected), whatever the exit status
    (``ibrepro nightly`` exits 1 on a failed check). A failed night is never a detection."""
    if check_failed or measured is None:
        return 'failed'
    return _BY_STATUS.get(status, 'unjudged')


def night_failed(reports):
    """Whether the night's own session (``reports[0]``, see sessions_of) is missing or has a failed test case."""
    return not reports or any(c.get('result') == 'fail' for c in results.testcases(reports[0]))


def _outcome(o):
    """The outcome of a saved night (nights.json before outcomes were saved: from its status and slowdown)."""
    return o.get('outcome') or outcome(o['status'], o['slowdown'], False)


def rate(count, trials):
    low, high = stats.clopper_pearson(count, trials)
    return {'rate': count / trials if trials else None, 'low95': low, 'high95': high}


def run_case(args, case, results_out):
    args.case = case
    home = Path(args.home or tempfile.mkdtemp(prefix='ibrepro-power-')) / _slug(case)
    home.mkdir(parents=True, exist_ok=True)
    logfile = home / 'harness.log'
    log(f'{case} on {args.environ}: results in {home}')

    options = ['--mode', 'nightly']
    started = time.monotonic()
    saved = home / 'nights.json'
    if args.resume and saved.exists():   # the nights ran: summarise them again (e.g. after Otava failed)
        kept = json.loads(saved.read_text())
        history = [r for k in range(args.history) for r in sessions_of(home, f'history-{k:03d}')]
        injections = {float(k) if '.' in k else int(k): tuple(v) for k, v in kept['injections'].items()}
        series = list(kept['history_series']) + [o['slowdown'] for o in kept['nights'] if o['level'] is None]
        entry = summarise(args, case, centers(history), injections, kept['nights'], series, None)
        entry['history_noise'] = history_noise(history, kept['history_series'])
        results_out.append(entry)
        return
    for k in range(args.history):
        status = reframe(args, home, [*options, f'--session-extras=nightly=history-{k:03d}'], logfile)
        if status:
            sys.exit(f'history night {k} failed (exit {status}): see {logfile}')
    history_wall = (time.monotonic() - started) / max(args.history, 1)
    history = [r for k in range(args.history) for r in sessions_of(home, f'history-{k:03d}')]
    center = centers(history)
    series = [slowdown(r, center) for r in history]      # the index of every clean night, in order
    log(f'  history: {args.history} nights, {history_wall:.1f} s each (ReFrame session, no judging)')
    noise = history_noise(history, series)
    log(f'  history noise: index sd {noise["index_sd"]:.2%}, repetition spread {noise["spread"]}, '
        f'CPU pressure {noise["cpu_pressure"]}')

    injections = {}
    for level in args.levels:
        injections[level] = calibrate(args, home, level, center, logfile)

    plan = [('clean', None)] * args.clean_nights + [(f'L{level}', level) for level in args.levels
                                                     for _ in range(args.nights)]
    random.Random(args.seed).shuffle(plan)
    outcomes = []
    for i, (kind, level) in enumerate(plan):
        night = f'night-{i:03d}-{kind}'
        extra = ['-S', f'inject_{args.inject}={injections[level][0]:.6g}'] if level else []
        status, wall = nightly(args, home, night, extra, logfile)
        reports = sessions_of(home, night)
        measured = slowdown(reports[0], center) if reports else None
        confirmed = len(reports) > 1
        added = next(iter(results.testcases(reports[0])), {}).get('inject_added') if reports else None
        outcomes.append({'night': night, 'level': level, 'status': status, 'wall_s': round(wall, 1),
                         'slowdown': measured, 'confirmation': confirmed,
                         'outcome': outcome(status, measured, night_failed(reports)),
                         'inject_overshoot': (added or {}).get('overshoot') if level else None})
        log(f'  {night}: exit {status} ({outcomes[-1]["outcome"]})'
            + (f', slowdown {measured:+.1%}' if measured is not None else '')
            + (', confirmation re-run' if confirmed else '') + f', {wall:.0f} s')
        (home / 'nights.json').write_text(json.dumps({'history_series': series[:args.history],
                                                      'injections': injections, 'nights': outcomes}, indent=1))
        if level:
            delete_night(args, home, night, logfile)
        else:
            series.append(measured)
    entry = summarise(args, case, center, injections, outcomes, series, history_wall)
    entry['history_noise'] = noise
    results_out.append(entry)


def summarise(args, case, center, injections, outcomes, series, history_wall):
    clean = [o for o in outcomes if o['level'] is None]
    entry = {'case': case, 'environ': args.environ, 'history': args.history, 'variables': len(center),
             'clean_nights': len(clean),
             'false_alarms': sum(_outcome(o) == 'detected' for o in clean),
             'clean_inconclusive': sum(_outcome(o) == 'inconclusive' for o in clean),
             'clean_unjudged': sum(_outcome(o) == 'unjudged' for o in clean),
             'clean_failed': sum(_outcome(o) == 'failed' for o in clean),
             'clean_confirmations': sum(o['confirmation'] for o in clean),
             'night_wall_s': _median([o['wall_s'] for o in clean]),
             'history_night_wall_s': round(history_wall, 1) if history_wall else None,
             'levels': [], 'nights': outcomes}
    entry['false_alarm_rate'] = rate(entry['false_alarms'], len(clean))
    for level in args.levels:
        mine = [o for o in outcomes if o['level'] == level]
        measured = [o['slowdown'] for o in mine if o['slowdown'] is not None]
        amount, calibrated, trace = injections[level]
        row = {'level': level, 'inject': f'inject_{args.inject}={amount:.4g}', 'calibrated_slowdown': calibrated,
               'calibration': trace,
               'injected_ratio': round(1 + statistics.median(measured), 4) if measured else None,
               'inject_overshoot': _median([o['inject_overshoot'] for o in mine
                                            if o['inject_overshoot'] is not None], 4),
               'nights': len(mine), 'detected': sum(_outcome(o) == 'detected' for o in mine),
               'inconclusive': sum(_outcome(o) == 'inconclusive' for o in mine),
               'unjudged': sum(_outcome(o) == 'unjudged' for o in mine),
               'failed': sum(_outcome(o) == 'failed' for o in mine),   # a miss in the rate, shown on its own
               'clean_nights': len(clean), 'false_alarms': entry['false_alarms'],
               'night_wall_s': _median([o['wall_s'] for o in mine])}
        row['detection_rate'] = rate(row['detected'], len(mine))
        if args.otava:
            row['otava'] = otava_step(series[:args.history], measured, args)
        entry['levels'].append(row)
    if args.otava:
        entry['otava_false_alarms'] = otava_clean(series, args)
    return entry


def _median(xs, digits=1):
    return round(statistics.median(xs), digits) if xs else None


def _slug(text):
    return ''.join(c if c.isalnum() else '_' for c in text).strip('_')[:80]


# -- Apache Otava on the same series ------------------------------------------------------------------------

def otava_change_points(series_list, args):
    """Otava's change points (indexes) of each series (log slowdowns), or a string where it could not split one."""
    if changepoints.otava_python() is None:
        changepoints.install()
    found = changepoints.locate([[math.log1p(x) for x in s] for s in series_list], window=args.otava_window,
                                max_pvalue=args.otava_pvalue)
    return [points if isinstance(points, str) else [p['index'] for p in points] for points in found]


def otava_clean(series, args):
    """Clean nights on which Otava saw a change point among the newest 3 nights: its false alarms."""
    series = [x for x in series if x is not None]
    nights = list(range(args.history, len(series)))
    found = otava_change_points([series[:j + 1] for j in nights], args) if nights else []
    failed = [points for points in found if isinstance(points, str)]
    alarms = sum(any(p >= j - 2 for p in points) for j, points in zip(nights, found) if not isinstance(points, str))
    return {'clean_nights': len(nights) - len(failed), 'false_alarms': alarms, 'otava_errors': failed[:3],
            **rate(alarms, len(nights) - len(failed))}


def otava_step(history, injected, args):
    """Nights until Otava finds a step made of ``injected`` nights in a row after the clean ``history``."""
    history = [x for x in history if x is not None]
    if not injected:
        return None
    prefixes = [history + injected[:m] for m in range(1, len(injected) + 1)]
    found = otava_change_points(prefixes, args)
    start = len(history)
    first = next((m for m, points in enumerate(found, 1)
                  if not isinstance(points, str) and any(abs(p - start) <= 1 for p in points)), None)
    return {'nights_until_detection': first, 'detected_first_night': first == 1, 'step_nights': len(injected),
            'otava_errors': [p for p in found if isinstance(p, str)][:3]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--from-ledger', metavar='FILE', type=Path,
                        help='no run: every table from the ledger of real nights (docs/verdict-protocol.md), offline')
    parser.add_argument('--phase1-first', metavar='NIGHT', help='--from-ledger: Phase I starts at this tuning night '
                        '(default: the first)')
    parser.add_argument('--phase1', type=int, metavar='N', help='--from-ledger: the first N clean tuning nights are '
                        'Phase I (default: every tuning night)')
    parser.add_argument('--rate', type=float, default=None, help='--from-ledger: the false alarms per night, '
                        'system-wide, the charts are calibrated to (default: ibrepro.charts.RATE)')
    parser.add_argument('--mean-block', type=float, default=None, help='--from-ledger: the replay\'s mean block of '
                        'consecutive nights (default: from Phase I\'s persistence)')
    parser.add_argument('--freeze', metavar='FILE', type=Path, help='--from-ledger: write Phase I\'s frozen baseline '
                        'and designs (the pre-registered reference) to FILE, which must not exist, and stop')
    parser.add_argument('--frozen', metavar='FILE', type=Path, help='--from-ledger: judge with the frozen reference '
                        'in FILE (--freeze) instead of fitting Phase I again')
    parser.add_argument('--cases', nargs='+', metavar='NAME', help='ReFrame -n patterns, one case each')
    parser.add_argument('--environ', default='impi', help='programming environment (default impi)')
    parser.add_argument('-C', '--config', default=str(paths.REPO_ROOT / 'configs' / 'local.py'))
    parser.add_argument('--history', type=int, default=20, metavar='K', help='clean history nights (default 20)')
    parser.add_argument('--nights', type=int, default=10, metavar='N', help='injected nights per level (default 10)')
    parser.add_argument('--clean-nights', type=int, metavar='C', help='clean nights (default: N x levels)')
    parser.add_argument('--levels', type=float, nargs='+', default=[5, 10, 20], metavar='PCT')
    parser.add_argument('--inject', choices=['pct', 'us'], default='pct', help='inject_pct (default) or inject_us')
    parser.add_argument('--start-us', type=float, default=0.05, help='inject_us to try first for 10 %% (--inject us)')
    parser.add_argument('--tolerance', type=float, default=2.0, help='calibration: points from the level (default 2)')
    parser.add_argument('--calibration-tries', type=int, default=5)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--home', help='keep the harness\'s databases here (default: a new temporary directory)')
    parser.add_argument('--otava', action='store_true', help='compare with Apache Otava (E-Divisive) on the series')
    parser.add_argument('--otava-window', type=int, default=30)
    parser.add_argument('--otava-pvalue', type=float, default=0.001)
    parser.add_argument('--json', metavar='FILE', help='write the results as JSON')
    parser.add_argument('--resume', action='store_true',
                        help='summarise the nights a previous run with the same --home saved (nights.json) again')
    parser.add_argument('reframe_options', nargs=argparse.REMAINDER, help='-- options for every ReFrame run (-S ...)')
    args = parser.parse_args()
    if args.from_ledger:
        from ibrepro import charts, ledger
        args.rate = charts.RATE if args.rate is None else args.rate
        try:
            nights = ledger.read(args.from_ledger)
            if args.freeze:
                if args.freeze.exists():
                    raise ValueError(f'{args.freeze} exists: a frozen reference is never overwritten')
                phase1 = charts.phase1_nights(nights, phase1=args.phase1, first=args.phase1_first)
                doc = charts.freeze(phase1, rate=args.rate, seed=args.seed, mean_block=args.mean_block)
                args.freeze.write_text(json.dumps(doc, indent=1) + '\n')
                print(f'froze Phase I ({phase1[0]["night"]}-{phase1[-1]["night"]}, {len(phase1)} nights) in '
                      f'{args.freeze}: predicted {doc["predicted_rate"]:.4f} false alarms per night')
                return 0
            frozen = json.loads(args.frozen.read_text()) if args.frozen else None
            if frozen is not None:
                try:
                    charts.Baseline.from_json(frozen)
                except ValueError as err:
                    raise ValueError(f'{args.frozen}: not a frozen reference: {err}') from None
            output = charts.study(nights, phase1=args.phase1, first=args.phase1_first, frozen=frozen,
                                  rate=args.rate, seed=args.seed, mean_block=args.mean_block, otava=args.otava)
        except (ledger.LedgerError, ValueError, OSError) as err:
            print(f'detection_power.py: {err}', file=sys.stderr)
            return 2
        text = json.dumps(output, indent=1)
        print(text)
        if args.json:
            Path(args.json).write_text(text + '\n')
        return 0
    if not args.cases:
        parser.error('--cases is required (or --from-ledger)')
    if args.reframe_options[:1] == ['--']:
        args.reframe_options = args.reframe_options[1:]
    # every run preloads the injector, the clean ones with nothing to add: a level is the injected cost alone
    args.reframe_options = [*args.reframe_options, '-S', 'inject_preload=true']
    if args.clean_nights is None:
        args.clean_nights = args.nights * len(args.levels)
    args.levels = [int(x) if float(x).is_integer() else x for x in args.levels]

    found = []
    for case in args.cases:
        run_case(args, case, found)
    output = {'harness': {k: v for k, v in vars(args).items() if k not in ('case',)}, 'cases': found,
              'levels': combined_levels(found, args.levels)}
    print_table(output)
    if args.json:
        Path(args.json).write_text(json.dumps(output, indent=1) + '\n')
    return 0


def combined_levels(cases, levels):
    """Per level over every case: the JSON the issue asks for (``levels``: level, injected_ratio, nights, detected,
    clean_nights, false_alarms, night_wall_s, ...)."""
    rows = []
    for level in levels:
        mine = [row for case in cases for row in case['levels'] if row['level'] == level]
        nights, detected = sum(r['nights'] for r in mine), sum(r['detected'] for r in mine)
        clean = sum(c['clean_nights'] for c in cases)
        alarms = sum(c['false_alarms'] for c in cases)
        ratios = [r['injected_ratio'] for r in mine if r['injected_ratio']]
        rows.append({'level': level, 'injected_ratio': round(statistics.median(ratios), 4) if ratios else None,
                     'nights': nights, 'detected': detected, 'detection': rate(detected, nights),
                     'inconclusive': sum(r['inconclusive'] for r in mine),
                     'failed': sum(r.get('failed', 0) for r in mine),
                     'clean_nights': clean, 'false_alarms': alarms, 'false_alarm': rate(alarms, clean),
                     'night_wall_s': round(sum(c['night_wall_s'] or 0 for c in cases), 1),
                     'per_case': [{'case': c['case'], **{k: r[k] for k in ('injected_ratio', 'detected', 'nights',
                                                                           'inconclusive')},
                                   'otava': r.get('otava')}
                                  for c in cases for r in c['levels'] if r['level'] == level]})
    return rows


def print_table(output):
    def pct(r):
        return '-' if r['rate'] is None else f'{r["rate"]:.0%} [{r["low95"]:.0%}, {r["high95"]:.0%}]'
    print('\nlevel | injected | detected | inconclusive | check failed (a miss) | false alarms (clean nights) | '
          'night wall')
    for row in output['levels']:
        print(f'{row["level"]} % | {row["injected_ratio"]} | {row["detected"]}/{row["nights"]} {pct(row["detection"])}'
              f' | {row["inconclusive"]} | {row["failed"]} | {row["false_alarms"]}/{row["clean_nights"]} '
              f'{pct(row["false_alarm"])} | {row["night_wall_s"]} s')


if __name__ == '__main__':
    sys.exit(main())

"""How often the history test cries wolf: replay a results database of unperturbed runs, night by night.

    .venv/bin/python scripts/history_false_alarms.py [--db FILE] [--system local] [--window 30] [--min-history 8]

Every stored run that has at least --min-history runs before it is tested as `ibrepro report --nightly` would
have tested it the night it ran: against up to --window runs before it (the same `report.build`, plots left out).
Meant for a database where nothing changed between runs (a quiet machine, the same software), so that every
alarm is a false one. Prints one line per night, then the rates: test-case alarms per test case and night (what
`--nightly` exits 1 on) and single variables flagged as regressions per tested variable and night.
Consecutive nights share most of their baseline, so the nights are not independent trials.
"""

import argparse
import math

from ibrepro import plots, report, results, stats
from ibrepro.report import cli as report_cli


def upper_bound(failures, trials, confidence=0.95):
    """One-sided upper confidence bound of a rate (Clopper-Pearson; with no failures, 1 - (1 - c)^(1/n)): the upper
    end of the two-sided interval at 2c - 1."""
    if trials == 0:
        return math.nan
    return stats.clopper_pearson(failures, trials, 2 * confidence - 1)[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--db', help='results database (default: ibrepro where)')
    parser.add_argument('--system', default='local')
    report_cli.add_method_arguments(parser)
    args = parser.parse_args()
    method = report_cli.method_of(args)

    # counting alarms needs no pictures
    plots.trend = plots.paper_figure = lambda *a, **k: ''

    index = [row for row in results.session_index(args.db) if args.system in row[2]]
    reports = results.sessions_by_uuid([row[0] for row in index], args.db)
    runs = {}
    for r in reports:
        runs.setdefault(report.run_id(r), []).append(r)
    runs = list(runs.values())
    print(f'{len(reports)} sessions, {len(runs)} runs of {args.system}; window {method.window}, '
          f'min-history {method.min_history}, alpha {method.alpha}, min-effect {method.min_effect}')

    nights = case_trials = case_alarms = var_trials = var_flags = nights_alarmed = 0
    for i in range(method.min_history + method.confirm - 1, len(runs)):
        # the tested runs (the newest --confirm) and up to --window before them
        history = [r for run in runs[max(0, i + 1 - method.confirm - method.window):i + 1] for r in run]
        tested = [r for run in runs[i + 1 - method.confirm:i + 1] for r in run]
        model = report.build(args.system, tested, results.History.of(history, system=args.system), method)
        cases = [g for g in model['groups'] if g['shift'].verdict != 'untested']
        flagged = [r for r in model['flagged'] if r['shift'].verdict == 'regression']
        alarms = model['group_alarms']
        nights += 1
        case_trials += len(cases)
        case_alarms += len(alarms)
        var_trials += model['tested']
        var_flags += len(flagged)
        nights_alarmed += bool(alarms or model['alarms'])
        when = runs[i][0]['session_info'].get('time_start', '?')
        print(f'night {i + 1:4d} {when}: {len(cases)} test case(s), {len(alarms)} alarm(s)'
              + ''.join(f' [{g["name"]} {g["shift"].change:+.0%} q={g["shift"].q:.2g}]' for g in alarms)
              + f'; {len(flagged)} of {model["tested"]} variables flagged')

    if not nights:
        print(f'nothing tested: fewer than {method.min_history + 1} runs')
        return 1
    print(f'\nnights tested: {nights}; nights with an alarm: {nights_alarmed} '
          f'(95 % upper bound {upper_bound(nights_alarmed, nights):.1%})')
    print(f'test-case alarms: {case_alarms} of {case_trials} '
          f'(95 % upper bound {upper_bound(case_alarms, case_trials):.1%})')
    print(f'single variables flagged as regressions: {var_flags} of {var_trials} ({var_flags / var_trials:.2%})')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())

#!/usr/bin/env python3
"""Collect real nights into the ledger (:mod:`ibrepro.ledger`): the measurement behind the nightly verdict's
calibration, false-alarm and detection figures (docs/verdict-protocol.md).

    .venv/bin/python scripts/campaign.py --ledger reference-data/ledger/vm-impi-1x2.jsonl --phase tuning \\
        --prefix t --nights 100

Each night is what the nightly ships for the cases (``reframe --mode nightly``: the bands' sizes, its rounds each
with the control before it, ``ibrepro.bands.NIGHT``), one ReFrame session in a results database of the campaign's
own (``--home``), stored in the ledger as one line, whatever happened (a failed case is kept with its reason).
Night ids are ``<prefix><number>``; a campaign resumes after the last night of its prefix in the ledger. While the
file ``--pause-file`` exists it waits between nights (to measure alone, pause it before loading the machine).
``--until HH:MM`` (UTC) stops before a night would start later. Run measurements alone on the machine: each night
records the CPU time other processes used beside it (:mod:`ibrepro.alone`; a night over the limit is kept and left
out of the study), and the next night waits until nothing else has run for ``--settle`` seconds (a scheduled night
that was not alone is measured again, as ``<id>.r1``, ...).

``--schedule FILE``: the nights a pre-registered schedule names (docs/verdict-protocol.md section 8: a JSON
``{"seed": S, "clean": N, "episodes": [{"name": "u10", "case": PATTERN, "level": 10, "inject_pct": P, "count": 29,
"nights": 2}, ...]}``; an episode may slow one band only: ``"band": "bandwidth", "sizes": "1048576:4194304"``, and
carry its level measured in paired jobs, ``"injected_ratio"``), night ``<prefix><position>`` for each entry,
resuming at the first entry not yet in the ledger; an injected night runs only its episode's case.

``--paired PCT --case NAME``: instead of nights, jobs that measure what an injection really does (the protocol's
levels): one case, ten rounds alternating clean and injected (``-S inject_pct=PCT``, in rounds 2, 4, ..., 10), each
with the control; stored as ledger lines of phase ``level`` (``ibrepro.charts.paired_levels`` reads them).
"""

import argparse
import datetime
import itertools
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

from ibrepro import alone, ledger, paths

CASES = ['IMBPointToPoint%benchmark=PingPong%layout=1x2', 'IMBPointToPoint%benchmark=Uniband%layout=1x2']
CHECKS = paths.REPO_ROOT / 'reframe-checks' / 'mpi' / 'pt2pt_collectives.py'


def night_ids(nights, prefix):
    return [n['night'] for n in nights if n['night'].startswith(prefix) and n['night'][len(prefix):].isdigit()]


PAIRS = 5


def make_schedule(seed, clean, episodes):
    """The held-out schedule: ``clean`` clean nights and, per episode kind, ``count`` episodes of ``nights``
    consecutive injected nights; the units (a clean night, an episode) in the order ``random.Random(seed)`` shuffles
    them, so the clean and the injected nights share the same weeks of drift."""
    units = [[{'kind': 'clean'}] for _ in range(clean)]
    for e in episodes:
        for k in range(e['count']):
            options = ['-S', f'inject_pct={float(e["inject_pct"]):g}']
            if e.get('sizes'):          # a slowdown of one size range (a band), e.g. "1048576:4194304"
                options += ['-S', f'inject_sizes={e["sizes"]}']
            units.append([{'kind': 'injected', 'case': e['case'], 'level': e['level'],
                           **({'band': e['band']} if e.get('band') else {}),
                           **({'injected_ratio': e['injected_ratio']} if e.get('injected_ratio') else {}),
                           'episode': f'{e["name"]}-{k + 1:02d}', 'night_in_episode': j + 1, 'options': options}
                          for j in range(e['nights'])])
    random.Random(seed).shuffle(units)
    return [entry for unit in units for entry in unit]


def paired_schedule(args):
    """The schedule entry and ReFrame options of one paired level job."""
    rounds = ','.join(str(2 * k) for k in range(1, PAIRS + 1))
    return {'kind': 'paired', 'case': args.case, 'inject_pct': args.paired, 'pairs': PAIRS,
            **({'sizes': args.sizes} if args.sizes else {}),
            'options': ['-S', f'repetitions={2 * PAIRS}', '-S', f'inject_pct={args.paired:g}',
                        '-S', f'inject_repetitions={rounds}',
                        *(['-S', f'inject_sizes={args.sizes}'] if args.sizes else [])]}


def run_night(args, night, schedule):
    home = Path(args.home)
    report_file = home / 'night-reports' / f'{night}.json'
    report_file.parent.mkdir(parents=True, exist_ok=True)
    command = [str(Path(sys.executable).parent / 'reframe'), '-C', str(paths.REPO_ROOT / 'configs' / 'local.py'),
               '-c', str(CHECKS), '--mode', 'nightly', '-r', '-p', f'^{args.environ}$',
               *[o for case in ([schedule['case']] if schedule.get('case') else CASES) for o in ('-n', case)],
               f'--report-file={report_file}',
               *schedule.get('options', []), *args.reframe_options]
    env = {**os.environ, 'IBREPRO_HOME': str(home), 'IBREPRO_NIGHTLY': night,
           'RFM_SQLITE_DB_FILE': str(home / 'results.db')}
    load1 = float(Path('/proc/loadavg').read_text().split()[0])
    started, t0 = time.time(), time.monotonic()
    others = alone.Others()
    with open(home / 'campaign.log', 'a') as log:
        status = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - t0
    others_cpu_s = others.seconds()         # after the run was waited for: its time is this process's by then
    try:
        report = json.loads(report_file.read_text())
    except (OSError, ValueError) as err:
        report = {'runs': [{'testcases': [{'display_name': c, 'result': 'fail',
                                           'fail_reason': f'no run report (reframe exit {status}: {err})'}
                                          for c in CASES]}]}
    # the code the night ran is what its checks recorded (the checkout as ReFrame loaded it), not this process's
    # start: the checkout may move on while a campaign runs
    ran = next((c.get('ibrepro_version') for run in report.get('runs') or [] for c in run.get('testcases') or []
                if isinstance(c, dict) and c.get('ibrepro_version')), None)
    return ledger.night_record(report, night, phase=args.phase, schedule=schedule, started=started, wall_s=wall,
                               load1=load1, commit=str(ran or paths.source_version.__wrapped__()),
                               host=socket.gethostname(), machine=ledger.machine_identity(),
                               others_cpu_s=others_cpu_s)


def summary(record):
    parts = []
    for name, case in record['cases'].items():
        short = name.split('%benchmark=')[-1].split()[0]
        pp = [c.get('pingpong_ns') for c in case['control'] if c.get('pingpong_ns') is not None]
        parts.append(f'{short} {case["result"]} control {min(pp) if pp else "-"} ns')
    seen = record.get('alone', {}).get('others_cpu_s')
    beside = f'others {seen} cpu-s{"" if ledger.measured_alone(record) else " (NOT ALONE)"}'
    return f'{record["night"]} {record["wall_s"]:.1f} s load {record["load1"]} {beside}: ' + '; '.join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--ledger', required=True, type=Path)
    p.add_argument('--phase', required=True, help='tuning, held-out, ... (stored with each night)')
    p.add_argument('--prefix', required=True, help='night ids are <prefix><number>')
    p.add_argument('--nights', type=int, help='nights of this prefix to have in the ledger')
    p.add_argument('--schedule', type=Path, help='run the nights of this schedule (JSON; see above)')
    p.add_argument('--environ', default='impi')
    p.add_argument('--home', default=str(Path.home() / '.local' / 'share' / 'ibrepro-campaign'))
    p.add_argument('--pause-file', default='/tmp/ibrepro-campaign.pause')
    p.add_argument('--until', help='HH:MM UTC: start no night after it')
    p.add_argument('--settle', type=float, default=alone.SETTLE_S, metavar='S',
                   help='after a night that was not alone, start the next once nothing else has run for S seconds')
    p.add_argument('--paired', type=float, metavar='PCT', help='paired level jobs of --case at inject_pct=PCT')
    p.add_argument('--case', help='the case of --paired (a ReFrame -n pattern)')
    p.add_argument('--sizes', metavar='MIN:MAX', help='--paired: slow only messages of these sizes (a band)')
    p.add_argument('reframe_options', nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if bool(args.paired) != bool(args.case):
        p.error('--paired and --case go together')
    if args.sizes and not args.paired:
        p.error('--sizes goes with --paired')
    if bool(args.nights) == bool(args.schedule):
        p.error('give --nights or --schedule')
    if args.reframe_options[:1] == ['--']:
        args.reframe_options = args.reframe_options[1:]
    Path(args.home).mkdir(parents=True, exist_ok=True)
    until = None
    if args.until:              # the next time the clock reads HH:MM (UTC), so a campaign may cross midnight
        now = datetime.datetime.now(datetime.timezone.utc)
        hour, minute = map(int, args.until.split(':'))
        until = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if until <= now:
            until += datetime.timedelta(days=1)
    nights = ledger.read(args.ledger)
    moved = ledger.other_machine(nights, ledger.machine_identity())
    if moved:
        p.error(f'{args.ledger}: {moved}: start a ledger of its own (docs/verdict-protocol.md)')
    entries = None
    if args.schedule:
        plan = json.loads(args.schedule.read_text())
        entries = make_schedule(plan['seed'], plan['clean'], plan['episodes'])
    settle = min(args.settle, 30.0)          # started by hand, right after the person's own runs ended
    while True:
        while os.path.exists(args.pause_file):
            time.sleep(5)
        alone.wait_until_quiet(settle, say=lambda text: print(text, flush=True))
        if until and datetime.datetime.now(datetime.timezone.utc) >= until:
            print(f'campaign: past --until {args.until} UTC: stopping', flush=True)
            return 0
        step = next_night(args, ledger.read(args.ledger), entries)
        if step is None:
            return 0
        record = run_night(args, *step)
        ledger.append(args.ledger, record)
        print(summary(record), flush=True)
        settle = 5.0 if ledger.measured_alone(record) else args.settle


def next_night(args, nights, entries):
    """The next (night id, schedule entry) to measure, None when there is none: the first scheduled night
    (``entries``) none of whose runs was measured alone, under its next free id (``h0007``, then ``h0007.r1``, ...);
    without a schedule, the prefix's next number until ``--nights`` of them were measured alone."""
    taken = {n['night'] for n in nights}
    alone_ids = {n['night'] for n in nights if ledger.measured_alone(n)}
    if entries is not None:
        measured = {x.split('.r')[0] for x in alone_ids}
        for i, entry in enumerate(entries, 1):
            base = f'{args.prefix}{i:04d}'
            if base not in measured:
                reruns = (f'{base}.r{k}' for k in itertools.count(1))
                return next(x for x in itertools.chain([base], reruns) if x not in taken), entry
        return None
    ids = night_ids(nights, args.prefix)
    if sum(1 for x in ids if x in alone_ids) >= args.nights:
        return None
    number = max((int(n[len(args.prefix):]) for n in ids), default=0)
    return f'{args.prefix}{number + 1:04d}', paired_schedule(args) if args.paired else {'kind': 'clean'}


if __name__ == '__main__':
    sys.exit(main())

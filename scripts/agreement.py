#!/usr/bin/env python3
"""Do the offline replay and the live ``ibrepro nightly`` judge stored nights alike? (docs/verdict-protocol.md)

    .venv/bin/python scripts/agreement.py --ledger reference-data/ledger/vm-impi-1x2.jsonl \\
        --db ~/campaign/results.db --first u0001 --phase1 40 --nights 30 --json agreement.json

The campaign (scripts/campaign.py) stores every night twice: as a ReFrame session in its results database and as a
ledger line. Here the same Phase I (``--phase1`` nights from ``--first``) becomes a frozen chart baseline twice:

* **live**: ``ibrepro charts baseline --accept FIRST --nights N`` on the database (in a temporary IBREPRO_HOME),
  then ``ibrepro nightly --no-run --night X`` for each of the ``--nights`` clean nights after Phase I, its charts'
  lines read back (per chart: ok with tonight's z and the evidence S/h, excluded, or REGRESSION);
* **offline**: the study's replay (:func:`ibrepro.charts.chart_states`, what ``detection_power.py --from-ledger``
  counts) over the ledger's lines of the same nights, with the baseline and designs fitted from the ledger.

A night agrees when every chart is in the same state (ok / excluded / alarm), with the same z and evidence to the
printed digits. The replay restarts every chart after an alarm and the live charts stay in alarm, so the nights are
compared up to the first alarm (later ones are counted apart). Exit 0 when every compared night agrees, 1 when one
does not, 2 when it could not compare.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ibrepro import charts, ledger

BIN = Path(sys.executable).parent
_LINE = re.compile(r'^(ok|excluded|REGRESSION|back) (.+?) @[^|]+\| (\w+): ?(.*)$')
_OK = re.compile(r'tonight z ([-+]\d+\.\d+), evidence (\d+)% of an alarm')


def live_states(line_text):
    """``{(case, band): (state, z, evidence %)}`` from ``ibrepro nightly``'s charts lines."""
    found = {}
    for line in line_text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        state, case, band, rest = m.groups()
        ok = _OK.search(rest) if state == 'ok' else None
        found[(case.strip(), band)] = ('alarm' if state in ('REGRESSION', 'back') else state,
                                       float(ok.group(1)) if ok else None, int(ok.group(2)) if ok else None)
    return found


def offline_states(nights, first, phase1, count, series):
    """Per night after Phase I, ``{(case, band): (state, z, evidence %)}`` by the study's replay."""
    ids = [n['night'] for n in nights]
    start = ids.index(first)
    phase = nights[start:start + phase1]
    after = [n for n in nights[start + phase1:] if n['schedule'].get('kind') == 'clean'][:count]
    baseline = charts.Baseline.fit(phase)
    keys, rows, scales = charts.rows_of(baseline, phase)
    designs = charts.calibrate(rows, scales, series=series, length=300)
    _, held, _ = charts.rows_of(baseline, after)
    states, alarms = charts.chart_states(held, scales, designs)
    out = []
    for i, (row, state) in enumerate(zip(held, states)):
        night, before = {}, states[i - 1] if i else [0.0] * len(keys)
        for c, key in enumerate(keys):
            if i in alarms and designs[c].step(before[c], row[c], scales[c])[1]:
                night[key] = ('alarm', None, None)
            elif row[c] is None:
                night[key] = ('excluded', None, None)
            else:
                night[key] = ('ok', round(row[c], 2), round(100 * state[c] / designs[c].h))
        out.append((after[i]['night'], night))
    return out, [after[i]['night'] for i in alarms]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--ledger', required=True, type=Path)
    p.add_argument('--db', required=True, type=Path, help="the campaign's results database")
    p.add_argument('--first', required=True, help='the first night of Phase I')
    p.add_argument('--phase1', type=int, required=True, help='Phase I: this many nights from --first')
    p.add_argument('--nights', type=int, default=30, help='clean nights after Phase I to compare (default 30)')
    p.add_argument('--series', type=int, default=200, help="the calibration's bootstrap series (default 200)")
    p.add_argument('--json', type=Path)
    args = p.parse_args(argv)
    try:
        nights = ledger.read(args.ledger)
        offline, offline_alarms = offline_states(nights, args.first, args.phase1, args.nights, args.series)
    except (ledger.LedgerError, ValueError) as err:
        print(f'agreement.py: {err}', file=sys.stderr)
        return 2
    if not args.db.is_file():
        print(f'agreement.py: no database {args.db}', file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix='ibrepro-agreement.') as home:
        env = {**os.environ, 'IBREPRO_HOME': home, 'RFM_SQLITE_DB_FILE': str(args.db)}
        made = subprocess.run([str(BIN / 'ibrepro'), 'charts', 'baseline', '--accept', args.first, '--nights',
                               str(args.phase1), '--series', str(args.series)], env=env, capture_output=True,
                              text=True)
        if made.returncode != 0:
            print(f'agreement.py: the live baseline failed: {made.stdout}{made.stderr}', file=sys.stderr)
            return 2
        compared = []
        for night, expected in offline:
            proc = subprocess.run([str(BIN / 'ibrepro'), 'nightly', '--no-run', '--night', night, '--output-dir',
                                   str(Path(home) / 'report')], env=env, capture_output=True, text=True)
            got = live_states(proc.stdout)
            same = bool(expected) and got == expected        # no chart read back is no agreement
            compared.append({'night': night, 'agree': same, 'exit': proc.returncode, 'charts': len(got),
                             **({} if same else {'live': {f'{k[0]}|{k[1]}': v for k, v in got.items()},
                                                 'offline': {f'{k[0]}|{k[1]}': v for k, v in expected.items()}})})
            print(f'{night}: {"agree" if same else "DIFFER"} (nightly exit {proc.returncode})', flush=True)
            if expected and any(v[0] == 'alarm' for v in expected.values()):
                break               # the replay restarts after an alarm, the live charts stay in it
    agree = sum(c['agree'] for c in compared)
    out = {'phase1': {'first': args.first, 'nights': args.phase1}, 'compared': len(compared), 'agree': agree,
           'offline_alarms': offline_alarms, 'nights': compared}
    print(f'agreement: {agree} of {len(compared)} nights')
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + '\n')
    return 0 if compared and agree == len(compared) else 1


if __name__ == '__main__':
    sys.exit(main())

"""How long `ibrepro report` takes over a long history: a synthetic results database, timed end to end.

    .venv/bin/python scripts/bench_report.py [--sessions 30 90 365 730] [--values 1000] [--keep DIR]

Each synthetic session is the stored run report of a real short `make run`
(tests/data/run-reports/run-report.local_imb_short.json) with its test cases copied under extra
environment names until it holds about --values performance values, one day apart, every value the real one
times log-normal noise (CV 5 %). The database has ReFrame 4.10's schema and rows (as its SQLite backend writes
them). For each history length N the script runs `ibrepro report --history N` (default window 30), so trends
span all N sessions, and prints the wall time.
"""

import argparse
import copy
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / 'tests' / 'data' / 'run-reports' / 'run-report.local_imb_short.json'

#: ReFrame 4.10.4's results database (reframe/frontend/reporting/storage.py, schema 1.0)
SCHEMA = [
    'CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, session_end_unix REAL, '
    'json_blob TEXT, report_file TEXT)',
    'CREATE TABLE testcases(name TEXT,system TEXT, partition TEXT, environ TEXT, job_completion_time_unix REAL, '
    'session_uuid TEXT, uuid TEXT, FOREIGN KEY(session_uuid) REFERENCES sessions(uuid) ON DELETE CASCADE)',
    'CREATE INDEX index_testcases_time on testcases(job_completion_time_unix)',
    'CREATE TABLE metadata(schema_version TEXT)',
    'CREATE INDEX index_sessions_time on sessions(session_start_unix)',
    "INSERT INTO metadata VALUES('1.0')",
]


def template(values):
    """The fixture's report with its performance test cases copied until it has about ``values`` values."""
    report = json.loads(FIXTURE.read_text())
    cases = report['runs'][0]['testcases']
    perf = [c for c in cases if c.get('perfvalues') and c['name'].startswith('IMB')]
    count = sum(len(c['perfvalues']) for c in cases)
    copies = 0
    while count < values:
        copies += 1
        for case in perf:
            clone = copy.deepcopy(case)
            clone['environ'] = f'synth{copies}'
            clone['perfvalues'] = dict(clone['perfvalues'])
            cases.append(clone)
            count += len(clone['perfvalues'])
    return report, count


def make_db(path, sessions, values, seed=1):
    rng = random.Random(seed)
    base, count = template(values)
    conn = sqlite3.connect(path)
    for sql in SCHEMA:
        conn.execute(sql)
    start = 1.7e9
    for n in range(sessions):
        report = copy.deepcopy(base)
        info = report['session_info']
        info['uuid'] = sid = str(uuid.UUID(int=rng.getrandbits(128)))
        info['time_start_unix'] = begin = start + n * 86400
        info['time_end_unix'] = begin + 600
        info['time_start'] = time.strftime('%Y%m%dT%H%M%S+0000', time.gmtime(begin))
        for i, case in enumerate(report['runs'][0]['testcases']):
            case['session_uuid'], case['uuid'] = sid, f'{sid}:0:{i}'
            case['job_completion_time_unix'] = begin + i
            for key, entry in case.get('perfvalues', {}).items():
                if entry[0] is not None:
                    case['perfvalues'][key] = [entry[0] * rng.lognormvariate(0, 0.05), *entry[1:]]
        conn.execute('INSERT INTO sessions VALUES(?, ?, ?, ?, ?)',
                     (sid, begin, begin + 600, json.dumps(report), None))
        conn.executemany('INSERT INTO testcases VALUES(?, ?, ?, ?, ?, ?, ?)',
                         [(c['name'], c['system'], c['partition'], c['environ'], c['job_completion_time_unix'],
                           sid, c['uuid']) for c in report['runs'][0]['testcases']])
    conn.commit()
    conn.close()
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sessions', type=int, nargs='+', default=[30, 90, 365, 730])
    parser.add_argument('--values', type=int, default=1000)
    parser.add_argument('--keep', metavar='DIR', help='keep the databases and reports here')
    args = parser.parse_args()

    work = Path(args.keep or tempfile.mkdtemp(prefix='bench-report-'))
    work.mkdir(parents=True, exist_ok=True)
    ibrepro = Path(sys.executable).parent / 'ibrepro'
    print(f'{"sessions":>8} {"values":>7} {"db MB":>6} {"report s":>9}   (load before: 1/5/15 min)')
    for sessions in args.sessions:
        db = work / f'history-{sessions}.db'
        db.unlink(missing_ok=True)
        count = make_db(db, sessions, args.values)
        load = ' '.join(Path('/proc/loadavg').read_text().split()[:3]) if Path('/proc/loadavg').exists() else '?'
        began = time.perf_counter()
        proc = subprocess.run([str(ibrepro), 'report', '--db', str(db), '--history', str(sessions),
                               '--output-dir', str(work / 'reports')],
                              capture_output=True, text=True, env={**os.environ, 'IBREPRO_HOME': str(work)})
        took = time.perf_counter() - began
        if proc.returncode:
            sys.exit(f'ibrepro report failed:\n{proc.stdout}\n{proc.stderr}')
        print(f'{sessions:>8} {count:>7} {db.stat().st_size / 1e6:>6.0f} {took:>9.1f}   ({load})')


if __name__ == '__main__':
    main()

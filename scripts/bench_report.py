"""How long `ibrepro report` takes over a long history: a synthetic results database, timed end to end.

    .venv/bin/python scripts/bench_report.py [--sessions 30 90 365 730] [--values 1000] [--repeat 2] [--fleet]
                                             [--skip-no-index] [--keep DIR [--reuse]]

Each synthetic session is the stored run report of a real short `make run`
(tests/data/run-reports/run-report.local_imb_short.json) with its test cases copied under extra
environment names until it holds about --values performance values, one day apart, every value the real one
times log-normal noise (CV 5 %). With --fleet, every session also holds a pair-round case (the fleet check's
``FleetPairs``): one of ten real fault-free fat-tree nights (tests/data/fleet/nights/, in turn), moved onto the
session's system, so the report draws its fleet section and reads the pair-round nights stored before. The
database has ReFrame 4.10's schema and rows (as its SQLite backend writes them). For each history length N the
script runs `ibrepro report --history N` (default window 30), so trends span all N sessions, and prints the wall
time and CPU time of

* `index build`: the first report, which extracts every session into the values index (once per database);
* `report`: a report with the index in step (every nightly report after the first: the tested path);
* `no index`: `ibrepro report --no-index`, which decodes every session's stored JSON (the path before the index);
* `ingest 1`: bringing the index in step after one more session was stored (what a nightly report adds);

and the sizes of the database and of the index (MB, and MB per 1000 sessions). Timings are the best of
--repeat runs, with the load average before each.
"""

import argparse
import copy
import resource
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
FLEET_NIGHTS = sorted((ROOT / 'tests' / 'data' / 'fleet' / 'nights').glob('fattree-clean-*.report.json'))

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


def fleet_cases(system, partition):
    """The pair-round case of each real fault-free night, moved onto ``system:partition``."""
    cases = []
    for path in FLEET_NIGHTS:
        (case,) = [c for c in json.loads(path.read_text())['runs'][0]['testcases'] if 'fleet_flows' in c]
        case.update(system=system, partition=partition)
        cases.append(case)
    return cases


def make_db(path, sessions, values, seed=1, start=1.7e9, fleet=False):
    """A results database of ``sessions`` synthetic sessions a day apart from ``start`` (added to ``path`` if it
    exists); with ``fleet`` each also holds a pair-round case."""
    rng = random.Random(seed)
    base, count = template(values)
    first = base['runs'][0]['testcases'][0]
    nights = fleet_cases(first['system'], first['partition']) if fleet else []
    exists = Path(path).exists()
    conn = sqlite3.connect(path)
    for sql in SCHEMA if not exists else []:
        conn.execute(sql)
    for n in range(sessions):
        report = copy.deepcopy(base)
        if nights:
            report['runs'][0]['testcases'].append(copy.deepcopy(nights[n % len(nights)]))
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


def _load():
    return ' '.join(Path('/proc/loadavg').read_text().split()[:3]) if Path('/proc/loadavg').exists() else '?'


def _timed(cmd, env, repeat):
    """(best wall seconds, its CPU seconds, loads) of ``repeat`` runs of ``cmd``."""
    best, loads = None, []
    for _ in range(repeat):
        loads.append(_load())
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        took = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode:
            sys.exit(f'{" ".join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}')
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        if best is None or took < best[0]:
            best = (took, cpu)
    return best[0], best[1], loads


def add_session(db, values, seed, fleet=False):
    """One more synthetic session, a day after the newest."""
    conn = sqlite3.connect(db)
    newest = conn.execute('SELECT MAX(session_start_unix) FROM sessions').fetchone()[0]
    conn.close()
    # the seed and the newest start: a database used again (--reuse) gets a session of a new UUID
    make_db(db, 1, values, seed=seed + int(newest), start=newest + 86400, fleet=fleet)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sessions', type=int, nargs='+', default=[30, 90, 365, 730])
    parser.add_argument('--values', type=int, default=1000)
    parser.add_argument('--repeat', type=int, default=2, help='timed runs of each step (the best is printed)')
    parser.add_argument('--fleet', action='store_true', help='every session also holds a pair-round night')
    parser.add_argument('--skip-no-index', action='store_true', help='leave out the `no index` step (minutes at 3650)')
    parser.add_argument('--keep', metavar='DIR', help='keep the databases and reports here')
    parser.add_argument('--reuse', action='store_true', help='reuse databases already in --keep DIR')
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / 'src'))
    from ibrepro import results

    work = Path(args.keep or tempfile.mkdtemp(prefix='bench-report-'))
    work.mkdir(parents=True, exist_ok=True)
    ibrepro = Path(sys.executable).parent / 'ibrepro'
    env = {**os.environ, 'IBREPRO_HOME': str(work)}
    print(f'{"sessions":>8} {"values":>6} {"db MB":>6} {"index MB":>8} {"MB/1000":>7}   {"step":<12} {"wall s":>7} '
          f'{"cpu s":>6}   load 1/5/15 min before each run')
    for sessions in args.sessions:
        db = work / f'history-{sessions}{"-fleet" if args.fleet else ""}.db'
        if not (args.reuse and db.exists()):
            db.unlink(missing_ok=True)
            make_db(db, sessions, args.values, fleet=args.fleet)
        count = template(args.values)[1]
        index = results.ValueIndex(db)
        index.remove()
        report = [str(ibrepro), 'report', '--db', str(db), '--history', str(sessions),
                  '--output-dir', str(work / 'reports')]
        steps = [('index build', *_timed(report, env, 1))]
        steps.append(('report', *_timed(report, env, args.repeat)))
        if not args.skip_no_index:
            steps.append(('no index', *_timed(report + ['--no-index'], env, args.repeat)))
        add_session(db, args.values, seed=sessions, fleet=args.fleet)
        loads = [_load()]
        began, cpu = time.perf_counter(), time.process_time()
        with results.ValueIndex(db):
            pass
        steps.append(('ingest 1', time.perf_counter() - began, time.process_time() - cpu, loads))
        size_db, size_index = db.stat().st_size / 1e6, index.size() / 1e6
        for step, wall, cpu, loads in steps:
            print(f'{sessions:>8} {count:>6} {size_db:>6.0f} {size_index:>8.1f} {size_index / sessions * 1000:>7.1f}   '
                  f'{step:<12} {wall:>7.2f} {cpu:>6.2f}   {"; ".join(loads)}', flush=True)


if __name__ == '__main__':
    main()

"""``ibrepro nightly``: one night of a site's regression test, run and judged as :mod:`ibrepro.verdict` says.

1. **Run** the checks in ReFrame's ``nightly`` mode (``scripts/run-checks.sh CONFIG --mode nightly``); every
   session stores the night's id as the session extra ``nightly`` (``--night``, ``$IBREPRO_NIGHTLY``, or the date
   and time). ``--no-run``: the night's sessions are already stored (a GitLab child pipeline stored one per case).
2. **Judge** the night against its history (``ibrepro report --nightly``, no page written): the suspects (test
   cases that regressed) and the test cases too noisy to judge.
3. **Confirm** them at once: one more ReFrame session per partition and environment that runs only those test
   cases (``-n /<hash>``, with the night's ``-S`` settings), stored with the extras ``nightly=<id>`` and
   ``confirms=<id>``. ``--no-confirm`` leaves the suspects unconfirmed (an alarm, exit 1).
4. **Report**: ``ibrepro report --nightly`` over the night and its confirmation (both shown, the page and
   summary.md written), whose exit status is the night's.

One night at a time per data directory: a night holds ``$IBREPRO_HOME/nightly.lock`` from start to verdict; a night
that finds it held does not start (exit 2, naming the night that holds it).

Exit status: the verdict's (0 clean, 1 regression, 2 could not judge, 3 inconclusive: ``ibrepro report --help``);
a check that failed in ReFrame after its job ran (sanity, references: a failed test case of the night's stored
sessions) makes it 1; a case that never ran (it failed before its job, its job was never submitted or never
started on a node: Slurm down, pending past ``max_pending_time``; :func:`ibrepro.verdict.not_measured`) makes it 2
unless it is worse (infrastructure is not a regression, nor a clean night); a night whose session was not stored
2; with ``--no-run``, a missing
or unreadable database, or a night none of whose sessions can be read, 2 (other unreadable sessions: named, left
out).
"""

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import paths, results, verdict

RUN_CHECKS = paths.REPO_ROOT / 'scripts' / 'run-checks.sh'

#: run-checks.sh's status when ReFrame ran but did not store the session.
NOT_STORED = 3

#: The history test's false discovery rate for the night itself (``ibrepro report --alpha``): a screen whose false
#: alarms the confirmation removes, so it can be looser than a test that alarms alone (docs/reports.md measures the
#: pair). ``--report-option=--alpha=X`` overrides it.
NIGHT_ALPHA = 0.05

#: ReFrame options a confirmation keeps from the night's: the settings (``-S``), not the selection.
_SETTING_OPTIONS = ('-S', '--setvar')

#: The lock a night holds in the data directory: one night at a time per ``$IBREPRO_HOME`` (a confirmation still
#: waiting for nodes when the next night starts must not share the nodes, the history or the database with it).
LOCK_NAME = 'nightly.lock'


def hold_night_lock(night):
    """``(fd, None)``: this night holds the lock while ``fd`` is open; ``(None, why)`` when another night holds it
    (its night id, process and start are in the file). trust.Refused when the data directory is not ours."""
    from . import trust
    home = paths.private_dir(paths.data_home())
    path = trust.check(home / LOCK_NAME, kind='file', root=home, name='IBREPRO_HOME')
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 300).decode('utf-8', 'replace').strip()
        os.close(fd)
        return None, f'another night holds {path} ({holder or "no holder recorded"})'
    os.ftruncate(fd, 0)
    os.write(fd, f'night {night}, process {os.getpid()}, since {time.strftime("%Y-%m-%d %H:%M:%S %Z")}\n'.encode())
    return fd, None


def settings_only(options):
    """The ``-S NAME=VALUE`` settings among ReFrame ``options`` (what a confirmation re-run must measure with)."""
    kept, i = [], 0
    while i < len(options):
        option = options[i]
        if option in _SETTING_OPTIONS and i + 1 < len(options):
            kept += [option, options[i + 1]]
            i += 2
            continue
        if option.startswith(('-S', '--setvar=')) and option not in _SETTING_OPTIONS:
            kept.append(option)
        i += 1
    return kept


def confirmation_runs(suspects):
    """``[(system, partition, environ, [hash, ...])]``: one ReFrame invocation per partition and environment."""
    groups = {}
    for s in suspects:
        if s.get('hashcode'):
            groups.setdefault((s['system'], s['partition'], s['environ']), []).append(s['hashcode'])
    return [(*key, sorted(set(hashes))) for key, hashes in sorted(groups.items())]


def run_checks(config, options, env):
    """scripts/run-checks.sh with ``options`` after ``-r``; its exit status."""
    return subprocess.run([str(RUN_CHECKS), str(config), *options], env=env).returncode


def failed_cases(night):
    """``(name @system:partition+environ, why it measured nothing or None)`` of each test case of ``night`` whose
    last attempt failed in ReFrame (confirmation sessions aside: they re-measure suspects, their verdict is the
    report's); the reason is :func:`ibrepro.verdict.not_measured`'s."""
    from . import results
    return [(f'{c["name"]} @{c["system"]}:{c["partition"]}+{c["environ"]}', verdict.not_measured(c))
            for report in results.stored_sessions(problems=[])
            if report['session_info'].get('nightly') == night and not report['session_info'].get('confirms')
            for c in results.readable_cases(report, []) if c.get('result') == 'fail']


def stored_night_problems(night, db=None):
    """``(why the night cannot be judged or None, [unreadable sessions of it])`` from the values index: no
    database, a database that cannot be read, or no readable session of ``night`` (its ``nightly`` extra) is the
    first; a stored session that cannot be read and names the night in its raw text (a truncated report) is
    part of the night that cannot be read. Unreadable sessions of other nights are the report's warnings."""
    from . import results
    try:
        with results.open_index(db) as index:
            rows, unreadable = index.sessions()
            raw = _unreadable_text(index.db, [row for row in unreadable])
    except results.ResultsError as err:
        return str(err), []
    mine = [row for row, _ in rows if row.night == night]
    named = [reason for reason, text in raw if _names_night(text, night)]
    if not any(not row.confirms for row in mine):
        return ('no readable session of it is stored'
                + (f' ({len(named)} unreadable: {"; ".join(named)})' if named else '')), []
    return None, named


def _unreadable_text(db, reasons):
    """``[(reason, the stored text's first 4096 characters)]`` of the unreadable sessions named in ``reasons``
    (``session <uuid>: ...``)."""
    import re
    import sqlite3
    found = []
    uuids = {m.group(1): reason for reason in reasons if (m := re.match(r'session (\S+?):', reason))}
    if not uuids:
        return found
    try:
        conn = sqlite3.connect(f'file:{db}?mode=ro', uri=True, timeout=30)
        try:
            for uuid, text in conn.execute(f'SELECT uuid, substr(json_blob, 1, 4096) FROM sessions WHERE uuid IN '
                                           f'({",".join("?" * len(uuids))})', list(uuids)):
                found.append((uuids[uuid], text if isinstance(text, str) else ''))
        finally:
            conn.close()
    except sqlite3.Error:
        pass
    return found


def _names_night(text, night):
    import re
    return re.search(r'"nightly"\s*:\s*' + re.escape(json.dumps(night)), text or '') is not None


def _report(argv):
    from . import cli
    return cli.main(['report', *argv])


def main(args):
    from . import rfmconfig
    try:
        night = rfmconfig.nightly_id({'IBREPRO_NIGHTLY': args.night or os.environ.get('IBREPRO_NIGHTLY', '')})
    except ValueError as err:
        print(f'ibrepro nightly: {err}', file=sys.stderr)
        return verdict.EXIT_UNJUDGED
    from . import trust
    try:
        lock, held = hold_night_lock(night)
    except (trust.Refused, OSError) as err:
        print(f'ibrepro nightly: could not take the night\'s lock: {err}', file=sys.stderr)
        return verdict.EXIT_UNJUDGED
    if lock is None:
        print(f'ibrepro nightly: night {night} does not start: {held}', file=sys.stderr)
        return verdict.EXIT_UNJUDGED
    try:
        return _night(args, night)
    finally:
        os.close(lock)


def _night(args, night):
    env = {**os.environ, 'IBREPRO_NIGHTLY': night}
    os.environ['IBREPRO_NIGHTLY'] = night
    reframe_options = list(args.reframe_options or [])
    if reframe_options[:1] == ['--']:
        reframe_options = reframe_options[1:]
    started = time.monotonic()

    ran = 0
    if not args.no_run:
        ran = run_checks(args.config, ['--mode', 'nightly', f'--session-extras=nightly={night}', *reframe_options],
                         env)
        if ran == NOT_STORED:
            print('ibrepro nightly: the night\'s session was not stored: nothing to judge', file=sys.stderr)
            return verdict.EXIT_UNJUDGED

    # --no-run: the night must be stored and readable (a missing or broken database is "could not judge", never a
    # regression); other unreadable sessions are named and left out by the report
    night_problem, unreadable_part = stored_night_problems(night)
    if night_problem:
        print(f'ibrepro nightly: could not judge night {night}: {night_problem}', file=sys.stderr)
        return verdict.EXIT_UNJUDGED

    # this night, not the newest stored one (a night judged again later, or another night stored since)
    report_options = [f'--alpha={NIGHT_ALPHA}', *args.report_options, '--nightly', '--night', night]
    confirmed, not_confirmed = [], []
    if not args.no_confirm:
        with tempfile.TemporaryDirectory(prefix='ibrepro-nightly-') as tmp:
            suspects_file = Path(tmp) / 'suspects.json'
            print(f'\n== ibrepro nightly {night}: the night against its history')
            first = _report([*report_options, '--output-dir', str(Path(tmp) / 'first'),
                             '--suspects', str(suspects_file)])
            suspects = json.loads(suspects_file.read_text())['suspects'] if suspects_file.exists() else []
        if first == verdict.EXIT_UNJUDGED and not suspects:
            print('ibrepro nightly: the night could not be judged (above)', file=sys.stderr)
        for system, partition, environ, hashes in confirmation_runs(suspects):
            print(f'\n== ibrepro nightly {night}: confirming {len(hashes)} test case(s) on {system}:{partition} '
                  f'+{environ} (' + ', '.join(s['name'] for s in suspects if s.get('hashcode') in hashes) + ')')
            options = ['--mode', 'nightly', f'--system={system}:{partition}', '-p', f'^{environ}$',
                       *[o for h in hashes for o in ('-n', f'/{h}')],
                       f'--session-extras=nightly={night},confirms={night}',
                       *settings_only(reframe_options)]
            status = run_checks(args.config, options, env)
            confirmed.append(status)
            if status == NOT_STORED:
                print('ibrepro nightly: the confirmation was not stored: its suspects are not confirmed, not cleared',
                      file=sys.stderr)
                not_confirmed.append(f'its confirmation on {system}:{partition}+{environ} ran but its ReFrame '
                                     'session was not stored: it measured nothing')
        unnamed = [s['name'] for s in suspects if not s.get('hashcode')]
        if unnamed:
            print(f'ibrepro nightly: no ReFrame hash recorded for {", ".join(unnamed)}: not confirmed, not cleared',
                  file=sys.stderr)
            not_confirmed.append('no ReFrame hash was recorded to re-run it: its confirmation measured nothing')
        if not_confirmed:
            report_options.append(f'--confirmation-problem={"; ".join(not_confirmed)}')

    print(f'\n== ibrepro nightly {night}: the verdict')
    status = _report([*report_options, *(['--output-dir', args.output_dir] if args.output_dir else [])])
    # the night's failed cases, from its stored sessions (with --no-run they ran elsewhere: GitLab child jobs; else
    # ReFrame's status says whether any failed)
    try:
        failures = failed_cases(night) if args.no_run or ran else []
    except results.ResultsError as err:
        print(f'ibrepro nightly: could not judge night {night}: {err}', file=sys.stderr)
        return verdict.EXIT_UNJUDGED
    not_run = [(name, why) for name, why in failures if why]        # never ran on a node: infrastructure
    failed = [name for name, why in failures if not why]            # ran and failed: the night fails
    if unreadable_part:
        print(f'ibrepro nightly: part of night {night} cannot be read ({"; ".join(unreadable_part)}): '
              'it was not judged', file=sys.stderr)
        status = verdict.combine([status, verdict.EXIT_UNJUDGED])
    # the charts across nights (ibrepro charts), where a system has a frozen chart baseline: they judge too
    from . import evidence
    charted, lines = evidence.judge_night(night)
    if charted is not None:
        print(f'\n== ibrepro nightly {night}: the charts across nights')
        print('\n'.join(lines))
        status = verdict.combine([status, {evidence.EXIT_ALARM: verdict.EXIT_REGRESSION,
                                           evidence.EXIT_UNJUDGED: verdict.EXIT_UNJUDGED}.get(charted, status)])
    if (failed or (ran and not not_run)) and status in (verdict.EXIT_CLEAN, verdict.EXIT_INCONCLUSIVE):
        print(f'ibrepro nightly: a check failed in ReFrame ({", ".join(failed) or "above"}): the night fails',
              file=sys.stderr)
        status = verdict.EXIT_REGRESSION
    if not_run:
        # infrastructure (Slurm down, a job that never started): not a regression, and never a clean night
        for name, why in not_run:
            print(f'ibrepro nightly: {name} measured nothing: {why}', file=sys.stderr)
        print(f'ibrepro nightly: could not judge {len(not_run)} test case(s) of night {night}: they did not run',
              file=sys.stderr)
        status = verdict.combine([status, verdict.EXIT_UNJUDGED])
    print(f'ibrepro nightly {night}: exit {status} ({_MEANING[status]}) after {time.monotonic() - started:.0f} s')
    return status


_MEANING = {verdict.EXIT_CLEAN: 'clean', verdict.EXIT_REGRESSION: 'regression',
            verdict.EXIT_UNJUDGED: 'could not judge', verdict.EXIT_INCONCLUSIVE: 'inconclusive'}


def add_cli(subparsers):
    p = subparsers.add_parser('nightly', help='one night: run the checks, judge them, confirm the suspects, report',
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('-C', '--config', default=str(paths.REPO_ROOT / 'configs' / 'local.py'), metavar='FILE',
                   help='ReFrame configuration (default: configs/local.py)')
    p.add_argument('--night', metavar='ID', help='id of this night (default: $IBREPRO_NIGHTLY, or the date and time)')
    p.add_argument('--no-run', action='store_true', help='the night\'s sessions are stored already: judge them')
    p.add_argument('--no-confirm', action='store_true', help='raise the alarm without re-running the suspects')
    p.add_argument('--output-dir', metavar='DIR', help='where the report is written (ibrepro report --output-dir)')
    p.add_argument('--report-option', dest='report_options', action='append', default=[], metavar='OPTION',
                   help='an option for ibrepro report (repeat it: --report-option=--window --report-option=20)')
    p.add_argument('reframe_options', nargs=argparse.REMAINDER, metavar='-- REFRAME OPTIONS',
                   help='options for the night\'s ReFrame run (the confirmation keeps their -S settings)')
    p.set_defaults(func=main)

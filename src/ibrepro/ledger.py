"""The ledger of nights: every measured night of a verdict study, compact and append-only, kept in the repository.

The nightly verdict is judged by replaying real nights (calibration, false alarms, detection): the nights must
outlive the machine and the results database that measured them, and nobody may drop the awkward ones. One JSON
object per line, one line per night, in the order measured; a line is never rewritten or deleted (:func:`append`
opens with ``O_APPEND`` and refuses a night id the file already has). A night keeps, per test case, each round's
value of every performance variable, the control measured before each round (:mod:`ibrepro.rfm.repeat`), each
round's CPU pressure, what was injected and what the ranks really added, ReFrame's result; and for the night its
schedule entry (what the protocol asked for), the machine's load when it started, its wall time, the commit, and the
CPU time other processes used beside it (``alone``: a night not measured alone is kept, and left out of a study).

    {"v": 1, "night": "t0001", "phase": "tuning", "schedule": {"kind": "clean"}, "started": 1796000000.0,
     "wall_s": 21.3, "load1": 0.4, "commit": "abc123", "host": "...", "machine": {"boot_id": "...", "cpu": "...", ...},
     "alone": {"others_cpu_s": 0.12},
     "cases": {"IMBPointToPoint %benchmark=PingPong %layout=1x2": {"environ": "impi", "result": "pass",
               "values": {"lat_8": [0.14, 0.15, 0.14], ...}, "control": [{"pingpong_ns": 55.1, ...}, ...],
               "pressure": [0.01, 0.0, 0.02], "injected": "", "inject_added": {}, "reason": "",
               "hardware": {"cpu": "AMD EPYC", "cpu_model": "2", "cache": "1024 KB"}}}}

A case's ``hardware`` is what its control read on the node (:func:`ibrepro.rfm.repeat.parse_hardware`); nights
stored before the control printed it have none.
"""

import json
import math
import os
import re
from pathlib import Path

from ibrepro import alone

#: The ledger format written here.
VERSION = 1

#: A night id: what a nightly id may be (``rfmconfig.nightly_id``).
_NIGHT_ID = re.compile(r'[A-Za-z0-9._:-]{1,64}')

#: The most bytes of one line read (a night is a few kB): a longer one is refused, not loaded.
MAX_LINE = 1 << 20


class LedgerError(ValueError):
    """A ledger line that cannot be read, or a night that cannot be appended (path, line and why)."""


def night_record(report, night, *, phase, schedule, started, wall_s, load1=None, commit='', host='', machine=None,
                 others_cpu_s=None):
    """One ledger line from a ReFrame run report (a dict) of one night: every test case of its final attempt.
    ``others_cpu_s``: the CPU seconds other processes used while it ran (:class:`ibrepro.alone.Others`)."""
    if not _NIGHT_ID.fullmatch(str(night)):
        raise LedgerError(f'night id {night!r}: 1-64 letters, digits and ._:-')
    cases = {}
    runs = report.get('runs') if isinstance(report, dict) else None
    if not isinstance(runs, list) or not runs:
        raise LedgerError('the run report has no runs')
    for run in runs:                   # a retried case: its last attempt stands
        for case in run.get('testcases') or []:
            if not isinstance(case, dict):
                continue
            name = str(case.get('display_name') or case.get('name'))
            values = case.get('repetition_values') or {}
            cases[name] = {
                'environ': case.get('environ'),
                'result': case.get('result'),
                'values': {k: [_number(x) for x in v] for k, v in sorted(values.items()) if isinstance(v, list)},
                'control': [{k: _number(x) for k, x in sorted(c.items())} for c in case.get('control_values') or []
                            if isinstance(c, dict)],
                'pressure': [_number(x) for x in case.get('repetition_pressure') or []],
                'injected': case.get('injected') or '',
                'inject_added': case.get('inject_added') or {},
                'reason': str(case.get('fail_reason') or '')[:300],
                **({'hardware': hardware} if (hardware := hardware_of(case.get('node_hardware'))) else {}),
            }
    return {'v': VERSION, 'night': night, 'phase': phase, 'schedule': schedule, 'started': round(started, 3),
            'wall_s': round(wall_s, 3), 'load1': load1, 'commit': commit, 'host': host,
            **({'machine': machine} if machine else {}),
            **({'alone': {'others_cpu_s': round(others_cpu_s, 2)}} if others_cpu_s is not None else {}),
            'cases': cases}


_HARDWARE_FIELD = re.compile(r'[A-Za-z0-9_.:-]{1,80}')
_HARDWARE_VALUE = re.compile(r'[\x20-\x7e]{1,100}')


def hardware_of(found):
    """A case's node hardware (``{field: value}``) as stored data may hold it: the fields and values that are
    the short printable strings the control prints, nothing else (a stored session is data; it may be hostile)."""
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in sorted(found.items())[:32] if isinstance(k, str) and isinstance(v, str)
            and _HARDWARE_FIELD.fullmatch(k) and _HARDWARE_VALUE.fullmatch(v)}


def machine_identity():
    """What tells one machine (and one boot of it) from another that answers to the same host name: a VM moved to
    other hardware keeps its name and its /etc/machine-id, while its CPU model and caches and the kernel's boot id
    change. Read from /proc; a field that cannot be read is left out."""
    found = {}
    try:
        found['boot_id'] = Path('/proc/sys/kernel/random/boot_id').read_text().strip()
    except OSError:
        pass
    try:
        cpuinfo = Path('/proc/cpuinfo').read_text(errors='replace')
    except OSError:
        return found
    for key, field in (('model name', 'cpu'), ('model', 'cpu_model'), ('cache size', 'cache')):
        m = re.search(rf'^{key}\s*:\s*(.+)$', cpuinfo, re.M)
        if m:
            found[field] = m.group(1).strip()[:100]
    found['cpus'] = len(re.findall(r'^processor\s*:', cpuinfo, re.M))
    return found


#: The fields of :func:`machine_identity` that a reboot keeps (the boot id does not).
HARDWARE = ('cpu', 'cpu_model', 'cache', 'cpus')


def other_machine(nights, identity):
    """Why ``identity`` is not the machine the ledger's last identified night ran on ('' when it is, or when no
    night says): a study's nights are one machine's, and another one needs its own ledger and Phase I."""
    last = next((n['machine'] for n in reversed(nights) if isinstance(n.get('machine'), dict)), None)
    if last is None:
        return ''
    moved = [f'{k} {last.get(k)!r} -> {identity.get(k)!r}' for k in HARDWARE if last.get(k) != identity.get(k)]
    return f'this machine is not the one of the ledger\'s nights ({"; ".join(moved)})' if moved else ''


def measured_alone(night):
    """Whether a night ran alone on its machine: what other processes used beside it (``alone``) within
    :data:`ibrepro.alone.SHARE`. A night from before that was measured (no ``alone``) counts as alone: the protocol
    says how those were kept alone (a pause file) and which were not."""
    seen = night.get('alone')
    if not isinstance(seen, dict):
        return True
    others, wall = _number(seen.get('others_cpu_s')), _number(night.get('wall_s'))
    return others is not None and wall is not None and alone.was_alone(others, wall)


def _number(x):
    """A stored value: a finite number, or None (what JSON cannot carry and a replay must not read)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return x


def read(path):
    """Every night of the ledger at ``path``, in the order measured (LedgerError naming the line that cannot be
    read, or a night id seen twice). A missing file is an empty ledger."""
    nights, seen = [], set()
    try:
        f = open(path, encoding='utf-8')
    except FileNotFoundError:
        return []
    with f:
        for number, line in enumerate(iter(lambda: f.readline(MAX_LINE + 1), ''), 1):
            if len(line) > MAX_LINE:
                raise LedgerError(f'{path}:{number}: a line over {MAX_LINE} bytes')
            if not line.strip():
                continue
            try:
                night = json.loads(line)
            except json.JSONDecodeError as err:
                raise LedgerError(f'{path}:{number}: not JSON ({err.msg})') from None
            problem = _problem(night)
            if problem:
                raise LedgerError(f'{path}:{number}: {problem}')
            if night['night'] in seen:
                raise LedgerError(f'{path}:{number}: night {night["night"]} is there twice')
            seen.add(night['night'])
            nights.append(night)
    return nights


def _problem(night):
    if not isinstance(night, dict):
        return 'not a night (a JSON object)'
    if night.get('v') != VERSION:
        return f'format {night.get("v")!r}, this ibrepro reads {VERSION}'
    if not isinstance(night.get('night'), str) or not _NIGHT_ID.fullmatch(night['night']):
        return f'night id {night.get("night")!r:.80}'
    if not isinstance(night.get('cases'), dict) or not isinstance(night.get('schedule'), dict):
        return f'night {night["night"]}: no cases or schedule'
    for name, case in night['cases'].items():
        if not isinstance(case, dict) or not isinstance(case.get('values'), dict) \
                or not isinstance(case.get('control'), list):
            return f'night {night["night"]}: case {name!r:.80} is not a case record'
    return None


def append(path, night):
    """Append one night to the ledger (created if missing); LedgerError when its id is there already or the
    record is not a night. One ``write`` of one line with ``O_APPEND``, then fsync: never a rewrite."""
    problem = _problem(night)
    if problem:
        raise LedgerError(f'{path}: {problem}')
    if any(n['night'] == night['night'] for n in read(path)):
        raise LedgerError(f'{path}: night {night["night"]} is there already: a ledger is never rewritten')
    line = json.dumps(night, sort_keys=True, separators=(',', ':'), allow_nan=False) + '\n'
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)

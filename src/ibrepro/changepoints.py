"""Change points by Apache Otava (PyPI ``apache-otava``: E-Divisive means in Hunter's sliding windows, Fleming et
al., ICPE 2023): where a series changed, for the charts' alarms (the night a change began, the re-baseline to
propose) and their retrospective view.

The charts (:mod:`ibrepro.charts`) decide *whether* a system got slower, night by night, at a stated false-alarm
rate; Otava, run on the whole series afterwards, says better *where* the change began (a CUSUM alarms some nights
after the start). Otava runs in a virtual environment of its own (``make otava``: ``.deps/otava``), because it
brings numpy, scipy and cloud clients that ibrepro does not need; one subprocess per call, the numbers as JSON on
its stdin, nothing from the data on its command line.
"""

import json
import math
import subprocess
import sys

from . import paths

OTAVA_VERSION = '0.8.0'
#: Otava's defaults for a nightly series: windows of 30 nights, a change significant at 0.001.
WINDOW = 30
MAX_PVALUE = 0.001

_PROGRAM = r'''
import json, sys
from otava.analysis import compute_change_points
job = json.load(sys.stdin)
out = []
for series in job['series']:
    try:
        points, _ = compute_change_points(series, window_len=job['window'], max_pvalue=job['max_pvalue'])
        out.append([{'index': int(cp.index), 'pvalue': float(cp.stats.pvalue),
                     'before': float(cp.stats.mean_1), 'after': float(cp.stats.mean_2)} for cp in points])
    except Exception as err:   # a series Otava cannot split: said per series, not a lost call
        out.append(f'{type(err).__name__}: {err}')
print(json.dumps(out))
'''


class OtavaError(Exception):
    """Otava is not installed or its run failed."""


def otava_python():
    """The Python of Otava's virtual environment, or None when it is not installed."""
    python = paths.DEPS_DIR / 'otava' / 'bin' / 'python'
    return python if python.exists() else None


def install():
    """Make Otava's virtual environment (``make otava``; needs PyPI)."""
    env = paths.DEPS_DIR / 'otava'
    subprocess.run([sys.executable, '-m', 'venv', str(env)], check=True)
    subprocess.run([str(env / 'bin' / 'python'), '-m', 'pip', 'install', '-q', f'apache-otava=={OTAVA_VERSION}'],
                   check=True)
    return otava_python()


def locate(series_list, *, window=WINDOW, max_pvalue=MAX_PVALUE, timeout=600):
    """Per series (numbers; None: a night not measured, left out), Otava's change points as
    ``[{'index': i, 'pvalue': p, 'before': mean, 'after': mean}, ...]`` with ``i`` an index of the series as given
    (the first night after the change), or a string saying why Otava could not split that series. OtavaError when
    Otava is not installed or did not run."""
    python = otava_python()
    if python is None:
        raise OtavaError('Otava is not installed (make otava)')
    kept = [[i for i, x in enumerate(s) if isinstance(x, (int, float)) and math.isfinite(x)] for s in series_list]
    job = {'series': [[float(s[i]) for i in idx] for s, idx in zip(series_list, kept)], 'window': int(window),
           'max_pvalue': float(max_pvalue)}
    try:
        proc = subprocess.run([str(python), '-c', _PROGRAM], input=json.dumps(job), capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise OtavaError(f'Otava did not run: {err}') from None
    if proc.returncode != 0:
        raise OtavaError(f'Otava failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}')
    try:
        found = json.loads(proc.stdout)
    except ValueError:
        raise OtavaError(f'Otava printed no JSON: {proc.stdout[:200]!r}') from None
    if not isinstance(found, list) or len(found) != len(series_list):
        raise OtavaError('Otava answered for another number of series')
    out = []
    for points, idx in zip(found, kept):
        if isinstance(points, str):
            out.append(points)
            continue
        out.append([dict(p, index=idx[p['index']]) for p in points if 0 <= p['index'] < len(idx)])
    return out

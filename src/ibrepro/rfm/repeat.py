"""Repetitions inside one job: the benchmark runs R times back to back (``-S repetitions=R``).

One nightly value of a benchmark is one sample of a noisy machine. Running the benchmark R times in the same job
(same nodes, same binding, same binaries) and reporting per message size the median of the R values takes out most
of the noise that is not shared by the repetitions, at R times the benchmark's time and none of the scheduler's.
The spread between the repetitions is the night's own noise: a night whose repetitions disagree by more than the
regression the nightly test must see is *inconclusive* (:mod:`ibrepro.verdict`), not clean and not a regression.

The job script wraps the launch in a loop; each repetition's output starts with a marker line on stdout
(:data:`MARKER`), and every repetition appends its start and end (wall time, the node's CPU pressure from
``/proc/pressure/cpu``, the exit status) to :data:`LOG_FILE` in the stage directory. The job fails when any
repetition fails. With R = 1 the job script is the one without repetitions.
"""

import math
import re
import statistics

#: The line that starts each repetition's output on stdout (the repetition's number follows).
MARKER = '### ibrepro repetition'
#: Per repetition: ``start|end <repetition> <unix time> <CPU pressure total, us> [exit status]``.
LOG_FILE = 'repetitions.txt'

#: The most repetitions one job may run (a knob from the command line: bounded).
MAX_REPETITIONS = 50

_MARKER_LINE = re.compile(r'^### ibrepro repetition (\d+) of (\d+)$', re.M)
_PRESSURE = "$(sed -n 's/^some .*total=//p' /proc/pressure/cpu 2>/dev/null || echo -)"


def check(repetitions):
    """``repetitions`` as an int in 1..MAX_REPETITIONS, or ValueError naming the knob."""
    if isinstance(repetitions, bool) or not isinstance(repetitions, int) or \
            not 1 <= repetitions <= MAX_REPETITIONS:
        raise ValueError(f'repetitions={repetitions!r}: must be an integer from 1 to {MAX_REPETITIONS}')
    return repetitions


def job_commands(repetitions):
    """``(commands before the launch, commands after it)`` that run the launch ``repetitions`` times (the job
    exits with the last failing repetition's status)."""
    check(repetitions)
    if repetitions == 1:
        return [], []
    before = [
        'ibrepro_failed=0',
        f'for ibrepro_repetition in $(seq 1 {repetitions}); do',
        f'echo "{MARKER} $ibrepro_repetition of {repetitions}"',
        f'echo "start $ibrepro_repetition $(date +%s.%N) {_PRESSURE}" >> {LOG_FILE}',
    ]
    after = [
        'ibrepro_status=$?',
        f'echo "end $ibrepro_repetition $(date +%s.%N) {_PRESSURE} $ibrepro_status" >> {LOG_FILE}',
        '[ "$ibrepro_status" = 0 ] || ibrepro_failed=$ibrepro_status',
        'done',
    ]
    return before, after


def job_exit():
    """The job script's last command: the status of the last failed repetition (0 when none failed)."""
    return 'exit $ibrepro_failed'


def split_output(text, repetitions):
    """The stdout of a job with ``repetitions`` repetitions, one text per repetition (ValueError when a
    repetition's marker is missing: the job ended early)."""
    marks = list(_MARKER_LINE.finditer(text))
    found = [int(m.group(1)) for m in marks]
    if found != list(range(1, len(found) + 1)) or any(int(m.group(2)) != repetitions for m in marks):
        raise ValueError(f'repetition markers out of order in the output: {found[:10]}')
    if len(found) < repetitions:
        raise ValueError(f'only {len(found)} of {repetitions} repetitions started (the job ended early)')
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return [text[m.end():end] for m, end in zip(marks, ends)]


def cpu_pressure(log_text):
    """Share of the repetitions' wall time in which some task of the node waited for a CPU (``/proc/pressure/cpu``
    'some'), or None when the node does not report it."""
    starts, waited, wall = {}, 0.0, 0.0
    for line in log_text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[0] not in ('start', 'end'):
            continue
        try:
            when, pressure = float(parts[2]), float(parts[3])
        except ValueError:
            return None
        if not (math.isfinite(when) and math.isfinite(pressure)):
            return None
        if parts[0] == 'start':
            starts[parts[1]] = (when, pressure)
        elif parts[1] in starts:
            t0, p0 = starts.pop(parts[1])
            wall += when - t0
            waited += (pressure - p0) / 1e6
    return round(min(1.0, max(0.0, waited / wall)), 4) if wall > 0 else None


def median_rows(tables):
    """The rows of the first table with every metric the median over ``tables`` (same benchmark, same sizes)."""
    first = tables[0]
    keys = set(first.metrics.values())
    by_size = [{row.get(t.size_key) if t.size_key else None: row for row in t.rows} for t in tables]
    rows = []
    for row in first.rows:
        size = row.get(first.size_key) if first.size_key else None
        merged = dict(row)
        for key in keys:
            xs = [r[key] for r in (b.get(size) for b in by_size)
                  if r is not None and isinstance(r.get(key), (int, float)) and not math.isnan(r[key])]
            if xs:
                merged[key] = statistics.median(xs)
        rows.append(merged)
    return rows


def spread(per_repetition, better):
    """The noise of one night from its repetitions: the standard deviation over repetitions of the test case's
    index (per repetition, the median over its directed variables of the log deviation from the variable's median
    over the repetitions; positive = worse). ``per_repetition`` maps a variable to its R values; ``better`` a
    variable to 'lower' / 'higher' / None. None with fewer than two repetitions."""
    indexes = None
    for name, values in per_repetition.items():
        direction = better.get(name)
        if not direction or len(values) < 2 or any(v is None or v <= 0 for v in values):
            continue
        center = statistics.median(math.log(v) for v in values)
        sign = -1 if direction == 'higher' else 1
        devs = [sign * (math.log(v) - center) for v in values]
        if indexes is None:
            indexes = [[] for _ in devs]
        if len(devs) != len(indexes):
            continue
        for slot, d in zip(indexes, devs):
            slot.append(d)
    if not indexes or len(indexes) < 2 or not all(indexes):
        return None
    return round(statistics.stdev(statistics.median(slot) for slot in indexes), 6)

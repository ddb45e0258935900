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

**The control** (``-S control=true``, the nightly's rounds): before each repetition, and once more after the last,
the job runs ``ibrepro_control`` (benchmarks/control/control.c) on the CPUs the ranks run on: a core-to-core cache-line
round trip, a memory copy, and the hypervisor's steal and the node's CPU pressure while it ran. No MPI, no network:
what moves it is the machine, never the measured stack, so the verdict excludes a round on its evidence and never on
the benchmark's own spread. A round is framed by the control before it and the one after it (the next round's, or
the last one): on the 2-core VM the machine's slow state often began between a round's control and its end, which
the control before alone missed. Its output goes to :data:`CONTROL_FILE` (one block per control, ``### round N``,
N = R + 1 for the one after the last), the case stores it as ``control_values``, R + 1 dicts in that order; a control
that failed or is missing fails the case (a night whose control did not run cannot be told from a busy one). It
runs on the job's first node (the batch step): what the 1x2 layouts use; for several nodes it is the first node's
machine state only. The control also prints the node's hardware (its CPU model and cache, each RDMA device's board
id), which the case stores as ``node_hardware``: a frozen baseline describes one kind of hardware, and a night
measured on another is not judged against it (:mod:`ibrepro.charts`).
"""

import collections
import dataclasses
import math
import os
import re
import shlex
import statistics

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import variable
from reframe.core.exceptions import SanityError

from .. import parsers

#: The line that starts each repetition's output on stdout (the repetition's number follows).
MARKER = '### ibrepro repetition'
#: Per repetition: ``start|end <repetition> <unix time> <CPU pressure total, us> [exit status]``.
LOG_FILE = 'repetitions.txt'

#: The most repetitions one job may run (a knob from the command line: bounded).
MAX_REPETITIONS = 50

#: Per repetition with ``control``: ``### round <repetition>`` then the control program's output.
CONTROL_FILE = 'control.txt'
#: The control program make setup builds (benchmarks/Makefile target ``control``).
CONTROL_PROGRAM = 'ibrepro_control'
#: What the control prints, each ``name value`` (``-`` where it cannot measure it).
CONTROL_FIELDS = ('pingpong_ns', 'copy_gbs', 'steal_pct', 'psi_some_pct', 'wall_s')

#: A hardware line of the control: ``hardware <field> <value>`` (``cpu``, ``cpu_model``, ``cache``, ``hca:<device>``).
_HARDWARE_LINE = re.compile(r'^hardware ([A-Za-z0-9_.:-]{1,80}) ([\x20-\x7e]{1,100})$', re.M)
_MARKER_LINE = re.compile(r'^### ibrepro repetition (\d+) of (\d+)$', re.M)
_PRESSURE = "$(sed -n 's/^some .*total=//p' /proc/pressure/cpu 2>/dev/null || echo -)"


def check(repetitions):
    """``repetitions`` as an int in 1..MAX_REPETITIONS, or ValueError naming the knob."""
    if isinstance(repetitions, bool) or not isinstance(repetitions, int) or \
            not 1 <= repetitions <= MAX_REPETITIONS:
        raise ValueError(f'repetitions={repetitions!r}: must be an integer from 1 to {MAX_REPETITIONS}')
    return repetitions


def job_commands(repetitions, control=None):
    """``(commands before the launch, commands after it)`` that run the launch ``repetitions`` times (the job
    exits with the last failing repetition's status); ``control``: the control program, run before each repetition
    and after the last (a loop even for one)."""
    check(repetitions)
    if repetitions == 1 and not control:
        return [], []
    before = [
        'ibrepro_failed=0',
        f'for ibrepro_repetition in $(seq 1 {repetitions}); do',
        f'echo "{MARKER} $ibrepro_repetition of {repetitions}"',
    ]
    if control:
        before += _control_commands(control, '$ibrepro_repetition')
    before += [
        f'echo "start $ibrepro_repetition $(date +%s.%N) {_PRESSURE}" >> {LOG_FILE}',
    ]
    after = [
        'ibrepro_status=$?',
        f'echo "end $ibrepro_repetition $(date +%s.%N) {_PRESSURE} $ibrepro_status" >> {LOG_FILE}',
        '[ "$ibrepro_status" = 0 ] || ibrepro_failed=$ibrepro_status',
        'done',
    ]
    if control:             # the control after the last round: each round is framed by one on either side
        after += _control_commands(control, str(repetitions + 1))
    return before, after


def _control_commands(control, number):
    return [f'echo "### round {number}" >> {CONTROL_FILE}',
            f'{shlex.quote(control)} >> {CONTROL_FILE} 2>&1 || echo "failed {number} $?" >> {CONTROL_FILE}']


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


def parse_control(text, controls):
    """The values of each of the ``controls`` controls (a job of R repetitions runs R + 1): a list of dicts
    (:data:`CONTROL_FIELDS`, None where it printed ``-``), or ValueError naming the control that failed or is
    missing."""
    blocks = re.split(r'^### round (\d+)$', text, flags=re.M)
    found = {}
    for number, body in zip(blocks[1::2], blocks[2::2]):
        failed = re.search(r'^failed \d+ (\d+)$', body, re.M)
        if failed:
            reason = next((ln for ln in body.splitlines() if ln.startswith('ibrepro_control:')), 'no reason given')
            raise ValueError(f'control {number} of {controls} failed (exit {failed.group(1)}: {reason[:200]})')
        values = {}
        for line in body.splitlines():
            name, _, value = line.partition(' ')
            if name in CONTROL_FIELDS:
                try:
                    values[name] = None if value.strip() == '-' else float(value)
                except ValueError:
                    raise ValueError(f'control {number} of {controls} printed {line[:80]!r}') from None
                if values[name] is not None and not (math.isfinite(values[name]) and values[name] >= 0):
                    raise ValueError(f'control {number} of {controls} printed {line[:80]!r}')
        lacking = sorted(set(CONTROL_FIELDS) - set(values))
        if lacking:
            raise ValueError(f'control {number} of {controls} printed no {", ".join(lacking)}')
        found[int(number)] = values
    missing = [r for r in range(1, controls + 1) if r not in found]
    if missing:
        raise ValueError(f'no output of control(s) {", ".join(map(str, missing[:10]))} of {controls}')
    return [found[r] for r in range(1, controls + 1)]


def parse_hardware(text):
    """The node's hardware the controls printed (``{field: value}``, printable text; empty when none printed it:
    a control built before it did), or ValueError when two controls of one job disagree (the promise that every
    round ran on the same node was not kept)."""
    blocks = re.split(r'^### round \d+$', text, flags=re.M)[1:]
    seen = [dict(_HARDWARE_LINE.findall(body)) for body in blocks]
    seen = [found for found in seen if found]
    if any(found != seen[0] for found in seen[1:]):
        raise ValueError(f'the rounds ran on different hardware: {seen[0]} and '
                         f'{next(f for f in seen if f != seen[0])}')
    return seen[0] if seen else {}


def _pressure_intervals(log_text):
    """``(intervals, unreadable)``: per repetition of :data:`LOG_FILE` that has a start and an end,
    ``(repetition, wall seconds, seconds some task waited for a CPU)``; ``unreadable``: whether a line's numbers
    could not be read (a node without PSI prints ``-``)."""
    starts, intervals, unreadable = {}, [], False
    for line in log_text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[0] not in ('start', 'end'):
            continue
        try:
            when, pressure = float(parts[2]), float(parts[3])
        except ValueError:
            unreadable = True
            continue
        if not (math.isfinite(when) and math.isfinite(pressure)):
            unreadable = True
            continue
        if parts[0] == 'start':
            starts[parts[1]] = (when, pressure)
        elif parts[1] in starts:
            t0, p0 = starts.pop(parts[1])
            intervals.append((parts[1], when - t0, (pressure - p0) / 1e6))
    return intervals, unreadable


def _share(waited, wall):
    return round(min(1.0, max(0.0, waited / wall)), 4)


def round_pressure(log_text):
    """Per repetition, the share of its wall time in which some task of the node waited for a CPU (None where the
    node does not report it): what the rounds of a night were up against."""
    intervals, _ = _pressure_intervals(log_text)
    ordered = sorted(intervals, key=lambda interval: int(interval[0]))
    return [_share(waited, wall) if wall > 0 else None for _, wall, waited in ordered]


def cpu_pressure(log_text):
    """Share of the repetitions' wall time in which some task of the node waited for a CPU (``/proc/pressure/cpu``
    'some'), or None when the node does not report it."""
    intervals, unreadable = _pressure_intervals(log_text)
    wall = sum(w for _, w, _ in intervals)
    return None if unreadable or wall <= 0 else _share(sum(x for *_, x in intervals), wall)


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


class Repetitions(rfm.RegressionTestPlugin):
    """Plugin of a family whose job can run its benchmark R times (``-S repetitions=R``: the MPI-launched families;
    the pair runner's flows start together at one barrier and measure once per job, so its families do not mix it
    in); its steps run from
    :class:`ibrepro.rfm.PaperExperiment`'s hooks (:meth:`measure` in sanity, :meth:`_repeat` before the run)."""

    #: Runs of the benchmark inside the job, back to back: each size reports the median over them, and their spread
    #: is the night's own noise.
    repetitions = variable(int, value=1, loggable=True)

    #: Per performance variable, its value in each repetition (set in the performance stage; empty for one).
    repetition_values = variable(typ.Dict[str, typ.List[float]], value={}, loggable=True)

    #: The spread of the test case's index over the repetitions (log units, ~ relative; None for one).
    repetition_spread = variable(float, type(None), value=None, loggable=True)

    #: Share of the repetitions' time in which some task of the (first) node waited for a CPU (Linux PSI);
    #: None where the node does not report it or for one repetition.
    cpu_pressure = variable(float, type(None), value=None, loggable=True)

    #: Run the control measurement (``ibrepro_control``) before each repetition and after the last, on the ranks'
    #: node: the nightly rounds' evidence of a busy machine (module doc).
    control = variable(typ.Bool, value=False, loggable=True)   # typ.Bool: -S control=false is False

    #: The control program (default: the one make setup builds in build/bench/bin).
    control_program = variable(str, value='')

    #: The control's values, before each repetition and after the last (``control``: R + 1; empty without it).
    control_values = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

    #: The node's hardware, as the control read it (``parse_hardware``; empty without the control).
    node_hardware = variable(typ.Dict[str, str], value={}, loggable=True)

    #: Per repetition, the share of its time some task of the node waited for a CPU (None where not reported).
    repetition_pressure = variable(typ.List[object], value=[], loggable=True)

    def in_each_repetition(self):
        """Job-script lines at the start of each repetition (the injection plugin's)."""
        return []

    def control_path(self):
        """The control program this case runs (ValueError when it is not there: the promise cannot be kept)."""
        from .. import rfmconfig
        path = self.control_program or str(rfmconfig.BENCH_BIN / CONTROL_PROGRAM)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise ValueError(f'control=true: the control program {path} is not there (make setup builds it; or '
                             '-S control_program=<path>)')
        return path

    def _repeat(self):
        check(self.repetitions)
        before, after = job_commands(self.repetitions, self.control_path() if self.control else None)
        before += self.in_each_repetition()
        if before:
            self.prerun_cmds = self.prerun_cmds + before
            self.postrun_cmds = after + self.postrun_cmds + [job_exit()]
            self.keep_files = self.keep_files + [LOG_FILE] + ([CONTROL_FILE] if self.control else [])

    def measure(self):
        """The parsed output and its table; with repetitions, each repetition's output diagnosed and the table
        the median per size."""
        if self.repetitions <= 1 and not self.control:
            return self.diagnose()
        if self.control:
            try:
                text = self._read(CONTROL_FILE)
                self.control_values = parse_control(text, self.repetitions + 1)
                self.node_hardware = parse_hardware(text)
            except ValueError as err:
                raise SanityError(f'control: {err}') from None
        self.repetition_pressure = round_pressure(self._read(LOG_FILE))
        stdout = self._read(self.stdout.evaluate())
        try:
            chunks = split_output(stdout, self.repetitions)
        except ValueError as err:
            raise SanityError(f'{self.tool}: {err}') from None
        tables = []
        for number, chunk in enumerate(chunks, 1):
            self._stdout_text = chunk        # diagnose() reads this repetition's output as the job's stdout
            try:
                parsed, table = self.diagnose()
            except SanityError as err:
                raise SanityError(f'repetition {number} of {self.repetitions}: {err}') from None
            finally:
                self._stdout_text = None
            tables.append(table)
        combined = dataclasses.replace(tables[0], rows=median_rows(tables))
        per_rep = collections.defaultdict(list)
        for table in tables:
            for name, value, _ in table.metric_values():
                per_rep[name].append(float(value))   # message rates print as integers
        wanted = set(self.report_metrics)
        self.repetition_values = {n: vs for n, vs in per_rep.items()
                                  if not wanted or n.rsplit('_', 1)[0] in wanted}
        better = {n: parsers.METRIC_BETTER.get(n.rsplit('_', 1)[0]) for n in self.repetition_values}
        self.repetition_spread = spread(self.repetition_values, better)
        self.cpu_pressure = cpu_pressure(self._read(LOG_FILE))
        return parsed, combined

"""Benchmark output -> tables, one row per message size: the only place that reads benchmark output.

Every tool module (``imb``, ``osu``, ...) exposes ``TOOL`` (its name), ``detect(text) -> bool`` and
``parse(text, source) -> ParsedOutput``. A tool's own failure report (wrong rank count, invalid
option, failed verification, abort, timeout, no RDMA device) raises :class:`BenchmarkFailed` with a
``kind`` from :data:`FAILURE_KINDS`; output we do not understand raises :class:`ParseError`. Both
name the source and say why, so a ReFrame sanity failure reads as a diagnosis.

The ReFrame side (:mod:`ibrepro.rfm`) turns :meth:`Table.metric_values` into one performance
variable per message size, named ``<metric>_<bytes>`` (``lat_1024``, ``bw_65536``).
"""

import importlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Optional

from ..compat import dataclasses

#: Metric prefixes of performance variables, and their units.
METRIC_UNITS = {
    'lat': 'us',         # latency or time per operation, microseconds
    'bw': 'MB/s',        # bandwidth, 10^6 bytes per second
    'msgrate': 'msg/s',  # messages per second
    'time': 's',         # application run time
    'mops': 'Mop/s',     # NPB millions of operations per second (total)
    'overhead': 'us',    # host overhead: time inside the MPI calls per message (ibrepro-bench)
    'overlap': 'us',     # computation that overlaps a message exchange (ibrepro-bench)
    'mem': 'KiB',        # resident memory of one process (ibrepro-bench; /proc's "kB")
}

#: Which direction of each metric is better (regression = moving the other way).
METRIC_BETTER = {'lat': 'lower', 'bw': 'higher', 'msgrate': 'higher', 'time': 'lower', 'mops': 'higher',
                 'overhead': 'lower', 'overlap': 'higher', 'mem': 'lower'}

#: Kinds of failure a benchmark reports about itself.
FAILURE_KINDS = {
    'invalid-ranks': 'the benchmark cannot run with this number of processes',
    'invalid-benchmark': 'the benchmark name is not known to the tool',
    'invalid-option': 'the tool rejected an option',
    'timeout': 'the run or a measurement hit a time limit',
    'abort': 'the program or the MPI job aborted',
    'verification': 'the benchmark verified its result and it was wrong',
    'no-device': 'no usable RDMA device',
    'incomplete': 'the output stops before the message-size sweep is complete',
    'no-peer': 'the client could not reach its server (not started, wrong address, or unreachable)',
    'invalid-result': 'the tool printed a result that is not a number (inf, nan): its measurement failed',
    'invalid-value': 'a value no measurement can produce (infinite, negative, out of range): garbled or failed output',
}

#: The physical domain of each metric: ``(lowest, lowest allowed, highest)``. Durations are > 0; rates and amounts
#: are >= 0 (0 where a tool prints it, e.g. the bandwidth of empty messages); the highest is beyond any machine (a
#: day of latency, 1 PB/s) and keeps every statistic on the values finite. A value outside is not data.
METRIC_DOMAIN = {
    'lat': (0.0, False, 8.64e10),       # us: a day
    'overhead': (0.0, True, 8.64e10),   # us
    'overlap': (0.0, True, 8.64e10),    # us
    'time': (0.0, False, 8.64e8),       # s: 10,000 days
    'bw': (0.0, True, 1e9),             # MB/s: 1 PB/s
    'msgrate': (0.0, True, 1e12),       # msg/s
    'mops': (0.0, True, 1e12),          # Mop/s: 10^18 op/s
    'mem': (0.0, True, 1e12),           # KiB: 1 PiB
}
#: The largest message size (2^50 B, a PiB): beyond it a size is garbled output.
MAX_SIZE = 2 ** 50
#: Variables of no metric (counts such as RDMA ports, link limits in Gb/s or MB/s): finite, >= 0, at most this.
OTHER_MAX = 1e15

# Tool modules in detection order (the first whose detect() accepts the text parses it).
_TOOL_MODULES = ['imb', 'osu', 'npb', 'perftest', 'bench', 'nvbandwidth', 'nccl']


class ParseError(ValueError):
    """The output could not be understood. ``str()`` names the source and the reason."""

    def __init__(self, source, reason):
        self.source = str(source)
        self.reason = reason
        super().__init__(f'{self.source}: {reason}')


class BenchmarkFailed(ParseError):
    """The tool reported a failure of its own; ``partial`` keeps whatever it measured before."""

    def __init__(self, source, kind, reason, partial=None):
        if kind not in FAILURE_KINDS:
            raise ValueError(f'unknown failure kind {kind!r}')

        self.kind = kind
        self.partial = partial
        super().__init__(source, f'{kind}: {reason}')


@dataclasses.dataclass
class Column:
    """One column as the tool printed it."""

    name: str                  # the header as printed, e.g. 't_avg[usec]'
    key: str                   # the row key, e.g. 't_avg_usec'
    unit: Optional[str] = None    # 'B', 'us', 'MB/s', 'msg/s', '%', 's', 'Mop/s'


@dataclasses.dataclass
class Table:
    """One benchmark's result table (one per benchmark and process count, or per mode)."""

    benchmark: str
    columns: list
    rows: list
    #: what the table was measured with, e.g. {'processes': 2} or {'mode': 'AGGREGATE'}
    params: dict = dataclasses.field(default_factory=dict)
    #: metric prefix (see METRIC_UNITS) -> column key holding it
    metrics: dict = dataclasses.field(default_factory=dict)
    #: the row key holding the message size in bytes; None for size-less tables (NPB)
    size_key: Optional[str] = 'bytes'
    #: notes about this table, e.g. a size skipped by a time-out
    notes: list = dataclasses.field(default_factory=list)

    def sizes(self):
        return [row[self.size_key] for row in self.rows] if self.size_key else []

    def metric_values(self):
        """Yield ``(variable name, value, unit)`` for every metric of every row."""
        for row in self.rows:
            for metric, key in self.metrics.items():
                value = row.get(key)
                if not isinstance(value, (int, float)) or math.isnan(value):
                    continue

                if metric == 'bw' and self.size_key and row[self.size_key] == 0:
                    continue  # the bandwidth of empty messages is 0 by definition

                name = metric if self.size_key is None else f'{metric}_{row[self.size_key]}'
                yield name, value, METRIC_UNITS[metric]


@dataclasses.dataclass
class ParsedOutput:
    """Everything one output file says."""

    tool: str
    source: str
    version: Optional[str] = None
    tables: list = dataclasses.field(default_factory=list)
    #: header facts printed by the tool (command line, date, MPI version, ...)
    meta: dict = dataclasses.field(default_factory=dict)

    def table(self, benchmark=None, **params):
        """The one table matching ``benchmark`` and ``params``; ParseError if none or several."""
        found = [t for t in self.tables
                 if (benchmark is None or t.benchmark.lower() == benchmark.lower())
                 and all(t.params.get(k) == v for k, v in params.items())]
        if len(found) != 1:
            what = ', '.join([benchmark or 'any benchmark'] + [f'{k}={v}' for k, v in params.items()])
            have = '; '.join(f'{t.benchmark} {t.params}' for t in self.tables) or 'no tables'
            raise ParseError(self.source, f'expected one table for {what}, found {len(found)} ({have})')

        return found[0]

    def to_dict(self):
        return dataclasses.asdict(self)


# What MPI launchers and schedulers print when a job dies; shared by every MPI tool's parser. The launcher's
# own refusals come first: they explain the aborts that follow them.
#: What the scheduler did to the job (Slurm's "*** JOB 42 ON cn7 CANCELLED AT ... DUE TO ... ***" on stderr).
_JOB_EVENTS = [
    # "ON <host>" is where the step's stepd runs, not the node that failed: `sinfo -R` names that one
    (r'\*\*\* (?:JOB|STEP) ([\d.]+) ON \S+ CANCELLED AT \S+ DUE TO NODE FAILURE',
     'a node of the job failed while it ran: Slurm cancelled {0} (job state NODE_FAIL; `sinfo -R` names the node '
     'and why)'),
    (r'\*\*\* (?:JOB|STEP) ([\d.]+) ON \S+ CANCELLED AT \S+ DUE TO PREEMPTION',
     'the job was preempted: Slurm cancelled {0}'),
    (r'DUE TO TIME LIMIT', 'the job hit its time limit (Slurm cancelled the step)'),
]

_ABORTS = _JOB_EVENTS + [
    (r'(?<!\S)(\S+) has detected an attempt to run as root',   # (?<!\S): tried at a word's start only: linear
     'Open MPI ({0}) refuses to run as root: the environment needs OMPI_ALLOW_RUN_AS_ROOT=1 and '
     'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (ibrepro sets them in its Open MPI environments), or run as another user'),
    (r'Runtime environment uses unsupported PMI version (\S+?)\.',
     'the program was built with MPICH but started by a launcher that speaks {0} (another MPI\'s mpirun, or srun '
     '--mpi=pmix): run it with the mpirun of the MPI it was built with (PATH), or srun --mpi=pmi2'),
    (r'MPI_ABORT was invoked on rank (\d+)[^\n]*\n\s*with errorcode (\d+)',
     'MPI_ABORT on rank {0}, error code {1}'),
    (r'application called MPI_Abort\(\S+, (\d+)\)', 'MPI_Abort with error code {0}'),
    (r'KILLED BY SIGNAL: (\d+) \(([^)]*)\)', 'a rank was killed by signal {0} ({1})'),
    (r'EXIT STRING: ([^\n(]*\(signal \d+\))', 'a rank was terminated: {0}'),
    (r'BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES[^\n]*\n[^\n]*\n=\s*EXIT CODE: (\d+)',
     'a rank terminated badly, exit code {0}'),
    (r'process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\)',
     'rank {0} on {1} exited on signal {2} ({3})'),
    (r'srun: error: (\S+): tasks? ([\d,-]+): (Killed|Terminated|Exited with exit code \d+)',
     'srun: {0} task {1}: {2}'),
    (r'detected that one or more processes exited with non-zero status[^\n]*\n(?:[^\n]*\n){0,3}?\s*Process name: '
     r'(\S+)\s*\n\s*Exit code:\s*(\d+)', 'rank {0} exited with code {1} (Open MPI)'),
]


def mpi_abort_reason(text, patterns=None):
    """A one-line reason if ``text`` shows an MPI job dying (abort, kill, time limit), else None."""
    for pattern, message in patterns or _ABORTS:
        m = re.search(pattern, text)
        if m:
            return message.format(*(g.strip() for g in m.groups()))

    return None


def job_event(text):
    """What the scheduler did to the job (a node failed, preemption, time limit), from its stderr, or None."""
    return mpi_abort_reason(text, _JOB_EVENTS)


def _tool_module(name):
    if name not in _TOOL_MODULES:
        raise ValueError(f'unknown tool {name!r}; known: {", ".join(_TOOL_MODULES)}')

    return importlib.import_module(f'{__name__}.{name}')


def tools():
    return list(_TOOL_MODULES)


def detect_tool(text):
    """The name of the tool that printed ``text``, or None."""
    for name in _TOOL_MODULES:
        if _tool_module(name).detect(text):
            return name

    return None


def parse_text(text, source='<text>', tool=None):
    """Parse one benchmark output. Raises ParseError (or BenchmarkFailed, e.g. ``invalid-value``)."""
    if not text.strip():
        raise ParseError(source, 'empty output')

    tool = tool or detect_tool(text)
    if tool is None:
        raise ParseError(source, 'not the output of a known benchmark '
                                 f'(known: {", ".join(_TOOL_MODULES)})')

    try:
        out = _tool_module(tool).parse(text, str(source))
    except ParseError:
        raise
    except ValueError as err:   # int() of a number thousands of digits long: Python's limit against slow conversions
        raise ParseError(source, f'unreadable number ({err})') from None
    _check_values(out, text)
    return out


# -- the values' domains: one check where values leave the parsers --------------------------------------

def value_problem(variable, value):
    """Why ``value`` cannot be a measurement of ``variable`` (``lat_1024``, ``time``, ``rdma_ports``), or None."""
    metric = variable.rpartition('_')[0] if variable.rpartition('_')[2].isdigit() else variable
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f'not a number ({type(value).__name__})'
    if isinstance(value, float) and not math.isfinite(value):   # (an int is finite, and may not fit a float)
        return 'not a finite number'
    low, low_ok, high = METRIC_DOMAIN.get(metric, (0.0, True, OTHER_MAX))
    if value < low or (value == low and not low_ok) or value > high:
        unit = f' {METRIC_UNITS[metric]}' if metric in METRIC_UNITS else ''
        return f'{metric} must be {">=" if low_ok else ">"} {low:g} and <= {high:g}{unit}'
    return None


def _check_values(out, text):
    """Every message size a non-negative integer printed once per table, every metric value in its domain
    (METRIC_DOMAIN); else BenchmarkFailed ``invalid-value`` naming the tool, table, size and what was printed."""
    for table in out.tables:
        for row in table.rows:
            size = row.get(table.size_key) if table.size_key else None
            if table.size_key and (isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_SIZE):
                _invalid(out, table, row, table.size_key, text, 'a message size must be an integer from 0 to 2^50')
            for metric, key in table.metrics.items():
                value = row.get(key)
                if value is None:
                    continue
                problem = value_problem(metric, value)
                if problem:
                    _invalid(out, table, row, key, text, problem)
        if table.size_key:     # one value per size: a second row of a size would overwrite the first, silently
            seen = set()
            for row in table.rows:
                if row[table.size_key] in seen:
                    _invalid(out, table, row, table.size_key, text,
                             'this message size is printed twice in one table (one value would overwrite the other)')
                seen.add(row[table.size_key])


def _invalid(out, table, row, key, text, problem):
    name = next((c.name for c in table.columns if c.key == key), key)
    size = f' at {row[table.size_key]!r} B' if table.size_key and key != table.size_key else ''
    params = ''.join(f' {k}={v}' for k, v in table.params.items() if v is not None)
    line = _printed_line(text, table, row, key)
    printed = f', printed {line!r}' if line else ''
    raise BenchmarkFailed(out.source, 'invalid-value', f'{out.tool} {table.benchmark}{params}: {name} = '
                          f'{row[key]!r}{size}{printed}: {problem}', partial=out)


def _printed_line(text, table, row, key):
    """The output line a bad value came from (the first with its size and a token of its value), for the message."""
    value, first = row[key], None
    label = next((c.name for c in table.columns if c.key == key), key)
    for line in text.splitlines():
        tokens = line.split()
        if table.size_key:
            if not tokens or tokens[0] != str(row[table.size_key]):
                continue
        elif label not in line:
            continue
        first = first or line
        if any(_same(token, value) for token in tokens):
            return _shorten(line.strip())
    return _shorten(first.strip()) if first else None


def _same(token, value):
    try:
        number = float(token)
    except ValueError:
        return token == value
    return number == value or (number != number and value != value)


def _shorten(line, width=120):
    return line if len(line) <= width else f'{line[:width - 15]}... ({len(line)} chars)'


def parse_file(path, tool=None):
    path = Path(path)
    try:
        text = path.read_text(errors='replace')
    except OSError as err:
        raise ParseError(path, f'cannot read: {err.strerror}') from None

    return parse_text(text, source=path, tool=tool)


# -- command line ------------------------------------------------------------------------------

def add_cli(subparsers):
    p = subparsers.add_parser(
        'parse', help='parse benchmark output files and print JSON',
        description='Parse the output of a benchmark (IMB, OSU, NPB, perftest, ibrepro-bench) and '
                    'print JSON: tool, version, and per table the units and one row per message '
                    'size. Exits 1 if any file cannot be parsed or reports a failure.')
    p.add_argument('files', nargs='+', metavar='FILE')
    p.add_argument('--tool', choices=_TOOL_MODULES, help='skip auto-detection')
    p.set_defaults(func=_cli_parse)


def _cli_parse(args):
    status = 0
    results = []
    for path in args.files:
        try:
            results.append(parse_file(path, tool=args.tool).to_dict())
        except BenchmarkFailed as err:
            status = 1
            print(f'ibrepro parse: {err}', file=sys.stderr)
            results.append({'source': err.source, 'failure': err.kind, 'reason': err.reason,
                            'partial': err.partial.to_dict() if err.partial else None})
        except ParseError as err:
            status = 1
            print(f'ibrepro parse: {err}', file=sys.stderr)

    if results:
        json.dump(results[0] if len(results) == 1 else results, sys.stdout, indent=2)
        print()

    return status

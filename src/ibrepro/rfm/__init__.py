"""What every ibrepro ReFrame check shares: one mixin, so the check files stay declarative.

A check says which experiments of the papers it reproduces, which tool prints its output and which table of
that output it reports; :class:`PaperExperiment` then

* tags it (``exp<row>``, ``s<seed>``, ``s<seed>-fig<N>``, the tool and the level; ``nightly`` for the subset that covers
  every figure of the papers once, reference-data/nightly.yaml),
* judges it against ``reference-data/systems/<system>/references.yaml`` when that file exists (ReFrame's
  ``$ref`` references, indexed by partition, environment and the check's parameters),
* fails sanity with the parser's diagnosis (the tool's own failure report, an MPI abort, an incomplete sweep,
  a missing binary, a metric the check reports that the output lacks) instead of a bare "pattern not found",
* with the plugins a family mixes in besides it, each owning its variables: the common knobs
  (:class:`~ibrepro.rfm.knobs.Knobs`), whole nodes, binding and rail (:class:`~ibrepro.rfm.launch.Placement`),
  repetitions and injection (:class:`~ibrepro.rfm.repeat.Repetitions`, :class:`~ibrepro.rfm.inject.Injection`),
  the layout (:class:`~ibrepro.rfm.layout.NodeLayout`) or the pair runner
  (:class:`~ibrepro.rfm.pair_runner.PairRunner`, shared by perftest and our verbs benchmark),
* and, in the performance stage, records one performance variable per message size and metric (``lat_1024``,
  ``bw_1048576``) plus the peak of each rate (``bw_peak``). References judge only a few representative
  variables (:attr:`reference_variables`: small-message latency, peak rates, the sizes the papers state), so one
  noisy size does not fail a night; the whole curve is stored for the report and the history test.
"""

import functools
import math
import os
import re
import shlex

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import PerformanceError, ReframeError, SanityError

from .. import catalog, parsers, paths, rfmconfig
from ..catalog import NightlyError, nightly_cases
from . import launch
from .inject import Injection  # noqa: F401  (the plugins a family mixes in besides this base)
from .knobs import Knobs, expand_sizes, size_bytes  # noqa: F401  (the size grammar's home: knobs)
from .launch import Placement  # noqa: F401
from .repeat import Repetitions  # noqa: F401

#: ReFrame reference file name inside a system's reference directory.
REFERENCES_FILE = 'references.yaml'

#: The time a check may take unless it says otherwise.
DEFAULT_TIME_LIMIT = '20m'

#: How long a job may wait in the queue unless the partition's ``max_pending_time`` extra or ``-S
#: max_pending_time=`` says otherwise: past it ReFrame cancels the job, and the case measured nothing ("could not
#: judge", ibrepro.verdict.not_measured), instead of holding tonight's run, its confirmation and the nights after.
DEFAULT_MAX_PENDING_TIME = '2h'

#: Test variables that name a program or a directory (they reach job scripts): see ``_refuse_unsafe_names``.
NAME_VARIABLES = ('imb_binary', 'osu_bin_dir', 'npb_bin_dir', 'npb_binary', 'osu_benchmark', 'program', 'test',
                  'control_program')
#: Knobs that reach an environment variable (the injector's): no shell syntax, which ReFrame would expand.
ENV_VARIABLES = ('inject_library', 'inject_sizes')
#: Numeric knobs: the range each must be in (finite); a value outside is refused, named (an infinite
#: ``inject_us`` would busy-wait every MPI call until the job is killed).
KNOB_RANGES = {'inject_us': (0.0, 1e6), 'inject_pct': (0.0, 1e4), 'time_per_sample': (1e-9, 86400.0)}
#: The always-last hooks of each stage, in the order they must run: after every other hook of the stage (the family's
#: command, layout and channel), NPB's ``require_tools`` before NodeLayout selects by the features it requires.
#: ReFrame runs a stage's always-last hooks in the reverse order of the classes defining them, so the order is stated
#: here and :func:`hook_order_problems` holds every check class to it (tests/test_layout.py).
LAST_HOOKS = {
    'post_init': ('require_tools', '_tag_and_reference', 'select_by_features'),
    'pre_run': ('_complete_job',),
}

_SAFE_NAME = re.compile(r'[\w./+@%,:={}-]+')
_PLAIN_WORD = re.compile(r'[\w./+@%,:=-]+')


def hook_order_problems(cls):
    """How the always-last hooks of check class ``cls`` break :data:`LAST_HOOKS` (a list; empty when they keep it)."""
    last = {}
    for hook in cls._rfm_hook_registry:
        for stage, always_last in hook.stages:
            if always_last:
                last.setdefault(stage, set()).add(hook.__name__)
    problems = []
    for stage, names in sorted(last.items()):
        contract = LAST_HOOKS.get(stage, ())
        unknown = sorted(names - set(contract))
        if unknown:
            problems.append(f'{cls.__name__}: always-last {stage} hook(s) {", ".join(unknown)} not in LAST_HOOKS')
        ran = [fn.__name__ for fn in cls.pipeline_hooks().get(stage, ()) if fn.__name__ in names]
        if ran != [n for n in contract if n in names]:
            problems.append(f'{cls.__name__}: {stage} runs {ran}, LAST_HOOKS says {list(contract)}')
    return problems


class PaperExperiment(rfm.RegressionTestPlugin):
    """Mixin of every ibrepro check: tags and references, sanity and performance. Subclasses set ``tool``,
    ``level`` and ``experiments``; the plugins a family mixes in come before it among the family's bases."""

    #: Rows of the experiment catalog (reference-data/experiments.yaml) this check reproduces.
    experiments = variable(typ.List[int], value=[])

    #: Figure tags this check reproduces, as ``<seed>-<figure>`` (e.g. ``000-fig<N>``); empty means
    #: every figure of :attr:`experiments`.
    figures = variable(typ.List[str], value=[])

    #: The tool whose output :mod:`ibrepro.parsers` reads (``imb``, ``osu``, ``npb``, ``perftest``, ...).
    tool = variable(str)

    #: The level of the experiment: verbs, mpi, multirail, collective, app or system.
    level = variable(str)

    #: The benchmark table to report (as the tool names it); empty: the output's only table.
    table_benchmark = variable(str, value='')

    #: Parameters the reported table must have been measured with, e.g. ``{'processes': 4}``.
    table_params = variable(typ.Dict[str, object], value={})

    #: Metrics to record as performance variables (``lat``, ``bw``, ``msgrate``, ...); empty: all the table has.
    report_metrics = variable(typ.List[str], value=[])

    #: Why the check was skipped on this partition and environment ('' when it ran): kept in the run
    #: report, where ReFrame itself records no skip reason.
    skip_reason = variable(str, value='')

    #: The ibrepro commit the check ran from (provenance of every stored session).
    ibrepro_version = variable(str, value=paths.source_version())

    #: Names of the test attributes the references are indexed by, after partition and environment
    #: (the check's parameters). Recorded so ``ibrepro baseline`` can write references for this check.
    reference_index = variable(typ.List[str], value=[])

    #: The performance variables references judge (set in the performance stage): the smallest size of each
    #: time-like metric, the peak of each rate, and the sizes the papers state for this check's figures.
    reference_variables = variable(typ.List[str], value=[], loggable=True)

    #: The references file this case was judged against ('' when the system has none).
    references_file = variable(str, value='', loggable=True)

    # always_last: the check's own init hooks (which pick experiments per parameter) run first
    @run_after('init', always_last=True)
    def _tag_and_reference(self):
        if self.figures:
            tags = {f'exp{e}' for e in self.experiments}
            tags |= {f's{f}' for f in self.figures} | {f's{f.split("-")[0]}' for f in self.figures}
        else:
            tags = catalog.tags_for(self.experiments)

        self.tags |= tags | {self.tool, self.level}
        try:
            if self.display_name in nightly_cases():
                self.tags.add('nightly')
        except NightlyError as err:   # raised here, ReFrame would drop the case and pass: it fails instead
            self._nightly_error = str(err)
        self.reference_index = sorted(type(self).param_space.params)
        if not self.reference:
            self._use_system_references()

    def _use_system_references(self):
        """Judge against the system's reference file when it has one; otherwise only record.

        A file that exists but cannot be read (a typo, a refused YAML tag, an alias) fails the case with its
        name and line: ReFrame itself would only warn and skip the test, switching the regression test off.
        """
        prefix = (rt.runtime().get_option('general/0/reference_prefix')
                  or paths.system_references_dir(self.current_system.name))
        path = os.path.abspath(os.path.join(prefix, REFERENCES_FILE))
        self._reference_error = None
        if os.path.lexists(path):
            problem, doc = system_references(path)
            if not problem:
                try:
                    self.reference = class_references(doc, type(self).__name__, self.current_system.name)
                except (TypeError, ValueError, LookupError, ReframeError) as err:   # a shape the schema missed
                    problem = f'references file {path}: {type(self).__name__}: {err}'
            if problem:
                self._reference_error = problem
                return
            self.references_file = path

    @run_before('run')
    def _limit_pending_time(self):
        if self.max_pending_time is None:
            self.max_pending_time = self.current_partition.extras.get('max_pending_time', DEFAULT_MAX_PENDING_TIME)

    def program_name(self):
        """The benchmark program the case runs (families override); None: nothing to look for."""
        return None

    @run_after('setup')
    def _skip_without_program(self):
        """An environment provides exactly the programs it has: a partial install (OSU's pt2pt directory only,
        NPB with IS and FT only) skips the cases of the programs it lacks, with the reason, instead of failing."""
        self._refuse_unsafe_names()         # before a name is looked up anywhere
        name = self.program_name()
        programs = self.current_environ.extras.get('programs')
        if not name or programs is None or '/' in name or name in programs:
            return
        pattern = rfmconfig.TOOL_PROGRAMS.get(self.tool)
        have = [p for p in programs if pattern and pattern.fullmatch(p)]
        self.skip_for([f'{name!r} is not installed in environment {self.current_environ.name!r} (its {self.tool} '
                       f'programs: {", ".join(have[:12]) or "none"}{" ..." if len(have) > 12 else ""})'])

    def skip_for(self, reasons):
        """Skip with ``reasons`` (a list of strings) if there are any, recording them in the report."""
        if reasons:
            self.skip_reason = '; '.join(reasons)
            self.skip(self.skip_reason)

    # -- sanity ------------------------------------------------------------------------------------

    def _read(self, name):
        if name == self.stdout.evaluate() and getattr(self, '_stdout_text', None) is not None:
            return self._stdout_text
        path = os.path.join(self.stagedir, name)
        try:
            with open(path, errors='replace') as fp:
                return fp.read()
        except OSError:
            return ''

    def diagnose(self):
        """Parse the output and return the reported table, or raise SanityError saying what went wrong."""
        stdout = self._read(self.stdout.evaluate())
        stderr = self._read(self.stderr.evaluate())
        missing = _missing_binary(stderr, self.executable)
        if missing:
            raise SanityError(missing)

        abort = parsers.mpi_abort_reason(stderr) or parsers.mpi_abort_reason(stdout)
        try:
            parsed = parsers.parse_text(stdout, source=f'{self.name} stdout', tool=self.tool)
            table = parsed.table(self.table_benchmark or None, **self.table_params)
        except parsers.BenchmarkFailed as err:
            own = _own_failure(stderr, self.name, self.tool)     # tools that report errors on stderr
            raise SanityError(own or f'{err}' + (f' ({abort})' if abort and abort not in str(err) else '')) \
                from None
        except parsers.ParseError as err:
            # no benchmark output: the launcher's or MPI's own words say why (a refusal, a PMI mismatch)
            own = _own_failure(stderr, self.name, self.tool)
            raise SanityError(own or (f'{abort} [{err}]' if abort else str(err))) from None

        if abort:
            raise SanityError(f'{self.tool}: {abort}')

        missing_sizes = self.unmeasured_sizes(table)
        if missing_sizes:
            raise SanityError(f'{self.tool} {table.benchmark}: incomplete message-size sweep, '
                              f'missing {_sizes_text(missing_sizes)}')

        if self.job.exitcode:
            raise SanityError(f'{self.executable} exited with code {self.job.exitcode}')

        return parsed, table

    def check_metrics(self, table):
        """SanityError unless the table has every metric the check reports (a format the parser does not
        know would otherwise drop the variable, and ReFrame never judges references it does not get)."""
        missing = [m for m in self.report_metrics if m not in table.metrics]
        if missing:
            columns = ', '.join(c.name for c in table.columns)
            raise SanityError(f'{self.tool} {table.benchmark}: no {" or ".join(repr(m) for m in missing)} in the '
                              f'output (its columns: {columns}); `ibrepro parse` shows what was read')

    def measured(self):
        """The parsed output and its reported table, parsed once per run (sanity and performance share it)."""
        if getattr(self, '_measured', None) is None:
            wrong_place = launch.misplaced(self._read(self.stderr.evaluate()))
            if wrong_place:       # it measured another partition's nodes, or nothing: not this partition's number
                raise SanityError(wrong_place)
            wrong_path = getattr(self, 'transport_problem', lambda: '')()
            if wrong_path:        # it measured another path than its rail (what UCX says it chose)
                raise SanityError(wrong_path)
            try:
                self._measured = self.measure()
            except SanityError as err:
                said = getattr(self, 'ucx_problems', lambda: [])()
                if said:          # UCX's own words (in its logs, not stderr) say why MPI could not send
                    raise SanityError(f'{err}; UCX said: {said[0]}') from None
                raise
        return self._measured

    # Steps a plugin of the family provides (it comes before PaperExperiment among the family's bases); the hooks
    # of this class call them, so their order is this class's.

    def measure(self):
        """Parse the output (:class:`ibrepro.rfm.repeat.Repetitions`: each repetition's)."""
        return self.diagnose()

    def unmeasured_sizes(self, table):
        """The message sizes the output lacks (:class:`ibrepro.rfm.knobs.Knobs`)."""
        return []

    @run_before('run')
    def _forget_measurement(self):
        self._measured = None

    # the one always-last hook before the run: after every family hook has set the command (set_command,
    # write_spec) and placed the ranks (place_ranks), its steps in this order
    @run_before('run', always_last=True)
    def _complete_job(self):
        self._quote_command()
        self._bind()
        self._repeat()

    def _repeat(self):
        """Run the benchmark R times in the job (:class:`ibrepro.rfm.repeat.Repetitions`)."""

    def _bind(self):
        """Bind the job's ranks (:class:`ibrepro.rfm.launch.Placement`)."""

    def _refuse_unsafe_names(self):
        """Variables that name a program or a directory reach the job script: a value given with -S (from a CI
        variable, a shared configuration) with white space, a newline or shell syntax is refused, named; so are
        shell syntax in a knob that reaches an environment variable and a number outside its knob's range."""
        for name in NAME_VARIABLES:
            value = getattr(self, name, None)
            if isinstance(value, str) and value and not _SAFE_NAME.fullmatch(value):
                bad = sorted({c for c in value if not _SAFE_NAME.fullmatch(c)})
                raise ValueError(f'{name}={value!r}: a program or directory name may not contain white space, '
                                 f'newlines or shell characters ({", ".join(map(repr, bad))})')
        for name in ENV_VARIABLES:
            rfmconfig.refuse_shell_syntax(getattr(self, name, ''), name)
        for name, (lo, hi) in KNOB_RANGES.items():
            value = getattr(self, name, None)
            if value is not None and not (math.isfinite(value) and lo <= value <= hi):
                raise ValueError(f'{name}={value!r}: must be a finite number from {lo:g} to {hi:g}')

    def _quote_command(self):
        """The command line as ReFrame writes it into the job script: every word shell-quoted (ReFrame joins
        them with spaces as given), so a path with a space or an option with shell syntax stays one word."""
        if self.executable and not _PLAIN_WORD.fullmatch(self.executable):
            self.executable = shlex.quote(self.executable)
        self.executable_opts = [o if _PLAIN_WORD.fullmatch(o) else shlex.quote(o) for o in self.executable_opts]

    @sanity_function
    def assert_benchmark_output(self):
        refused = getattr(self, '_reference_error', None) or getattr(self, '_nightly_error', None)
        if refused:
            raise SanityError(refused)
        try:
            self.measured()
        except SanityError as err:
            # what the scheduler did to the job comes first: the benchmark's own words are its consequence
            event = parsers.job_event(self._read(self.stderr.evaluate()))
            if event and event not in str(err):
                raise SanityError(f'{event}; {err}') from None
            raise
        return True

    # -- performance -------------------------------------------------------------------------------

    @run_before('performance')
    def _set_perf_variables(self):
        if self.is_dry_run():
            return      # --dry-run: nothing ran, nothing was parsed

        try:
            _, table = self.measured()
        except SanityError as err:      # sanity was skipped (--skip-sanity-check) and the output is unusable
            raise PerformanceError(f'no performance values: {err}') from None

        wanted = set(self.report_metrics)
        values = [(n, v, u) for n, v, u in table.metric_values() if not wanted or n.rsplit('_', 1)[0] in wanted]
        for name, value, unit in values + peaks(values):
            self.perf_variables[name] = sn.make_performance_function(sn.defer(value), unit)
        self.reference_variables = representative(values, self.paper_sizes())

    def paper_sizes(self):
        """{metric prefix: message sizes} the papers state for this check's experiments and figures."""
        return paper_sizes(tuple(sorted(self.tags)))


def peaks(values):
    """``<metric>_peak`` of every rate among ``(name, value, unit)``: the best value over the sizes."""
    best = {}
    for name, value, unit in values:
        metric, _, size = name.rpartition('_')
        if size.isdigit() and parsers.METRIC_BETTER.get(metric) == 'higher':
            if metric not in best or value > best[metric][1]:
                best[metric] = (f'{metric}_peak', value, unit)
    return list(best.values())


def representative(values, paper_sizes=None):
    """The variables references judge: the smallest non-zero size of each lower-is-better metric, the peak of
    each rate, every size-less variable, and the sizes the papers state."""
    chosen, smallest = [], {}
    for name, _, _ in values:
        metric, _, size = name.rpartition('_')
        if not size.isdigit():
            chosen.append(name)
            continue
        if parsers.METRIC_BETTER.get(metric) == 'higher':
            chosen.append(f'{metric}_peak')
        elif int(size) > 0 and (metric not in smallest or int(size) < smallest[metric]):
            smallest[metric] = int(size)
        if int(size) in (paper_sizes or {}).get(metric, ()):
            chosen.append(name)
    chosen += [f'{m}_{s}' for m, s in smallest.items()]
    return sorted(set(chosen))


@functools.lru_cache(maxsize=None)
def paper_sizes(tags):
    """{metric prefix: sizes} stated by the papers' results for the figures and experiments in ``tags``."""
    from .. import compare, references

    found = {}
    try:
        entries = references.entries(kind='result')
    except references.DataError:
        return {}
    for entry in entries:
        size = entry.get('message_size')
        prefix = compare.METRIC_VARIABLE.get(entry.get('metric'))
        if prefix and str(size).isdigit() and compare.related(entry, {'tags': tags}):
            found.setdefault(prefix, set()).add(int(size))
    return found


#: The references files read in this process: (path, mtime, size) -> (problem, document). Every test instance
#: is judged against the same file: it is read and checked once per run, not once per instance.
_REFERENCES = {}


def system_references(path):
    """``(problem, document)`` of the references file at ``path``: why it cannot judge anything (file and line),
    or None and the parsed document. Read as the report reads it (:func:`ibrepro.references.read_yaml`: no symbolic
    link, no anchor, alias or merge key, at most MAX_YAML_DEPTH levels and MAX_YAML_BYTES) and checked as the report
    checks it (the schema and nesting ReFrame needs, e.g. ``$index: 7``): what ReFrame would refuse, switching the
    case off, fails the case instead."""
    from .. import references

    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError as err:
        return f'references file {path} cannot be read: {err.strerror}', None
    key = (path, info.st_mtime_ns, info.st_size)
    if key not in _REFERENCES:
        try:
            doc = references.read_yaml(path)
            problems = [str(p) for p in references.check_reference_document(doc, name=str(path))]
        except references.DataError as err:
            doc, problems = None, [str(err.problem)]
        if doc is not None and not isinstance(doc, dict):
            problems = [f'{path}: not a mapping of test names to references']
        problem = (f'references file {"; ".join(problems[:3])}' + (f' (and {len(problems) - 3} more)'
                                                                    if len(problems) > 3 else '')) if problems else None
        _REFERENCES[key] = (problem, None if problem else doc)
    return _REFERENCES[key]


def class_references(doc, name, system=None):
    """The references of test class ``name`` in a references document, as ReFrame builds them from a ``$ref`` file
    (``_ReferenceDict._read_ref_file``: tuples at the depth of ``$index``, ``$xfail`` entries), given inline so
    that ReFrame does not parse the whole file again for every test instance; with ``system``, without the
    partitions of other systems (ReFrame type-checks every entry it is given, for every instance)."""
    from reframe.core.pipeline import xfail

    def entry(key, value, level, depth):
        if level == 0 and key == '$index':
            return tuple(value)
        if level < depth and isinstance(value, dict):
            return {k: entry(k, v, level + 1, depth) for k, v in value.items()}
        if level == depth:
            return xfail(*value[1:-1], tuple(value[-1])) if value[0] == '$xfail' else tuple(value)
        return value

    body = doc.get(name)
    if not isinstance(body, dict):
        return {}
    depth = len(body['$index']) if '$index' in body else 1
    by_partition = '$index' not in body or list(body['$index'])[:1] == ['$partition']
    return {key: entry(key, value, 0, depth) for key, value in body.items()
            if not (system and by_partition and ':' in str(key) and str(key).split(':')[0] != system)}


def _own_failure(stderr, name, tool):
    """The tool's own failure report on stderr (invalid option, rank count, no device), if it made one."""
    try:
        parsers.parse_text(stderr, source=f'{name} stderr', tool=tool)
    except parsers.BenchmarkFailed as err:
        return str(err)
    except parsers.ParseError:
        return None
    return None


def _sizes_text(sizes):
    return ', '.join(str(s) for s in sizes[:8]) + (f' and {len(sizes) - 8} more' if len(sizes) > 8 else '')


def _missing_binary(stderr, executable):
    """A clear message if the launcher or shell could not find the benchmark binary, else None."""
    # the dynamic loader's words: the binary is there, a library it needs is not (on the node that ran it)
    lib = re.search(r'error while loading shared libraries: (\S+): cannot open shared object file', stderr)
    if lib:
        return (f'{executable!r} cannot load shared library {lib.group(1)} on the node: the environment\'s MPI '
                f'library directory is not on LD_LIBRARY_PATH (or not installed) there ({lib.group(0)})')
    for line in stderr.splitlines():
        names_it = executable in line and any(
            sign in line for sign in ('command not found', 'No such file', 'Unable to run', 'cannot execute'))
        # Open MPI names the executable on a later line
        if names_it or 'unable to find the specified executable' in line:
            return (f'{executable!r} not found in this environment: provide it through the partition\'s '
                    f'environment (make setup, a Spack view, modules or PATH) ({line.strip()})')

    return None

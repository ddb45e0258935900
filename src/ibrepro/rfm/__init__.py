"""What every ibrepro ReFrame check shares: one mixin, so the check files stay declarative.

A check says which experiments of the papers it reproduces, which tool prints its output and which table of
that output it reports; :class:`PaperExperiment` then

* tags it (``exp11``, ``s000``, ``s000-fig12``, the tool and the level),
* judges it against ``reference-data/systems/<system>/references.yaml`` when that file exists (ReFrame's
  ``$ref`` references, indexed by partition, environment and the check's parameters),
* fails sanity with the parser's diagnosis (the tool's own failure report, an MPI abort, an incomplete sweep,
  a missing binary) instead of a bare "pattern not found",
* and records one performance variable per message size and metric (``lat_1024``, ``bw_1048576``).
"""

import os

import reframe as rfm
import reframe.core.runtime as rt
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from .. import catalog, parsers, paths

#: ReFrame reference file name inside a system's reference directory.
REFERENCES_FILE = 'references.yaml'

#: The time a check may take unless it says otherwise.
DEFAULT_TIME_LIMIT = '20m'


class PaperExperiment(rfm.RegressionTestPlugin):
    """Mixin of every ibrepro check. Subclasses set ``tool``, ``level`` and ``experiments``."""

    #: Rows of the experiment catalog (reference-data/experiments.yaml) this check reproduces.
    experiments = variable(typ.List[int], value=[])

    #: Figure tags this check reproduces, as ``<seed>-<figure>`` (e.g. ``000-fig15``); empty means
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

    #: Message sizes the output must contain; an output missing one fails as an incomplete sweep.
    expected_sizes = variable(typ.List[int], value=[])

    #: Why the check was skipped on this partition and environment ('' when it ran): kept in the run
    #: report, where ReFrame itself records no skip reason.
    skip_reason = variable(str, value='')

    #: The ibrepro commit the check ran from (provenance of every stored session).
    ibrepro_version = variable(str, value=paths.source_version())

    #: Names of the test attributes the references are indexed by, after partition and environment
    #: (the check's parameters). Recorded so ``ibrepro baseline`` can write references for this check.
    reference_index = variable(typ.List[str], value=[])

    #: The model a simulated partition ran this case on (its extras ``simulation``: SimGrid version, platform
    #: hash, model parameters; :mod:`ibrepro.simulated`); empty on a real system.
    simulation = variable(typ.Dict[str, object], value={})

    # always_last: the check's own init hooks (which pick experiments per parameter) run first
    @run_after('init', always_last=True)
    def _tag_and_reference(self):
        if self.figures:
            tags = {f'exp{e}' for e in self.experiments}
            tags |= {f's{f}' for f in self.figures} | {f's{f.split("-")[0]}' for f in self.figures}
        else:
            tags = catalog.tags_for(self.experiments)

        self.tags |= tags | {self.tool, self.level}
        self.reference_index = sorted(type(self).param_space.params)
        if not self.reference:
            self._use_system_references()

    def _use_system_references(self):
        """Judge against the system's reference file when it has one; otherwise only record."""
        prefix = (rt.runtime().get_option('general/0/reference_prefix')
                  or paths.system_references_dir(self.current_system.name))
        path = os.path.join(prefix, REFERENCES_FILE)
        if os.path.isfile(path):
            self.reference = {'$ref': os.path.abspath(path)}

    @run_after('setup')
    def _simulated_partition(self):
        """On a simulated partition: keep the model with the results, and skip what SMPI cannot model (the
        catalog's reasons: reference-data/experiments.yaml ``simulated``)."""
        extras = self.current_partition.extras
        if extras.get('simulated'):
            self.simulation = dict(extras.get('simulation') or {})
            self.skip_for(catalog.cannot_model(self.display_name, self.experiments))

    def skip_for(self, reasons):
        """Skip with ``reasons`` (a list of strings) if there are any, recording them in the report."""
        if reasons:
            self.skip_reason = '; '.join(reasons)
            self.skip(self.skip_reason)

    # -- sanity ------------------------------------------------------------------------------------

    def _read(self, name):
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
        except parsers.ParseError as err:
            own = _own_failure(stderr, self.name, self.tool)     # tools that report errors on stderr
            raise SanityError(own or f'{err}' + (f' ({abort})' if abort and abort not in str(err) else '')) \
                from None

        if abort:
            raise SanityError(f'{self.tool}: {abort}')

        missing_sizes = sorted(set(self.expected_sizes) - set(table.sizes()))
        if missing_sizes:
            raise SanityError(f'{self.tool} {table.benchmark}: incomplete message-size sweep, '
                              f'missing {_sizes_text(missing_sizes)}')

        if self.job.exitcode:
            raise SanityError(f'{self.executable} exited with code {self.job.exitcode}')

        return parsed, table

    @sanity_function
    def assert_benchmark_output(self):
        self._parsed, self._table = self.diagnose()
        return True

    # -- performance -------------------------------------------------------------------------------

    @run_before('performance')
    def _set_perf_variables(self):
        if self.is_dry_run():
            return      # --dry-run: nothing ran, nothing was parsed

        wanted = set(self.report_metrics)
        for name, value, unit in self._table.metric_values():
            if not wanted or name.rsplit('_', 1)[0] in wanted:
                self.perf_variables[name] = sn.make_performance_function(sn.defer(value), unit)


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
    for line in stderr.splitlines():
        names_it = executable in line and any(
            sign in line for sign in ('command not found', 'No such file', 'Unable to run', 'cannot execute'))
        # Open MPI names the executable on a later line
        if names_it or 'unable to find the specified executable' in line:
            return (f'{executable!r} not found in this environment: provide it through the partition\'s '
                    f'environment (make setup, a Spack view, modules or PATH) ({line.strip()})')

    return None

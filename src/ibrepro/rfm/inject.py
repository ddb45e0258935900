"""A controlled MPI slowdown for a check's run: the injector (benchmarks/inject/inject.c) preloaded into its ranks.

``-S inject_us=5`` adds 5 us to every MPI call that completes a message (a latency regression), ``-S
inject_pct=10`` 10 % of each call's own duration (a bandwidth regression), ``-S inject_sizes=8:8`` only for messages
of that size range, ``-S inject_repetitions=3`` only in the third of the job's repetitions (a transient slowdown,
as from another job sharing the node for a while: what the noise guard must call inconclusive and the median of the
repetitions takes out). The library is the one ``make setup`` builds with the MPICH wheel (MPICH ABI: the ``impi``,
``mpich`` and ``mvapich2`` environments), or ``-S inject_library=<path>`` built with another MPI (``make -C
benchmarks inject MPICC=<its mpicc> BUILD=<dir>``: Open MPI has its own ABI). Each rank appends what it really added
to the stage's ``inject.txt``; the case records it (``inject_added``) beside what was asked (``injected``).
"""

import math
import os
import re

import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable

from .. import paths
from . import launch
from .repeat import Repetitions

#: The injector make setup builds (benchmarks/Makefile target ``inject``, the MPICH wheel's mpicc), in .deps (resolved:
#: never under a path with white space, which LD_PRELOAD cannot carry).
DEFAULT_LIBRARY = paths.DEPS_DIR / 'inject' / 'lib' / 'libibrepro_inject.so'

#: MPI families whose ABI is MPICH's (the default library works with them).
MPICH_ABI = ('mpich', 'impi', 'mvapich2')

REPORT_FILE = 'inject.txt'

_ADDED = re.compile(r'^rank (\d+): (\d+) of (\d+) calls slowed, ([0-9.]+) s added(?: of ([0-9.]+) s asked)?', re.M)


class InjectError(ValueError):
    """The injection asked for cannot be applied to this case; the message says why and what to do."""


def settings(us, pct, sizes, library, family, launcher, stagedir):
    """``(environment variables, launcher options, description)`` preloading the injector into a job's ranks."""
    if not (0 <= us < math.inf and 0 <= pct < math.inf):    # NaN fails both comparisons
        raise InjectError(f'inject_us={us} and inject_pct={pct} must be finite and >= 0')
    if family is None:
        raise InjectError('the injector slows MPI calls, and this environment declares no MPI (its features name '
                          'none of openmpi, mpich, impi, mvapich2)')
    lib = library or str(DEFAULT_LIBRARY)
    if not library and family not in MPICH_ABI:
        raise InjectError(f'the default injector is built for the MPICH ABI, this environment is {family}: build '
                          'one with its mpicc (make -C benchmarks inject MPICC=<mpicc> BUILD=<dir>) and set '
                          'inject_library=<dir>/lib/libibrepro_inject.so')
    if re.search(r'[\s:]', lib):
        raise InjectError(f'injector {lib!r}: LD_PRELOAD cannot carry a path with white space or a colon; '
                          'build it elsewhere (make -C benchmarks inject BUILD=<dir>)')
    if not os.path.isfile(lib):
        raise InjectError(f'injector {lib} not found: make setup builds it (or make -C benchmarks inject)')
    env = {'LD_PRELOAD': lib, 'IBREPRO_INJECT_US': repr(float(us)), 'IBREPRO_INJECT_PCT': repr(float(pct)),
           'IBREPRO_INJECT_REPORT': os.path.join(stagedir, REPORT_FILE)}
    said = f'{us:g} us + {pct:g} % per MPI call'
    if sizes:
        m = re.fullmatch(r'(\d+):(\d+)', sizes)
        if not m or int(m.group(1)) > int(m.group(2)):
            raise InjectError(f'inject_sizes must be MIN:MAX in bytes (e.g. 8:8), got {sizes!r:.40}')
        env.update(IBREPRO_INJECT_MIN_BYTES=m.group(1), IBREPRO_INJECT_MAX_BYTES=m.group(2))
        said += f' for {sizes} B messages'
    # Open MPI's mpirun passes only the variables it is told to; the others pass the whole environment
    options = [o for name in env for o in ('-x', name)] if family == 'openmpi' and 'mpirun' in launcher else []
    return env, options, said


def added(stagedir):
    """What the ranks really added: {'ranks': n, 'calls': slowed, 'calls_by_rank': slowed per rank report,
    'seconds': total, 'asked_seconds': what the settings asked for, 'overshoot': added / asked - 1 (a busy wait
    preempted by another task runs long)}, or None without a report."""
    try:
        with open(os.path.join(stagedir, REPORT_FILE)) as f:
            found = _ADDED.findall(f.read())
    except OSError:
        return None
    if not found:
        return None
    # in the order the ranks finished: repetitions run one after another, so ranks of repetition r come before
    # those of r + 1 (what shows that a transient hit the repetitions it names only)
    calls_by_rank = [int(s) for _, s, _, _, _ in found]
    added = {'ranks': len(found), 'calls': sum(calls_by_rank), 'calls_by_rank': calls_by_rank,
             'seconds': round(sum(float(t) for *_, t, _ in found), 6)}
    if all(asked for *_, asked in found):
        asked = sum(float(a) for *_, a in found)
        added['asked_seconds'] = round(asked, 6)
        added['overshoot'] = round(added['seconds'] / asked - 1, 4) if asked > 0 else None
    return added


def repetitions(which, count):
    """The repetitions ``which`` names ('3', '1,3'; '' = every one) as a sorted list of numbers in 1..``count``,
    or InjectError naming the knob."""
    if not which:
        return []
    if not re.fullmatch(r'\d{1,3}(,\d{1,3})*', which):
        raise InjectError(f'inject_repetitions must be repetition numbers separated by commas (e.g. 3 or 1,3), '
                          f'got {which!r:.40}')
    numbers = sorted({int(n) for n in which.split(',')})
    if count < 2:
        raise InjectError(f'inject_repetitions={which} needs repetitions of 2 or more (the job runs the benchmark '
                          'once)')
    if not 1 <= numbers[0] <= numbers[-1] <= count:
        raise InjectError(f'inject_repetitions={which}: the job runs repetitions 1 to {count}')
    return numbers


def repetition_commands(which, count, us, pct):
    """The job-script line, inside the repetition loop, that makes the preloaded injector add ``us``/``pct`` only
    in the repetitions ``which`` names and nothing in the others ([] when ``which`` is '')."""
    numbers = repetitions(which, count)
    if not numbers:
        return []
    if not (us or pct):
        raise InjectError(f'inject_repetitions={which} with nothing to inject: set inject_us or inject_pct')
    slow = f'IBREPRO_INJECT_US={float(us)!r} IBREPRO_INJECT_PCT={float(pct)!r}'
    return [f'case "$ibrepro_repetition" in {"|".join(map(str, numbers))}) export {slow} ;; '
            '*) export IBREPRO_INJECT_US=0.0 IBREPRO_INJECT_PCT=0.0 ;; esac']


class Injection(Repetitions):
    """Plugin: the injector preloaded into a family's ranks when asked (``-S inject_us=5``), in every repetition of
    the job or in those ``inject_repetitions`` names."""

    #: Microseconds more per MPI call that completes a message.
    inject_us = variable(float, value=0.0, loggable=True)

    #: Percent of each such call's own duration more.
    inject_pct = variable(float, value=0.0, loggable=True)

    #: Only for messages of ``MIN:MAX`` bytes ('' = every size).
    inject_sizes = variable(str, value='', loggable=True)

    #: Only in these repetitions of the job (``3``, ``1,3``; '' = in every one).
    inject_repetitions = variable(str, value='', loggable=True)

    #: The injector library ('' = the one make setup builds, for MPICH-ABI environments).
    inject_library = variable(str, value='')

    #: Preload the injector even with nothing to add: the baseline of an injection experiment, so that the
    #: clean runs carry the interposition's own cost (one more function call per MPI call; it reads the clock only
    #: when ``inject_pct`` asks for a share of the call's time).
    inject_preload = variable(typ.Bool, value=False, loggable=True)

    #: What was injected, as applied ('' = nothing), and what the ranks really added (set after the run).
    injected = variable(str, value='', loggable=True)
    inject_added = variable(typ.Dict[str, object], value={}, loggable=True)

    def in_each_repetition(self):
        try:
            return repetition_commands(self.inject_repetitions, self.repetitions, self.inject_us, self.inject_pct)
        except InjectError as err:
            raise ValueError(f'injection: {err}') from None

    @run_before('run')
    def _inject(self):
        if not (self.inject_us or self.inject_pct or self.inject_preload):
            return
        try:
            env, options, self.injected = settings(
                self.inject_us, self.inject_pct, self.inject_sizes, self.inject_library,
                launch.mpi_family(self.current_environ.features), self.job.launcher.registered_name, self.stagedir)
            which = repetitions(self.inject_repetitions, self.repetitions)
        except InjectError as err:
            raise ValueError(f'injection: {err}') from None
        if which:
            self.injected += f' in repetition(s) {",".join(map(str, which))} of {self.repetitions}'
        self.env_vars = {**self.env_vars, **env}
        self.job.launcher.options += options

    @run_after('run')
    def _injected(self):
        if self.injected:
            self.inject_added = added(self.stagedir) or {}

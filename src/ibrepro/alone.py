"""Whether a measurement ran alone on its machine: the CPU time every other process used while it ran.

A verdict study's nights must be measured alone (docs/verdict-protocol.md): a test run, a build or a CI job beside a
night scatters it far beyond any injected level. The load average cannot say so (a night's own ranks make it), a
pause file only says what a person remembered. What can: the kernel's count of busy CPU time (``/proc/stat``) less
what this process and everything it started and waited for used (``getrusage``). A process that outlives its
parent and is reaped by init counts as another's: the rule errs towards "not alone".

:func:`wait_until_quiet` holds a campaign until nothing else has run for a while; :class:`Others` measures a night.
"""

import os
import resource
import time
from pathlib import Path

#: The most CPU seconds other processes may use, per second of a night, for it to count as measured alone: a
#: twentieth of what a busy loop on one core takes. The idle machine's own daemons and kernel threads use 0.004-0.04
#: (this VM: its agent and the kernel's memory monitor), a test run 1-2.
SHARE = 0.05

#: How long nothing else may have run before a campaign starts its next night after one that was not alone (s):
#: longer than the quiet gaps inside a test run or a CI job, so that a night does not start in one of them.
SETTLE_S = 180

_TICK = os.sysconf('SC_CLK_TCK')


def busy_seconds(stat='/proc/stat'):
    """CPU seconds all CPUs spent running anything since boot (user, nice, system, irq, softirq; a guest's time is
    in user already). Idle, I/O wait and steal (time the hypervisor took, which the night's control reads) are not."""
    fields = Path(stat).read_text().split('\n', 1)[0].split()
    if fields[:1] != ['cpu'] or len(fields) < 8:
        raise OSError(f'{stat}: no "cpu" line')
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    return (user + nice + system + irq + softirq) / _TICK


def own_seconds():
    """CPU seconds this process and its reaped descendants used."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        use = resource.getrusage(who)
        total += use.ru_utime + use.ru_stime
    return total


class Others:
    """CPU seconds other processes used since it was made (call :meth:`seconds` after the children one starts have
    been waited for: until then their time is not yet this process's)."""

    def __init__(self):
        self._busy, self._own, self._t = busy_seconds(), own_seconds(), time.monotonic()

    def seconds(self):
        return max(0.0, (busy_seconds() - self._busy) - (own_seconds() - self._own))

    def elapsed(self):
        return time.monotonic() - self._t


def was_alone(others_cpu_s, wall_s, share=SHARE):
    """Whether a measurement of ``wall_s`` seconds beside which others used ``others_cpu_s`` CPU seconds ran alone."""
    return others_cpu_s <= share * max(wall_s, 1.0)


def wait_until_quiet(quiet_s, *, share=SHARE, poll_s=5.0, say=print, meter=Others, sleep=time.sleep,
                     clock=time.monotonic):
    """Return once other processes have used at most ``share`` CPU seconds per second in each ``poll_s`` window
    for ``quiet_s`` seconds in a row; how long it waited (s). ``say`` is told once when it starts waiting."""
    t0 = clock()
    quiet, told = 0.0, False
    while True:
        window = meter()
        sleep(poll_s)
        if was_alone(window.seconds(), window.elapsed(), share):
            quiet += window.elapsed()
            if quiet >= quiet_s:
                return clock() - t0
        else:
            quiet = 0.0
            if not told:
                say(f'campaign: other processes are running: waiting until nothing else has run for {quiet_s:g} s')
                told = True

"""Whether a night ran alone (ibrepro.alone): the CPU time other processes used beside it, the campaign's wait
for a quiet machine, and what the ledger and the study make of a night that was not alone."""

import os
import subprocess
import sys
import time

import pytest

from ibrepro import alone, charts, ledger, paths

# a process that burns this much CPU time (its own clock, not the wall's: the same on a busy or a quiet machine)
BURN = 'import time\nwhile time.process_time() < 0.3: pass\n'


def test_the_kernels_busy_time_is_read_from_proc_stat(tmp_path):
    assert alone.busy_seconds() > 0
    stat = tmp_path / 'stat'
    tick = os.sysconf('SC_CLK_TCK')
    # user nice system idle iowait irq softirq steal: idle, I/O wait and steal are not anyone's running
    stat.write_text(f'cpu  {3 * tick} {tick} {2 * tick} 9999 77 0 {tick} 555 0 0\ncpu0 1 2 3\n')
    assert alone.busy_seconds(stat) == pytest.approx(7.0)
    stat.write_text('intr 1 2 3\n')
    with pytest.raises(OSError, match='no "cpu" line'):
        alone.busy_seconds(stat)


def test_a_process_this_one_did_not_wait_for_is_anothers():
    """An orphan (started by a shell that exited, reaped by init) is what a test run or a CI job beside the night
    looks like: its CPU time counts as others'. A child that was waited for is this process's own."""
    own = alone.own_seconds()
    subprocess.run([sys.executable, '-c', BURN], check=True)
    assert alone.own_seconds() - own >= 0.3
    meter = alone.Others()
    orphan = subprocess.run(['sh', '-c', f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', BURN],
                            check=True, capture_output=True, text=True).stdout.strip()
    while _state(orphan) != 'Z':
        time.sleep(0.01)
    assert meter.seconds() >= 0.25       # its 0.3 s less what the kernel had not yet counted (a tick per CPU)


def _state(pid):
    try:
        return open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0]
    except OSError:
        return 'Z'


def test_a_night_is_alone_when_others_used_under_its_share():
    assert alone.was_alone(0.0, 60.0) and alone.was_alone(alone.SHARE * 60, 60.0)
    assert not alone.was_alone(alone.SHARE * 60 + 0.1, 60.0)
    assert not alone.was_alone(1.0, 0.0)       # a night that lasted no time still needs others under a second's share


class _Window:
    """One poll window of a scripted machine: ``others`` CPU seconds used by others over ``elapsed`` seconds."""
    script = []

    def __init__(self):
        self.others = _Window.script.pop(0)

    def seconds(self):
        return self.others

    def elapsed(self):
        return 5.0


def test_the_campaign_waits_until_nothing_else_ran_for_the_whole_settle_time():
    said = []
    _Window.script = [0.0, 3.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0]   # busy, quiet, busy again, then quiet
    alone.wait_until_quiet(20, say=said.append, meter=_Window, sleep=lambda s: None)
    assert _Window.script == []           # 4 quiet windows of 5 s in a row, after the last busy one
    assert len(said) == 1 and 'other processes are running' in said[0]
    _Window.script = [0.0, 9.0]
    alone.wait_until_quiet(5, say=said.append, meter=_Window, sleep=lambda s: None)
    assert _Window.script == [9.0] and len(said) == 1        # quiet from the start: no wait, nothing said


REAL = ledger.read(paths.REFERENCE_DATA / 'ledger' / 'vm2-impi-1x2.jsonl')


def _beside(night, others_cpu_s):
    """A real stored night as if others had used ``others_cpu_s`` CPU seconds beside it."""
    return {**night, 'alone': {'others_cpu_s': others_cpu_s}}


def test_the_ledger_keeps_a_night_that_was_not_alone_and_says_so(tmp_path):
    night = REAL[0]
    assert 'alone' not in night and ledger.measured_alone(night)       # measured before the rule: the pause file
    report = {'runs': [{'testcases': [{'display_name': 'X', 'result': 'pass', 'repetition_values': {'lat_8': [1.0]}}]}]}
    record = ledger.night_record(report, 'n1', phase='tuning', schedule={'kind': 'clean'}, started=1.0, wall_s=60.0,
                                 others_cpu_s=40.123)
    assert record['alone'] == {'others_cpu_s': 40.12} and not ledger.measured_alone(record)
    ledger.append(tmp_path / 'l.jsonl', record)
    assert ledger.read(tmp_path / 'l.jsonl')[0]['alone'] == {'others_cpu_s': 40.12}
    assert ledger.measured_alone(_beside(night, 0.3))
    assert not ledger.measured_alone(_beside(night, 'a lot')) and not ledger.measured_alone(_beside(night, -1e400))


def test_a_night_not_measured_alone_is_named_and_never_judged():
    """A real night with a busy loop's worth of others beside it neither enters Phase I nor counts as held out."""
    nights = REAL[:30]
    out = charts.study(nights, phase1=20, series=20, within=(1,))
    busy = [*nights[:5], _beside(nights[5], 60.0), *nights[6:25], _beside(nights[25], 60.0), *nights[26:]]
    beside = charts.study(busy, phase1=20, series=20, within=(1,))
    assert beside['not_alone'] == [nights[5]['night'], nights[25]['night']] and out['not_alone'] == []
    assert beside['phase1']['last'] == nights[20]['night'] != out['phase1']['last']      # one more night taken
    assert beside['false_alarms']['clean_nights'] == out['false_alarms']['clean_nights'] - 2
    assert charts.phase1_nights(busy) == [n for n in nights if n['night'] not in beside['not_alone']]

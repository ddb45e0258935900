"""The injector (benchmarks/inject/inject.c, ibrepro.rfm.inject): a controlled MPI slowdown, preloaded into a
check's ranks by ``-S inject_us=...``, shows up in the measured values at the size asked, and the case records what
it asked and what the ranks really added."""

import pytest

from conftest import needs_impi, output
from ibrepro import results
from ibrepro.rfm import inject

#: IMB's own time limit per message size raised to 300 s (default 10): a busy wait preempted on a loaded machine
#: made IMB give up at a size, and the case fail, where the injection had worked
PINGPONG = ['-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-p', 'impi',
            '-S', 'IMBPointToPoint.message_sizes=8:64', '-S', 'IMBPointToPoint.iterations=2000',
            '-S', 'IMBPointToPoint.time_per_sample=300']


def test_settings_say_what_they_apply_and_refuse_what_cannot_work(tmp_path):
    lib = tmp_path / 'libibrepro_inject.so'
    lib.write_bytes(b'')
    env, options, said = inject.settings(5, 0, '8:8', str(lib), 'openmpi', 'mpirun', '/stage')
    assert env == {'LD_PRELOAD': str(lib), 'IBREPRO_INJECT_US': '5.0', 'IBREPRO_INJECT_PCT': '0.0',
                   'IBREPRO_INJECT_REPORT': '/stage/inject.txt', 'IBREPRO_INJECT_MIN_BYTES': '8',
                   'IBREPRO_INJECT_MAX_BYTES': '8'}
    assert options[:4] == ['-x', 'LD_PRELOAD', '-x', 'IBREPRO_INJECT_US']    # Open MPI passes only what it is told
    assert said == '5 us + 0 % per MPI call for 8:8 B messages'
    for args, message in [((5, 0, '', '', None), 'declares no MPI'),
                          ((5, 0, '', '', 'openmpi'), 'built for the MPICH ABI, this environment is openmpi'),
                          ((5, 0, '9:8', str(lib), 'mpich'), 'inject_sizes must be MIN:MAX'),
                          ((-1, 0, '', str(lib), 'mpich'), 'must be finite and >= 0'),
                          ((float('nan'), 0, '', str(lib), 'mpich'), 'must be finite and >= 0'),
                          ((0, float('inf'), '', str(lib), 'mpich'), 'must be finite and >= 0'),
                          ((5, 0, '', str(tmp_path / 'none.so'), 'mpich'), 'not found'),
                          ((5, 0, '', '/new comer/lib.so', 'mpich'), 'LD_PRELOAD cannot carry a path with white')]:
        with pytest.raises(inject.InjectError, match=message):
            inject.settings(*args, 'mpirun', '/stage')


def test_an_injection_in_some_repetitions_is_one_line_inside_the_loop():
    line, = inject.repetition_commands('3,1', 3, 50, 0)
    assert line == ('case "$ibrepro_repetition" in 1|3) export IBREPRO_INJECT_US=50.0 IBREPRO_INJECT_PCT=0.0 ;; '
                    '*) export IBREPRO_INJECT_US=0.0 IBREPRO_INJECT_PCT=0.0 ;; esac')
    assert inject.repetition_commands('', 3, 50, 0) == []
    for args, message in [(('4', 3, 50, 0), 'the job runs repetitions 1 to 3'),
                          (('0', 3, 50, 0), 'the job runs repetitions 1 to 3'),
                          (('1', 1, 50, 0), 'needs repetitions of 2 or more'),
                          (('1;reboot', 3, 50, 0), 'repetition numbers separated by commas'),
                          (('1,', 3, 50, 0), 'repetition numbers separated by commas'),
                          (('2', 3, 0, 0), 'nothing to inject')]:
        with pytest.raises(inject.InjectError, match=message):
            inject.repetition_commands(*args)


def _lat(reframe, *args):
    proc = reframe('-r', *PINGPONG, *args)
    assert proc.returncode == 0, output(proc)
    case, = results.testcases(results.stored_sessions(reframe.db)[-1])
    values = {pv.variable: pv.value for pv in results.perf_values(results.stored_sessions(reframe.db)[-1])}
    return values, case


@needs_impi
@pytest.mark.integration
def test_an_injected_latency_shows_at_the_size_asked_and_is_recorded(reframe):
    assert inject.DEFAULT_LIBRARY.exists(), 'make setup builds the injector'
    base, case = _lat(reframe)
    assert case['injected'] == '' and case['inject_added'] == {}
    slow, case = _lat(reframe, '-S', 'inject_us=20', '-S', 'inject_sizes=64:64')
    assert case['injected'] == '20 us + 0 % per MPI call for 64:64 B messages'
    added = case['inject_added']
    assert added['ranks'] == 2 and added['calls'] > 2000 and added['seconds'] >= added['calls'] * 20e-6
    # what was asked is exact; what the wait took is at least that (a preempted spin overshoots: reported)
    assert added['asked_seconds'] == pytest.approx(added['calls'] * 20e-6, rel=1e-4)
    assert added['overshoot'] == pytest.approx(added['seconds'] / added['asked_seconds'] - 1, abs=1e-3)
    assert added['overshoot'] >= 0
    # one way: a send and the matching receive are each slowed by 20 us, half a round trip grows by >= 20 us
    # (more on a loaded machine, where a busy wait can be preempted); the other sizes are not slowed
    assert slow['lat_64'] >= base['lat_64'] + 20 * 0.9, (base, slow)
    assert slow['lat_8'] < base['lat_8'] + 10, (base, slow)


@needs_impi
@pytest.mark.integration
def test_an_injection_that_cannot_apply_fails_the_case_saying_why(reframe):
    proc = reframe('-r', *PINGPONG, '-S', 'inject_us=5', '-S', 'inject_library=/nonexistent/lib.so')
    assert proc.returncode == 1, output(proc)
    assert 'injection: injector /nonexistent/lib.so not found' in proc.stdout, output(proc)


@needs_impi
@pytest.mark.integration
def test_an_injection_in_one_repetition_slows_that_repetition_only(reframe):
    # a transient slowdown: the median of three repetitions is a clean one, the spread is the slowed one's
    values, case = _lat(reframe, '-S', 'repetitions=3', '-S', 'inject_us=50', '-S', 'inject_repetitions=2')
    assert case['injected'] == '50 us + 0 % per MPI call in repetition(s) 2 of 3'
    assert any(line.startswith('case "$ibrepro_repetition" in 2) export IBREPRO_INJECT_US=50.0 ')
               for line in case['prerun_cmds'])
    reps = case['repetition_values']['lat_8']
    # a busy wait of 50 us per call bounds the slowed repetition from below; how slow the clean ones are depends on
    # the machine's load (on a loaded 2-core machine a clean PingPong can take longer), so they are not compared
    assert reps[1] >= 50 * 0.9, reps
    assert values['lat_8'] == pytest.approx(sorted(reps)[1])   # the median
    # the ranks of the clean repetitions report nothing slowed; the slowed one's ranks each slowed their calls
    added = case['inject_added']
    assert added['ranks'] == 6 and added['seconds'] >= 2000 * 50e-6
    by_rank = added['calls_by_rank']
    assert by_rank[:2] == [0, 0] and by_rank[4:] == [0, 0] and min(by_rank[2:4]) > 0, by_rank


@needs_impi
@pytest.mark.integration
def test_an_injection_in_repetitions_the_job_does_not_run_fails_the_case(reframe):
    proc = reframe('-r', *PINGPONG, '-S', 'inject_us=5', '-S', 'inject_repetitions=2')
    assert proc.returncode == 1, output(proc)
    assert 'injection: inject_repetitions=2 needs repetitions of 2 or more' in proc.stdout, output(proc)

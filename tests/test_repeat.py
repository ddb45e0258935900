"""The nightly's rounds (ibrepro.rfm.repeat): the control measurement before each repetition, its parsing, the CPU
pressure of each round; and one real night as the nightly mode ships it (ibrepro.bands.NIGHT) through ReFrame."""

import json
import shlex
import subprocess

import pytest

from conftest import needs_impi, output
from ibrepro import bands, ledger, rfmconfig
from ibrepro.rfm import repeat

CONTROL = rfmconfig.BENCH_BIN / repeat.CONTROL_PROGRAM


def control_block(number, pingpong='55.1', copy='12.5', steal='0.000', psi='1.2'):
    return (f'### round {number}\n# ibrepro_control 1: cpus 0,1, 9 repeats\npingpong_ns {pingpong}\n'
            f'copy_gbs {copy}\nsteal_pct {steal}\npsi_some_pct {psi}\nwall_s 0.19\n')


def test_control_runs_before_each_repetition_even_one_and_after_the_last():
    before, after = repeat.job_commands(1, control='/opt/x y/ibrepro_control')
    assert 'for ibrepro_repetition in $(seq 1 1); do' in before
    # after the loop: control 2, the one after the last round
    assert after[after.index('done') + 1:] == [
        'echo "### round 2" >> control.txt',
        "'/opt/x y/ibrepro_control' >> control.txt 2>&1 || echo \"failed 2 $?\" >> control.txt"]
    control = next(line for line in before if 'ibrepro_control' in line)
    assert control.startswith("'/opt/x y/ibrepro_control' >> control.txt")   # quoted: one word
    assert 'failed $ibrepro_repetition $?' in control
    # the control comes before the repetition's start mark: its time is not the benchmark's
    assert before.index(control) < next(i for i, line in enumerate(before) if line.startswith('echo "start'))
    assert repeat.job_commands(1) == ([], [])


def test_control_values_per_repetition():
    text = control_block(1) + control_block(2, pingpong='-', psi='-') + control_block(3, pingpong='812.5')
    values = repeat.parse_control(text, 3)
    assert [v['pingpong_ns'] for v in values] == [55.1, None, 812.5]
    assert values[1]['psi_some_pct'] is None and values[0]['copy_gbs'] == 12.5


@pytest.mark.parametrize('text, message', [
    (control_block(1), 'no output of control\\(s\\) 2 of 2'),
    (control_block(1) + '### round 2\nibrepro_control: the thread on CPU 1 did not answer within 10 s\n'
     'failed 2 1\n', 'control 2 of 2 failed \\(exit 1: ibrepro_control: the thread on CPU 1'),
    (control_block(1) + control_block(2, copy='fast'), "printed 'copy_gbs fast'"),
    (control_block(1) + control_block(2, copy='nan'), "printed 'copy_gbs nan'"),
    (control_block(1) + '### round 2\npingpong_ns 5\n', 'printed no copy_gbs'),
])
def test_a_control_that_failed_or_is_missing_is_named(text, message):
    with pytest.raises(ValueError, match=message):
        repeat.parse_control(text, 2)


def test_the_hardware_is_the_nodes_and_one_for_every_round():
    amd = 'hardware cpu AMD EPYC\nhardware cpu_model 2\nhardware cache 1024 KB\nhardware hca:mlx5_0 MT_0000000223\n'
    text = control_block(1) + amd + control_block(2) + amd
    assert repeat.parse_hardware(text) == {'cpu': 'AMD EPYC', 'cpu_model': '2', 'cache': '1024 KB',
                                           'hca:mlx5_0': 'MT_0000000223'}
    assert repeat.parse_hardware(control_block(1) + control_block(2)) == {}     # a control that does not print it
    # a line that is not the control's form is no hardware (what a node prints is data)
    assert repeat.parse_hardware(control_block(1) + 'hardware cpu $(reboot)\x07\nhardware a b c\n') == {'a': 'b c'}
    with pytest.raises(ValueError, match='different hardware'):
        repeat.parse_hardware(text + control_block(3) + amd.replace('cpu_model 2', 'cpu_model 17'))


def test_round_pressure_per_repetition():
    log = ('start 1 100.0 1000000\nend 1 102.0 1500000 0\nstart 2 102.5 1500000\nend 2 103.5 1500000 0\n'
           'start 3 104 -\nend 3 105 - 0\n')
    assert repeat.round_pressure(log) == [0.25, 0.0]     # a round without PSI numbers is left out


@needs_impi
def test_the_control_program_measures_the_machine():
    proc = subprocess.run([str(CONTROL), '-n', '3'], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (values,) = repeat.parse_control('### round 1\n' + proc.stdout, 1)
    assert values['copy_gbs'] > 0 and values['wall_s'] > 0
    # and the node's hardware, as /proc/cpuinfo names it (what a frozen baseline describes)
    hardware = repeat.parse_hardware('### round 1\n' + proc.stdout)
    assert {k: hardware.get(k) for k in ('cpu', 'cpu_model', 'cache')} == \
        {k: ledger.machine_identity().get(k) for k in ('cpu', 'cpu_model', 'cache')}
    bad = subprocess.run([str(CONTROL), '-c', '0'], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and '-c takes two CPU numbers' in bad.stderr


# -- one real night, as the nightly mode ships it -------------------------------------------------------------

@pytest.fixture(scope='module')
def shipped_run(tmp_path_factory):
    from conftest import ReFrameRunner
    runner = ReFrameRunner(tmp_path_factory.mktemp('rounds') / 'home')
    report = runner.home / 'night.json'
    proc = runner('-r', '--mode', 'nightly', '-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-p', '^impi$',
                  '-S', 'iterations=200', f'--report-file={report}',
                  checks='reframe-checks/mpi/pt2pt_collectives.py', env={'IBREPRO_NIGHTLY': 'n1'})
    assert proc.returncode == 0, output(proc)
    (case,) = json.loads(report.read_text())['runs'][0]['testcases']
    return runner, case


@pytest.fixture(scope='module')
def shipped_night(shipped_run):
    return shipped_run[1]


@pytest.mark.integration
@needs_impi
def test_a_shipped_night_measures_the_bands_in_rounds_with_the_control(shipped_night):
    case = shipped_night
    rounds = bands.NIGHT['IMBPointToPoint']['repetitions']
    assert case['repetitions'] == rounds and case['control'] is True
    # the bands' sizes exactly, through IMB's -msglen (not a power-of-two sweep with 0)
    sizes = bands.sizes('IMBPointToPoint')
    assert sorted(int(k.split('_')[1]) for k in case['repetition_values'] if k.startswith('lat_')) == sizes
    assert all(len(v) == rounds for v in case['repetition_values'].values())
    assert len(case['control_values']) == rounds + 1      # before each round and after the last
    assert all(c['copy_gbs'] > 0 and c['wall_s'] > 0 for c in case['control_values'])
    assert case['node_hardware']['cpu'] == ledger.machine_identity()['cpu']     # stored with the session
    assert len(case['repetition_pressure']) == rounds
    assert case['executable_opts'][1:3] == ['-msglen', 'msglen.txt']
    # quoted as one word: a checkout path with a space (CI's clone) stays one argument
    assert any(line.startswith(f'{shlex.quote(str(CONTROL))} >> control.txt') for line in case['prerun_cmds'])


@pytest.mark.integration
@needs_impi
def test_the_control_can_be_switched_off_from_the_command_line(tmp_path):
    """``-S control=false`` beats the nightly mode's ``control=true`` (a bool variable would take 'false' as True)."""
    from conftest import ReFrameRunner
    runner = ReFrameRunner(tmp_path / 'home')
    report = tmp_path / 'night.json'
    proc = runner('-r', '--mode', 'nightly', '-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-p', '^impi$',
                  '-S', 'iterations=50', '-S', 'repetitions=1', '-S', 'control=false', f'--report-file={report}',
                  checks='reframe-checks/mpi/pt2pt_collectives.py')
    assert proc.returncode == 0, output(proc)
    (case,) = json.loads(report.read_text())['runs'][0]['testcases']
    assert case['control'] is False and case['control_values'] == []


@pytest.mark.integration
@needs_impi
def test_the_stored_night_carries_its_nodes_hardware_into_the_charts(shipped_run):
    """From the control on the node to the frozen baseline: ReFrame stores ``node_hardware``, the charts' night
    record keeps it, a baseline fitted on the night knows it, and a night on other hardware is told apart."""
    from ibrepro import charts, evidence
    runner, _ = shipped_run
    (night,) = evidence.stored_nights('local', db=runner.db)
    (case,) = night['cases'].values()
    here = ledger.machine_identity()
    assert {k: case['hardware'][k] for k in ('cpu', 'cpu_model', 'cache')} == \
        {k: here[k] for k in ('cpu', 'cpu_model', 'cache')}
    baseline = charts.Baseline.fit([night])
    (name,) = night['cases']
    assert baseline.hardware == {name: [case['hardware']]} and baseline.other_hardware(name, case) == ''
    elsewhere = {**case, 'hardware': {**case['hardware'], 'cpu_model': here['cpu_model'] + '0'}}
    assert baseline.other_hardware(name, elsewhere).startswith(f"cpu_model '{here['cpu_model']}0'")

"""ibrepro.fleet.simulate and `ibrepro fleet simulate`: small seeded runs, the JSON's keys, the fault model."""

import json
import random
from pathlib import Path

import pytest

from ibrepro.fleet import plan as fp

from ibrepro.fleet import simulate as fs
from ibrepro.cli import main

DATA = Path(__file__).parent / 'data'
RUN_REPORTS = DATA / 'run-reports'
#: ten real fault-free pair-round nights of the namespace fat tree, and a real night that named a link
CLEAN = sorted((DATA / 'fleet' / 'nights').glob('fattree-clean-*.report.json'))
FAULT = DATA / 'fleet' / 'fattree-uplink-leaf1-spine1-25.report.json'
KEYS = {'named_exactly', 'wrong_per_night', 'wrong_per_night_upper95', 'rounds', 'jobs', 'fault_free_alarm_nights'}


def test_the_cli_writes_the_three_harnesses_scores(tmp_path, capsys):
    out = tmp_path / 'out.json'
    assert main(['fleet', 'simulate', '--nodes', '48', '--nights', '12', '--fault-free-nights', '4',
                 '--fault', 'random:10%', '--seed', '2', '--json', str(out)]) == 0
    result = json.loads(out.read_text())
    for name in ('ibrepro', 'clusterkit', 'linktest'):
        assert KEYS <= set(result[name]), name
    assert result['simulation']['noise_cv_source'].startswith('modelled')
    assert result['ibrepro']['named_exactly'] >= 0.9 and result['ibrepro']['fault_free_alarm_nights'] == 0
    assert result['clusterkit']['rounds'] == 47 and result['ibrepro']['rounds'] <= 5
    assert 'simulated (not measured)' in capsys.readouterr().out


def test_runs_are_deterministic_for_a_seed():
    a = fs.run(fs.Model(32, 0.01), 6, 0.1, seed=5, fault_free_nights=2)
    b = fs.run(fs.Model(32, 0.01), 6, 0.1, seed=5, fault_free_nights=2)
    assert a == b


def test_link_faults_cannot_be_named_exactly_by_the_node_only_baselines():
    fabric = fp.fat_tree(64)
    fault = fs.Fault('leaf uplink', 'uplink leaf001>spine3', ('leaf001>spine3',), 0.10)
    import numpy as np
    out = fs.clusterkit_night(fabric, fs.Model(64, 0.01), fault, np.random.default_rng(0))
    assert fs._score([fault], out['named'])[0] is False


def test_a_degraded_link_slows_exactly_the_flows_that_cross_it():
    fabric = fp.fat_tree(32)
    model = fs.Model(32, noise_cv=1e-9)
    fault = fs.Fault('leaf uplink', 'uplink leaf000>spine4', ('leaf000>spine4',), 0.25)
    r = fp.pair_rounds(fabric)[1]
    for f in fs.simulate_flows(fabric, r.pairs, model, fault, random.Random(0)):
        crosses = 'leaf000>spine4' in fabric.directed_links(f['src'], f['dst'])
        assert abs(f['bw'] - model.link_capacity * (0.75 if crosses else 1.0)) < 1e-3


def _reports(paths):
    return [json.loads(Path(p).read_text()) for p in paths]


def test_the_noise_is_drawn_from_the_residuals_of_the_nights_that_named_nothing():
    # the repository's run reports hold no pair-round night: nothing to draw from
    assert fs.stored_residuals(_reports(sorted(RUN_REPORTS.glob('*.json')))) == ((), 0)
    residuals, nights = fs.stored_residuals(_reports(CLEAN))
    assert (len(residuals), nights) == (240, 10)    # a night of 8 nodes: 3 rounds x 4 pairs x 2 directions
    # the tails the fabric has are kept, not summarised into one CV: a flow far beyond a Gaussian's reach
    scale = fs.robust_scale(residuals)
    assert min(residuals) < -8 * scale
    # a night that named a component is a fault, not noise: left out
    assert fs.stored_residuals(_reports(CLEAN + [FAULT])) == (residuals, nights)


def test_the_cli_draws_the_noise_from_the_results_database_or_reports(tmp_path, monkeypatch, capsys):
    from test_report_fleet import stored_nights
    residuals = fs.stored_residuals(_reports(CLEAN))[0]
    args = ['fleet', 'simulate', '--nodes', '16', '--nights', '2', '--fault-free-nights', '1', '--no-baselines']
    monkeypatch.setenv('IBREPRO_HOME', str(tmp_path))
    monkeypatch.delenv('RFM_SQLITE_DB_FILE', raising=False)
    assert main(args + ['--noise-from']) == 2                       # no database yet: said, not modelled quietly
    assert 'no results database' in capsys.readouterr().err
    stored_nights(tmp_path / 'results.db', CLEAN)
    for extra in (['--noise-from'], ['--noise-from', *map(str, CLEAN)]):
        out = tmp_path / 'out.json'
        assert main(args + extra + ['--json', str(out)]) == 0
        simulation = json.loads(out.read_text())['simulation']
        assert simulation['noise'] == f'{len(residuals)} stored residuals', extra
        assert simulation['noise_cv_source'].startswith('drawn from 240 residuals of 10'), extra
    (tmp_path / 'bad.json').write_text('{"runs": 3')
    assert main(args + ['--noise-from', str(tmp_path / 'bad.json')]) == 2
    assert 'bad.json: not JSON' in capsys.readouterr().err
    assert main(args + ['--noise-from', '--noise-cv', '0.01']) == 2
    assert 'not both' in capsys.readouterr().err


def test_faults_and_bounds():
    assert fs.parse_fault('random:25%') == (0.25, 0.0, None)
    assert fs.parse_fault('switch:10%') == (0.10, 0.0, 'leaf switch')
    assert fs.parse_fault('spine:10%') == (0.10, 0.0, 'spine switch')
    assert fs.parse_fault('latency:30%') == (0.0, 0.30, None)
    for bad in ('random:0%', 'latency:x%', 'latency:30', 'slow:10%', 'random:100%', 'switch:0%', 'spine:x'):
        with pytest.raises(ValueError, match='--fault'):
            fs.parse_fault(bad)
    assert fs.poisson_upper(0, 100) < fs.poisson_upper(1, 100)
    assert abs(fs.poisson_upper(0, 1) - 3.689) < 1e-3            # Garwood: chi2(0.975, 2) / 2
    assert 4000 / 200 < fs.poisson_upper(4000, 200) < 4300 / 200  # large counts: above the rate, not underflowed
    assert fs.parse_tail('0.2%:30%') == (0.002, 0.30)
    for bad in ('0.2:30%', '0%:30%', '1%:100%', 'x'):
        with pytest.raises(ValueError, match='--tail'):
            fs.parse_tail(bad)


def test_the_cli_simulates_the_hard_worlds_and_keeps_the_baselines_to_the_plans(tmp_path, capsys):
    out = tmp_path / 'out.json'
    args = ['fleet', 'simulate', '--nodes', '32', '--nights', '4', '--fault-free-nights', '2', '--seed', '1']
    assert main(args + ['--routing', 'permuted']) == 2                   # baselines: modelled only in the plan's
    assert '--no-baselines' in capsys.readouterr().err
    assert main(args + ['--no-baselines', '--routing', 'adaptive', '--oversubscription', '2', '--flap', '0.5',
                        '--leaf-noise', '0.01', '--round-noise', '0.01', '--tail', '1%:20%', '--faults', '2',
                        '--json', str(out)]) == 0
    simulation = json.loads(out.read_text())['simulation']
    assert (simulation['routing'], simulation['oversubscription'], simulation['faults_per_night']) == ('adaptive', 2, 2)
    assert 'world: routing adaptive' in capsys.readouterr().out
    assert main(args + ['--no-baselines', '--fault', 'switch:10%', '--json', str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result['ibrepro']['named_exactly_by_kind']) == {'leaf switch'}
    assert main(args + ['--faults', '0']) == 2 and main(args + ['--no-baselines', '--flap', '0']) == 2
    with pytest.raises(SystemExit):
        main(args + ['--routing', 'ecmp'])


def test_calibration_replays_the_same_nights_at_each_level_and_takes_the_largest_within_the_target():
    """``calibrate`` replays the stored noise on the partition's own fabric: every level the same seeded nights,
    the level chosen the largest whose 95 % upper bound of false names a night is within the target (none when no
    level's is: with 10 nights no bound gets below 0.369 a night)."""
    residuals, _ = fs.stored_residuals([json.loads(p.read_text()) for p in CLEAN])
    fabric = fp.fabric_from_leaves({f'sw-{j}': [f'c{j}{i}' for i in range(4)] for j in range(4)}, 4)
    model = fs.Model(len(fabric.nodes), fs.robust_scale(residuals), 4, 4, residuals=residuals)
    out = fs.calibrate(model, 10, alphas=(0.02, 0.001, 0.01), target=0.5, fault_nights=4, fabric=fabric)
    assert [row['alpha'] for row in out['levels']] == [0.001, 0.01, 0.02]
    within = [row['alpha'] for row in out['levels'] if row['wrong_per_night_upper95'] <= 0.5]
    assert out['alpha'] == (max(within) if within else None)
    assert out['simulation']['nodes'] == 16 and out['simulation']['fault_free_nights'] == 10
    assert fs.calibrate(model, 10, alphas=(0.01,), target=0.3, fabric=fabric)['alpha'] is None
    with pytest.raises(ValueError, match='levels in'):
        fs.calibrate(model, 10, alphas=(0.5,), fabric=fabric)


def test_the_cli_calibrates_on_a_topology_says_the_level_or_that_none_meets_the_target(tmp_path, capsys):
    topology = tmp_path / 'topology.conf'
    topology.write_text('SwitchName=ib-leaf-1 Nodes=c[01-04]\nSwitchName=ib-leaf-2 Nodes=c[05-08]\n'
                        'SwitchName=spine Switches=ib-leaf-[1-2]\n')
    common = ['fleet', 'calibrate', '--noise-from', *map(str, CLEAN), '--topology', str(topology),
              '--nights', '8', '--fault-nights', '2', '--alphas', '0.005,0.01']
    out = tmp_path / 'cal.json'
    assert main(common + ['--target', '0.9', '--json', str(out)]) == 0
    said = capsys.readouterr().out
    chosen = json.loads(out.read_text())['alpha']
    assert f"fleet_alpha {chosen:g}" in said and 'not measured' in said
    assert main(common + ['--target', '0.1']) == 1            # 8 nights bound no rate below 0.46 a night
    assert 'no level keeps the false names' in capsys.readouterr().err
    assert main(['fleet', 'calibrate', '--noise-from', str(FAULT), '--nodes', '16', '--nights', '2']) == 2
    assert 'no fault-free pair-round night' in capsys.readouterr().err

"""ibrepro fleet verdict (ibrepro.fleet.drain) and scripts/nhc/ibrepro_fleet.nhc: the night's findings (a sweep's
state faults on fixture sysfs trees, a localiser's named components on a constructed night) become one verdict
file and one drain list; the NHC check fails exactly the named nodes, and judges nothing from a stale, missing or
malformed file. NHC itself is not on this machine: the check runs in bash beside a ``die``/``log`` pair that keep
NHC's contract (``die <status> <message>``; scripts/common.nhc)."""

import json
import random
import shlex
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from ibrepro.fleet import sweep as fleet_sweep
from ibrepro.fleet import drain as fleet_drain
from ibrepro.fleet import localise as fl
from ibrepro.fleet import plan as fp
from ibrepro.fleet import simulate as fs
from ibrepro.cli import main
from test_fleet_localise import LATENCY_MODEL, MODEL, latency_night, night

NHC_CHECK = ROOT / 'scripts' / 'nhc' / 'ibrepro_fleet.nhc'


def _confirmed(fabric, result, fault, seed, model=MODEL):
    """``result`` with its suspects re-tested as the check plans it (fleet_plan.confirmation_rounds) on the fabric
    with ``fault`` still there (modelled flows): the analysis JSON ``fleet verdict`` reads."""
    hosts = fl.suspect_hosts(result.suspects, fabric)
    rounds = fp.confirmation_rounds([s.members[0] for s in result.suspects], fabric,
                                    [n for n in fabric.nodes if n not in hosts])
    again = [{**f, 'round': r.label(k)} for r in rounds
             for k, f in enumerate(fs.simulate_flows(fabric, r.pairs, model, fault, random.Random(seed), r.name))]
    return fl.as_json(fl.confirm(result, again, fabric), fabric)


def _analysis(confirm=True):
    fabric = fp.fat_tree(64)
    result = fl.localise(night(fabric, ('cable n0005:mlx5_0/1 up', ('n0005>leaf',)), 3), fabric)
    fault = fs.Fault('cable', 'cable n0005:mlx5_0/1 up', ('n0005>leaf',), 0.10)
    return _confirmed(fabric, result, fault, 4) if confirm else fl.as_json(result, fabric)


def _uplink_analysis():
    fabric = fp.fat_tree(64)
    result = fl.localise(night(fabric, ('uplink leaf001>spine7', ('leaf001>spine7',)), 2), fabric)
    return _confirmed(fabric, result, fs.Fault('uplink', 'uplink leaf001>spine7', ('leaf001>spine7',), 0.10), 5)


SWEEP = {'nodes': 2, 'skipped': [], 'faults': [
    {'component': 'n0009:mlx5_0/1', 'fault': 'port width', 'evidence': "100 Gb/sec (2X HDR): 2X, the partition's 4X"}]}


def test_findings_name_the_nodes_and_keep_switch_links_apart():
    bad, links, untested = fleet_drain.findings(SWEEP, _analysis())
    assert sorted(bad) == ['n0005', 'n0009'] and links == [] == untested
    assert bad['n0005'][0].startswith('cable n0005:mlx5_0/1 up: bandwidth -')
    bad, links, untested = fleet_drain.findings(None, _uplink_analysis())
    assert bad == {} and [c for c, _ in links] == ['uplink leaf001>spine7'] and untested == []


def test_a_node_named_by_latency_is_drained_saying_latency():
    fabric = fp.fat_tree(64)
    result = fl.localise(latency_night(fabric, ('cable n0017:mlx5_0/1 up', ('n0017>leaf',)), 7), fabric)
    fault = fs.Fault('test', 'cable n0017:mlx5_0/1 up', ('n0017>leaf',), 0.0, latency=0.4)
    bad, links, untested = fleet_drain.findings(None, _confirmed(fabric, result, fault, 8, LATENCY_MODEL))
    assert list(bad) == ['n0017'] and links == [] == untested
    assert ': latency +' in bad['n0017'][0]


def test_a_node_named_as_flapping_is_drained_saying_flapping_and_a_stored_flag_is_believed_only_if_true():
    analysis = _analysis()
    flapping = {**analysis, 'named': [{**analysis['named'][0], 'flapping': True}]}
    bad, _, _ = fleet_drain.findings(None, flapping)
    assert list(bad) == ['n0005'] and 'flapping (slow in some rounds only)' in bad['n0005'][0]
    hostile = {**analysis, 'named': [{**analysis['named'][0], 'flapping': 'yes; rm -rf /'}]}
    assert 'flapping' not in fleet_drain.findings(None, hostile)[0]['n0005'][0]


def test_nothing_a_confirmation_did_not_re_test_is_drained_nor_a_host_outside_the_fabric():
    """A night whose confirmation never ran names its suspects from the night alone; a stored night may name a host
    its fabric does not have (slurmctld01). Both are written down as untested and drain nothing."""
    alone = _analysis(confirm=False)
    assert alone['named'] and alone['named'][0]['confirmed'] is None
    bad, links, untested = fleet_drain.findings(SWEEP, alone)
    assert list(bad) == ['n0009'] and links == []           # the sweep's own fault still drains its node
    assert [c for c, _ in untested] == ['cable n0005:mlx5_0/1 up']
    assert 'named from the night alone, no confirmation re-tested it' in untested[0][1]

    confirmed = _analysis()
    foreign = json.loads(json.dumps(confirmed).replace('n0005', 'slurmctld01'))
    foreign['fabric_nodes'] = confirmed['fabric_nodes']
    bad, links, untested = fleet_drain.findings(None, foreign)
    assert bad == {} and links == [] and 'slurmctld01 not a node of the fabric the night ran on' in untested[0][1]
    del foreign['fabric_nodes']                            # an analysis that names no fabric: nothing to check against
    bad, _, untested = fleet_drain.findings(None, foreign)
    assert bad == {} and 'the analysis names no fabric' in untested[0][1]
    text = fleet_drain.verdict_text({}, [], 'n', untested=untested)
    assert text.splitlines()[1].startswith('untested cable_slurmctld01:mlx5_0/1_up cable slurmctld01')


def test_hostile_names_are_refused_and_reasons_kept_plain():
    with pytest.raises(fleet_drain.VerdictError, match='is not a host name'):
        fleet_drain.findings({'faults': [{'component': "n1;reboot:mlx5_0/1", 'fault': 'x'}]})
    bad, _, _ = fleet_drain.findings({'faults': [{'component': 'n1:mlx5_0/1', 'fault': "it's $(reboot)\n`x`\\",
                                               'evidence': 'e'}]})
    assert not set("'$`\\\n") & set(bad['n1'][0]), bad
    argv, = fleet_drain.drain_commands(bad)
    assert argv[:4] == ['scontrol', 'update', 'NodeName=n1', 'State=DRAIN'] and argv[4].startswith('Reason=ibrepro')


def _nhc(verdict, host, *args):
    script = (f'source {shlex.quote(str(NHC_CHECK))}\n'
              'function die() { echo "DIE $1 $2"; return 0; }\n'
              'function log() { echo "LOG $*"; }\n'
              f'HOSTNAME={host}.cluster; HOSTNAME_S={host}\n'
              f'check_ibrepro_fleet {shlex.quote(str(verdict))} {" ".join(args)}; echo "status $?"\n')
    return subprocess.run(['bash', '-c', script], capture_output=True, text=True, timeout=60).stdout


def test_the_cli_writes_the_verdict_the_nhc_check_reads(tmp_path):
    sweep, analysis, out = tmp_path / 'sweep.json', tmp_path / 'analysis.json', tmp_path / 'verdict.txt'
    sweep.write_text(json.dumps(SWEEP))
    analysis.write_text(json.dumps(_analysis()))
    proc = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'fleet', 'verdict', '--sweep', str(sweep),
                           '--analysis', str(analysis), '--night', '42', '--out', str(out)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 1, proc.stdout + proc.stderr           # bad nodes: the night is not clean
    assert "to drain: scontrol update NodeName=n0005 State=DRAIN 'Reason=ibrepro fleet: cable" in proc.stdout
    text = out.read_text()
    assert text.startswith('# ibrepro fleet verdict v1 night=42 written=')
    assert '\nbad n0009 n0009:mlx5_0/1: port' in text
    assert not (tmp_path / 'verdict.txt.partial').exists()

    assert _nhc(out, 'n0005', '3600').splitlines()[0].startswith('DIE 1 ibrepro fleet: cable n0005:mlx5_0/1 up')
    assert 'DIE 1 ibrepro fleet: n0009:mlx5_0/1: port width' in _nhc(out, 'n0009')
    assert _nhc(out, 'n0001').strip() == 'status 0'                  # a node nobody named passes
    assert _nhc(out, 'n000').strip() == 'status 0'                   # names match whole, never as a pattern


def test_the_nhc_check_judges_nothing_from_a_stale_missing_or_foreign_file(tmp_path):
    old = tmp_path / 'old.txt'
    old.write_text(fleet_drain.verdict_text({'n1': ['r']}, [], 'n', now=time.time() - 7200))
    assert 'is 7' in _nhc(old, 'n1', '3600') and 'DIE' not in _nhc(old, 'n1', '3600')
    assert 'DIE 1' in _nhc(old, 'n1', '86400')
    assert 'is not readable' in _nhc(tmp_path / 'none.txt', 'n1')
    foreign = tmp_path / 'foreign.txt'
    foreign.write_text('bad n1 reboot\n')
    out = _nhc(foreign, 'n1')
    assert 'not an ibrepro fleet verdict' in out and 'DIE' not in out and 'status 0' in out


def test_the_cli_refuses_input_it_cannot_attribute(tmp_path):
    bad = tmp_path / 'sweep.json'
    bad.write_text(json.dumps({'faults': [{'component': '$(id):mlx5_0/1', 'fault': 'x'}]}))
    for args, message in [([], 'give --sweep and/or --analysis'), (['--sweep', str(bad)], 'is not a host name'),
                          (['--sweep', str(tmp_path / 'none.json')], 'No such file')]:
        proc = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'fleet', 'verdict', '--out',
                               str(tmp_path / 'v.txt'), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / 'v.txt').exists()


def test_a_sweeps_json_feeds_the_verdict(tmp_path):
    # the sweep's own JSON (ibrepro fleet sweep --json) is what verdict reads: the same keys
    result = fleet_sweep.sweep({})
    assert set(result) >= {'faults', 'nodes'} and fleet_drain.findings(result) == ({}, [], [])


def test_the_cli_drains_nothing_it_could_not_judge_and_says_so(tmp_path):
    analysis, out = tmp_path / 'analysis.json', tmp_path / 'verdict.txt'
    analysis.write_text(json.dumps(_analysis(confirm=False)))
    proc = subprocess.run([sys.executable, '-m', 'ibrepro.cli', 'fleet', 'verdict', '--analysis', str(analysis),
                           '--out', str(out), '--apply'], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2, proc.stdout + proc.stderr            # could not judge: not clean, nothing drained
    assert 'not drained: cable n0005:mlx5_0/1 up' in proc.stdout and 'drain' not in proc.stdout.replace(
        'not drained', '').replace('drains', '')
    assert '\nuntested cable_n0005:mlx5_0/1_up ' in out.read_text() and '\nbad ' not in out.read_text()
    assert _nhc(out, 'n0005').strip() == 'status 0'


def test_fleet_analyse_of_a_night_whose_confirmation_never_ran_says_nothing_re_tested_it(tmp_path, capsys):
    """The real uplink night of the namespace fat tree (tests/data/fleet) with its confirmation flows left out, as a
    night stores them when its confirmation job never ran."""
    night_ = json.loads((ROOT / 'tests' / 'data' / 'fleet' / 'fattree-uplink-leaf1-spine1-25.fleet.json').read_text())
    del night_['confirmation']
    (tmp_path / 'night.json').write_text(json.dumps(night_))
    assert main(['fleet', 'analyse', str(tmp_path / 'night.json'), '--json', str(tmp_path / 'analysis.json')]) == 1
    assert 'no confirmation re-tested this night' in capsys.readouterr().out
    analysis = json.loads((tmp_path / 'analysis.json').read_text())
    assert analysis['fabric_nodes'] == [f'node{i}' for i in range(1, 9)]
    bad, links, untested = fleet_drain.findings(None, analysis)
    assert bad == {} and links == [] and untested

"""ibrepro fleet verdict (ibrepro.fleet_drain) and scripts/nhc/ibrepro_fleet.nhc: the night's findings (a sweep's
state faults on fixture sysfs trees, a localiser's named components on a constructed night) become one verdict
file and one drain list; the NHC check fails exactly the named nodes, and judges nothing from a stale, missing or
malformed file. NHC itself is not on this machine: the check runs in bash beside a ``die``/``log`` pair that keep
NHC's contract (``die <status> <message>``; scripts/common.nhc)."""

import json
import shlex
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from ibrepro import fleet, fleet_drain, fleet_localise as fl, fleet_plan as fp
from test_fleet_localise import latency_night, night

NHC_CHECK = ROOT / 'scripts' / 'nhc' / 'ibrepro_fleet.nhc'


def _analysis():
    fabric = fp.fat_tree(64)
    return fl.as_json(fl.localise(night(fabric, ('cable n0005:mlx5_0/1 up', ('n0005>leaf',)), 3), fabric))


def _uplink_analysis():
    fabric = fp.fat_tree(64)
    return fl.as_json(fl.localise(night(fabric, ('uplink leaf001>spine7', ('leaf001>spine7',)), 2), fabric))


SWEEP = {'nodes': 2, 'skipped': [], 'faults': [
    {'component': 'n0009:mlx5_0/1', 'fault': 'port width', 'evidence': "100 Gb/sec (2X HDR): 2X, the partition's 4X"}]}


def test_findings_name_the_nodes_and_keep_switch_links_apart():
    bad, links = fleet_drain.findings(SWEEP, _analysis())
    assert sorted(bad) == ['n0005', 'n0009'] and links == []
    assert bad['n0005'][0].startswith('cable n0005:mlx5_0/1 up: bandwidth -')
    bad, links = fleet_drain.findings(None, _uplink_analysis())
    assert bad == {} and [c for c, _ in links] == ['uplink leaf001>spine7']


def test_a_node_named_by_latency_is_drained_saying_latency():
    fabric = fp.fat_tree(64)
    analysis = fl.as_json(fl.localise(latency_night(fabric, ('cable n0017:mlx5_0/1 up', ('n0017>leaf',)), 7),
                                      fabric))
    bad, links = fleet_drain.findings(None, analysis)
    assert list(bad) == ['n0017'] and links == []
    assert ': latency +' in bad['n0017'][0]


def test_hostile_names_are_refused_and_reasons_kept_plain():
    with pytest.raises(fleet_drain.VerdictError, match='is not a host name'):
        fleet_drain.findings({'faults': [{'component': "n1;reboot:mlx5_0/1", 'fault': 'x'}]})
    bad, _ = fleet_drain.findings({'faults': [{'component': 'n1:mlx5_0/1', 'fault': "it's $(reboot)\n`x`\\",
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
    result = fleet.sweep({})
    assert set(result) >= {'faults', 'nodes'} and fleet_drain.findings(result) == ({}, [])

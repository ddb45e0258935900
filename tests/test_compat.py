"""The modules a compute node runs (fleet_rounds.NODE_MODULES, copied to the job's stage directory and run by the
node's own Python) need at most Python 3.6 (EL8's platform Python; EL9's is 3.9): ibrepro.compat is where they take
what newer Pythons have. vermin reads them; where pyenv has an old Python, a real round of the fleet is parsed and
its confirmation planned under it, and must come out as under this one."""

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, old_python, output
from ibrepro import compat
from ibrepro.fleet import rounds as fleet_rounds
from ibrepro.rfm import system
from test_topology import ACTIVE, ib_device, pci_function

FLEET = ROOT / 'tests' / 'data' / 'fleet'

#: Parses round 1 of a real night (tests/data/fleet/round-1: iperf3 outputs) and plans the confirmation of the
#: uplink night's suspects, as a node's task 0 does; prints both as JSON.
_NODE_TASK = '''
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
sys.modules.update(numpy=None, sqlite3=None, _sqlite3=None)      # what a node may lack
from ibrepro.fleet import rounds as fleet_rounds
data = Path(sys.argv[2])
plan = json.loads((data / 'round-1' / 'plan.json').read_text())
records = fleet_rounds.flow_records(data / 'round-1', 1)
night = json.loads((data / 'fattree-uplink-leaf1-spine1-25.fleet.json').read_text())
rounds, suspects = fleet_rounds.confirmation_plan(plan, night['flows'])
print(json.dumps({'records': records, 'suspects': suspects, 'rounds': [r.as_json() for r in rounds]}))
'''


def test_the_node_modules_need_at_most_python_3_6():
    vermin = Path(sys.executable).parent / 'vermin'
    if not vermin.exists():
        pytest.skip('vermin not installed (pip install -e .[test])')
    package = ROOT / 'src' / 'ibrepro'
    done = subprocess.run([str(vermin), '--no-tips', '--violations', '-t=3.6-',
                           *(str(package / name) for name in {*fleet_rounds.NODE_MODULES, *system.NODE_MODULES})],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_what_compat_gives_is_what_newer_pythons_have():
    values = [4.686478064764285, 4.661552768814791, 9.3, 1e-9, 7.25]
    assert compat.fmean(values) == statistics.fmean(values)
    with pytest.raises(ValueError):
        compat.fmean([])
    assert all(compat.comb(n, k) == math.comb(n, k) for n in range(0, 70) for k in range(0, 72))
    for text, prefix in [('spine12', 'spine'), ('netdev:eth0', 'netdev:'), ('fab0', 'netdev:'), ('x', ''), ('', 'a')]:
        assert compat.removeprefix(text, prefix) == text.removeprefix(prefix)
        assert compat.removesuffix(text, prefix) == text.removesuffix(prefix)
    assert compat.removesuffix('4x', 'x') == '4' and compat.removesuffix('x', 'x') == ''


@pytest.mark.parametrize('version', ['3.6', '3.9'])
def test_a_nodes_old_python_parses_a_real_round_and_plans_the_confirmation_as_this_one(tmp_path, version):
    old = old_python(version)
    if old is None:
        pytest.skip(f'no Python {version} here (pyenv install {version})')
    fleet_rounds.copy_node_modules(tmp_path)

    def task(python):
        done = subprocess.run([python, '-I', '-c', _NODE_TASK, str(tmp_path), str(FLEET)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    there, here = task(old), task(sys.executable)
    assert there == here
    assert len(here['records']) == 8 and here['suspects'][0] == 'uplink leaf1>spine1 = downlink spine1>leaf2'
    assert [r['name'] for r in here['rounds']] == ['confirmation']     # the link alone: its cables are no suspects


def _node_command(python, *args):
    """``python -m ibrepro.cli ARGS`` as a job of :class:`ibrepro.rfm.system.IbreproCommand` runs it on a node."""
    done = subprocess.run([python, '-m', 'ibrepro.cli', *args], capture_output=True, text=True, timeout=120,
                          env={'PATH': '/usr/bin:/bin', 'PYTHONPATH': str(system.PACKAGE_DIR)}, cwd='/')
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize('version', ['3.6', '3.9'])
def test_a_nodes_old_python_reads_the_node_as_this_one(tmp_path, version):
    """The topology and software records of a node, read by EL8's and EL9's platform Pythons as by this one."""
    old = old_python(version)
    if old is None:
        pytest.skip(f'no Python {version} here (pyenv install {version})')
    fn = pci_function(tmp_path, '0000:3b:00.0', speed='16.0 GT/s PCIe', numa=1)
    ib_device(tmp_path, 'mlx5_0', {1: (*ACTIVE, '200 Gb/sec (4X HDR)', 'InfiniBand')}, function=fn)
    topo = ['topology', '--json', '--sysfs', str(tmp_path)]
    assert _node_command(old, *topo) == _node_command(sys.executable, *topo)
    node = ['fleet', 'node', '--sysfs', str(tmp_path)]      # what each task of a fleet sweep prints
    assert _node_command(old, *node) == _node_command(sys.executable, *node)
    there, here = _node_command(old, 'software', '--json'), _node_command(sys.executable, 'software', '--json')
    assert there['python'].startswith(f'{version}.') and there['ibrepro'] == here['ibrepro']
    assert {k: v for k, v in there.items() if k not in ('python', 'os')} == \
        {k: v for k, v in here.items() if k not in ('python', 'os')}


@pytest.mark.parametrize('version', ['3.6', '3.9'])
def test_the_system_checks_run_with_the_partitions_python(reframe, version):
    """RdmaTopology and SoftwareVersions in real ReFrame runs on a partition whose nodes have only an old Python
    (extras ``python``): their jobs run it, with this checkout's package, and store what it read."""
    old = old_python(version)
    if old is None:
        pytest.skip(f'no Python {version} here (pyenv install {version})')
    proc = reframe('-r', '-n', '^(RdmaTopology|SoftwareVersions)$', '--report-file', str(reframe.home / 'r.json'),
                   config='tests/configs/node_python.py', checks='reframe-checks/system',
                   env={'IBREPRO_TEST_NODE_PYTHON': old})
    assert proc.returncode == 0, output(proc)
    cases = {c['name']: c for run in json.loads((reframe.home / 'r.json').read_text())['runs']
             for c in run['testcases']}
    assert {c['result'] for c in cases.values()} == {'pass'} and set(cases) == {'RdmaTopology', 'SoftwareVersions'}
    assert cases['SoftwareVersions']['software']['python'].startswith(f'{version}.')
    (script,) = reframe.home.rglob('RdmaTopology*/rfm_job.sh')
    assert f'{old} -m ibrepro.cli topology' in script.read_text()

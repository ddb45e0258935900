"""reframe-checks/system/topology.py in a real ReFrame session: what the run report stores."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_topology import ACTIVE, ib_device, pci_function

CHECK = Path(__file__).parents[1] / 'reframe-checks' / 'system' / 'topology.py'
REFRAME = Path(sys.executable).parent / 'reframe'   # installed next to the venv's python

CONFIG = """
site_configuration = {
    'systems': [{'name': 'testsys', 'hostnames': ['.*'], 'modules_system': 'nomod',
                 'partitions': [{'name': 'cpu', 'scheduler': 'local', 'launcher': 'local',
                                 'environs': ['plain']}]}],
    'environments': [{'name': 'plain'}],
}
"""


def run_check(tmp_path, sysfs_root):
    (tmp_path / 'settings.py').write_text(CONFIG)
    report = tmp_path / 'report.json'
    proc = subprocess.run(
        [str(REFRAME), '-C', str(tmp_path / 'settings.py'), '-c', str(CHECK), '-r',
         '--prefix', str(tmp_path / 'rfm'), '--report-file', str(report), '--warn-as-error',
         '-S', f'sysfs_root={sysfs_root}'],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    testcase, = json.loads(report.read_text())['runs'][0]['testcases']
    return testcase


@pytest.mark.integration
def test_report_stores_topology_features_and_limits(tmp_path):
    fn = pci_function(tmp_path / 'sys', '0000:04:00.0', speed='5.0 GT/s PCIe', width=8)
    ib_device(tmp_path / 'sys', 'mlx4_0', {1: (*ACTIVE, '40 Gb/sec (4X QDR)', 'InfiniBand'),
                                           2: (*ACTIVE, '40 Gb/sec (4X QDR)', 'InfiniBand')}, function=fn)
    tc = run_check(tmp_path, tmp_path / 'sys')

    assert tc['result'] == 'pass'
    assert tc['topology']['devices'][0]['name'] == 'mlx4_0'
    assert tc['rdma_features'] == ['ib', 'ib-qdr', 'dual-port']
    perf = {k.rsplit(':', 1)[1]: v[0] for k, v in tc['perfvalues'].items()}
    assert perf == {'rdma_devices': 1, 'rdma_ports': 2, 'link_gbps': 32.0,
                    'limit_uni': 4000.0, 'limit_bi': 8000.0}


@pytest.mark.integration
def test_machine_without_rdma_records_zero_ports(tmp_path):
    tc = run_check(tmp_path, tmp_path / 'empty-sys')

    assert tc['result'] == 'pass'
    assert 'no RDMA devices found' in tc['topology']['message']
    assert tc['rdma_features'] == []
    perf = {k.rsplit(':', 1)[1]: v[0] for k, v in tc['perfvalues'].items()}
    assert perf == {'rdma_devices': 0, 'rdma_ports': 0}

"""`ibrepro pair`: the perftest client/server runner, and the verbs families that use it."""

import json
import shutil

import pytest

from conftest import output
from ibrepro import pair

PERFTEST = shutil.which('ib_write_lat')
needs_perftest = pytest.mark.skipif(not PERFTEST, reason='perftest not installed (apt-get install perftest)')


def spec(**kw):
    return {'command': ['ib_write_lat', '-F', '-n', '100'],
            'flows': [{'id': 0, 'port': 18515, 'server': {'node': 0, 'device': 'rxe_a', 'ib_port': 1},
                       'client': {'node': 1, 'device': 'rxe_b', 'ib_port': 1}}],
            'addresses': [None, None], 'timeout': 20, **kw}


@pytest.mark.parametrize('env, nodes', [
    ({}, [0, 1]),                                              # alone: plays both ends
    ({'SLURM_PROCID': '1', 'SLURM_NTASKS': '2'}, [1]),        # srun, second task
    ({'PMI_RANK': '0', 'PMI_SIZE': '2'}, [0]),                # MPICH / Intel MPI hydra
    ({'OMPI_COMM_WORLD_RANK': '1', 'OMPI_COMM_WORLD_SIZE': '2'}, [1]),
    ({'SLURM_PROCID': '0', 'SLURM_NTASKS': '1'}, [0, 1]),     # one task: still both ends
])
def test_node_comes_from_the_launcher(env, nodes):
    assert pair.my_nodes(spec(), env) == nodes


def test_side_commands_carry_device_port_and_server():
    s = spec(node_exec=['guest-exec', '--node', '{node}', '--'])
    flow = s['flows'][0]
    assert pair._side_command(s, flow, 'server') == [
        'guest-exec', '--node', '0', '--', 'ib_write_lat', '-F', '-n', '100', '-d', 'rxe_a', '-i', '1',
        '-p', '18515']
    assert pair._side_command(s, flow, 'client', '198.51.100.1')[-7:] == [
        '-d', 'rxe_b', '-i', '1', '-p', '18515', '198.51.100.1']


def test_bad_spec_is_named(tmp_path):
    path = tmp_path / 'flows.json'
    path.write_text('{"flows": [{"id": 0, "port": 1, "server": {"node": 0}, "client": {"node": 1}}]}')
    with pytest.raises(pair.SpecError, match="flows.json: missing 'command'"):
        pair.load_spec(path)


def test_missing_program_is_reported(tmp_path):
    lines = []
    rc = pair.run(spec(command=['ib_no_such_test']), tmp_path, log=lines.append)
    assert rc == 127
    assert "'ib_no_such_test' not found on PATH" in lines[0]


@needs_perftest
def test_server_without_device_fails_fast_with_its_reason(tmp_path):
    lines = []
    rc = pair.run(spec(), tmp_path, log=lines.append)
    assert rc == 1
    assert any('server exited with 1 before a client connected' in line for line in lines), lines
    assert 'rxe_a' in (tmp_path / 'flow-0.server.out').read_text()
    status = json.loads((tmp_path / 'flow-0.server.status.json').read_text())
    assert status['returncode'] == 1


@needs_perftest
@pytest.mark.integration
def test_verbs_family_on_a_partition_without_the_device_says_so(reframe):
    """A partition that declares RoCE without having it: the checks fail, naming perftest's own report."""
    proc = reframe('-r', '-n', 'PerftestLatency%operation=rdma_write', '-S', 'iterations=100',
                   config='tests/configs/declared_rdma.py')
    assert proc.returncode == 1, output(proc)
    assert 'flow 0: the client never ran: server: no-device: perftest: Did not detect devices' \
        in proc.stdout, output(proc)

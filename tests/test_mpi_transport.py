"""Which transport MPI really used, from UCX's own protocol tables (ibrepro.mpi_transport), on the real UCX 1.20.1
logs of tests/fixtures/ucx (MANIFEST.md there), and what a case does with it."""

from pathlib import Path

from ibrepro import mpi_transport

FIXTURES = Path(__file__).parent / 'fixtures' / 'ucx'


def test_the_tagged_sends_of_each_peer_kind_are_read_from_every_process_log():
    summary, problems = mpi_transport.read(FIXTURES / '1.20.1-mpich-5.0.2')
    assert summary == {'intra-node': ['cma/memory', 'sysv/memory'], 'self': ['self/memory']} and problems == []
    rows = mpi_transport.tables((FIXTURES / '1.20.1-mpich-5.0.2' / 'ucx-vm-25722.log').read_text())
    tagged = [r for r in rows if r['peer'] == 'intra-node' and r['operation'] == mpi_transport.TAGGED]
    assert [(r['range'], r['protocol'], r['transport']) for r in tagged] == [
        ('0..92', 'eager short', 'sysv/memory'), ('93..5028', 'eager copy-in copy-out', 'sysv/memory'),
        ('5029..inf', '(?) rendezvous zero-copy read from remote', 'cma/memory')]


def test_a_rail_the_node_lacks_is_what_ucx_says_in_its_own_words():
    summary, problems = mpi_transport.read(FIXTURES / '1.20.1-mpich-5.0.2-no-rail')
    assert summary['intra-node'] == ['cma/memory', 'sysv/memory']
    assert problems == ["UCX WARN network device 'mlx5_0:1' is not available, please use one or more of: "
                        "'eth0'(tcp), 'lo'(tcp)"]


def test_an_inter_node_transport_off_the_rail_is_named():
    assert mpi_transport.off_rail({'intra-node': ['sysv/memory']}, 'mlx5_0') == ''        # no inter-node peer
    assert mpi_transport.off_rail({'inter-node': ['rc_mlx5/mlx5_0:1', 'ud_mlx5/mlx5_0:1']}, 'mlx5_0', 1) == ''
    said = mpi_transport.off_rail({'inter-node': ['rc_mlx5/mlx5_0:1', 'tcp/eth0']}, 'mlx5_0', 1)
    assert said.startswith('MPI sent inter-node messages over tcp/eth0, not the rail mlx5_0:1')
    assert 'rc_mlx5/mlx5_1:1' in mpi_transport.off_rail({'inter-node': ['rc_mlx5/mlx5_1:1']}, 'mlx5_0', 1)


def test_logs_that_are_links_or_too_large_are_not_followed(tmp_path):
    (tmp_path / 'ucx-a-1.log').symlink_to(FIXTURES / '1.20.1-mpich-5.0.2' / 'ucx-vm-25722.log')
    assert mpi_transport.read(tmp_path) == ({}, [])

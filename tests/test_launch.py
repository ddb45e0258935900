"""ibrepro.rfm.launch: how each launcher and MPI binds a job's ranks, and what the run report says about it."""

import re
import subprocess

import pytest

from ibrepro.rfm import launch


@pytest.mark.parametrize('launcher', ['srun', 'srunalloc', 'mpirun', 'mpiexec'])
@pytest.mark.parametrize('hca_numa_node', [None, 0])
def test_mvapich2_ranks_have_one_binder(launcher, hca_numa_node):
    """srun's --cpu-bind or MVAPICH2's own affinity, never both (MVAPICH2 binds unless told not to)."""
    options, env, said = launch.policy(launcher, ['mvapich2', 'mpich'], hca_numa_node=hca_numa_node)
    srun_binds = any(o.startswith('--cpu-bind=') and o != '--cpu-bind=none' for o in options)
    mvapich2_binds = env.get('MV2_ENABLE_AFFINITY') == '1'
    assert srun_binds != mvapich2_binds and 'MV2_ENABLE_AFFINITY' in env, (options, env)
    assert ('srun binds' if srun_binds else 'MVAPICH2 binds') in said


@pytest.mark.parametrize('launcher, features, kw, options, env, said', [
    ('srun', ['mpi'], {}, ['--cpu-bind=cores'], {}, 'srun --cpu-bind=cores'),
    ('srun', ['openmpi'], {'hca_numa_node': 1}, ['--cpu-bind=map_ldom:1'], {}, 'map_ldom:1'),
    ('srun', [], {'bind': False, 'kill_on_bad_exit': True}, ['--kill-on-bad-exit=1', '--whole', '--cpu-bind=none'], {},
     'the launcher leaves binding to the job'),
    ('mpirun', ['openmpi'], {}, ['--bind-to', 'core'], {}, 'mpirun --bind-to core'),
    ('mpiexec', ['mpich'], {}, ['-bind-to', 'core'], {}, 'mpiexec -bind-to core'),
    ('mpirun', ['impi'], {}, [], {'I_MPI_PIN': '1', 'I_MPI_PIN_DOMAIN': 'core'}, 'I_MPI_PIN=1'),
    ('mpirun', ['mvapich2', 'mpich'], {}, [], {'MV2_ENABLE_AFFINITY': '1', 'MV2_CPU_BINDING_LEVEL': 'core'},
     'MVAPICH2 binds (its affinity on, one binder)'),
    # under srun, srun binds and MVAPICH2's own affinity (on by default) is turned off: one binder, not two
    ('srun', ['mvapich2', 'mpich'], {'hca_numa_node': 1}, ['--cpu-bind=map_ldom:1'], {'MV2_ENABLE_AFFINITY': '0'},
     "srun --cpu-bind=map_ldom:1; MV2_ENABLE_AFFINITY=0; srun binds, MVAPICH2's affinity off (one binder)"),
    ('srunalloc', ['mvapich2'], {}, ['--whole', '--cpu-bind=cores'], {'MV2_ENABLE_AFFINITY': '0'}, 'srun binds'),
    ('srunalloc', ['openmpi'], {'hca_numa_node': 1}, ['--whole', '--cpu-bind=map_ldom:1'], {}, 'map_ldom:1'),
    # several ranks per node: CPUs of the rail's HCA, as the node lists them (near_cpus_commands)
    ('srun', ['openmpi'], {'ranks_per_node': 2, 'hca_numa_node': 1, 'rail_device': 'mlx5_0'},
     ['--cpu-bind=$ibrepro_bind'], {}, "srun --cpu-bind=map_cpu:<the first 2 CPUs of mlx5_0's local_cpulist"),
    ('srun', ['openmpi'], {'ranks_per_node': 2}, ['--cpu-bind=cores'], {}, 'srun --cpu-bind=cores'),
    # left unbound (oversubscribed, or the job binds its own processes): MVAPICH2 does not bind behind its back
    ('mpirun', ['mvapich2'], {'ranks_per_node': 8, 'cores_per_node': 2}, [], {'MV2_ENABLE_AFFINITY': '0'},
     'oversubscribed on purpose'),
    ('srun', ['mvapich2'], {'bind': False}, ['--whole', '--cpu-bind=none'], {'MV2_ENABLE_AFFINITY': '0'},
     "MVAPICH2's affinity off; the launcher leaves binding to the job"),
    ('mpirun', ['openmpi'], {'ranks_per_node': 8, 'cores_per_node': 2}, [], {}, 'oversubscribed on purpose'),
    ('mpirun', ['mpi'], {}, [], {}, "no binding known for launcher 'mpirun'"),
    ('smpirun', ['mpi', 'mpich'], {}, [], {}, 'binding does not apply: the ranks are simulated'),
])
def test_binding_per_launcher_and_mpi(launcher, features, kw, options, env, said):
    got_options, got_env, description = launch.policy(launcher, features, **kw)
    assert (got_options, got_env) == (options, env)
    assert said in description


@pytest.mark.parametrize('extras, rail', [
    ({}, None),
    ({'rdma_devices': ['mlx5_0', 'mlx5_1']}, ('mlx5_0', 1)),
    ({'rdma_devices': ['mlx5_0', 'mlx5_1'], 'mpi_rail': 'mlx5_1'}, ('mlx5_1', 1)),
    ({'rdma_devices': ['mlx4_0'], 'ib_ports': 2, 'mpi_rail': 'mlx4_0:2'}, ('mlx4_0', 2)),
])
def test_the_partitions_rail(extras, rail):
    assert launch.partition_rail(extras) == rail


@pytest.mark.parametrize('extras, error', [
    ({'rdma_devices': ['mlx5_0'], 'mpi_rail': 'mlx5_3'}, "mlx5_3 is not one of the partition's rdma_devices"),
    ({'rdma_devices': ['mlx5_0'], 'mpi_rail': 'mlx5_0:2'}, 'port 2, but the partition\'s devices have 1 port(s)'),
    ({'rdma_devices': ['mlx5_0'], 'mpi_rail': 'mlx5_0;reboot'}, 'a device name, optionally :port'),
    ({'rdma_devices': ['$(reboot)']}, "rdma_devices[0] '$(reboot)': not a device name"),
])
def test_a_rail_that_is_not_the_partitions_is_refused_by_name(extras, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        launch.partition_rail(extras)


@pytest.mark.parametrize('features, env', [
    (['openmpi'], {'UCX_NET_DEVICES': 'mlx5_1:1', 'FI_VERBS_DEVICE_NAME': 'mlx5_1', 'OMPI_MCA_pml': 'ucx'}),
    (['mpich'], {'UCX_NET_DEVICES': 'mlx5_1:1', 'FI_VERBS_DEVICE_NAME': 'mlx5_1', 'MPIR_CVAR_CH4_OFI_MAX_NICS': '1'}),
    (['impi'], {'UCX_NET_DEVICES': 'mlx5_1:1', 'FI_VERBS_DEVICE_NAME': 'mlx5_1', 'I_MPI_MULTIRAIL': '0'}),
    (['mvapich2', 'mpich'], {'MV2_IBA_HCA': 'mlx5_1', 'MV2_NUM_HCAS': '1', 'MV2_NUM_PORTS': '1',
                             'MV2_DEFAULT_PORT': '1'}),
])
def test_every_mpi_family_is_kept_on_one_rail(features, env):
    got, rail, said = launch.one_rail('srun', features, ('mlx5_1', 1))
    assert (got, rail) == (env, 'mlx5_1:1')
    assert said.startswith('one rail, mlx5_1:1 (')


def test_no_rail_where_there_is_none_to_choose_or_no_mpi():
    assert launch.one_rail('srun', ['openmpi'], None)[:2] == ({}, '')
    assert 'names no rdma_devices' in launch.one_rail('srun', ['openmpi'], None)[2]
    assert launch.one_rail('srun', ['perftest'], ('mlx5_0', 1)) == ({}, '', '')
    assert launch.one_rail('smpirun', ['mpich'], ('mlx5_0', 1)) == ({}, '', '')


@pytest.mark.integration
def test_boolean_knobs_take_false_from_the_command_line(tmp_path):
    """``-S one_rail=false`` is False: a plain ``bool`` variable turns any non-empty string, 'false' too, into True,
    and the case would then pin a rail the site asked it not to (``allow_oversubscription`` the same)."""
    import json

    from conftest import ReFrameRunner, output
    runner = ReFrameRunner(tmp_path / 'home')
    proc = runner('-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '--describe',
                  '-S', 'one_rail=false', '-S', 'allow_oversubscription=true',
                  checks='reframe-checks/mpi/pt2pt_collectives.py')
    assert proc.returncode == 0, output(proc)
    (case,) = json.loads(proc.stdout[proc.stdout.index('['):])
    assert case['one_rail'] is False and case['allow_oversubscription'] is True
    proc = runner('-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '--describe', '-S', 'one_rail=true',
                  '-S', 'allow_oversubscription=false', checks='reframe-checks/mpi/pt2pt_collectives.py')
    (case,) = json.loads(proc.stdout[proc.stdout.index('['):])
    assert case['one_rail'] is True and case['allow_oversubscription'] is False


@pytest.mark.parametrize('environ, ends', [
    ({'SLURM_JOB_PARTITION': 'hdr', 'SLURM_JOB_ACCOUNT': 'ibperf'}, None),
    ({'SLURM_JOB_PARTITION': 'edr', 'SLURM_JOB_ACCOUNT': 'ibperf'}, "Slurm partition 'edr', its partition asks for "
                                                                    "hdr,hdr2"),
    ({'SLURM_JOB_PARTITION': 'hdr2', 'SLURM_JOB_ACCOUNT': 'other'}, "Slurm account 'other', its partition asks for "
                                                                     "IBperf"),
    ({'SLURM_JOB_ACCOUNT': 'ibperf'}, "Slurm partition 'none'"),
])
def test_a_job_outside_its_partitions_place_ends_before_anything_runs(environ, ends):
    """The job script's first lines, run by bash as a job would: a job in another Slurm partition or account (a
    child job's allocation made apart from its case) ends with 97 and the line its sanity reports; Slurm keeps account
    names in lower case."""
    lines = launch.placement_commands({'slurm_partition': 'hdr,hdr2', 'slurm_account': 'IBperf'})
    done = subprocess.run(['bash', '-c', '\n'.join([*lines, 'echo measured'])],
                          env={'PATH': '/usr/bin:/bin', **environ}, capture_output=True, text=True, timeout=30)
    if ends is None:
        assert (done.returncode, done.stdout, done.stderr) == (0, 'measured\n', '')
    else:
        assert (done.returncode, done.stdout) == (97, '')
        assert launch.misplaced(done.stderr).startswith(f'ibrepro: misplaced: this job ran in {ends}')


def test_a_partition_that_names_no_slurm_partition_checks_nothing():
    assert launch.placement_commands({'nodes': 2}) == []


@pytest.mark.parametrize('extras, nodes, near', [
    ({'rdma_devices': ['mlx5_0', 'mlx5_1'], 'hca_numa_node': 1}, {'mlx5_0': 1}, ('mlx5_0', 1)),
    ({'rdma_devices': ['mlx5_0', 'mlx5_1'], 'mpi_rail': 'mlx5_1', 'hca_numa_node': 1}, {'mlx5_1': 1}, ('mlx5_1', 1)),
    ({'rdma_devices': ['mlx5_0', 'mlx5_1'], 'mpi_rail': 'mlx5_1', 'hca_numa_node': {'mlx5_0': 0, 'mlx5_1': 1}},
     {'mlx5_0': 0, 'mlx5_1': 1}, ('mlx5_1', 1)),
    ({'rdma_devices': ['mlx5_0', 'mlx5_1'], 'hca_numa_node': {'mlx5_1': 1}}, {'mlx5_1': 1}, None),
    ({'rdma_devices': ['mlx5_0']}, {}, None),
])
def test_the_rail_and_its_numa_node_come_from_one_place(extras, nodes, near):
    """One number is the NUMA node of the MPI rail's HCA (the ranks go near it); a map says each HCA's."""
    assert launch.hca_numa_nodes(extras) == nodes and launch.rail_numa_node(extras) == near


@pytest.mark.parametrize('said', ['1', True, -1, {'mlx5_0': 'one'}, {'mlx5_0;x': 1}])
def test_a_numa_node_that_is_no_node_number_is_refused(said):
    with pytest.raises(ValueError, match='hca_numa_node'):
        launch.hca_numa_nodes({'rdma_devices': ['mlx5_0'], 'hca_numa_node': said})


@pytest.mark.parametrize('numa, ends', [('1', None), ('-1', None), (None, None), ('0', 'mlx5_1 (the MPI rail) sits on '
                                                                                     'NUMA node 0 of ')])
def test_a_job_whose_rail_is_not_where_it_binds_ends_before_anything_runs(tmp_path, numa, ends):
    """The lines a job runs before its benchmark when its ranks go near the rail's HCA (map_ldom): the node's sysfs
    must agree with the partition (-1 or no file: the kernel does not say)."""
    if numa is not None:
        (tmp_path / 'class' / 'infiniband' / 'mlx5_1' / 'device').mkdir(parents=True)
        (tmp_path / 'class' / 'infiniband' / 'mlx5_1' / 'device' / 'numa_node').write_text(numa + '\n')
    lines = launch.numa_commands('mlx5_1', 1, sysfs=str(tmp_path))
    done = subprocess.run(['bash', '-c', '\n'.join([*lines, 'echo measured'])], env={'PATH': '/usr/bin:/bin'},
                          capture_output=True, text=True, timeout=30)
    if ends is None:
        assert (done.returncode, done.stdout, done.stderr) == (0, 'measured\n', '')
    else:
        assert (done.returncode, done.stdout) == (97, '')
        said = launch.misplaced(done.stderr)
        assert said.startswith(f'ibrepro: misplaced: {ends}') and said.endswith(
            'the partition binds the ranks near NUMA node 1 (hca_numa_node)')


@pytest.mark.parametrize('cpulist, ranks, bind', [
    ('0-15,64-79', 2, 'map_cpu:0,1'),
    ('5,7-9,12', 4, 'map_cpu:5,7,8,9'),
    ('16-31', 16, 'map_cpu:' + ','.join(str(c) for c in range(16, 32))),
    ('0-3', 8, None),                 # fewer CPUs than ranks
    (None, 2, None),                  # the kernel does not list them
])
def test_several_ranks_per_node_are_bound_to_cpus_of_the_rails_hca(tmp_path, cpulist, ranks, bind):
    """The lines that pick srun's map_cpu on the node from the rail device's local_cpulist, run by bash; where it
    lists too few, the lowest cores, said on stderr; what was applied is written for the record."""
    if cpulist is not None:
        (tmp_path / 'class' / 'infiniband' / 'mlx5_1' / 'device').mkdir(parents=True)
        (tmp_path / 'class' / 'infiniband' / 'mlx5_1' / 'device' / 'local_cpulist').write_text(cpulist + '\n')
    lines = launch.near_cpus_commands('mlx5_1', ranks, sysfs=str(tmp_path / 'sys-of-node' if cpulist is None else
                                                                   tmp_path))
    done = subprocess.run(['bash', '-c', '\n'.join([*lines, 'echo "$ibrepro_bind"'])], env={'PATH': '/usr/bin:/bin'},
                          capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (bind or 'cores')
    assert (tmp_path / launch.APPLIED_BINDING).read_text() == f'srun --cpu-bind={bind or "cores"}\n'
    assert ('lists no' in done.stderr) == (bind is None)

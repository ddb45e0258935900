"""ibrepro.rfm.launch: how each launcher and MPI binds a job's ranks, and what the run report says about it."""

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
    ('srunalloc', ['mvapich2'], {}, ['--cpu-bind=cores'], {'MV2_ENABLE_AFFINITY': '0'}, 'srun binds'),
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

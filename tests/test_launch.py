"""ibrepro.rfm.launch: how each launcher and MPI binds a job's ranks, and what the run report says about it."""

import pytest

from ibrepro.rfm import launch


@pytest.mark.parametrize('launcher, features, kw, options, env, said', [
    ('srun', ['mpi'], {}, ['--cpu-bind=cores'], {}, 'srun --cpu-bind=cores'),
    ('srun', ['openmpi'], {'hca_numa_node': 1}, ['--cpu-bind=map_ldom:1'], {}, 'map_ldom:1'),
    ('srun', [], {'bind': False, 'kill_on_bad_exit': True}, ['--kill-on-bad-exit=1', '--whole', '--cpu-bind=none'], {},
     'the launcher leaves binding to the job'),
    ('mpirun', ['openmpi'], {}, ['--bind-to', 'core'], {}, 'mpirun --bind-to core'),
    ('mpiexec', ['mpich'], {}, ['-bind-to', 'core'], {}, 'mpiexec -bind-to core'),
    ('mpirun', ['impi'], {}, [], {'I_MPI_PIN': '1', 'I_MPI_PIN_DOMAIN': 'core'}, 'I_MPI_PIN=1'),
    ('mpirun', ['mvapich2', 'mpich'], {}, [], {'MV2_ENABLE_AFFINITY': '1', 'MV2_CPU_BINDING_LEVEL': 'core'},
     'MV2_ENABLE_AFFINITY=1'),
    ('mpirun', ['openmpi'], {'ranks_per_node': 8, 'cores_per_node': 2}, [], {}, 'oversubscribed on purpose'),
    ('mpirun', ['mpi'], {}, [], {}, "no binding known for launcher 'mpirun'"),
    ('smpirun', ['mpi', 'mpich'], {}, [], {}, 'binding does not apply: the ranks are simulated'),
])
def test_binding_per_launcher_and_mpi(launcher, features, kw, options, env, said):
    got_options, got_env, description = launch.policy(launcher, features, **kw)
    assert (got_options, got_env) == (options, env)
    assert said in description

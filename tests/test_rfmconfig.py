"""The configuration building blocks: environments declare what their binaries really provide."""

import json
import os
import re

import pytest

from conftest import IMPI, REFRAME, ROOT, needs_impi, output
from ibrepro import rfmconfig, trust


def test_missing_prefix_gives_a_featureless_environment_that_says_why(tmp_path):
    env = rfmconfig.prefix_environment('ghost', tmp_path / 'nowhere', descr='a stack that is not there')
    assert env['features'] == []
    assert 'not installed' in env['extras']['about'] and 'make setup' in env['extras']['about']


@needs_impi
def test_spack_views_become_environments_with_their_tools(tmp_path, monkeypatch):
    """A complete view with IMB and OSU programs (real executables linked in) and an external MPI (the Intel MPI
    wheel, not linked into the view, as Spack leaves externals) gives an environment with those features and that
    MPI's launcher; a view whose install has not finished (no stamp) gives none."""
    views = tmp_path / 'spack-view'
    view = views / 'ib-mvapich'
    osu = view / 'libexec' / 'osu-micro-benchmarks' / 'mpi' / 'pt2pt'
    for d in (view / 'bin', osu, views / 'half-built' / 'bin'):
        d.mkdir(parents=True)
    os.symlink(IMPI, view / 'bin' / 'IMB-MPI1')
    os.symlink('/bin/true', osu / 'osu_latency')
    os.symlink('/bin/true', views / 'half-built' / 'bin' / 'osu_bw')
    mpi_prefix = IMPI.parents[1]
    (views / '.complete-ib-mvapich.json').write_text(json.dumps({'environment': 'ib-mvapich',
                                                                 'mpi_prefix': str(mpi_prefix)}))
    monkeypatch.setattr(rfmconfig, 'SPACK_VIEWS', views)

    (env,) = rfmconfig.spack_environments()
    assert env['name'] == 'spack-ib-mvapich'
    assert {'mpi', 'impi', 'spack', 'imb', 'osu'} <= set(env['features'])
    programs = env['extras']['programs']          # the programs it has (the MPI's prefix brings IMB's too)
    assert {'IMB-MPI1', 'osu_latency'} <= set(programs) and 'osu_bw' not in programs    # not the half-built view's
    path = dict(env['env_vars'])['PATH']
    assert f'"{view / "bin"}"' in path and f'"{osu}"' in path and f'"{mpi_prefix / "bin"}"' in path
    local = rfmconfig.local_system(rfmconfig.local_environments())
    assert 'spack-ib-mvapich' in local['partitions'][0]['environs']

    # the stamp without the MPI's prefix: the benchmarks are there, but no launcher, so no 'mpi' feature
    (views / '.complete-ib-mvapich.json').write_text(json.dumps({'environment': 'ib-mvapich', 'mpi_prefix': None}))
    (env,) = rfmconfig.spack_environments()
    assert 'mpi' not in env['features'] and 'osu' in env['features']


def test_no_views_no_spack_environments(tmp_path, monkeypatch):
    monkeypatch.setattr(rfmconfig, 'SPACK_VIEWS', tmp_path / 'absent')
    assert rfmconfig.spack_environments() == []


@needs_impi
def test_the_mpi_of_an_environment_is_known_from_its_launcher_directory():
    """The wheels of make setup: Intel MPI and MPICH (what binding options and Open MPI settings follow from)."""
    deps = IMPI.parents[2]
    assert rfmconfig.mpi_family([deps / 'impi' / 'bin']) == 'impi'
    assert rfmconfig.mpi_family([deps / 'mpich' / 'bin']) == 'mpich'
    assert rfmconfig.mpi_family([deps]) is None           # no launcher there
    mpich = rfmconfig.mpich_environment()
    assert 'mpich' in mpich['features'] and 'OMPI_ALLOW_RUN_AS_ROOT' not in dict(mpich['env_vars'])


def test_paths_in_job_scripts_are_quoted(tmp_path):
    """A checkout under a path with a space stays one word."""
    prefix = tmp_path / 'my stacks' / 'a"b'
    (prefix / 'bin').mkdir(parents=True)
    env = rfmconfig.prefix_environment('odd', prefix, descr='odd path')
    path = dict(env['env_vars'])['PATH']
    assert path == f'"{tmp_path}/my stacks/a\\"b/bin":${{PATH:-}}'
    import subprocess
    out = subprocess.run(['bash', '-c', f'export PATH={path}; echo "$PATH"'], capture_output=True, text=True,
                         cwd=tmp_path, env={'PATH': '/usr/bin:/bin'})
    assert out.stdout.split(':')[0] == f'{prefix}/bin'


# -- one site configuration for every place a site runs it -------------------------------------------


SLURM_SYSTEM = {'name': 'site', 'hostnames': [r'^login\d+$'], 'partitions': [
    {'name': 'hdr', 'scheduler': 'slurm', 'launcher': 'srun', 'access': ['--partition=hdr'], 'environs': ['e'],
     'extras': {'nodes': 2}},
    {'name': 'login', 'scheduler': 'local', 'launcher': 'local', 'environs': ['e']}]}


def _nightly_options(config):
    (mode,) = [m for m in config['modes'] if m['name'] == 'nightly']
    return mode['options']


def test_asked_inside_a_slurm_allocation_slurm_partitions_run_as_its_job_steps():
    config = rfmconfig.site_configuration([SLURM_SYSTEM], [], environ={'SLURM_JOB_ID': '77',
                                                                       'IBREPRO_IN_ALLOCATION': '1'})
    hdr, login = config['systems'][0]['partitions']
    assert (hdr['scheduler'], hdr['launcher'], hdr['access']) == ('local', 'srunalloc', [])
    # where its jobs would have gone is kept: each case checks it ran there (rfm.launch.placement_commands)
    assert hdr['extras'] == {'nodes': 2, 'slurm_partition': 'hdr', 'slurm_allocation': '77'} and hdr['name'] == 'hdr'
    assert login == SLURM_SYSTEM['partitions'][1]
    # outside one, not asked (a scrontab job, an salloc shell: SLURM_JOB_ID alone), or told not to: jobs submitted
    for environ in ({}, {'SLURM_JOB_ID': '77'}, {'SLURM_JOB_ID': '77', 'IBREPRO_IN_ALLOCATION': '0'}):
        (hdr, _) = rfmconfig.site_configuration([SLURM_SYSTEM], [], environ=environ)['systems'][0]['partitions']
        assert (hdr['scheduler'], hdr['launcher'], hdr['access']) == ('slurm', 'srun', ['--partition=hdr'])


@pytest.mark.parametrize('access, places', [
    (['--partition=hdr'], {'slurm_partition': 'hdr'}),
    (['-p hdr', '--account=ibperf'], {'slurm_partition': 'hdr', 'slurm_account': 'ibperf'}),
    (['-p', 'hdr,edr', '-A', 'x1'], {'slurm_partition': 'hdr,edr', 'slurm_account': 'x1'}),
    (['--partition', 'gpu', '--qos=perf'], {'slurm_partition': 'gpu'}),
    (['-pgpu'], {'slurm_partition': 'gpu'}),
    (['--constraint=ib'], {}),
    ([], {}),
])
def test_the_place_a_partition_asks_for_is_read_from_its_access_options(access, places):
    assert rfmconfig.access_places(access) == places


@pytest.mark.parametrize('access', [['-p', 'a;reboot'], ['--partition=$(reboot)'], ['-p'], ['--account="a b"']])
def test_an_access_option_that_names_no_partition_is_refused_naming_it(access):
    system = {**SLURM_SYSTEM, 'partitions': [{**SLURM_SYSTEM['partitions'][0], 'access': access}]}
    with pytest.raises(trust.Refused, match='partition hdr: access option'):
        rfmconfig.site_configuration([system], [], environ={})


@pytest.mark.parametrize('environ, says', [
    ({'IBREPRO_IN_ALLOCATION': '1'}, 'in no Slurm allocation (SLURM_JOB_ID is unset)'),
    ({'IBREPRO_IN_ALLOCATION': '1', 'SLURM_JOB_ID': '77; reboot'}, 'in no Slurm allocation'),
    ({'IBREPRO_IN_ALLOCATION': 'maybe', 'SLURM_JOB_ID': '77'}, "IBREPRO_IN_ALLOCATION='maybe': say 1"),
])
def test_asked_to_run_in_an_allocation_without_one_is_refused(environ, says):
    with pytest.raises(trust.Refused, match=re.escape(says)):
        rfmconfig.site_configuration([SLURM_SYSTEM], [], environ=environ)


def test_every_configuration_stores_the_night_it_belongs_to():
    config = rfmconfig.site_configuration([SLURM_SYSTEM], [], environ={'IBREPRO_NIGHTLY': '4242'})
    assert '--session-extras=nightly=4242' in _nightly_options(config)
    stamp = [o for o in _nightly_options(rfmconfig.site_configuration([SLURM_SYSTEM], [], environ={}))
             if o.startswith('--session-extras=nightly=')]
    assert len(stamp) == 1 and stamp[0].split('=')[-1][:2].isdigit()
    for bad in ('a,b=c', '$(reboot)', 'x y'):
        with pytest.raises(ValueError, match='IBREPRO_NIGHTLY'):
            rfmconfig.site_configuration([SLURM_SYSTEM], [], environ={'IBREPRO_NIGHTLY': bad})


def test_the_template_runs_in_an_allocation_as_job_steps(reframe):
    """The template's job script inside a CI job's allocation: srun steps, no sbatch; the night's id stored."""
    proc = reframe('--dry-run', '--system', 'example-cluster:hdr', '--mode', 'nightly', '-n',
                   'PerftestBandwidth%direction=uni', config='configs/example-cluster.py',
                   env={'SLURM_JOB_ID': '77', 'IBREPRO_IN_ALLOCATION': '1', 'IBREPRO_NIGHTLY': '4242'})
    assert proc.returncode == 0, output(proc)
    (script,) = reframe.home.rglob('PerftestBandwidth_*/rfm_job.sh')
    text = script.read_text()
    assert '#SBATCH' not in text and '--partition' not in text
    step = text.splitlines()[-1].split()
    assert step[0] == 'srun' and '--ntasks=2' in step and '--ntasks-per-node=1' in step
    # the runner chooses among the node's CPUs: no -c N, and no --exclusive (in an allocation both imply --exact)
    assert '--whole' in step and not [o for o in step if o.startswith(('--cpus-per-task', '--exclusive'))]


def test_an_mpi_case_binds_the_same_in_its_own_job_and_as_a_step_of_an_allocation(reframe):
    """The night (a GitLab child job: a step of its allocation) and its confirmation (the login node: a job of its
    own) run one MPI case with the same binding and rail; the step is never --exclusive (it would imply --exact)."""
    steps, places = {}, {}
    for where, env in (('job', {}), ('step', {'SLURM_JOB_ID': '77', 'IBREPRO_IN_ALLOCATION': '1'})):
        home = reframe.home / where
        proc = reframe('--dry-run', '--system', 'example-cluster:hdr', '-n', 'OSULatency', '-p', '^openmpi$',
                       config='configs/example-cluster.py', env={'IBREPRO_HOME': str(home), **env})
        assert proc.returncode == 0, output(proc)
        (script,) = home.rglob('openmpi/OSULatency/rfm_job.sh')
        lines = script.read_text().splitlines()
        places[where] = [line for line in lines if 'SLURM_JOB_' in line or 'ibrepro_numa' in line]
        steps[where] = (lines[-1].split(), sorted(line for line in lines if line.startswith('export ')),
                        [line for line in lines if line.startswith('#SBATCH')])
    (job, job_env, sbatch), (step, step_env, none) = steps['job'], steps['step']
    assert '#SBATCH --exclusive' in sbatch and not none
    assert step[0] == job[0] == 'srun' and '--cpu-bind=map_ldom:1' in job and '--cpu-bind=map_ldom:1' in step
    assert '--whole' in step and not [o for o in step if o.startswith(('--exclusive', '--exact', '-c'))], step
    assert job_env == step_env and any(e.startswith('export UCX_NET_DEVICES=mlx5_0:1') for e in job_env), job_env
    # both check, before anything runs, that they are in the partition's Slurm partition
    # ... and that the rail's HCA sits on the NUMA node its ranks are bound near (map_ldom:1)
    assert places['job'] == places['step'] and 'SLURM_JOB_PARTITION' in places['job'][0], places
    assert '/sys/class/infiniband/mlx5_0/device/numa_node' in places['job'][1] and \
        places['job'][2].startswith('case "$ibrepro_numa" in 1|-1) ;;'), places


def test_two_ranks_per_node_go_to_cpus_of_the_rails_hca_in_either_place(reframe):
    """A 1x2 MPI case in its own job and as a step of an allocation: one binding, CPUs the node lists for the rail's
    HCA (srun map_cpu from its local_cpulist), not the lowest cores, never --exclusive in the allocation."""
    scripts = {}
    for where, env in (('job', {}), ('step', {'SLURM_JOB_ID': '77', 'IBREPRO_IN_ALLOCATION': '1'})):
        home = reframe.home / where
        proc = reframe('--dry-run', '--system', 'example-cluster:hdr', '-n',
                       'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-p', '^openmpi$',
                       config='configs/example-cluster.py', env={'IBREPRO_HOME': str(home), **env})
        assert proc.returncode == 0, output(proc)
        (script,) = home.rglob('openmpi/IMBPointToPoint_*/rfm_job.sh')
        scripts[where] = script.read_text().splitlines()
    for lines in scripts.values():
        srun = [line.split() for line in lines if line.startswith('srun ')]
        assert srun and all('--cpu-bind=$ibrepro_bind' in step for step in srun), srun
        assert any('/sys/class/infiniband/mlx5_0/device/local_cpulist' in line for line in lines)
        assert not any(o.startswith(('--exclusive', '--exact', '-c')) for step in srun for o in step)
    near = [[line for line in lines if ('ibrepro_cpus' in line or 'ibrepro_bind' in line) and
             not line.startswith('srun ')] for lines in scripts.values()]
    assert near[0] == near[1] and len(near[0]) == 3


@pytest.mark.parametrize('config', ['configs/example-cluster.py', 'configs/ci-cluster.py'])
def test_the_nightly_mode_of_every_configuration_carries_the_night(config, tmp_path):
    import subprocess
    import sys
    code = (f'import runpy, json; c = runpy.run_path({str(ROOT / config)!r})["site_configuration"]; '
            'print(json.dumps([m for m in c["modes"] if m["name"] == "nightly"][0]["options"]))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, 'IBREPRO_NIGHTLY': 'n-7', 'IBREPRO_HOME': str(tmp_path / 'home')})
    assert out.returncode == 0, out.stderr
    assert '--session-extras=nightly=n-7' in json.loads(out.stdout)


def test_a_host_no_system_names_fails_loudly_instead_of_running_nothing(reframe):
    """ReFrame would pick its `generic` system and run 0 test cases with exit 0."""
    proc = reframe('-l', config='configs/example-cluster.py')
    assert proc.returncode != 0, output(proc)
    assert 'matches the hostnames of no system' in proc.stderr and '--system' in proc.stderr
    assert 'generic' not in proc.stdout
    # named explicitly, the same configuration lists its cases
    proc = reframe('-l', '--system', 'example-cluster', '-n', 'PerftestBandwidth', config='configs/example-cluster.py')
    assert proc.returncode == 0 and '- PerftestBandwidth %direction=uni' in proc.stdout, output(proc)



@pytest.mark.parametrize('name', ['$(touch pwned)', '`touch pwned`', '$HOME', 'a\nb'])
def test_paths_with_shell_syntax_never_reach_an_environment_variable(tmp_path, name):
    """ReFrame expands environment values itself through a shell (osext.expandvars), escaped or not: refused."""
    prefix = tmp_path / 'stacks' / name
    (prefix / 'bin').mkdir(parents=True)
    with pytest.raises(ValueError, match=r'^PATH=.*may not contain'):
        rfmconfig.prefix_environment('odd', prefix, descr='odd path')
    with pytest.raises(ValueError, match=r'^PATH=.*may not contain'):
        rfmconfig.site_environment('site', descr='a site', tools=['osu'], prefix=prefix)
    with pytest.raises(ValueError, match=r'^IBREPRO_PREFIXES=.*may not contain'):
        rfmconfig.user_prefixes({'IBREPRO_PREFIXES': f'/opt/osu:{prefix}'})
    assert not list(tmp_path.rglob('pwned'))


@pytest.mark.parametrize('variable, value', [('IBREPRO_PREFIXES', '/opt/$(touch pwned)'),
                                             ('IBREPRO_HOME', '/tmp/`touch pwned`')])
@pytest.mark.integration
def test_reframe_refuses_a_configuration_with_shell_syntax_in_a_path(tmp_path, variable, value):
    """Before ReFrame loads it (it would run the command as the user who runs it)."""
    import subprocess
    env = {**os.environ, 'IBREPRO_HOME': str(tmp_path / 'home'), variable: value.replace('/tmp', str(tmp_path))}
    proc = subprocess.run([str(REFRAME), '-C', 'configs/local.py', '-c', 'reframe-checks/system', '-l'], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and f'{variable}=' in proc.stdout + proc.stderr, output(proc)
    assert 'may not contain' in proc.stdout + proc.stderr
    assert not list(tmp_path.rglob('pwned')) and not (ROOT / 'pwned').exists()

"""The nightly CI templates (ci/gitlab, ci/github) and the GitLab child pipeline ReFrame generates.

No CI service is reachable from here: the templates are checked against the keywords the two
services document, and the child pipeline is generated for real by `reframe --ci-generate`
(ci/nightly.sh generate) with the ci-cluster configuration; generating needs no cluster.
"""

import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
GITLAB = REPO / 'ci' / 'gitlab' / 'nightly.yml'
GITHUB = REPO / 'ci' / 'github' / 'nightly.yml'

# ---- GitLab: keywords of https://docs.gitlab.com/ee/ci/yaml/ -----------------------------------
GITLAB_GLOBAL = {'default', 'include', 'stages', 'variables', 'workflow', 'image', 'services',
                 'cache', 'before_script', 'after_script', 'spec'}
GITLAB_JOB = {'after_script', 'allow_failure', 'artifacts', 'before_script', 'cache', 'coverage',
              'dast_configuration', 'dependencies', 'environment', 'extends', 'hooks', 'id_tokens',
              'identity', 'image', 'inherit', 'interruptible', 'manual_confirmation', 'needs', 'pages',
              'parallel', 'release', 'resource_group', 'retry', 'rules', 'run', 'script', 'secrets',
              'services', 'stage', 'tags', 'timeout', 'trigger', 'variables', 'when'}
GITLAB_DEFAULT = {'after_script', 'artifacts', 'before_script', 'cache', 'hooks', 'id_tokens', 'image',
                  'interruptible', 'retry', 'services', 'tags', 'timeout'}
GITLAB_BUILTIN_STAGES = {'.pre', '.post'}


def gitlab_problems(pipeline):
    """What is wrong with a GitLab CI pipeline (a loaded YAML dict): [] when nothing is."""
    problems = []
    if not isinstance(pipeline, dict):
        return ['the pipeline is not a mapping']

    stages = set(pipeline.get('stages', ['build', 'test', 'deploy'])) | GITLAB_BUILTIN_STAGES
    jobs = {name: job for name, job in pipeline.items() if name not in GITLAB_GLOBAL}
    for key in set(pipeline.get('default', {})) - GITLAB_DEFAULT:
        problems.append(f'default: unknown keyword {key!r}')

    for name, job in jobs.items():
        if not isinstance(job, dict):
            problems.append(f'{name}: a job must be a mapping')
            continue

        for key in set(job) - GITLAB_JOB:
            problems.append(f'{name}: unknown job keyword {key!r}')

        if name.startswith('.'):
            continue        # a hidden job: a template for `extends`

        merged = {}
        for parent in ([job['extends']] if isinstance(job.get('extends'), str) else job.get('extends', [])):
            if parent not in jobs:
                problems.append(f'{name}: extends unknown job {parent!r}')
            merged.update(jobs.get(parent, {}))

        merged.update(job)
        if ('script' in merged) == ('trigger' in merged):
            problems.append(f'{name}: needs exactly one of script and trigger')

        if merged.get('stage', 'test') not in stages:
            problems.append(f'{name}: stage {merged.get("stage")!r} is not in stages')

        for need in merged.get('needs', []):
            need = need['job'] if isinstance(need, dict) else need
            if need not in jobs:
                problems.append(f'{name}: needs unknown job {need!r}')

        trigger = merged.get('trigger')
        for include in trigger.get('include', []) if isinstance(trigger, dict) else []:
            if 'artifact' in include and include.get('job') not in jobs:
                problems.append(f'{name}: trigger includes an artifact of unknown job {include.get("job")!r}')

    return problems


# ---- GitHub Actions: the workflow syntax, reduced to what a template can get wrong -------------
_STEP = {
    'type': 'object',
    'properties': {k: {} for k in ('id', 'if', 'name', 'uses', 'run', 'shell', 'with', 'env',
                                   'continue-on-error', 'timeout-minutes', 'working-directory')},
    'additionalProperties': False,
    'oneOf': [{'required': ['uses']}, {'required': ['run']}],
}
_JOB = {
    'type': 'object',
    'properties': {**{k: {} for k in ('name', 'needs', 'permissions', 'if', 'environment', 'concurrency',
                                      'outputs', 'env', 'defaults', 'timeout-minutes', 'strategy',
                                      'continue-on-error', 'container', 'services')},
                   'runs-on': {'anyOf': [{'type': 'string'}, {'type': 'array', 'items': {'type': 'string'}}]},
                   'steps': {'type': 'array', 'minItems': 1, 'items': _STEP}},
    'required': ['runs-on', 'steps'],
    'additionalProperties': False,
}
GITHUB_SCHEMA = {
    'type': 'object',
    'properties': {
        **{k: {} for k in ('name', 'run-name', 'env', 'defaults', 'concurrency', 'permissions')},
        'on': {'type': 'object', 'minProperties': 1,
               'propertyNames': {'enum': ['schedule', 'workflow_dispatch', 'push', 'pull_request',
                                          'workflow_call', 'workflow_run', 'repository_dispatch']},
               'properties': {'schedule': {'type': 'array', 'minItems': 1,
                                           'items': {'type': 'object', 'required': ['cron'],
                                                     'properties': {'cron': {'type': 'string'}},
                                                     'additionalProperties': False}}}},
        'jobs': {'type': 'object', 'minProperties': 1, 'additionalProperties': _JOB},
    },
    'required': ['on', 'jobs'],
    'additionalProperties': False,
}


def load_github(path):
    workflow = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as the boolean true
    if True in workflow:
        workflow['on'] = workflow.pop(True)
    return workflow


# ---- the templates ---------------------------------------------------------------------------

def test_gitlab_template_is_valid():
    pipeline = yaml.safe_load(GITLAB.read_text())
    assert gitlab_problems(pipeline) == []
    trigger = pipeline['run-checks']['trigger']
    assert trigger['strategy'] == 'depend'               # the parent fails when a check fails
    # per-job allocations come from the generated child pipeline; a trigger variable would override them
    assert 'SCHEDULER_PARAMETERS' not in pipeline['run-checks']['variables']
    assert 'IBREPRO_SCHEDULER_OPTIONS' in pipeline['run-checks']['variables']
    assert pipeline['nightly-report']['when'] == 'always'  # the report also of a failed night
    assert pipeline['nightly-report']['artifacts']['when'] == 'always'
    assert 'ci/nightly.sh report' in pipeline['nightly-report']['script']


def test_github_template_is_valid():
    workflow = load_github(GITHUB)
    jsonschema.validate(workflow, GITHUB_SCHEMA)
    steps = workflow['jobs']['nightly']['steps']
    runs = [s.get('run', '') for s in steps]
    assert any('ci/nightly.sh run' in r for r in runs)
    report = next(s for s in steps if 'ci/nightly.sh report' in s.get('run', ''))
    assert report['if'] == 'always()'
    upload = next(s for s in steps if s.get('uses', '').startswith('actions/upload-artifact'))
    assert upload['if'] == 'always()' and upload['with']['path'] == 'nightly-report/'


def test_validators_catch_mistakes():
    bad_gitlab = {'stages': ['a'], 'job': {'stage': 'b', 'script': ['x'], 'scirpt': ['y'], 'needs': ['nope']}}
    assert len(gitlab_problems(bad_gitlab)) == 3
    bad_github = load_github(GITHUB)
    bad_github['jobs']['nightly']['steps'].append({'name': 'both', 'run': 'x', 'uses': 'y'})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_github, GITHUB_SCHEMA)


# ---- the child pipeline, generated by ReFrame ------------------------------------------------

def _check_dirs():
    dirs = ['ci/cluster/checks']
    if any((REPO / 'reframe-checks').rglob('*.py')):
        dirs.append('reframe-checks')
    return dirs


@pytest.mark.parametrize('checks', _check_dirs())
def test_generated_child_pipeline(tmp_path, checks):
    child = tmp_path / 'child-pipeline.yml'
    env = dict(os.environ, IBREPRO_CHECKS=checks, IBREPRO_NIGHTLY='4242', IBREPRO_HOME=str(tmp_path),
               IBREPRO_CHILD_TAGS='batch,slurm', IBREPRO_CHILD_JOBS='allocation',
               PATH=f'{Path(sys.executable).parent}{os.pathsep}{os.environ["PATH"]}')
    done = subprocess.run([REPO / 'ci' / 'nightly.sh', 'generate', child], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    pipeline = yaml.safe_load(child.read_text())
    assert gitlab_problems(pipeline) == []
    assert pipeline['variables'] == {'IBREPRO_NIGHTLY': '4242'}
    assert pipeline['default']['tags'] == ['batch', 'slurm']
    jobs = {name: job for name, job in pipeline.items() if name not in GITLAB_GLOBAL}
    assert jobs, 'no test case in the child pipeline'
    for name, job in jobs.items():
        [command] = job['script']
        # compute nodes need not match the configuration's host names: the job names its system
        assert command.startswith('reframe --system=ci-cluster:'), command    # ... and the partition it runs on
        assert job['resource_group'] == 'ibrepro-fabric'     # one at a time: runs never share the fabric
        assert '-C ${CI_PROJECT_DIR}/configs/ci-cluster.py' in command
        assert str(REPO) not in command            # runs in the child job's own checkout
        assert '--mode=nightly' in command and ' -r' in command
        assert f'--report-file={name}-report.json' in command
        assert job['artifacts']['paths'][0] == f'{name}-report.json'
        # ReFrame's junit report of the case reaches GitLab's test view, failed or not
        assert f'--report-junit={name}-report.xml' in command
        assert job['artifacts']['reports'] == {'junit': [f'{name}-report.xml']} and job['artifacts']['when'] == 'always'
        # each child job's allocation is exactly the nodes its test needs (2x1: 2, 1x2: 1), whole nodes
        scheduler = job['variables']['SCHEDULER_PARAMETERS']
        assert scheduler.endswith(' --exclusive --partition=ci ${IBREPRO_SCHEDULER_OPTIONS}')
        # ... and its tests run as steps of that allocation because the job says so (rfmconfig.in_allocation)
        assert job['variables']['IBREPRO_IN_ALLOCATION'] == '1'
        if '%layout=1x2' in name.replace('_', ' ') or 'layout=1x2' in command:
            assert scheduler.startswith('--nodes=1 ')
    layouts = {job['variables']['SCHEDULER_PARAMETERS'].split()[0] for job in jobs.values()}
    if checks == 'reframe-checks':
        assert layouts == {'--nodes=1', '--nodes=2'}         # the ci-cluster has two nodes: 1x2 and 2x1 cases


def _generate(tmp_path, **env):
    child = tmp_path / 'child-pipeline.yml'
    env = dict(os.environ, IBREPRO_CHECKS='reframe-checks/verbs', IBREPRO_NIGHTLY='4242',
               IBREPRO_HOME=str(tmp_path), PATH=f'{Path(sys.executable).parent}{os.pathsep}{os.environ["PATH"]}', **env)
    env.pop('SLURM_JOB_ID', None)
    env.pop('IBREPRO_IN_ALLOCATION', None)
    done = subprocess.run([REPO / 'ci' / 'nightly.sh', 'generate', child], env=env, capture_output=True, text=True,
                          timeout=120)
    return done, (yaml.safe_load(child.read_text()) if done.returncode == 0 else None)


def test_a_site_configuration_generates_jobs_that_name_its_system(tmp_path):
    """The template matches login nodes only: generating on another host fails, saying why, instead of a child
    pipeline of ReFrame's `generic` system (0 test cases, every job passing); named, its jobs name it too."""
    done, _ = _generate(tmp_path, IBREPRO_CONFIG='configs/example-cluster.py')
    assert done.returncode != 0
    assert 'matches the hostnames of no system' in done.stderr and 'IBREPRO_SYSTEM' in done.stderr

    done, pipeline = _generate(tmp_path, IBREPRO_CONFIG='configs/example-cluster.py', IBREPRO_SYSTEM='example-cluster',
                               IBREPRO_RESOURCE_GROUP='')
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = {name: job for name, job in pipeline.items() if name not in GITLAB_GLOBAL}
    assert jobs and gitlab_problems(pipeline) == []
    for job in jobs.values():
        assert job['script'][0].startswith('reframe --system=example-cluster:hdr ')
        assert 'resource_group' not in job                 # the site opted out

    for bad in ({'IBREPRO_SYSTEM': 'x; reboot'}, {'IBREPRO_RESOURCE_GROUP': '$(reboot)'}):
        done, _ = _generate(tmp_path, **bad)
        assert done.returncode == 2 and 'nightly.sh: IBREPRO_' in done.stderr


#: A site configuration of two partitions in two Slurm partitions, the second charged to an account: the template's
#: partition and a second one (tests/test_ci_templates.py writes it next to a copy of the template).
TWO_PARTITIONS = """
import copy, runpy
template = runpy.run_path({template!r}, run_name='template')
system = copy.deepcopy(template['EXAMPLE_CLUSTER'])
edr = template['_partition']('edr', 'a second partition', nodes=2, cores_per_node=32, rdma_devices=['mlx5_0'],
                             ib_ports=1)
edr['access'] = ['-p edr', '--account=ibperf']
system['partitions'].append(edr)
site_configuration = template['rfmconfig'].site_configuration(systems=[system], environments=template['ENVIRONMENTS'],
                                                              nightly_subset=True)
"""


def test_a_test_of_two_partitions_is_two_child_jobs_each_in_its_own_partition(tmp_path):
    """ReFrame generates one job per test, whatever its partitions, and the allocation Jacamar makes from it names no
    partition: each partition's cases would run in whichever the runner's default is. Here each (test, partition)
    is a job of its own, whose allocation asks for that partition's access options and whose ReFrame runs only it."""
    config = tmp_path / 'two-partitions.py'
    config.write_text(TWO_PARTITIONS.format(template=str(REPO / 'configs' / 'example-cluster.py')))
    done, pipeline = _generate(tmp_path, IBREPRO_CONFIG=str(config), IBREPRO_SYSTEM='example-cluster',
                               IBREPRO_CHILD_JOBS='allocation')
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = {name: job for name, job in pipeline.items() if name not in GITLAB_GLOBAL}
    assert gitlab_problems(pipeline) == []
    by_test = {}
    for name, job in jobs.items():
        test, part = name.rsplit('@', 1)
        by_test.setdefault(test, {})[part] = job
        [command] = job['script']
        assert command.startswith(f'reframe --system=example-cluster:{part} ')
        assert f'--report-file={name}-report.json' in command and job['artifacts']['paths'][0] == f'{name}-report.json'
        scheduler = job['variables']['SCHEDULER_PARAMETERS']
        place = {'hdr': '--partition=hdr', 'edr': '-p edr --account=ibperf'}[part]
        assert f' --exclusive {place} ${{IBREPRO_SCHEDULER_OPTIONS}}' in scheduler, scheduler
    # every test runs on the template's partition; those edr can run (no second port there) on both
    assert by_test and all('hdr' in parts for parts in by_test.values())
    assert any(set(parts) == {'hdr', 'edr'} for parts in by_test.values()), sorted(by_test)


def test_a_partition_whose_access_is_not_plain_options_generates_no_pipeline(tmp_path):
    config = tmp_path / 'two-partitions.py'
    config.write_text(TWO_PARTITIONS.format(template=str(REPO / 'configs' / 'example-cluster.py'))
                      .replace("'--account=ibperf'", "'--comment=$(reboot)'"))
    done, _ = _generate(tmp_path, IBREPRO_CONFIG=str(config), IBREPRO_SYSTEM='example-cluster')
    assert done.returncode != 0
    assert "access option '--comment=$(reboot)' is not a plain sbatch option" in done.stderr


def test_login_child_jobs_leave_the_allocation_to_the_case(tmp_path):
    """IBREPRO_CHILD_JOBS=login (the default): each child job runs ReFrame on a login-node runner, which submits the
    case's own job (with its partition's access options, as the confirmation does): no allocation of the child job,
    no in-allocation mode, the login runner's tags. Any other mode is refused, named."""
    done, pipeline = _generate(tmp_path, IBREPRO_CONFIG='configs/example-cluster.py', IBREPRO_SYSTEM='example-cluster')
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = {name: job for name, job in pipeline.items() if name not in GITLAB_GLOBAL}
    assert jobs and gitlab_problems(pipeline) == [] and pipeline['default']['tags'] == ['ibrepro-login']
    for name, job in jobs.items():
        assert 'variables' not in job and job['script'][0].startswith('reframe --system=example-cluster:hdr ')
    done, _ = _generate(tmp_path, IBREPRO_CONFIG='configs/example-cluster.py', IBREPRO_SYSTEM='example-cluster',
                        IBREPRO_CHILD_JOBS='batch')
    assert done.returncode == 2 and 'IBREPRO_CHILD_JOBS=batch: say login or allocation' in done.stderr


def test_the_ci_sites_edits_each_still_match_the_template_once(tmp_path):
    """ci/templates/site-config.py makes the CI's site configuration from the template by its SITE edits, as a site
    would: each edit must match the template exactly once (a template change that moves a marked line would
    otherwise fail only in the cluster phase), and the result is a configuration of the CI partition."""
    out = tmp_path / 'mysite.py'
    done = subprocess.run([sys.executable, str(REPO / 'ci' / 'templates' / 'site-config.py'), str(out), '^vm$'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "_partition('ci', " in text and "'environs': ['impi', 'mpich', *environs]," in text
    assert "_partition('hdr'" not in text and 'GPU_NODES = False' in text

"""The GitLab nightly template run by a real client against the namespace Slurm cluster (make ci-templates-test).

A site's repository is made from this checkout as docs/site-setup.md says: its configuration copied from
configs/example-cluster.py with what is marked SITE changed (ci/templates/site-config.py: this host as the login
node, the cluster's partition and nodes, no rails, the MPI wheels over TCP), and a .gitlab-ci.yml that includes
ci/gitlab/nightly.yml. gitlab-ci-local (shell executor) runs its scheduled pipeline: generate, the child jobs (each
on this host, the login node, whose ReFrame submits the case's job; or, IBREPRO_CHILD_JOBS=allocation, each as one
batch job of its own allocation, what a Jacamar runner does), the report (ci/templates/gitlab-nightly.sh).

Needs root, the cluster (ci/cluster/up.sh) and gitlab-ci-local (ci/templates/install-gitlab-ci-local.sh, or
$GITLAB_CI_LOCAL); skipped otherwise, saying which.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import old_python
from ibrepro import results

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO / 'ci' / 'templates'
CLUSTER_DIR = Path(os.environ.get('IBREPRO_CLUSTER_DIR', '/tmp/ibrepro-cluster'))
GITLAB_CI_LOCAL = os.environ.get('GITLAB_CI_LOCAL') or str(REPO / 'build' / 'gitlab-ci-local' / 'node_modules' /
                                                           '.bin' / 'gitlab-ci-local')
#: A setting that breaks Intel MPI's start-up on any machine: the night's MPI case fails in MPI_Init.
BROKEN_MPI = 'I_MPI_OFI_PROVIDER=ibrepro-no-such-provider'


def _missing():
    if os.geteuid() != 0:
        return 'needs root (the namespace cluster)'
    if not shutil.which(GITLAB_CI_LOCAL):
        return f'gitlab-ci-local not installed ({GITLAB_CI_LOCAL}): ci/templates/install-gitlab-ci-local.sh'
    try:
        up = subprocess.run([REPO / 'ci' / 'cluster' / 'status.sh', '-q'], timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        up = False
    return None if up else 'cluster not up (make cluster-up)'


MISSING = _missing()
#: The compute nodes' Python of the site's configuration (extras ``python``): 3.6, an EL8 node's, where pyenv or
#: PATH has one; else the template's python3.
NODE_PYTHON = old_python('3.6')
pytestmark = [pytest.mark.integration, pytest.mark.skipif(bool(MISSING), reason=MISSING or '')]


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    """A site's repository: this checkout's files, its configurations made from the template, set up."""
    root = tmp_path_factory.mktemp('site') / 'ibrepro'
    files = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], cwd=REPO,
                           capture_output=True, check=True).stdout
    subprocess.run(['rsync', '-a', '--from0', '--files-from=-', f'{REPO}/', f'{root}/'], input=files, check=True)
    host = socket.gethostname()
    for name, hostnames in (('mysite', f'^{host}$'), ('elsewhere', r'^login-of-another-site\d+$')):
        # the nodes' Python: EL8's platform Python (3.6) where this machine has one
        subprocess.run([sys.executable, TEMPLATES / 'site-config.py', root / 'configs' / f'{name}.py', hostnames,
                        *([NODE_PYTHON] if NODE_PYTHON else [])], check=True)
    (root / '.gitlab-ci.yml').write_text('include:\n  - local: ci/gitlab/nightly.yml\n')
    git = ['git', '-c', 'user.name=site', '-c', 'user.email=site@example.org']
    subprocess.run(['git', 'init', '-q'], cwd=root, check=True)
    subprocess.run(['git', 'add', '-A'], cwd=root, check=True)
    subprocess.run([*git, 'commit', '-qm', "a site's repository"], cwd=root, check=True)
    setup = subprocess.run(['make', 'setup'], cwd=root, capture_output=True, text=True, timeout=1200)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    return root


def _night(site, home, *variables):
    """One scheduled pipeline; (exit status, its output, the night's id or None when nothing was generated)."""
    env = dict(os.environ, SLURM_CONF=str(CLUSTER_DIR / 'etc' / 'slurm.conf'), GITLAB_CI_LOCAL=GITLAB_CI_LOCAL,
               PYTHON=sys.executable)
    shutil.rmtree(site / 'nightly-report', ignore_errors=True)
    for name in ('IBREPRO_HOME', 'IBREPRO_NIGHTLY', 'SLURM_JOB_ID', 'IBREPRO_IN_ALLOCATION', 'RFM_SQLITE_DB_FILE'):
        env.pop(name, None)
    done = subprocess.run([TEMPLATES / 'gitlab-nightly.sh', site, f'IBREPRO_HOME={home}', *variables], env=env,
                          capture_output=True, text=True, timeout=1200)
    child = site / '.gitlab-ci-local' / 'artifacts' / 'generate-checks' / 'child-pipeline.yml'
    night = yaml.safe_load(child.read_text())['variables']['IBREPRO_NIGHTLY'] if child.exists() else None
    child.unlink(missing_ok=True)
    return done.returncode, done.stdout + done.stderr, night


def _cases(home, night):
    """{test case name: (result, host its session ran on, the nodes its job ran on, the test case)} the child jobs
    stored for ``night`` (the report job's confirmation of a suspect aside: it runs from the login node, when the
    night is noisy)."""
    found = {}
    for report in results.stored_sessions(home / 'results.db'):
        info = report['session_info']
        if info.get('nightly') == night and not info.get('confirms'):
            for case in results.readable_cases(report, []):
                nodes = case.get('job_nodelist') or []
                found[case['name']] = (case['result'], info.get('hostname'),
                                       set([nodes] if isinstance(nodes, str) else nodes), case)
    return found


def test_a_clean_night_is_stored_by_the_child_jobs_and_judged_by_the_report(site, tmp_path):
    """The default child jobs (IBREPRO_CHILD_JOBS=login): each runs ReFrame on the login node, which submits its
    case's job to the case's partition; the compute nodes run only the partition's Python (3.6 here)."""
    status, output, night = _night(site, tmp_path, 'IBREPRO_CONFIG=configs/mysite.py')
    assert status == 0, output
    child = yaml.safe_load((site / '.jacamar' / 'child-pipeline.yml').read_text())
    jobs = {name: job for name, job in child.items() if isinstance(job, dict) and 'script' in job}
    # one job per test and partition (the site's one partition `ci`), which its ReFrame runs alone, here
    assert jobs and all(name.endswith('@ci') for name in jobs)
    for job in jobs.values():
        assert job['script'][0].startswith('reframe --system=example-cluster:ci ') and 'variables' not in job
    cases = _cases(tmp_path, night)
    assert any(name.startswith('IMBPointToPoint') for name in cases), cases
    for name, (result, host, nodes, _) in cases.items():
        # each session ran on the login node, each case's job on the compute nodes
        assert result == 'pass' and host == socket.gethostname(), (name, result, host)
        assert nodes and all(re.fullmatch(r'node(\d|\[1-2\])', n) for n in nodes), (name, nodes)
    software = cases['SoftwareVersions'][3]['software']
    if NODE_PYTHON:         # the node's record was read by the node's Python
        assert software['python'].startswith('3.6.'), software
    # judged: clean, or too noisy to judge on a loaded machine (a warning: allow_failure exit_codes [3])
    assert re.search(rf'ibrepro nightly {night}: exit (0 \(clean\)|3 \(inconclusive\))', output), output
    assert list((site / 'nightly-report' / 'example-cluster').glob('*/summary.md')), output
    assert 'gitlab-nightly.sh: the pipeline passed' in output


def test_a_failing_case_fails_the_child_pipeline_and_the_report(site, tmp_path):
    """The child jobs of a Jacamar batch runner (IBREPRO_CHILD_JOBS=allocation): each inside its own allocation of
    its partition, its case as job steps of it."""
    status, output, night = _night(site, tmp_path, 'IBREPRO_CONFIG=configs/mysite.py', BROKEN_MPI,
                                   'IBREPRO_CHILD_JOBS=allocation')
    assert status == 1, output
    child = yaml.safe_load((site / '.jacamar' / 'child-pipeline.yml').read_text())
    jobs = [name for name, job in child.items() if isinstance(job, dict) and 'script' in job]
    assert jobs and all((site / '.jacamar' / f'{name}.sh').read_text().count('reframe --system=example-cluster:ci ')
                        == 1 for name in jobs)
    cases = _cases(tmp_path, night)
    failed = [name for name, (result, *_) in cases.items() if result == 'fail']
    assert failed and all(name.startswith('IMBPointToPoint') for name in failed), cases
    # the other cases of the night still ran, each child job's ReFrame on a compute node in its allocation
    assert any(result == 'pass' for result, *_ in cases.values())
    assert {host for _, host, *_ in cases.values()} <= {'node1', 'node2'}
    assert f'a check failed in ReFrame ({failed[0]} @example-cluster:ci+impi)' in output
    assert 'the pipeline failed: run-checks nightly-report' in output


def test_a_configuration_that_names_no_host_fails_loudly(site, tmp_path):
    status, output, night = _night(site, tmp_path, 'IBREPRO_CONFIG=configs/elsewhere.py')
    assert status == 1, output
    assert night is None and 'Ran 0/0' not in output
    assert f"host '{socket.gethostname()}' matches the hostnames of no system" in output
    assert 'no session of nightly' in output          # the report job (when: always) says so, exit 2
    assert 'the pipeline failed: generate-checks nightly-report' in output


def test_a_cron_night_runs_its_cases_with_the_nodes_python(site, tmp_path):
    """The cron path of docs/site-setup.md in the same site repository: its crontab line, `.venv/bin/ibrepro
    nightly -C configs/mysite.py` from the login node (no CI variable, no allocation). Its cases run on the compute
    nodes with the partition's Python (3.6 here), are stored as one night and judged: the first night of a new
    system says it is not judged yet (exit 3, the verdict's own status: `make nightly` would say make's 2)."""
    env = dict(os.environ, SLURM_CONF=str(CLUSTER_DIR / 'etc' / 'slurm.conf'), IBREPRO_HOME=str(tmp_path))
    for name in ('IBREPRO_NIGHTLY', 'SLURM_JOB_ID', 'IBREPRO_IN_ALLOCATION', 'RFM_SQLITE_DB_FILE', 'CI'):
        env.pop(name, None)
    line = next(x for x in (REPO / 'docs' / 'site-setup.md').read_text().splitlines() if 'ibrepro nightly -C' in x
                and x.startswith('15 1 * * *'))
    command = line.split('&&', 1)[1].split('>>')[0].split()
    assert command == ['.venv/bin/ibrepro', 'nightly', '-C', 'configs/mysite.py'], line
    done = subprocess.run(command, cwd=site, env=env, capture_output=True, text=True, timeout=1200)
    said = done.stdout + done.stderr
    assert done.returncode == 3 and 'not judged yet' in said, said[-4000:]
    reports = results.stored_sessions(tmp_path / 'results.db')
    assert len({results.run_id(r) for r in reports}) == 1, said[-2000:]
    cases = {c['name']: c for r in reports for c in results.readable_cases(r, [])}
    assert any(name.startswith('IMBPointToPoint') for name in cases), cases
    assert all(c['result'] == 'pass' for c in cases.values()), {n: c.get('fail_reason') for n, c in cases.items()}
    for name, case in cases.items():       # every job on the compute nodes
        nodes = case.get('job_nodelist') or []
        assert nodes and all(re.fullmatch(r'node(\d|\[1-2\])', n) for n in ([nodes] if isinstance(nodes, str)
                                                                              else nodes)), (name, nodes)
    if NODE_PYTHON:
        assert cases['SoftwareVersions']['software']['python'].startswith('3.6.'), cases['SoftwareVersions']

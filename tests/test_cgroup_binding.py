"""Binding that is true or fails, on a cgroup-confined Slurm node (issue 24, "What to build" 3).

The cluster: ``make cgroup-up`` (ci/cluster/up.sh with IBREPRO_CLUSTER_CGROUP=1 and its own names, ports and work
directory beside the default CI cluster): two slurmd nodes with ``task/cgroup,task/affinity`` +
``proctrack/cgroup`` and ``ConstrainCores=yes``, each in its own subtree of the machine's cgroup v1 hierarchies.
A job step's tasks run in the cpuset Slurm granted the step, which a process cannot widen.

The pair cases are the ones ReFrame generates for a site (``--dry-run`` on the template, configs/example-cluster.py):
their job script's ``#SBATCH`` lines (partition: the cluster's) and their ``srun`` step line, unchanged, with their
flows (nodes, rails, flows, processes per side). What cannot run here is replaced, and only that: no RDMA device
exists, so the sides are real non-RDMA programs (tests/programs/tcp_peer.py; a program that forks two busy processes,
as ``ibrepro_rdma -P 2`` does), and the devices' PCI locality comes from a fake sysfs (the spec's ``sysfs``).

Needs root, the cgroup cluster up (``IBREPRO_CLUSTER_DIR`` names its work directory) and ReFrame; skipped otherwise.
The names a second cluster takes (common.sh) are tested without one, at the end.
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import output

REPO = Path(__file__).resolve().parents[1]
CLUSTER_DIR = Path(os.environ.get('IBREPRO_CLUSTER_DIR', '/tmp/ibrepro-cgroup'))
SLURM_CONF = CLUSTER_DIR / 'etc' / 'slurm.conf'
CGROUP_CONF = CLUSTER_DIR / 'etc' / 'cgroup.conf'
PEER = str(REPO / 'tests' / 'programs' / 'tcp_peer.py')
PYTHON = '/usr/bin/python3'          # the nodes' own Python (the partition's extras python: python3)

#: The generated cases: a two-flow verbs case and VerbsTwoPort with two processes per side.
TWO_FLOWS = 'PerftestMultiPair%program=ib_write_bw%pairs=2$'
TWO_RAILS = 'PerftestBinding%case=bidir-1proc$'
TWO_PORT_2PROC = 'VerbsTwoPort%case=bind-bi-2proc$'


def _slurm(*cmd, timeout=120, cwd='/tmp'):
    return subprocess.run(cmd, env={**os.environ, 'SLURM_CONF': str(SLURM_CONF)}, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def _confined_cluster():
    """Why the cgroup cluster cannot be used, or None."""
    if os.geteuid() != 0:
        return 'needs root (the jobs run as root on the namespace cluster)'
    if not SLURM_CONF.exists() or 'ConstrainCores=yes' not in (CGROUP_CONF.read_text() if CGROUP_CONF.exists()
                                                                  else ''):
        return f'no cgroup-confined cluster at {CLUSTER_DIR} (make cgroup-up)'
    try:
        done = _slurm('sinfo', '-h', '-N', '-t', 'idle,alloc,mix', '-o', '%N', timeout=30)
    except subprocess.TimeoutExpired:
        done = None
    if not done or done.returncode or len(set(done.stdout.split())) < 2:
        return f'the cgroup cluster at {CLUSTER_DIR} is not up (make cgroup-up)'
    return None


UNUSABLE = _confined_cluster()
#: make cgroup-test brought the cluster up (IBREPRO_CLUSTER_CGROUP=1): there an unusable cluster fails, not skips
REQUIRED = os.environ.get('IBREPRO_CLUSTER_CGROUP') == '1'


@pytest.fixture(scope='module')
def cluster():
    """The cgroup cluster: skipped when it is not up, failed when make cgroup-test says it should be."""
    if UNUSABLE and REQUIRED:
        pytest.fail(f'{UNUSABLE}; IBREPRO_CLUSTER_CGROUP=1 says it should be')
    if UNUSABLE:
        pytest.skip(UNUSABLE)


#: What a step's task says about its CPUs: the kernel's mask, its cpuset cgroup and that cgroup's CPUs.
SAY_CPUS = ('cg=$(grep :cpuset: /proc/self/cgroup | cut -d: -f3); '
            'echo "$(hostname) allowed=$(grep Cpus_allowed_list /proc/self/status | cut -f2) cgroup=$cg '
            'cpuset=$(cat /sys/fs/cgroup/cpuset$cg/cpuset.cpus)"; '
            # a process may not leave its cpuset: asking for every CPU leaves the mask as it was
            'taskset -pc 0-1023 $$ >/dev/null 2>&1; '
            'echo "widened=$(grep Cpus_allowed_list /proc/self/status | cut -f2)"')


def _cpus(text):
    out = []
    for part in text.split(','):
        lo, _, hi = part.partition('-')
        out += range(int(lo), int(hi or lo) + 1)
    return out


def _fields(line):
    return dict(f.split('=', 1) for f in line.split()[1:])


@pytest.fixture(scope='module')
def node_cpus(cluster):
    """The CPUs a node declares (slurm.conf: the machine's own, numbered from 0)."""
    done = _slurm('scontrol', 'show', 'node', 'node1')
    return list(range(int(re.search(r'CPUTot=(\d+)', done.stdout).group(1))))


@pytest.mark.integration
def test_a_step_runs_in_the_cpuset_slurm_granted_it(node_cpus):
    """srun -c 1 (which implies --exact): a cpuset of one CPU; srun --whole in an exclusive allocation: the node's
    CPUs. The cpuset is the step's own cgroup on the node's own subtree, and the task cannot widen it."""
    if len(node_cpus) < 2:
        pytest.skip('needs two CPUs')
    exact = _slurm('srun', '-p', 'ci', '-N1', '-w', 'node1', '-c1', '-t', '1', 'bash', '-c', SAY_CPUS)
    whole = _slurm('salloc', '-p', 'ci', '-N1', '-w', 'node1', '--exclusive', '-t', '1',
                   'srun', '--whole', '-n1', 'bash', '-c', SAY_CPUS)
    assert exact.returncode == 0 and whole.returncode == 0, (exact.stdout + exact.stderr, whole.stdout + whole.stderr)
    print(exact.stdout, whole.stdout)
    one, widened = exact.stdout.splitlines()[:2]
    fields = _fields(one)
    assert one.startswith('node1 ') and len(_cpus(fields['allowed'])) == 1, one
    assert fields['cpuset'] == fields['allowed'] and re.fullmatch(r'/slurm\w*/uid_0/job_\d+/step_0', fields['cgroup'])
    assert widened == f'widened={fields["allowed"]}'                # the cgroup holds, not only an affinity mask
    every = _fields(whole.stdout.splitlines()[0])
    assert _cpus(every['allowed']) == node_cpus and _cpus(every['cpuset']) == node_cpus, whole.stdout


# -- the generated pair cases, run as generated ---------------------------------------------------------------

@pytest.fixture(scope='module')
def generated(cluster, tmp_path_factory):
    """{case: (job script, flows spec)} as ReFrame generates them for the site template (--dry-run)."""
    cases = {}
    # a job of its own (sbatch), and a step inside a CI job's allocation (the nightly's child jobs set
    # IBREPRO_IN_ALLOCATION=1 in theirs)
    for where, extra in (('', {}), ('-in-allocation', {'SLURM_JOB_ID': '77', 'IBREPRO_IN_ALLOCATION': '1'})):
        home = tmp_path_factory.mktemp('dry-run')
        env = {**os.environ, 'IBREPRO_HOME': str(home), **extra}
        for var in ('SLURM_JOB_ID', 'IBREPRO_IN_ALLOCATION', 'RFM_CONFIG_FILES', 'RFM_SYSTEM', 'IBREPRO_NIGHTLY'):
            if var not in extra:
                env.pop(var, None)
        done = subprocess.run([str(Path(sys.executable).with_name('reframe')), '-C', 'configs/example-cluster.py',
                               '--system', 'example-cluster:hdr', '-c', 'reframe-checks', '--dry-run', '-n', TWO_FLOWS,
                               '-n', TWO_RAILS, '-n', TWO_PORT_2PROC], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, output(done)
        for name, pattern in (('two-flows', 'PerftestMultiPair_*'), ('two-rails', 'PerftestBinding_*'),
                              ('two-port-2proc', 'VerbsTwoPort_*')):
            (stage,) = home.rglob(pattern)
            cases[name + where] = ((stage / 'rfm_job.sh').read_text(), json.loads((stage / 'flows.json').read_text()))
    return cases


@pytest.mark.integration
def test_the_generated_pair_step_gets_the_node_s_cpus_and_binds_nothing_itself(generated):
    """What the job script promises: the step sees its nodes' CPUs (--whole; in a job of its own, whole nodes),
    the runner binds."""
    for name, (script, _) in generated.items():
        step = script.strip().splitlines()[-1].split()
        assert step[0] == 'srun' and step[-3:] == ['python3', 'ibrepro_pair.py', 'flows.json'], script
        assert '--kill-on-bad-exit=1' in step and '--whole' in step and '--cpu-bind=none' in step, script
        assert not [o for o in step if o.startswith(('-c', '--cpus-per-task', '--exact', '--exclusive'))], script
        if not name.endswith('-in-allocation'):
            assert '#SBATCH --exclusive' in script.splitlines(), script


def fake_sysfs(root, devices):
    """/sys/class/infiniband/<device>/{ports/1/link_layer, device/{numa_node,local_cpulist}} per device; a device
    given as None has no PCI function (as soft-RoCE's): its locality is unknown."""
    for device, where in devices.items():
        port = root / 'class' / 'infiniband' / device / 'ports' / '1'
        port.mkdir(parents=True)
        (port / 'link_layer').write_text('InfiniBand\n')
        if where is not None:
            dev = root / 'class' / 'infiniband' / device / 'device'
            dev.mkdir()
            (dev / 'numa_node').write_text(f'{where[0]}\n')
            (dev / 'local_cpulist').write_text(f'{where[1]}\n')
    return root


#: A side that forks two busy processes (as ibrepro_rdma -P 2 does); each child says which CPUs it may run on once
#: the runner has pinned it (or after 20 s); a server waits for its client's end.
FORKER = (
    'import os, sys, time\n'
    'kids = []\n'
    'for i in range(2):\n'
    '    pid = os.fork()\n'
    '    if pid == 0:\n'
    '        until = time.time() + 20\n'
    '        while len(os.sched_getaffinity(0)) > 1 and time.time() < until:\n'
    '            pass\n'
    '        os.write(1, ("child %s\\n" % sorted(os.sched_getaffinity(0))).encode())\n'
    '        os._exit(0)\n'
    '    kids.append(pid)\n'
    'for pid in kids:\n'
    '    os.waitpid(pid, 0)\n'
    'while sys.argv[1] == "server" and not os.path.exists("flow-0.client.status.json"):\n'
    '    time.sleep(0.05)\n')


def real_sides(spec, sysfs):
    """The generated spec with real programs for its sides (nothing else changed but fewer sizes)."""
    spec = json.loads(json.dumps(spec))
    for flow in spec['flows']:
        port = str(flow['port'])
        if flow['server'].get('processes', 1) > 1:
            flow['server']['argv'] = [PYTHON, '-c', FORKER, 'server']
            flow['client']['argv'] = [PYTHON, '-c', FORKER, 'client']
        else:
            flow['server']['argv'] = [PYTHON, PEER, 'server', port]
            flow['client']['argv'] = [PYTHON, PEER, 'client', port, '{server_addr}', '0.5']
    spec.pop('program', None)
    spec['options'] = []
    spec['sizes'] = spec['sizes'][:2] if spec['sizes'] else None
    spec['timeout'], spec['connect_timeout'] = 120, 60
    spec['sysfs'] = str(sysfs)
    return spec


def run_as_generated(stage, script, spec, step=None, allocation=None):
    """The generated job script on the cgroup cluster: its #SBATCH lines (partition ci), its srun step (or
    ``step`` instead), in a stage directory holding the runner and the spec, submitted with sbatch; or, for a
    script made inside an allocation, run by salloc with the options ``allocation``. (exit status, output)"""
    from ibrepro import pair

    stage.mkdir(parents=True, exist_ok=True)
    (stage / 'flows.json').write_text(json.dumps(spec))
    (stage / 'ibrepro_pair.py').write_text(Path(pair.__file__).read_text())
    # the site's partition hdr is this cluster's ci: its #SBATCH line and the job's check that it runs there
    placed = [line for line in script.splitlines() if line.startswith('case "${SLURM_JOB_PARTITION-}" in hdr) ;;')]
    assert len(placed) == 1, script
    lines = [re.sub(r'--partition=\S+', '--partition=ci', line).replace(' in hdr) ;;', ' in ci) ;;')
             for line in script.strip().splitlines()
             if not line.startswith('export ')]          # the site's Spack view: not on these nodes
    if step is not None:
        lines[-1] = step
    assert lines[-1].endswith(' python3 ibrepro_pair.py flows.json'), lines[-1]
    lines[-1] = lines[-1].replace(' python3 ', f' {PYTHON} ')
    (stage / 'job.sh').write_text('\n'.join(lines) + '\n')
    if allocation is not None:
        done = _slurm('salloc', '-p', 'ci', '-t', '3', *allocation, 'bash', 'job.sh', cwd=stage, timeout=300)
        return done.returncode, done.stdout + done.stderr
    done = _slurm('sbatch', '--wait', '--parsable', '--time=3', 'job.sh', cwd=stage, timeout=300)
    out = (stage / 'rfm_job.out').read_text() if (stage / 'rfm_job.out').exists() else ''
    return done.returncode, out + done.stderr


def _status(stage, name):
    return json.loads((stage / f'{name}.status.json').read_text())


@pytest.mark.integration
@pytest.mark.parametrize('case, devices', [
    # PerftestMultiPair, 2 pairs: on each node two sides of rail 0 (mlx5_0), whose NUMA node has both CPUs
    ('two-flows', {'mlx5_0': (0, '0-1'), 'mlx5_1': (1, '0-1')}),
    # PerftestBinding bidir-1proc: on each node one side of rail 0 and one of rail 1, each device on its own node
    ('two-rails', {'mlx5_0': (0, '0'), 'mlx5_1': (1, '1')}),
    # devices without PCI locality: any CPUs of the step, still one each, and the binding says the node is unknown
    ('two-rails', {'mlx5_0': None, 'mlx5_1': None}),
])
def test_two_flows_run_on_distinct_cpus_each_near_its_device(generated, tmp_path, node_cpus, case, devices):
    """Concurrent flows: on each node every side on a CPU of its own, on its device's (fake) NUMA node."""
    if len(node_cpus) < 2:
        pytest.skip('needs two CPUs')
    script, spec = generated[case]
    sysfs = fake_sysfs(tmp_path / 'sys', devices)
    runnable = real_sides(spec, sysfs)
    rc, out = run_as_generated(tmp_path / 'stage', script, runnable)
    assert rc == 0, out
    for size in runnable['sizes']:
        ends = [_status(tmp_path / 'stage', f'flow-{f["id"]}.s{size}.{side}') for f in spec['flows']
                for side in ('server', 'client')]
        print(case, size, [(e['host'], e['device'], e['cpus'], e['binding']) for e in ends])
        assert all(e['returncode'] == 0 for e in ends)
        for host in ('node1', 'node2'):
            cpus = [e['cpu'] for e in ends if e['host'] == host]
            assert len(cpus) == 2 and len(set(cpus)) == 2, ends                     # distinct CPUs
        for e in ends:
            if devices[e['device']] is None:
                assert e['cpus'] == [e['cpu']] and e['cpu'] in node_cpus, e
                assert e['binding'] == f'{e["device"]}: HCA NUMA node unknown (no PCI locality in sysfs): any CPU ' \
                    'of the task', e
                continue
            numa, local = devices[e['device']]
            assert e['cpus'] == [e['cpu']] and e['cpu'] in _cpus(local), e       # near its own device
            assert e['binding'] == f'near {e["device"]} (NUMA node {numa})', e
            text = (tmp_path / 'stage' / f'flow-{e["flow"]}.s{size}.{e["side"]}.out').read_text()
            assert f'cpus [{e["cpu"]}]' in text, text                               # and really ran there


@pytest.mark.integration
def test_each_forked_process_of_a_two_process_side_gets_its_own_cpu(generated, tmp_path, node_cpus):
    """VerbsTwoPort with -P 2: both sides fork two busy processes; each process on its own CPU near the device."""
    if len(node_cpus) < 2:
        pytest.skip('needs two CPUs')
    script, spec = generated['two-port-2proc']
    assert all(f[s]['processes'] == 2 and f[s]['argv'][:3] == ['ibrepro_rdma', '-P', '2']
               for f in spec['flows'] for s in ('server', 'client'))
    local = ','.join(map(str, node_cpus[:2]))
    sysfs = fake_sysfs(tmp_path / 'sys', {'mlx5_0': (1, local), 'mlx5_1': (1, local)})
    rc, out = run_as_generated(tmp_path / 'stage', script, real_sides(spec, sysfs))
    assert rc == 0, out
    for side, host in (('client', 'node1'), ('server', 'node2')):
        end = _status(tmp_path / 'stage', f'flow-0.{side}')
        print(side, end['host'], end['cpus'], end['process_cpus'], end['binding'])
        assert end['host'] == host and end['binding'] == 'near mlx5_0 (NUMA node 1)'
        assert end['cpus'] == node_cpus[:2] and sorted(end['process_cpus'].values()) == node_cpus[:2]
        children = [line for line in (tmp_path / 'stage' / f'flow-0.{side}.out').read_text().splitlines()
                    if line.startswith('child')]
        assert sorted(children) == [f'child [{c}]' for c in node_cpus[:2]], children   # really, one each


@pytest.mark.integration
@pytest.mark.parametrize('case, devices', [
    # two sides near mlx5_0 on each node, one CPU in the step's cpuset: the second has none of its own
    ('two-flows', {'mlx5_0': (0, '0-1'), 'mlx5_1': (1, '0-1')}),
    # a side of rail 0 (CPU 0) and one of rail 1 (CPU 1) on each node: one of them is far from its cpuset
    ('two-rails', {'mlx5_0': (0, '0'), 'mlx5_1': (1, '1')}),
])
def test_a_step_confined_away_from_the_device_fails_the_case_naming_the_cpus(generated, tmp_path, node_cpus, case,
                                                                             devices):
    """The step as it used to be generated (srun -c 1, which implies --exact): Slurm's cgroup gives it one CPU,
    whichever Slurm picks; a side that cannot get a CPU of its own on its device's NUMA node fails the case before
    it starts, the reason names the device's CPUs and the step's, and nothing ran far from its device."""
    if len(node_cpus) < 2:
        pytest.skip('needs two CPUs')
    script, spec = generated[case]
    sysfs = fake_sysfs(tmp_path / 'sys', devices)
    step = script.strip().splitlines()[-1].replace(' --whole ', ' --cpus-per-task=1 ')
    rc, out = run_as_generated(tmp_path / 'stage', script, real_sides(spec, sysfs), step=step)
    assert rc != 0, out
    reasons = [json.loads(p.read_text())['reason'] for p in sorted((tmp_path / 'stage').glob('failed-*.json'))]
    print(case, reasons)
    found = [m for m in (re.search(r'needs 1 CPU\(s\) of its own near (mlx5_\d) \(CPUs (\S+) are local to it\), '
                                   r'but this task may use only CPUs (\S+) and 0 of them are free', r)
                         for r in reasons) if m]
    assert found and all('srun --whole' in r for r in reasons if 'needs 1 CPU' in r), (reasons, out)
    device, local, granted = found[0].groups()
    assert local == devices[device][1] and len(_cpus(granted)) == 1, reasons    # the cpuset of -c 1: one CPU
    for path in (tmp_path / 'stage').glob('flow-*.status.json'):                # what did start: near its device
        end = json.loads(path.read_text())
        assert end['cpu'] in _cpus(devices[end['device']][1]), end


@pytest.mark.integration
@pytest.mark.parametrize('allocation, holds', [(['-N2', '--exclusive'], 'whole nodes'),
                                               (['-N2', '--ntasks-per-node=1'], 'one CPU per node')])
def test_inside_an_allocation_the_step_has_what_the_allocation_holds(generated, tmp_path, node_cpus, allocation,
                                                                     holds):
    """The nightly's child jobs run the cases as steps of their own allocation: --whole gives the step what the
    allocation holds on each node. Whole nodes: each side near its device; one CPU per node: the case fails, naming
    the CPUs, instead of measuring far from a device."""
    if len(node_cpus) < 2:
        pytest.skip('needs two CPUs')
    script, spec = generated['two-rails-in-allocation']
    devices = {'mlx5_0': (0, '0'), 'mlx5_1': (1, '1')}
    rc, out = run_as_generated(tmp_path / 'stage', script, real_sides(spec, fake_sysfs(tmp_path / 'sys', devices)),
                               allocation=allocation)
    ends = [json.loads(p.read_text()) for p in (tmp_path / 'stage').glob('flow-*.status.json')]
    print(holds, [(e['host'], e['device'], e['cpus'], e['returncode']) for e in ends])
    assert all(e['cpu'] in _cpus(devices[e['device']][1]) for e in ends), ends     # never far from its device
    if holds == 'whole nodes':
        assert rc == 0 and len(ends) == 2 * 2 * len(spec['flows']) and all(e['returncode'] == 0 for e in ends), out
    else:
        reasons = [json.loads(p.read_text())['reason'] for p in (tmp_path / 'stage').glob('failed-*.json')]
        assert rc != 0 and any(re.search(r'needs 1 CPU\(s\) of its own near mlx5_\d \(CPUs \d are local to it\), '
                                         r'but this task may use only CPUs \d and 0 of them are free', r)
                               and 'a job or allocation without whole nodes' in r for r in reasons), (reasons, out)


# -- the names of a cluster beside the default one (common.sh; no cluster needed) -------------------------------

COMMON = REPO / 'ci' / 'cluster' / 'common.sh'
NAMES = ('echo $CLUSTER_NAME $NS_SWITCH $BRIDGE $HEAD_IF $NODE_IF $(ns_node 1) $(ns_node 2) $HEAD_ADDR $(node_addr 2) '
         '$SLURMCTLD_PORT $SLURMD_PORT $SLURMDBD_PORT $MARIADB_PORT $CGROUP')


def _common(script, **overrides):
    env = {k: v for k, v in os.environ.items() if not k.startswith('IBREPRO_CLUSTER_')}
    env.update(IBREPRO_CLUSTER_DIR='/tmp/ibrepro-names-test', **overrides)
    done = subprocess.run(['bash', '-c', f'. {shlex.quote(str(COMMON))}; {script}'], env=env, capture_output=True,
                          text=True,
                          timeout=30)
    return done.returncode, done.stdout.strip(), done.stderr


def test_the_default_cluster_keeps_its_names():
    assert _common(NAMES)[1] == ('ci ibr-switch ibr-br0 ibr-head0 ibr0 ibr-node1 ibr-node2 198.51.100.1 '
                                 '198.51.100.12 6817 6818 6819 3307 0')


def test_a_second_cluster_takes_names_addresses_and_ports_of_its_own():
    make = subprocess.run(['make', '-s', '-n', 'cgroup-up'], cwd=REPO, capture_output=True, text=True, timeout=30)
    overrides = dict(w.split('=', 1) for w in shlex.split(make.stdout) if w.startswith('IBREPRO_CLUSTER_'))
    assert overrides['IBREPRO_CLUSTER_DIR'] != '/tmp/ibrepro-cluster' and overrides['IBREPRO_CLUSTER_CGROUP'] == '1'
    overrides.pop('IBREPRO_CLUSTER_DIR')
    assert _common(NAMES, **overrides)[1] == ('cgroup ibc-switch ibc-br0 ibc-head0 ibc0 ibc-node1 ibc-node2 '
                                              '203.0.113.1 203.0.113.12 6917 6918 6919 3317 1')


@pytest.mark.parametrize('variable, value', [
    ('IBREPRO_CLUSTER_PREFIX', 'ibr'), ('IBREPRO_CLUSTER_PREFIX', 'a b-'), ('IBREPRO_CLUSTER_PREFIX', '$(id)-'),
    ('IBREPRO_CLUSTER_NET', '203.0.113.0'), ('IBREPRO_CLUSTER_NET', '10.0;reboot'),
    ('IBREPRO_CLUSTER_NAME', 'Ci Two'), ('IBREPRO_CLUSTER_MARIADB_PORT', '33o7'),
    ('IBREPRO_CLUSTER_SLURMCTLD_PORT', '80'),
])
def test_a_bad_override_is_refused_naming_it(variable, value):
    rc, out, err = _common('echo USED', **{variable: value})
    assert rc == 2 and 'USED' not in out and f'{variable} must be' in err and f"got '{value}'" in err, err

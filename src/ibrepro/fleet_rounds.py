"""The fleet's pair rounds run for real: one Slurm job's node group of a night (:func:`ibrepro.fleet_plan.slurm_jobs`).

The ReFrame check (``reframe-checks/system/fleet_pairs.py``) writes a *plan* into its stage directory (:func:`plan`:
the job's nodes, its rounds' disjoint pairs, the fabric's leaves and spines) and starts one task per node:
``python -m ibrepro.fleet_rounds node plan.json`` (:func:`node_main`). Each task runs every round with the pair
runner (:mod:`ibrepro.pair`): both directions of each pair at once, as TCP flows of a real bandwidth tool (iperf3,
argv flows; the server's address is that of the rail's network interface, ``netdev:<if>``). When the job holds the
whole fabric (:func:`ibrepro.fleet_plan.confirmation_job_needed` is False), task 0 localises the rounds' flows and
writes the confirmation rounds for the suspects (:func:`ibrepro.fleet_plan.confirmation_rounds`), which every task
then runs. After the job, :func:`collect` reads every flow (``{round, host, device, port, peer, direction, bw}``, MB/s)
and :func:`analyse` names the components (:mod:`ibrepro.fleet_localise`).
"""

import json
import os
import re
import shutil
import stat
import sys
import time
from pathlib import Path

from . import fleet_localise, fleet_plan, pair, parsers
from .compat import removeprefix

#: seconds each flow runs; iperf3 leaves the first second (TCP's slow start) out of its figure
SECONDS = 4
OMIT = 1
BASE_PORT = 5300
#: the RDMA transport's tools (perftest), per rail: a round's bandwidth flows, each pair's two directions at once for
#: ``seconds`` (``-D``), then each pair's latency alone (a ping-pong: one flow per pair and rail, nothing beside it)
RDMA_BW = ('ib_write_bw', '-F', '-D')
RDMA_LAT = ('ib_send_lat', '-F')
#: seconds perftest's duration mode leaves out at each end of ``-D`` (its ``--margin``, default 2; its help:
#: "duration/(duration-2*margin)"): ``-D`` is the plan's seconds plus both margins, so the plan's seconds are measured
PERFTEST_MARGIN = 2
#: the directory of a round's latency run, inside the round's
LATENCY = 'lat'
#: task 0's confirmation decision: the confirmation rounds (each a directory named as its round) and the suspects
DECISION = 'confirmation-decision.json'
#: how long a task waits for task 0's confirmation decision
DECISION_TIMEOUT = 120


#: what a task imports: standard library only, and not sqlite3 (the results database is read on the login node:
#: :mod:`ibrepro.results` is imported where it is used), so a compute node's own interpreter (the partition's extras
#: ``python``) runs a copy of them (:func:`copy_node_modules`) without this package installed there
NODE_MODULES = ('__init__.py', 'fleet_rounds.py', 'fleet_localise.py', 'fleet_plan.py', 'pair.py', 'stats.py',
                'parsers', 'compat.py', '_vendor')


def copy_node_modules(dest):
    """Copy :data:`NODE_MODULES` to ``dest/ibrepro`` (``dest`` goes on the task's PYTHONPATH)."""
    package = Path(__file__).resolve().parent
    target = Path(dest) / 'ibrepro'
    target.mkdir(parents=True, exist_ok=True)
    for name in NODE_MODULES:
        if (package / name).is_dir():
            shutil.copytree(package / name, target / name, dirs_exist_ok=True,  # novm (on the login node)
                            ignore=shutil.ignore_patterns('__pycache__'))
        else:
            shutil.copy2(package / name, target / name)


#: The largest topology file a night reads (a topology.conf of MAX_NODES nodes is a few MB).
MAX_TOPOLOGY_BYTES = 64 * 2**20


def night_from_environment(environ):
    """``(fabric, rounds, jobs, problem)`` of the pair-round check from ``IBREPRO_FLEET_TOPOLOGY`` (a Slurm
    topology.conf or JSON, :func:`load_topology`) and ``IBREPRO_FLEET_JOB_NODES``: the night's plan, or why the
    environment gives none in ``problem`` (the check's case then fails saying so: a night must not vanish from the
    run because the check could not load); ``(None, [], [], None)`` without a topology."""
    path = environ.get('IBREPRO_FLEET_TOPOLOGY')
    if not path:
        return None, [], [], None
    job_nodes = environ.get('IBREPRO_FLEET_JOB_NODES', str(fleet_plan.JOB_NODES))
    if not re.fullmatch(r'[0-9]{1,6}', job_nodes) or int(job_nodes) < 1:
        return None, [], [], f'IBREPRO_FLEET_JOB_NODES={job_nodes!r:.40}: expected a number of nodes'
    try:
        leaves, spines = load_topology(read_topology(path))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        return None, [], [], f'IBREPRO_FLEET_TOPOLOGY={path!r:.200}: {err}'
    routes_dir, routes = environ.get('IBREPRO_FLEET_ROUTES'), None
    if routes_dir:                  # the fabric's own tables: its leaves in port order and its routes
        from . import fleet_routes
        try:
            found = fleet_routes.read(read_topology(os.path.join(routes_dir, 'ibnetdiscover.txt')),
                                      read_topology(os.path.join(routes_dir, 'dump_lfts.txt')))
            fabric = fleet_plan.fabric_from_routes(found)
        except (OSError, ValueError, KeyError, TypeError) as err:
            return None, [], [], f'IBREPRO_FLEET_ROUTES={routes_dir!r:.200}: {err}'
        if sorted(fabric.nodes) != sorted(n for ns in leaves.values() for n in ns):
            return None, [], [], (f'IBREPRO_FLEET_ROUTES={routes_dir!r:.200}: its HCAs are not the nodes of '
                                  f'IBREPRO_FLEET_TOPOLOGY={path!r:.200}')
        leaves, spines, routes = fabric.leaves, fabric.spines, fleet_plan.routes_json(fabric)
    try:
        return (*night(leaves, spines, job_nodes=int(job_nodes), routes=routes), None)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        return None, [], [], f'IBREPRO_FLEET_TOPOLOGY={path!r:.200}: {err}'


#: Slurm's short node states (``sinfo %t``) in which a node runs jobs; any other (down, drain, drng, fail, maint,
#: resv, unk, boot, ...) leaves the node out of the night
RUNNABLE_STATES = ('idle', 'mix', 'alloc', 'comp', 'plnd')
#: state flags that keep a node from running the night's job although its state is runnable: not responding (*),
#: in a maintenance reservation ($), being powered down (! and %)
BLOCKING_FLAGS = {'*': 'not responding', '$': 'in a maintenance reservation', '!': 'being powered down',
                  '%': 'being powered down'}
_SINFO_LINE = re.compile(r'(?P<node>[A-Za-z0-9][A-Za-z0-9_.-]{0,252})\|(?P<state>[a-z_]{1,16})'
                         r'(?P<flags>[*~#!%$@^-]{0,8})')


def node_states(partition=None, *, timeout=60):
    """``{node: state as sinfo prints it}`` of the Slurm partition ``partition`` (every partition when None): the
    nodes Slurm would give a job there now. OSError or ValueError (naming what sinfo said) when Slurm cannot be
    asked or answers something else."""
    import subprocess
    cmd = ['sinfo', '--noheader', '--Node', '--format=%N|%t'] + ([f'--partition={partition}'] if partition else [])
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout)     # (Python 3.6: no capture_output)
    except subprocess.TimeoutExpired:
        raise OSError(f'{" ".join(cmd)}: no answer in {timeout} s') from None
    except FileNotFoundError:
        raise OSError('sinfo: not found (Slurm\'s commands are not on PATH here)') from None
    if done.returncode:
        raise OSError(f'{" ".join(cmd)}: exit {done.returncode}: {done.stderr.strip()[:300]}')
    states = {}
    for line in done.stdout.splitlines():
        match = _SINFO_LINE.fullmatch(line.strip())
        if not match:
            raise ValueError(f'{" ".join(cmd)}: a line that is no "node|state": {line.strip()[:120]!r}')
        states.setdefault(match['node'], match['state'] + match['flags'])   # a node of two partitions: once
    return states


def left_out(nodes, states, partition=None):
    """``{node: why}`` of the ``nodes`` a job cannot have now (``states``: :func:`node_states`): not in the
    partition, or in a state that runs no job (:data:`RUNNABLE_STATES`, :data:`BLOCKING_FLAGS`)."""
    out = {}
    for node in nodes:
        state = states.get(node)
        if state is None:
            out[node] = f'not in Slurm partition {partition}' if partition else 'unknown to Slurm'
            continue
        base = state.rstrip('*~#!%$@^-')
        flags = [BLOCKING_FLAGS[f] for f in state[len(base):] if f in BLOCKING_FLAGS]
        if base not in RUNNABLE_STATES or flags:
            out[node] = f'state {state}' + (f' ({", ".join(flags)})' if flags else '')
    return out


def without(p, gone):
    """The plan ``p`` without the nodes ``gone`` (``{node: why}``): their pairs dropped from every round (the
    fabric, and with it every other node's position and route, unchanged), recorded as ``left_out``."""
    gone = {n: why for n, why in gone.items() if n in p['nodes']}
    if not gone:
        return p
    return {**p, 'nodes': [n for n in p['nodes'] if n not in gone],
            'rounds': [{**r, 'pairs': [pr for pr in r['pairs'] if not set(pr) & set(gone)]} for r in p['rounds']],
            'left_out': {**p.get('left_out', {}), **gone}}


def read_topology(path):
    """The text of a topology file: a regular file of at most :data:`MAX_TOPOLOGY_BYTES` in UTF-8 (a FIFO named
    there would block every ReFrame run that loads the check, even ``-l``); OSError or ValueError otherwise."""
    with open(path, 'rb', opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError('not a regular file')
        data = f.read(MAX_TOPOLOGY_BYTES + 1)
    if len(data) > MAX_TOPOLOGY_BYTES:
        raise ValueError(f'larger than {MAX_TOPOLOGY_BYTES} bytes')
    return data.decode('utf-8')


def load_topology(text):
    """``(leaves, spines)`` from a Slurm topology.conf or JSON ``{leaf: [nodes]}`` / ``{"leaves": ..., "spines": k}``
    (spines 0: the leaf size, :class:`ibrepro.fleet_plan.Fabric`)."""
    if text.lstrip().startswith('{'):
        data = json.loads(text)
        if 'leaves' in data:
            return data['leaves'], fleet_plan.spines_of(data.get('spines'))
        return data, 0
    return fleet_plan.parse_topology_conf(text), fleet_plan.parse_topology_spines(text)


def night(leaves, spines=0, job_nodes=fleet_plan.JOB_NODES, routes=None):
    """``(fabric, rounds, jobs)`` of a night on this topology (and the fabric's own ``routes``, where read), at most
    ``ceil(N / job_nodes)`` jobs."""
    fabric = fleet_plan.fabric_from_leaves(leaves, spines, routes=routes)
    rounds = fleet_plan.pair_rounds(fabric)
    return fabric, rounds, fleet_plan.slurm_jobs(fabric, rounds, job_nodes=job_nodes)


def plan(fabric, rounds, job, *, netdev='fab0', seconds=SECONDS, tool='iperf3', rails=None, cpu_sharing=False,
         perftest_options=()):
    """The plan of one job: its nodes (sorted, the tasks' order), its rounds' pairs, the fabric, and whether it
    runs the confirmation itself. ``rails`` (``[(device, port)]``, device None: perftest's first) makes the flows
    RDMA (perftest over each rail, :data:`RDMA_BW` and :data:`RDMA_LAT`); without, TCP (``tool``, iperf3) over the
    network interface ``netdev``. ``cpu_sharing``: emulated nodes, whose RDMA sides may share CPUs;
    ``perftest_options``: options every perftest run of the partition needs (its extras')."""
    mine = set(job['nodes'])
    out = {'nodes': sorted(job['nodes']), 'seconds': int(seconds),
           'leaves': fabric.leaves, 'spines': fabric.spines, 'routes': fleet_plan.routes_json(fabric),
           'rounds': [{'number': r.number, 'kind': r.kind, 'pairs': [list(p) for p in r.pairs if set(p) <= mine]}
                      for r in rounds if r.number in job['rounds']],
           'confirm': not fleet_plan.confirmation_job_needed(fabric, [job])}
    if rails:
        out.update(transport='rdma', rails=[[d, int(p)] for d, p in rails], cpu_sharing=bool(cpu_sharing),
                   options=[str(o) for o in perftest_options])
    else:
        out.update(transport='tcp', netdev=netdev, tool=tool)
    return out


def round_spec(p, pairs):
    """The pair runner's spec for one round's bandwidth flows: each pair's two directions at once (on every rail,
    RDMA), each a client sending to the server on its destination."""
    if p.get('transport') == 'rdma':
        duration = p['seconds'] + 2 * PERFTEST_MARGIN
        return _rdma_spec(p, [(s, d, r) for a, b in pairs for r in range(len(p['rails'])) for s, d in ((a, b), (b, a))],
                          RDMA_BW[0], [*RDMA_BW[1:], str(duration), *p['options']], 4 * duration + 60)
    index = {n: i for i, n in enumerate(p['nodes'])}
    flows = []
    for a, b in pairs:
        for src, dst in ((a, b), (b, a)):
            port = BASE_PORT + len(flows)
            flows.append({'id': len(flows), 'port': port, 'src': src, 'dst': dst,
                          'server': {'node': index[dst], 'rail': 0,
                                     'argv': [p['tool'], '-s', '-1', '-p', str(port)]},
                          'client': {'node': index[src], 'rail': 0,
                                     'argv': [p['tool'], '-c', '{server_addr}', '-p', str(port), '-t',
                                              str(p['seconds']), '-O', str(OMIT), '-J']}})
    return {'version': 2, 'rails': [[pair.NETDEV_RAIL + p['netdev'], None]], 'nodes': len(p['nodes']),
            'distinct_hosts': True, 'flows': flows, 'sizes': None, 'pin': False, 'cpu_sharing': True,
            'timeout': 4 * p['seconds'] + 60, 'connect_timeout': 30}


def latency_spec(p, pairs):
    """The pair runner's spec for one round's latency flows (RDMA only): one ping-pong per pair and rail."""
    return _rdma_spec(p, [(a, b, r) for a, b in pairs for r in range(len(p['rails']))], RDMA_LAT[0],
                      [*RDMA_LAT[1:], *p['options']], 120)


def _rdma_spec(p, flows, program, options, timeout):
    """perftest flows ``(src, dst, rail index)``: the runner adds ``-d``/``-i``/``-p`` and the server's host, and
    pins each side near its rail's device."""
    index = {n: i for i, n in enumerate(p['nodes'])}
    return {'version': 2, 'program': program, 'options': options, 'rails': p['rails'], 'nodes': len(p['nodes']),
            'distinct_hosts': True, 'sizes': None, 'pin': True, 'cpu_sharing': p.get('cpu_sharing', False),
            'timeout': timeout, 'connect_timeout': 60,
            'flows': [{'id': i, 'port': BASE_PORT + i, 'src': src, 'dst': dst,
                       'server': {'node': index[dst], 'rail': r}, 'client': {'node': index[src], 'rail': r}}
                      for i, (src, dst, r) in enumerate(flows)]}


def write_json(path, data):
    path = Path(path)
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)          # atomic: a reader sees the whole file or none


def prepare(stagedir, p):
    """Write the plan and each round's specs (``round-<n>/spec.json``, RDMA also ``round-<n>/lat/spec.json``) into
    ``stagedir``."""
    stagedir = Path(stagedir)
    write_json(stagedir / 'plan.json', p)
    for r in p['rounds']:
        write_round(stagedir / f'round-{r["number"]}', p, r['pairs'])


def write_round(d, p, pairs):
    """One round's directory: its bandwidth spec and, RDMA, its latency run's."""
    d.mkdir(exist_ok=True)
    write_json(d / 'spec.json', round_spec(p, pairs))
    if p.get('transport') == 'rdma':
        (d / LATENCY).mkdir(exist_ok=True)
        write_json(d / LATENCY / 'spec.json', latency_spec(p, pairs))


def _run_round(d, rank, log):
    rc = 0
    for run in (d, d / LATENCY):
        if (run / 'spec.json').exists():
            rc |= pair.run(pair.load_spec(run / 'spec.json'), run, nodes=[rank], log=log,
                           run_id=pair.run_id(run / 'spec.json'))
    write_json(d / f'done-{rank}.json', {'rc': rc})
    return rc


def _wait_done(d, count, timeout):
    until = time.monotonic() + timeout
    while not all((d / f'done-{i}.json').exists() for i in range(count)):
        if time.monotonic() > until:
            raise TimeoutError(f'{d}: not every node finished the round within {timeout} s')
        time.sleep(0.2)


def flow_records(d, round_number):
    """The flows of one round directory: ``{round, host, device, port, peer, direction: 'send', bw}`` (MB/s: TCP
    what the receiver got, RDMA perftest's average), RDMA with ``lat`` (us, the pair's and rail's
    ``ib_send_lat`` typical), or a record without ``bw`` and with ``error`` for a flow that measured nothing."""
    spec = json.loads((d / 'spec.json').read_text())
    hosts = _hosts(d, spec)
    latency = _latencies(d / LATENCY) if (d / LATENCY / 'spec.json').exists() else {}
    out = []
    for f in spec['flows']:
        device, port = spec['rails'][f['client'].get('rail', 0)]
        rec = {'round': round_number, 'host': hosts.get(f['client']['node']) or f['src'],
               'peer': hosts.get(f['server']['node']) or f['dst'],
               'device': removeprefix(device or '', pair.NETDEV_RAIL), 'port': port or 1, 'direction': 'send'}
        path = d / f'flow-{f["id"]}.client.out'
        try:
            text = _tool_output(path)
            if 'program' in spec:             # perftest: its average, in MB/s (10^6 bytes)
                parsed = parsers.parse_text(text, path.name, tool='perftest')
                rec['device'] = rec['device'] or parsed.meta.get('device')
                rec['bw'] = parsed.tables[-1].rows[-1]['bw_average_si']
                lat = latency.get((f['src'], f['dst'], f['client'].get('rail', 0))) \
                    or latency.get((f['dst'], f['src'], f['client'].get('rail', 0)))
                if lat is not None:
                    rec['lat'] = lat
            else:
                data = json.loads(text)
                if 'error' in data:
                    rec['error'] = data['error']
                else:
                    rec['bw'] = data['end']['sum_received']['bits_per_second'] / 8e6
        except (OSError, ValueError, KeyError, TypeError, IndexError) as err:
            rec.pop('bw', None)
            rec['error'] = f'{path.name}: {err}'
        if 'bw' in rec and not rec['bw'] > 0:      # the tool ran and printed nothing it counted: no measurement
            why = ('perftest could not time the CPU clock: "Correlation coefficient r^2 ... < 0.9"'
                   if 'Correlation coefficient r^2' in text else 'nothing completed in the measured window')
            rec['error'] = f'{path.name}: {rec.pop("bw")} MB/s measured ({why})'
        out.append(rec)
    return out


def _tool_output(path):
    """What a flow's tool printed: its output file without the pair runner's ``#`` lines."""
    return ''.join(line for line in path.read_text().splitlines(True) if not line.startswith('#'))


def _hosts(d, spec):
    """``{node index: the node it ran on}``: its Slurm name (what the topology and the fabric name) when Slurm
    launched it, else its hostname; None when it published nothing."""
    hosts = {}
    for i in range(spec['nodes']):
        path = d / f'node-{i}.json'
        info = json.loads(path.read_text()) if path.exists() else {}
        names = [n for n in (info.get('slurm_node'), info.get('host'))
                 if isinstance(n, str) and fleet_plan.HOST_NAME.fullmatch(n)]
        hosts[i] = names[0] if names else None
    return hosts


def _latencies(d):
    """``{(src, dst, rail index): typical latency (us)}`` of a round's latency run (flows that measured nothing
    left out: the bandwidth flow's record still holds the pair's verdict)."""
    spec = json.loads((d / 'spec.json').read_text())
    out = {}
    for f in spec['flows']:
        path = d / f'flow-{f["id"]}.client.out'
        try:
            out[(f['src'], f['dst'], f['client'].get('rail', 0))] = parsers.parse_text(
                _tool_output(path), path.name, tool='perftest').tables[-1].rows[-1]['t_typical_usec']
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return out


def collect(stagedir):
    """``(flows, confirmation_flows)`` of a job's stage directory."""
    stagedir = Path(stagedir)
    p = json.loads((stagedir / 'plan.json').read_text())
    flows = []
    for r in p['rounds']:
        flows += flow_records(stagedir / f'round-{r["number"]}', r['number'])
    again = []
    per_pair = 2 * len(p['rails']) if p.get('transport') == 'rdma' else 2      # round_spec's flows of a pair
    if (stagedir / DECISION).exists():
        for data in json.loads((stagedir / DECISION).read_text())['rounds']:
            r = fleet_plan.ConfirmationRound.from_json(data)
            again += [{**rec, 'round': r.label(k, per_pair)}
                      for k, rec in enumerate(flow_records(stagedir / r.name, r.name))]
    return flows, again


def no_task_ran(stagedir):
    """Why no flow of the job could have measured anything, or '': no task published itself in any round
    (``node-<i>.json``), so the tasks never reached the stage directory (one the nodes do not share) or never ran."""
    stagedir = Path(stagedir)
    if any(stagedir.glob('*/node-*.json')):
        return ''
    return (f'no task of the job ran a round (no round directory of {stagedir} holds a node-<i>.json): the stage '
            'directory must be on a filesystem the nodes share (ReFrame --prefix or --stage), and the job must '
            "have started there: see the job's output (rfm_job.out, rfm_job.err) and the scheduler's record")


def fabric_of(p):
    return fleet_plan.fabric_from_leaves(p['leaves'], p['spines'], routes=p.get('routes'))


def night_fabric(data, flows):
    """The fabric of a night (:func:`from_report`, a case's ``fleet.json``): its leaves and spines when it stored
    them, else the nodes of its ``flows`` (read flows) without a topology."""
    if isinstance(data, dict) and data.get('leaves'):
        return fleet_plan.fabric_from_leaves(data['leaves'], data.get('spines', 0), routes=data.get('routes'))
    return fleet_plan.no_topology(sorted({n for f in flows for n in (f['src'], f['dst'])}))


def analyse(flows, fabric, confirmation=(), expected=None, history=None):
    """The localiser's result for a job's flows, confirmed by its confirmation flows when there are any;
    ``history`` each component's past effects (:func:`stored_history`)."""
    result = fleet_localise.localise(fleet_localise.read_flows(flows), fabric, expected=expected, history=history)
    again = fleet_localise.read_flows(confirmation)
    if again:
        fleet_localise.confirm(result, again, fabric)
    return result


#: the history file of a case's stage directory: {metric: {component: [past effects]}} (:func:`stored_history`)
HISTORY = 'history.json'
#: nights of a component's history
HISTORY_NIGHTS = 14
#: stored pair-round nights the report reads for each component's last verification (and the noise fit)
STORED_NIGHTS = 90
#: the check whose stored sessions are the pair-round nights
NIGHT_CHECK = 'FleetPairs'


def night_reports(system=None, partition=None, *, before=None, last=HISTORY_NIGHTS, db=None, problems=None,
                  exclude=()):
    """The pair-round nights of the last ``last`` runs stored with a pair-round case on ``system`` (and
    ``partition``), started before ``before`` (unix time), oldest first, each one run report (:func:`nights_of`: a
    run stored as several sessions is one night); runs in ``exclude`` (run ids, :func:`ibrepro.results.run_id`)
    left out. Found by ReFrame's test case index (:func:`ibrepro.results.check_sessions`) and read from the newest
    back, each only its pair-round cases (:func:`ibrepro.results.pair_round_reports`: from the values index).
    Sessions that cannot be read are named in ``problems`` (ResultsError without it)."""
    from . import results
    uuids = results.check_sessions(NIGHT_CHECK, system, partition, before, db)

    def kept(reports):
        return [n for n in nights_of(reports) if results.run_id(n) not in exclude]
    if not last:
        return kept(results.pair_round_reports(uuids, db, problems=problems))
    reports, nights, end = [], [], len(uuids)
    while end > 0:
        start = max(0, end - last)
        reports = results.pair_round_reports(uuids[start:end], db, problems=problems) + reports
        nights, end = kept(reports), start
        if len(nights) > last:            # one more than asked: the oldest night asked for has all its sessions
            break
    return nights[-last:]


def nights_of(reports):
    """Run reports (oldest first) as nights: the sessions of one run (:func:`ibrepro.results.run_id`, their
    ``nightly`` extra: a CI child pipeline stores one session per test case) merged into one run report, in the
    place of its first session, with that session's ``session_info`` plus ``sessions``, every session's UUID; a
    case stored twice in a run (a confirmation re-run) is its last (:func:`ibrepro.results.testcases`)."""
    from . import results
    nights = {}
    for k, report in enumerate(reports):
        run = results.run_id(report) or f'unnamed session {k}'
        info, runs = report.get('session_info'), report.get('runs')
        info = info if isinstance(info, dict) else {}
        if run not in nights:
            nights[run] = {**report, 'session_info': {**info, 'sessions': []}, 'runs': []}
        # a night merged before keeps its sessions (the report merges, then stored_history reads the nights)
        sessions = info.get('sessions')
        nights[run]['session_info']['sessions'] += sessions if isinstance(sessions, list) else [info.get('uuid')]
        nights[run]['runs'] += [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []
    return list(nights.values())


def stored_history(reports, system, partition, nights=HISTORY_NIGHTS):
    """``({metric: {component: [effects, oldest first]}}, [the first session UUID of each night used])``: each
    component's effect per metric (mean residual, log units: :func:`ibrepro.fleet_localise.night_effects`; latency
    from RDMA nights) in the last ``nights`` pair-round nights of ``system:partition`` among ``reports`` (run
    reports, oldest first; the sessions of one run are one night, :func:`nights_of`). A night that named a
    component is left out of that component's history: a fault must not become its normal
    (:func:`ibrepro.fleet_localise.localise` takes a component's usual slowness, the median of its history, as
    its zero)."""
    found = []
    for report in nights_of(reports):
        try:
            data = from_report(report, system, partition)
        except ValueError:
            continue                       # a night whose stored variables are not what the check stores
        if data and data['flows'] and data['leaves']:
            found.append((report['session_info'].get('uuid'), data))
    history, used = {}, []
    for uuid, data in found[-nights:]:
        try:
            fabric = fleet_plan.fabric_from_leaves(data['leaves'], data['spines'], routes=data.get('routes'))
            effects = fleet_localise.night_effects(fleet_localise.read_flows(data['flows']), fabric)
        except (KeyError, TypeError, AttributeError, ValueError, ZeroDivisionError):
            continue                       # a night that cannot be judged adds nothing
        used.append(uuid)
        for metric, by_component in effects.items():
            for c, e in by_component.items():
                if c not in data['named']:     # named by either metric: the fault is no normal of either
                    history.setdefault(metric, {}).setdefault(c, []).append(e)
    return history, used


def history_before(report, db=None):
    """``(history, [session uuids])`` a stored pair-round night had: :func:`stored_history` over the pair-round
    nights of its system and partition stored before it in the results database (what the check read for it);
    ``({}, [])`` when the report has no pair-round case."""
    from . import results
    case = next((c for c in results.testcases(report) if results.PAIR_ROUND_FLOWS in c), None)
    if case is None:
        return {}, []
    start = float((report.get('session_info') or {}).get('time_start_unix') or 0)
    reports = night_reports(case.get('system'), case.get('partition'), before=start, db=db, problems=[],
                            exclude={results.run_id(report)})     # an earlier session of its own run is no history
    return stored_history(reports, case.get('system'), case.get('partition'))


def read_history(stagedir):
    """The history a case's stage directory holds (:data:`HISTORY`), or None."""
    path = Path(stagedir) / HISTORY
    return json.loads(path.read_text()) if path.exists() else None


def _stored(case, field, kind, item=None):
    """A stored case's loggable variable of type ``kind`` (of ``item``s); ValueError naming the case and field."""
    value = case.get(field)
    if value is None:
        return kind()
    if not isinstance(value, kind) or (item and not all(isinstance(x, item) for x in value)):
        raise ValueError(f"test case {case.get('name')!r}: {field} is not a {kind.__name__}"
                         + (f' of {item.__name__}' if item else '') + f' ({type(value).__name__})')
    return value


def has_night(report, system):
    """Whether the run report has a pair-round case on ``system`` (its loggable ``fleet_flows``)."""
    from . import results
    return any(results.PAIR_ROUND_FLOWS in c and c.get('system') == system for c in results.testcases(report))


def from_report(report, system=None, partition=None):
    """``{'flows', 'confirmation', 'leaves', 'spines'}`` of a ReFrame run report (``--report-file``, or a session
    stored in the results database): every pair-round case's loggable ``fleet_flows``, ``fleet_confirmation`` and
    ``fleet_fabric`` merged (the night's jobs share one fabric), ``named``, the components its ``fleet_named``
    hold, ``left_out``, the nodes its jobs left out and why (``fleet_left_out``), and ``partition``, the first such
    case's; of ``system`` (and ``partition``) when given; None when the
    report has no such case; ValueError naming the case and field when a stored variable is not of the type the
    check stores."""
    from . import results
    out = {'flows': [], 'confirmation': [], 'leaves': {}, 'spines': 0, 'routes': None, 'named': set(),
           'left_out': {}}
    found = False
    for case in results.testcases(report):
        if results.PAIR_ROUND_FLOWS not in case or system not in (None, case.get('system')) \
                or partition not in (None, case.get('partition')):
            continue
        found = True
        out['partition'] = out.get('partition') or case.get('partition')
        out['flows'] += _stored(case, results.PAIR_ROUND_FLOWS, list, dict)
        out['confirmation'] += _stored(case, 'fleet_confirmation', list, dict)
        out['named'] |= {m for n in _stored(case, 'fleet_named', list, str) for m in n.split(' = ')}
        out['left_out'].update({str(n): str(why) for n, why in _stored(case, 'fleet_left_out', dict).items()})
        fabric = _stored(case, 'fleet_fabric', dict)
        out['leaves'] = out['leaves'] or fabric.get('leaves') or {}
        if out['routes'] is None:       # the fabric's own, where the night read them ([]: read, as assumed)
            out['routes'] = fabric.get('routes')
        try:
            out['spines'] = out['spines'] or fleet_plan.spines_of(fabric.get('spines'))
        except ValueError as err:
            raise ValueError(f"test case {case.get('name')!r}: fleet_fabric {err}") from None
    out['named'] = sorted(out['named'])          # the components the night named, JSON-ready
    return out if found else None


def confirmation_plan(p, flows, history=None):
    """The confirmation rounds (:class:`ibrepro.fleet_plan.ConfirmationRound`) for the suspects of ``flows``
    (:func:`ibrepro.fleet_plan.confirmation_rounds`), and the suspects' names."""
    fabric = fabric_of(p)
    result = analyse(flows, fabric, history=history)
    hosts = fleet_localise.suspect_hosts(result.suspects, fabric)
    good = [n for n in p['nodes'] if n not in hosts]
    rounds = fleet_plan.confirmation_rounds([s.members[0] for s in result.suspects], fabric, good,
                                            flapping=[s.members[0] for s in result.suspects if s.flapping])
    return rounds, [s.name for s in result.suspects]


def node_main(plan_path, log=print):
    """One task of the job: every round, then (task 0 decides) the confirmation round. Exit status non-zero when a
    round failed on this node."""
    stagedir = Path(plan_path).resolve().parent
    p = json.loads(Path(plan_path).read_text())
    rank = pair.my_nodes({'nodes': len(p['nodes'])})[0]
    status = 0
    previous = None
    for r in p['rounds']:
        if previous:        # rounds never overlap: a node idle in a round (odd node out) must not start the next
            _wait_done(previous, len(p['nodes']), _round_timeout(previous))
        previous = stagedir / f'round-{r["number"]}'
        status |= _run_round(previous, rank, log)
    decision = stagedir / DECISION
    if not p.get('confirm'):
        if not decision.exists():
            return status
        # a confirmation job's plan: no rounds of its own, the decision written before the job (FleetConfirmation)
    elif rank == 0:
        for r in p['rounds']:
            d = stagedir / f'round-{r["number"]}'
            _wait_done(d, len(p['nodes']), _round_timeout(d))
        flows = [f for r in p['rounds'] for f in flow_records(stagedir / f'round-{r["number"]}', r['number'])]
        rounds, suspects = confirmation_plan(p, flows, read_history(stagedir))
        write_decision(stagedir, p, rounds, suspects)
        log(f'fleet rounds: suspects {suspects or "none"}; confirmation rounds '
            f'{[f"{r.name}: {list(zip(r.roles, r.pairs))}" for r in rounds] or "none"}')
    else:
        until = time.monotonic() + DECISION_TIMEOUT
        while not decision.exists():
            if time.monotonic() > until:
                log(f'fleet rounds: no confirmation decision from task 0 within {DECISION_TIMEOUT} s')
                return 1
            time.sleep(0.2)
    for r in json.loads(decision.read_text())['rounds']:
        if previous:
            _wait_done(previous, len(p['nodes']), _round_timeout(previous))
        previous = stagedir / r['name']
        status |= _run_round(previous, rank, log)
    return status


def write_decision(stagedir, p, rounds, suspects):
    """The confirmation's decision (:data:`DECISION`: its rounds and the suspects they re-test) and each of its
    rounds' directories, for the plan ``p``'s nodes."""
    stagedir = Path(stagedir)
    for r in rounds:
        write_round(stagedir / r.name, p, r.pairs)
    write_json(stagedir / DECISION, {'rounds': [r.as_json() for r in rounds], 'suspects': suspects})


def _round_timeout(d):
    """How long the others may still take once this node finished round directory ``d``: its runs' time limits,
    plus their start-up."""
    specs = [json.loads(r.read_text()) for r in (d / 'spec.json', d / LATENCY / 'spec.json') if r.exists()]
    return sum(spec['timeout'] + spec.get('connect_timeout', 60) for spec in specs)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != 'node':
        print('usage: python -m ibrepro.fleet_rounds node PLAN.json', file=sys.stderr)
        return 2
    try:
        return node_main(argv[1], log=lambda m: print(m, flush=True))
    except TimeoutError as err:         # a node that never finished a round: this one stops, saying which
        print(f'fleet rounds: {err}', file=sys.stderr, flush=True)
        return 1


if __name__ == '__main__':
    sys.exit(main())

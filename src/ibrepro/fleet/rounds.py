"""The fleet's pair rounds run for real: one Slurm job's node group of a night (:func:`ibrepro.fleet.plan.slurm_jobs`).

The ReFrame check (``reframe-checks/system/fleet_pairs.py``) writes a *plan* into its stage directory (:func:`plan`:
the job's nodes, its rounds' disjoint pairs, the fabric's leaves and spines) and starts one task per node:
``python -m ibrepro.fleet.rounds node plan.json`` (:func:`node_main`). Each task runs every round with the pair
runner (:mod:`ibrepro.pair`): both directions of each pair at once, as TCP flows of a real bandwidth tool (iperf3,
argv flows; the server's address is that of the rail's network interface, ``netdev:<if>``). When the job holds the
whole fabric (:func:`ibrepro.fleet.plan.confirmation_job_needed` is False), task 0 localises the rounds' flows and
writes the confirmation rounds for the suspects (:func:`ibrepro.fleet.plan.confirmation_rounds`), which every task
then runs. After the job, :func:`collect` reads every flow (``{round, host, device, port, peer, direction, bw}``, MB/s)
and :func:`analyse` names the components (:mod:`ibrepro.fleet.localise`).
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

from .. import pair, parsers
from ..compat import removeprefix
from . import localise as fleet_localise
from . import plan as fleet_plan
from .component import HOST_NAME

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


#: what a task imports (paths in the package): standard library only, and not sqlite3 (the results database is read
#: on the login node: :mod:`ibrepro.fleet.history`), so a compute node's own interpreter (the partition's extras
#: ``python``) runs a copy of them (:func:`copy_node_modules`) without this package installed there
NODE_MODULES = ('__init__.py', 'fleet/__init__.py', 'fleet/rounds.py', 'fleet/localise.py', 'fleet/plan.py',
                'fleet/component.py', 'pair.py', 'pcie_distance.py', 'stats.py', 'parsers', 'compat.py', '_vendor')


def copy_node_modules(dest):
    """Copy :data:`NODE_MODULES` to ``dest/ibrepro`` (``dest`` goes on the task's PYTHONPATH)."""
    package = Path(__file__).resolve().parents[1]
    target = Path(dest) / 'ibrepro'
    for name in NODE_MODULES:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        if (package / name).is_dir():
            shutil.copytree(package / name, target / name, dirs_exist_ok=True,  # novm (on the login node)
                            ignore=shutil.ignore_patterns('__pycache__'))
        else:
            shutil.copy2(package / name, target / name)


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
                 if isinstance(n, str) and HOST_NAME.fullmatch(n)]
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


def analyse(flows, fabric, confirmation=(), expected=None, history=None, alpha=None):
    """The localiser's result for a job's flows, confirmed by its confirmation flows when there are any;
    ``history`` each component's past effects (:func:`ibrepro.fleet.history.stored_history`); ``alpha`` the
    partition's calibrated level (:func:`ibrepro.fleet.localise.method_of`)."""
    result = fleet_localise.localise(fleet_localise.read_flows(flows), fabric, expected=expected, history=history,
                                     method=fleet_localise.method_of(alpha))
    again = fleet_localise.read_flows(confirmation)
    if again:
        fleet_localise.confirm(result, again, fabric)
    return result


#: the history file of a case's stage directory: {metric: {component: [past effects]}} (:func:`stored_history`)
HISTORY = 'history.json'
def read_history(stagedir):
    """The history a case's stage directory holds (:data:`HISTORY`), or None."""
    path = Path(stagedir) / HISTORY
    return json.loads(path.read_text()) if path.exists() else None


def confirmation_plan(p, flows, history=None):
    """The confirmation rounds (:class:`ibrepro.fleet.plan.ConfirmationRound`) for the suspects of ``flows``
    (:func:`ibrepro.fleet.plan.confirmation_rounds`), and the suspects' names."""
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
        print('usage: python -m ibrepro.fleet.rounds node PLAN.json', file=sys.stderr)
        return 2
    try:
        return node_main(argv[1], log=lambda m: print(m, flush=True))
    except TimeoutError as err:         # a node that never finished a round: this one stops, saying which
        print(f'fleet rounds: {err}', file=sys.stderr, flush=True)
        return 1


if __name__ == '__main__':
    sys.exit(main())

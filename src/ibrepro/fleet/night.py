"""A night of pair rounds as the check plans it on the login node: the fabric from the topology file (and the
fabric's own routes, where the site gives them), the rounds and Slurm jobs (:mod:`ibrepro.fleet.plan`), and the nodes
Slurm can give a job now (``sinfo``), the others left out with the reason."""

import json
import os
import re
import stat

from . import plan as fleet_plan


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
        from . import routes as fleet_routes
        try:
            found = fleet_routes.read(*(read_topology(os.path.join(routes_dir, name)) for name in fleet_routes.FILES))
            fabric = fleet_plan.fabric_from_routes(found)
            same = fleet_routes.same_nodes(found, leaves)
        except (OSError, ValueError, KeyError, TypeError) as err:
            return None, [], [], f'IBREPRO_FLEET_ROUTES={routes_dir!r:.200}: {err}'
        if not same:
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
    (spines 0: the leaf size, :class:`ibrepro.fleet.plan.Fabric`)."""
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

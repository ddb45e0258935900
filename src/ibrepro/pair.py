"""``ibrepro pair``: run perftest client/server flows across the nodes of one job.

perftest is a client/server pair, and the papers' verbs experiments need several pairs at once (two ports bound
to two directions, N concurrent pairs). A ReFrame check describes the *flows* in a JSON spec; this runner is
started once per node by whatever launcher the partition uses (``srun``, ``mpirun``, PBS ``mpiexec``) and
takes its node index from the launcher's rank variable. On a single node (no rank variable, or one task) one
runner plays every node, e.g. a server on device/port 1 and a client on device/port 2 of the same HCA.

Per node: start the servers of the flows it hosts, wait until they listen, publish this node's address in the
rendezvous directory (the job's stage directory, shared by the nodes), wait for the peers' addresses, start the
clients, and wait for everything, with a time limit. Every flow writes ``flow-<id>.client.out`` (what the
check parses), ``flow-<id>.server.out`` and ``flow-<id>.status.json``; a summary goes to stdout. The exit status
is non-zero if a process of this node failed or timed out.

Spec (JSON)::

    {"command": ["ib_write_bw", "-a", "-F"],          # common options; -d/-i/-p and the host are added
     "flows": [{"id": 0, "port": 18515,
                "server": {"node": 0, "device": "mlx5_0", "ib_port": 1},
                "client": {"node": 1, "device": "mlx5_0", "ib_port": 1}}],
     "addresses": [null, null],                         # how clients reach each node's servers (null: hostname)
     "node_exec": null,                                 # optional command prefix running a side on a node,
                                                        # e.g. ["guest-exec", "{node}"] for emulated nodes
     "timeout": 600}

A side may instead carry its whole command line, ``"argv": [...]`` (``{server_addr}`` is replaced by the
address the server's node published), for client/server programs other than perftest; with
``"wait_listen": false`` the runner does not wait for a TCP listener (the client retries by itself).
"""

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

#: Launcher variables that hold the rank of a task, in the order we trust them.
RANK_VARIABLES = ['SLURM_PROCID', 'PMIX_RANK', 'PMI_RANK', 'OMPI_COMM_WORLD_RANK', 'PALS_RANKID',
                  'MPI_LOCALRANKID']

#: Client output that means "the server is not listening yet": worth a retry.
_NOT_READY = ("Couldn't connect to", 'Unable to open file descriptor for socket connection',
              'Connection refused', 'Failed to establish connection')


class SpecError(ValueError):
    pass


def load_spec(path):
    try:
        spec = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise SpecError(f'{path}: {err}') from None

    if not spec.get('flows'):
        raise SpecError(f'{path}: missing \'flows\'')
    if 'command' not in spec and not all('argv' in f[side] for f in spec['flows'] for side in ('server', 'client')):
        raise SpecError(f'{path}: missing \'command\' (or an "argv" for every side)')
    spec.setdefault('command', [])
    nodes = {f[side]['node'] for f in spec['flows'] for side in ('server', 'client')}
    spec.setdefault('addresses', [None] * (max(nodes) + 1))
    spec.setdefault('timeout', 600)
    return spec


def my_nodes(spec, env=os.environ):
    """Node indices this process plays: its rank, or all of them when it is the only task."""
    nodes = sorted({f[side]['node'] for f in spec['flows'] for side in ('server', 'client')})
    for var in RANK_VARIABLES:
        if env.get(var, '').isdigit():
            ntasks = next((int(env[v]) for v in ('SLURM_NTASKS', 'PMI_SIZE', 'OMPI_COMM_WORLD_SIZE')
                           if env.get(v, '').isdigit()), None)
            if ntasks == 1:
                break
            return [int(env[var])]

    return nodes


def _listening_ports():
    ports = set()
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == '0A':      # TCP_LISTEN
                ports.add(int(fields[1].rsplit(':', 1)[1], 16))
    return ports


def _side_command(spec, flow, side, server_addr=None):
    end = flow[side]
    prefix = [arg.replace('{node}', str(end['node'])) for arg in spec.get('node_exec') or []]
    if 'argv' in end:
        return prefix + [arg.replace('{server_addr}', server_addr or '') for arg in end['argv']]

    cmd = prefix + list(spec['command'])
    if end.get('device'):
        cmd += ['-d', str(end['device'])]
    if end.get('ib_port'):
        cmd += ['-i', str(end['ib_port'])]
    cmd += ['-p', str(flow['port'])]
    if side == 'client':
        cmd.append(server_addr)
    return cmd


class Runner:
    def __init__(self, spec, workdir='.', log=print):
        self.spec = spec
        self.workdir = Path(workdir)
        self.log = log
        self.deadline = time.monotonic() + float(spec['timeout'])
        self.procs = {}        # (flow id, side) -> (Popen, output file)
        self.status = {}       # (flow id, side) -> return code or 'timeout'

    def _file(self, flow, side, suffix='out'):
        return self.workdir / f'flow-{flow["id"]}.{side}.{suffix}'

    def _start(self, flow, side, cmd):
        out = open(self._file(flow, side), 'w')
        out.write(f'# {side}: {shlex.join(cmd)}\n')
        out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir)
        self.procs[(flow['id'], side)] = (proc, out)
        self.log(f'flow {flow["id"]}: {side} started on {socket.gethostname()}: {shlex.join(cmd)}')
        return proc

    def _remaining(self):
        return max(0.0, self.deadline - time.monotonic())

    def start_servers(self, nodes):
        flows = [f for f in self.spec['flows'] if f['server']['node'] in nodes]
        for flow in flows:
            self._start(flow, 'server', _side_command(self.spec, flow, 'server'))

        # Ready when listening on the TCP port of the out-of-band exchange (rdma_cm servers listen
        # through the CM instead: give those a moment).
        waiting = {f['port'] for f in flows}
        uses_cm = '-R' in self.spec['command'] or '--rdma_cm' in self.spec['command']
        remote = bool(self.spec.get('node_exec'))     # not our /proc: clients retry instead
        if not self.spec.get('wait_listen', True):
            waiting = set()
        grace = time.monotonic() + (1.0 if uses_cm or remote else 30.0)
        while waiting and time.monotonic() < min(grace, self.deadline):
            waiting -= _listening_ports()
            for flow in flows:
                proc, _ = self.procs[(flow['id'], 'server')]
                if proc.poll() is not None:
                    self.status[(flow['id'], 'server')] = proc.returncode
                    raise RuntimeError(f'flow {flow["id"]}: server exited with {proc.returncode} before '
                                       f'a client connected (see {self._file(flow, "server")})')
            time.sleep(0.05)

    def publish(self, nodes):
        for node in nodes:
            address = self.spec['addresses'][node] or socket.gethostname()
            tmp = self.workdir / f'.node-{node}.tmp'
            tmp.write_text(address)
            tmp.rename(self.workdir / f'node-{node}.ready')

    def peer_address(self, node):
        marker = self.workdir / f'node-{node}.ready'
        while not marker.exists():
            if not self._remaining():
                raise TimeoutError(f'node {node} never published its address ({marker} missing): '
                                   'its servers did not start')
            time.sleep(0.1)
        return marker.read_text().strip()

    def run_clients(self, nodes):
        for flow in [f for f in self.spec['flows'] if f['client']['node'] in nodes]:
            address = self.peer_address(flow['server']['node'])
            self._start(flow, 'client', _side_command(self.spec, flow, 'client', address))

        for (flow_id, side), (proc, out) in list(self.procs.items()):
            if side == 'client':
                self._wait(flow_id, side, proc, out, retry=True)

    def _wait(self, flow_id, side, proc, out, retry=False):
        flow = next(f for f in self.spec['flows'] if f['id'] == flow_id)
        while True:
            try:
                rc = proc.wait(timeout=self._remaining() or 0.001)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                out.write(f'\n# ibrepro pair: {side} killed after the {self.spec["timeout"]} s time limit\n')
                out.close()
                self.status[(flow_id, side)] = 'timeout'
                return

            text = self._file(flow, side).read_text(errors='replace')
            if retry and rc and any(s in text for s in _NOT_READY) and self._remaining() > 1:
                time.sleep(0.5)   # the server is not listening yet: start the client again
                out.close()
                proc = self._start(flow, side, _side_command(
                    self.spec, flow, side, self.peer_address(flow['server']['node'])))
                out = self.procs[(flow_id, side)][1]
                continue

            out.close()
            self.status[(flow_id, side)] = rc
            return

    def wait_servers(self):
        for (flow_id, side), (proc, out) in list(self.procs.items()):
            if side == 'server':
                self._wait(flow_id, side, proc, out)

    def stop_all(self):
        """Kill what still runs (after an error); their status says so."""
        for key, (proc, out) in self.procs.items():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
                self.status.setdefault(key, 'killed')
            self.status.setdefault(key, proc.returncode)
            out.close()

    def write_status(self):
        for (flow_id, side), rc in sorted(self.status.items()):
            path = self.workdir / f'flow-{flow_id}.{side}.status.json'
            path.write_text(json.dumps({'flow': flow_id, 'side': side, 'returncode': rc,
                                        'host': socket.gethostname()}))
            self.log(f'flow {flow_id}: {side} ' + (f'{rc}' if isinstance(rc, str) else f'exit {rc}'))


def run(spec, workdir='.', nodes=None, log=print):
    """Run this node's share of the flows; return 0 if all its processes succeeded."""
    nodes = my_nodes(spec) if nodes is None else nodes
    runner = Runner(spec, workdir, log)
    program = (spec['command'] or spec['flows'][0]['server']['argv'])[0]
    if not spec.get('node_exec') and not shutil.which(program):
        log(f'ibrepro pair: {program!r} not found on PATH of {socket.gethostname()} '
            '(install perftest, or load the module / Spack view that provides it)')
        return 127

    try:
        runner.start_servers(nodes)
        runner.publish(nodes)
        runner.run_clients(nodes)
        runner.wait_servers()
    except (RuntimeError, TimeoutError) as err:
        log(f'ibrepro pair: {err}')
        runner.stop_all()
        runner.write_status()
        return 1

    runner.write_status()
    return 0 if all(rc == 0 for rc in runner.status.values()) else 1


def add_cli(subparsers):
    p = subparsers.add_parser('pair', help='run perftest client/server flows of a job (used by the checks)',
                              description=__doc__, formatter_class=__import__('argparse').RawDescriptionHelpFormatter)
    p.add_argument('spec', help='JSON spec of the flows')
    p.add_argument('--workdir', default='.', help='rendezvous and output directory (shared by the nodes)')
    p.add_argument('--nodes', type=int, nargs='+', help='node indices to play (default: from the rank)')
    p.set_defaults(func=_cli)


def _cli(args):
    try:
        spec = load_spec(args.spec)
    except SpecError as err:
        print(f'ibrepro pair: {err}', file=sys.stderr)
        return 2

    return run(spec, args.workdir, args.nodes, log=lambda msg: print(msg, flush=True))

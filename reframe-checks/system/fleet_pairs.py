"""The fleet's pair rounds: which node cable, uplink or downlink of a partition is slow, tonight (issue 28, item 2).

One case per Slurm job of the night (:func:`ibrepro.fleet_plan.slurm_jobs`): its node group, one task per node
(``--nodelist``). Inside the allocation each task runs every round of the job with the pair runner, both directions
of each disjoint pair at once: RDMA flows on every rail (``ib_write_bw -D``, then each pair's ``ib_send_lat``
alone) or TCP flows (iperf3, argv flows) over the rail's network interface; when the job holds the whole fabric,
the suspects are re-tested in the same job with known-good partners (:mod:`ibrepro.fleet_rounds`). The case fails
naming each confirmed component; every flow (src, dst, direction, round, rail, bandwidth, RDMA latency) is the
loggable variable ``fleet_flows`` of the stored session, and ``fleet.json`` in the case's
output directory is what ``ibrepro fleet analyse`` reads.

Topology: ``IBREPRO_FLEET_TOPOLOGY`` names the Slurm ``topology.conf`` (or JSON ``{leaf: [nodes]}``) the cases are
cut from; without it the check's one case is skipped saying so. Transport: ``fleet_transport`` (``-S``, or the
partition's extras), by default ``rdma`` when the partition lists ``rdma_devices`` (its rails: ``rdma_devices`` x
``ib_ports``, perftest from the programming environment), else ``tcp`` over the interface ``fleet_netdev``
(the partition's extras or ``-S fleet_netdev=<if>``; default fab0).

History: each component's effects in the partition's last ``fleet_history_nights`` (14) pair-round nights stored
in the results database (a night that named it left out) are its usual state: a cable that is always 3 % slow is
judged against that (:func:`ibrepro.fleet_localise.localise`, from 3 nights); the sessions used are
``fleet_history_from``.

    IBREPRO_FLEET_TOPOLOGY=/etc/slurm/topology.conf reframe -c reframe-checks/system/fleet_pairs.py -r
"""

import json
import os
import shlex
import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from ibrepro import fleet_localise, fleet_rounds, results
from ibrepro.rfm import pair_runner


def _night():
    path = os.environ.get('IBREPRO_FLEET_TOPOLOGY')
    if not path:
        return None, [], []
    return fleet_rounds.night(*fleet_rounds.load_topology(Path(path).read_text()))


_FABRIC, _ROUNDS, _JOBS = _night()


@rfm.simple_test
class FleetPairs(rfm.RunOnlyRegressionTest):
    descr = "the fleet's pair rounds of one Slurm job's node group: the slow component named (ibrepro fleet)"
    valid_systems = ['+fleet']
    valid_prog_environs = ['*']
    #: the night's Slurm job (None: no topology given, the case is skipped saying so)
    job_index = parameter(list(range(len(_JOBS))) or [None])
    num_tasks_per_node = 1
    exclusive_access = True
    #: a task's interpreter: this one, or the partition's extras ``python`` (the compute nodes' own, running a copy
    #: of the modules a task needs)
    executable = shlex.quote(sys.executable)
    tags = {'system', 'fleet'}

    #: ``rdma`` (perftest on each rail) or ``tcp`` (iperf3 over ``fleet_netdev``); empty: the partition's extras
    #: ``fleet_transport``, else ``rdma`` when the partition lists ``rdma_devices``, else ``tcp``
    fleet_transport = variable(str, value='')
    #: the network interface of the rail the TCP flows cross (the partition's extras ``fleet_netdev`` when it has one)
    fleet_netdev = variable(str, value='fab0')
    #: seconds per flow
    fleet_seconds = variable(int, value=fleet_rounds.SECONDS)
    #: every flow of the case: {round, host, device, port, peer, direction, bw (MB/s)} (set after the run)
    fleet_flows = variable(typ.List[dict], value=[], loggable=True)
    #: the confirmation round's flows
    fleet_confirmation = variable(typ.List[dict], value=[], loggable=True)
    #: the fabric the flows were localised on: {leaves: {leaf: [nodes]}, spines: k}
    fleet_fabric = variable(dict, value={}, loggable=True)
    #: the components named (confirmed suspects)
    fleet_named = variable(typ.List[str], value=[], loggable=True)
    #: past pair-round nights of this partition that give each component its history (0: none)
    fleet_history_nights = variable(int, value=fleet_rounds.HISTORY_NIGHTS)
    #: the stored sessions (UUIDs) the components' history came from
    fleet_history_from = variable(typ.List[str], value=[], loggable=True)
    #: why the stored history could not be read (sessions left out), for the record
    fleet_history_problems = variable(typ.List[str], value=[], loggable=True)

    @run_after('setup')
    def need_topology(self):
        self.skip_if(self.job_index is None, 'no topology: IBREPRO_FLEET_TOPOLOGY names no Slurm topology.conf '
                                             '(the pair rounds are cut by leaf)')

    @run_before('run')
    def write_plan(self):
        job = _JOBS[self.job_index]
        extras = self.current_partition.extras
        self.fleet_netdev = extras.get('fleet_netdev', self.fleet_netdev)
        self.fleet_transport = self.fleet_transport or extras.get('fleet_transport') or \
            ('rdma' if extras.get('rdma_devices') else 'tcp')
        if self.fleet_transport not in ('rdma', 'tcp'):
            raise SanityError(f'fleet_transport {self.fleet_transport!r}: expected rdma or tcp')
        rails = pair_runner.rails(self.current_partition) if self.fleet_transport == 'rdma' else None
        names = [*job['nodes'], self.fleet_netdev, *(d for d, _ in rails or () if d)]
        if not all(shlex.quote(str(n)) == str(n) for n in names):
            raise SanityError(f'refusing node, device or interface names with shell syntax: {names}')
        plan = fleet_rounds.plan(_FABRIC, _ROUNDS, job, netdev=self.fleet_netdev, seconds=self.fleet_seconds,
                                 rails=rails, cpu_sharing=bool(extras.get('emulated')),
                                 perftest_options=extras.get('perftest_options', ()))
        fleet_rounds.prepare(self.stagedir, plan)
        self.write_history()
        self.num_tasks = len(plan['nodes'])
        self.job.options += [f'--nodelist={",".join(plan["nodes"])}']
        # each round (and the confirmation): its flows' seconds and start-up, RDMA also its latency run
        per_round = 12 * self.fleet_seconds + (12 * 2 * fleet_rounds.PERFTEST_MARGIN + 60 if rails else 0)
        self.job.time_limit = 60 + per_round * (len(plan['rounds']) + 1)
        self.executable_opts = ['-m', 'ibrepro.fleet_rounds', 'node', 'plan.json']
        if extras.get('python'):
            # the compute nodes' own interpreter: the modules a task needs (standard library only), copied
            fleet_rounds.copy_node_modules(Path(self.stagedir) / 'pylib')
            self.executable = shlex.quote(extras['python'])
            self.env_vars['PYTHONPATH'] = shlex.quote(str(Path(self.stagedir) / 'pylib'))

    def write_history(self):
        """Each component's effects in the partition's last pair-round nights stored in the results database
        (:func:`ibrepro.fleet_rounds.stored_history`), as the stage directory's history file: task 0 and the
        sanity read it. Read on the login node; the compute nodes need no database."""
        if self.fleet_history_nights <= 0:
            return
        problems = []
        try:
            # a night's sessions hold other checks too: look back over several times as many sessions
            reports = results.stored_sessions(last=fleet_rounds.HISTORY_SESSIONS * self.fleet_history_nights
                                              // fleet_rounds.HISTORY_NIGHTS, problems=problems)
        except (OSError, results.ResultsError) as err:    # no database yet: no history
            reports, problems = [], [str(err)]
        history, used = fleet_rounds.stored_history(reports, self.current_system.name,
                                                    self.current_partition.name, self.fleet_history_nights)
        self.fleet_history_from, self.fleet_history_problems = used, problems[:10]
        fleet_rounds.write_json(Path(self.stagedir) / fleet_rounds.HISTORY, history)

    @run_after('setup')
    def once_per_partition(self):
        first = self.current_partition.environs[0].name
        self.skip_if(self.current_environ.name != first, f'run once per partition, in environment {first}')

    @sanity_function
    def localised(self):
        flows, again = fleet_rounds.collect(self.stagedir)
        plan = json.loads((Path(self.stagedir) / 'plan.json').read_text())
        failed = [f for f in flows + again if 'bw' not in f]
        self.fleet_flows, self.fleet_confirmation = flows, again
        self.fleet_fabric = {'leaves': plan['leaves'], 'spines': plan['spines']}
        if failed:
            raise SanityError(f'{len(failed)} flow(s) measured nothing: ' + '; '.join(
                f"round {f['round']} {f['host']}->{f['peer']}: {f.get('error')}" for f in failed[:4]))
        history = fleet_rounds.read_history(self.stagedir)
        result = fleet_rounds.analyse(flows, fleet_rounds.fabric_of(plan), again, history=history)
        self.fleet_named = [s.name for s in result.named]
        out = {'leaves': plan['leaves'], 'spines': plan['spines'], 'flows': flows, 'confirmation': again,
               'history_from': self.fleet_history_from, 'result': fleet_localise.as_json(result)}
        (Path(self.stagedir) / 'fleet.json').write_text(json.dumps(out, indent=1, default=list) + '\n')
        self.keep_files = ['fleet.json', 'plan.json', fleet_rounds.HISTORY]
        if result.named:
            raise SanityError(f'{len(result.named)} component(s) slow: ' + '; '.join(
                f'{s.name}: {s.effect:+.1%} over {len(s.flows)} flow(s), q={s.q:.2g}, confirmed by '
                f'{len(s.confirmation)} flow(s)' for s in result.named))
        return True

"""The fleet's pair rounds: which node cable, uplink or downlink of a partition is slow, tonight (issue 28, item 2).

One case per Slurm job of the night (:func:`ibrepro.fleet.plan.slurm_jobs`): its node group, one task per node
(``--nodelist``). Inside the allocation each task runs every round of the job with the pair runner, both directions
of each disjoint pair at once: RDMA flows on every rail (``ib_write_bw -D``, then each pair's ``ib_send_lat``
alone) or TCP flows (iperf3, argv flows) over the rail's network interface; when the job holds the whole fabric,
the suspects are re-tested in the same job with known-good partners (:mod:`ibrepro.fleet.rounds`) and the case
fails naming each confirmed component, by bandwidth or (RDMA) by latency. A night of several jobs (more nodes than
``IBREPRO_FLEET_JOB_NODES``, 16) has one more case, ``FleetConfirmation``: after every pair-round case (ReFrame
dependencies) it localises the night's flows together, re-tests the suspects in a job of their own and fails
naming the confirmed ones (the pair-round cases then name nothing themselves). Every flow (src, dst, direction,
round, rail, bandwidth, RDMA latency) is the loggable variable ``fleet_flows`` of the stored session, and
``fleet.json`` in the case's output directory is what ``ibrepro fleet analyse`` reads.

Topology: ``IBREPRO_FLEET_TOPOLOGY`` names the Slurm ``topology.conf`` (or JSON ``{leaf: [nodes]}``) the cases are
cut from; without it the check's one case is skipped saying so (and fails saying why when it cannot be read).
Routing: destination-mod-k over its order, unless ``IBREPRO_FLEET_ROUTES`` names a directory with the fabric's own
tables, ``ibnetdiscover.txt`` and ``dump_lfts.txt`` (infiniband-diags; a site refreshes them, e.g. from cron on a
node with the fabric's management port): then the leaves in port order and the routes they give, stored with the
night (``fleet_fabric``: ``routes``) so its report judges it on them (:mod:`ibrepro.fleet.routes`).
Transport: ``fleet_transport`` (``-S``, or the partition's extras), by default ``rdma`` when the partition lists
``rdma_devices`` (its rails: ``rdma_devices`` x ``ib_ports``, perftest from the programming environment), else
``tcp`` over the interface ``fleet_netdev`` (the partition's extras or ``-S fleet_netdev=<if>``; default fab0).

History: each component's effects in the partition's last ``fleet_history_nights`` (14) pair-round nights stored
in the results database (a night that named it left out) are its usual state: a cable that is always 3 % slow is
judged against that (:func:`ibrepro.fleet.localise.localise`, from 3 nights); the sessions used are
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

from ibrepro import results

from ibrepro.fleet import localise as fleet_localise

from ibrepro.fleet import plan as fleet_plan

from ibrepro.fleet import rounds as fleet_rounds

from ibrepro.fleet import night as fleet_night

from ibrepro.fleet import history as fleet_history
from ibrepro.rfm import launch, pair_runner


#: the night's plan, or why the environment gives none (its one case then fails saying so)
_FABRIC, _ROUNDS, _JOBS, _PROBLEM = fleet_night.night_from_environment(os.environ)
#: a night of several jobs: one more job, after them all, re-tests the night's suspects (FleetConfirmation)
_CONFIRMATION_JOB = bool(_JOBS) and fleet_plan.confirmation_job_needed(_FABRIC, _JOBS)


class FleetNight(rfm.RunOnlyRegressionTest, launch.Placement):
    """What the night's jobs share: the transport and rails, the history, the task's interpreter and launch; its
    cases run once per partition (in its first environment), one task per node of a node group."""
    valid_systems = ['+fleet']
    valid_prog_environs = ['*']
    num_tasks_per_node = 1
    #: no MPI here: the flows' rails are the plan's (each side pinned near its rail's device)
    one_rail = False
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
    fleet_history_nights = variable(int, value=fleet_history.HISTORY_NIGHTS)
    #: the stored nights the components' history came from, each its first session's UUID
    fleet_history_from = variable(typ.List[str], value=[], loggable=True)
    #: why the stored history could not be read (sessions left out), for the record
    fleet_history_problems = variable(typ.List[str], value=[], loggable=True)
    #: the job's nodes left out tonight and why: not in the Slurm partition, or in a state that runs no job (sinfo)
    fleet_left_out = variable(typ.Dict[str, str], value={}, loggable=True)

    @run_after('setup')
    def once_per_partition(self):
        first = self.current_partition.environs[0].name
        self.skip_if(self.current_environ.name != first, f'run once per partition, in environment {first}')

    def night_plan(self, job):
        """The plan of ``job`` (``{'nodes', 'rounds'}``) with the partition's transport and rails."""
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
        return fleet_rounds.plan(_FABRIC, _ROUNDS, job, netdev=self.fleet_netdev, seconds=self.fleet_seconds,
                                 rails=rails, cpu_sharing=bool(extras.get('emulated')),
                                 perftest_options=extras.get('perftest_options', ()))

    def runnable(self, plan):
        """``plan`` without the nodes Slurm cannot give its job now (:func:`ibrepro.fleet.night.left_out`: not in
        the partition's Slurm partition, drained, down, not responding, ...), recorded in ``fleet_left_out``; the
        fabric keeps them, so every other node's route is the one planned. A dry run asks Slurm nothing."""
        if self.is_dry_run() or self.current_partition.scheduler.registered_name not in ('slurm', 'squeue'):
            return plan
        partition = self.current_partition.extras.get('slurm_partition')
        try:
            states = fleet_night.node_states(partition)
        except (OSError, ValueError) as err:
            raise SanityError(f'cannot ask Slurm which nodes can run tonight: {err}') from None
        plan = fleet_night.without(plan, fleet_night.left_out(plan['nodes'], states, partition))
        self.fleet_left_out = {**self.fleet_left_out, **plan.get('left_out', {})}
        return plan

    def launch_plan(self, plan, rounds):
        """One task per node of ``plan`` running ``rounds`` rounds (the confirmation's included)."""
        extras = self.current_partition.extras
        self.num_tasks = len(plan['nodes'])
        self.job.options += [f'--nodelist={",".join(plan["nodes"])}']
        # as the pair runner's steps: the task sees its node's CPUs (--whole, no -c: under ConstrainCores a step
        # would otherwise get one CPU, and an RDMA round runs a client and a server per rail), it pins each side.
        # No --kill-on-bad-exit: a node whose flow failed still finishes (its rounds are bounded), the others' later
        # rounds are kept
        if self.job.launcher.registered_name == 'srunalloc':
            self.exclusive_access = False      # a step in the nightly's allocation: --exclusive there means --exact
        self.apply_launch_policy(tasks_per_node=1, bind=False)
        # each round: its flows' seconds and start-up, RDMA also its latency run
        per_round = 12 * self.fleet_seconds + (12 * 2 * fleet_rounds.PERFTEST_MARGIN + 60
                                               if plan.get('transport') == 'rdma' else 0)
        self.job.time_limit = 60 + per_round * rounds
        self.executable_opts = ['-m', 'ibrepro.fleet.rounds', 'node', 'plan.json']
        if extras.get('python'):
            # the compute nodes' own interpreter: the modules a task needs (standard library only), copied
            fleet_rounds.copy_node_modules(Path(self.stagedir) / 'pylib')
            self.executable = shlex.quote(extras['python'])
            self.env_vars['PYTHONPATH'] = shlex.quote(str(Path(self.stagedir) / 'pylib'))

    def write_history(self):
        """Each component's effects in the partition's last pair-round nights stored in the results database
        (:func:`ibrepro.fleet.history.stored_history`), as the stage directory's history file: task 0 and the
        sanity read it. Read on the login node; the compute nodes need no database."""
        if self.fleet_history_nights <= 0:
            return
        problems = []
        try:
            # a night stored as several sessions (a CI child pipeline's): its sessions stored so far are no history
            reports = fleet_history.night_reports(self.current_system.name, self.current_partition.name,
                                                 last=self.fleet_history_nights, problems=problems,
                                                 exclude={os.environ.get('IBREPRO_NIGHTLY')})
        except (OSError, results.ResultsError) as err:    # no database yet: no history
            reports, problems = [], [str(err)]
        history, used = fleet_history.stored_history(reports, self.current_system.name,
                                                    self.current_partition.name, self.fleet_history_nights)
        self.fleet_history_from, self.fleet_history_problems = used, problems[:10]
        fleet_rounds.write_json(Path(self.stagedir) / fleet_rounds.HISTORY, history)

    def refuse_misplaced(self):
        """SanityError when the job ran outside its partition's Slurm partition or account (its first lines)."""
        stderr = Path(self.stagedir) / self.stderr.evaluate()
        if wrong_place := launch.misplaced(stderr.read_text(errors='replace') if stderr.exists() else ''):
            raise SanityError(wrong_place)

    def judge(self, flows, again, plan, *, name=True):
        """Fail on flows that measured nothing; localise ``flows`` (confirmed by ``again``) and write fleet.json;
        with ``name``, fail naming the components confirmed."""
        failed = [f for f in flows + again if 'bw' not in f]
        alpha = self.current_partition.extras.get('fleet_alpha')     # its level, calibrated (ibrepro fleet calibrate)
        try:
            fleet_localise.method_of(alpha)
        except ValueError as err:
            raise SanityError(f"the partition's extras fleet_alpha: {err}") from None
        self.fleet_fabric = {'leaves': plan['leaves'], 'spines': plan['spines'], **(
            {'routes': plan['routes']} if plan.get('routes') is not None else {}), **(
            {'alpha': alpha} if alpha is not None else {})}
        if failed:
            if why := fleet_rounds.no_task_ran(self.stagedir):
                raise SanityError(why)
            raise SanityError(f'{len(failed)} flow(s) measured nothing: ' + '; '.join(
                f"round {f['round']} {f['host']}->{f['peer']}: {f.get('error')}" for f in failed[:4]))
        history = fleet_rounds.read_history(self.stagedir)
        fabric = fleet_rounds.fabric_of(plan)
        result = fleet_rounds.analyse(flows, fabric, again, history=history, alpha=alpha)
        self.fleet_named = [s.name for s in result.named] if name else []
        out = {'leaves': plan['leaves'], 'spines': plan['spines'], 'routes': plan.get('routes'),
               'left_out': plan.get('left_out', {}), 'alpha': alpha,
               'flows': flows, 'confirmation': again,
               'history_from': self.fleet_history_from, 'result': fleet_localise.as_json(result, fabric)}
        (Path(self.stagedir) / 'fleet.json').write_text(json.dumps(out, indent=1, default=list) + '\n')
        self.keep_files = ['fleet.json', 'plan.json', fleet_rounds.HISTORY]
        if self.fleet_named:
            raise SanityError(f'{len(result.named)} component(s) slow: ' + '; '.join(
                f'{s.name}: {s.change} over {len(s.flows)} flow(s), {s.singled_out}, confirmed by '
                f'{len(s.confirmation)} flow(s)' for s in result.named))
        return True


@rfm.simple_test
class FleetPairs(FleetNight):
    descr = "the fleet's pair rounds of one Slurm job's node group: the slow component named (ibrepro fleet)"
    #: the night's Slurm job (None: no topology given, the case is skipped saying so)
    job_index = parameter(list(range(len(_JOBS))) or [None])

    @run_after('setup')
    def need_topology(self):
        if _PROBLEM:
            raise SanityError(_PROBLEM)
        self.skip_if(self.job_index is None, 'no topology: IBREPRO_FLEET_TOPOLOGY names no Slurm topology.conf '
                                             '(the pair rounds are cut by leaf)')

    @run_before('run')
    def write_plan(self):
        plan = self.runnable(self.night_plan(_JOBS[self.job_index]))
        self.skip_if(not any(r['pairs'] for r in plan['rounds']), 'no pair of this job can run tonight, nodes left '
                     'out: ' + '; '.join(f'{n}: {why}' for n, why in sorted(self.fleet_left_out.items())))
        fleet_rounds.prepare(self.stagedir, plan)
        self.write_history()
        # its rounds and its confirmation's: one, and a flapping suspect's repeats (fleet_plan.FLAP_REPEATS)
        self.launch_plan(plan, len(plan['rounds']) + fleet_plan.FLAP_REPEATS)

    @sanity_function
    def localised(self):
        self.refuse_misplaced()
        flows, again = fleet_rounds.collect(self.stagedir)
        self.fleet_flows, self.fleet_confirmation = flows, again
        plan = json.loads((Path(self.stagedir) / 'plan.json').read_text())
        # a job that holds every node confirmed its suspects and names them; a night of several jobs leaves that
        # to FleetConfirmation, which sees every job's flows
        return self.judge(flows, again, plan, name=plan['confirm'])


class FleetConfirmation(FleetNight):
    """The confirmation job of a night of several jobs (issue 28, item 4): after every pair-round job of the night
    (ReFrame dependencies), the night's flows are localised together and the suspects re-tested in one job, each
    with known-good partners (:func:`ibrepro.fleet.rounds.confirmation_plan`, as a job holding every node does
    itself); the case fails naming the components whose re-run flows are slow again. Its ``fleet_flows`` stay
    empty (the pair-round cases store the night's flows), its ``fleet_confirmation`` holds the re-run flows."""
    descr = "the fleet's confirmation job: the night's suspects re-tested with known-good partners (ibrepro fleet)"

    @run_after('init')
    def after_every_job(self):
        for i in range(len(_JOBS)):
            self.depends_on(FleetPairs.variant_name(i))

    def night_flows(self):
        """The flows every pair-round case of the night recorded (its fleet.json)."""
        flows = []
        for i in range(len(_JOBS)):
            dep = self.getdep(FleetPairs.variant_name(i))
            found = [Path(d) / 'fleet.json' for d in (dep.stagedir, dep.outputdir) if d]
            path = next((f for f in found if f.exists()), None)
            if path is None and self.is_dry_run():
                continue                  # nothing ran: the job is generated for the night without suspects
            if path is None:
                raise SanityError(f'{dep.display_name}: no fleet.json (its flows) in {dep.stagedir}')
            flows += json.loads(path.read_text())['flows']
        return flows

    @run_before('run')
    def write_plan(self):
        flows = self.night_flows()
        fleet_rounds.write_json(Path(self.stagedir) / 'night-flows.json', flows)
        self.write_history()
        whole = self.runnable(self.night_plan({'nodes': _FABRIC.nodes, 'rounds': []}))
        rounds, suspects = fleet_rounds.confirmation_plan(whole, flows, fleet_rounds.read_history(self.stagedir))
        self.skip_if(not suspects, 'no suspects tonight: nothing to confirm')
        if not rounds:
            raise SanityError(f'{len(suspects)} suspect(s) and no known-good partner to re-test them: '
                              + '; '.join(suspects))
        nodes = sorted({n for r in rounds for p in r.pairs for n in p})
        plan = {**self.night_plan({'nodes': nodes, 'rounds': []}), 'confirm': False}
        fleet_rounds.prepare(self.stagedir, plan)
        fleet_rounds.write_decision(self.stagedir, plan, rounds, suspects)
        self.launch_plan(plan, len(rounds))

    @sanity_function
    def confirmed(self):
        self.refuse_misplaced()
        _, again = fleet_rounds.collect(self.stagedir)
        self.fleet_confirmation = again
        flows = json.loads((Path(self.stagedir) / 'night-flows.json').read_text())
        plan = json.loads((Path(self.stagedir) / 'plan.json').read_text())
        return self.judge(flows, again, plan)


if _CONFIRMATION_JOB:
    rfm.simple_test(FleetConfirmation)

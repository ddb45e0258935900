"""``ibrepro fleet``: the sweep's node and judge commands, the night's analysis, its simulation and its
verdict (each subcommand imports what it needs: ``fleet node`` runs on a compute node's own Python)."""

import argparse
import json
import sys
from pathlib import Path

from .. import topology as ibtopology
from .. import trust
from . import sweep as fleet_sweep
from .world import ROUTINGS


# -- command line ------------------------------------------------------------------------------

def add_cli(subparsers):
    p = subparsers.add_parser('fleet', help='the state of every node of a partition: what is degraded, where',
                              description=fleet_sweep.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='fleet_command')
    sub.required = True         # not add_subparsers(required=...): 3.7, and `fleet node` runs on a node's 3.6
    node = sub.add_parser('node', help="print this node's state as one JSON line (what a sweep's task runs)")
    node.add_argument('--sysfs', default=str(ibtopology.SYSFS), metavar='ROOT', help='sysfs root (default /sys)')
    node.set_defaults(func=_cli_node)
    judge_ = sub.add_parser('sweep', help='judge the node lines of a sweep (files of `ibrepro fleet node` lines)')
    judge_.add_argument('files', nargs='+', help='files holding one JSON line per node')
    judge_.add_argument('--expected', metavar='JSON', default='{}',
                        help="the partition's expectations: rdma_devices, ib_ports, expected_port, hca_numa_node, "
                             "gpu_hca_distance")
    judge_.add_argument('--json', metavar='OUT', help='write the result here (what `fleet verdict` reads)')
    judge_.set_defaults(func=_cli_sweep)
    _add_pair_round_cli(sub)
    verdict = sub.add_parser('verdict', help="the night's verdict file (for the NHC check) and drain list, from a "
                                             "sweep's and an analysis's JSON")
    verdict.add_argument('--sweep', metavar='JSON', help='`ibrepro fleet sweep --json` output')
    verdict.add_argument('--analysis', metavar='JSON', help='`ibrepro fleet analyse --json` output')
    verdict.add_argument('--night', default='', help="the night's id (written into the file)")
    verdict.add_argument('--out', metavar='FILE', required=True,
                         help='the verdict file scripts/nhc/ibrepro_fleet.nhc reads (written atomically)')
    verdict.add_argument('--apply', action='store_true', help='drain the bad nodes (scontrol update ... DRAIN); '
                                                              'without it the commands are only printed')
    verdict.set_defaults(func=_cli_verdict)


def _cli_node(args):
    print(fleet_sweep.node_line(args.sysfs))
    return 0


def _cli_sweep(args):
    texts = []
    for name in args.files:
        try:
            texts.append((name, Path(name).read_text(errors='replace')))
        except OSError as err:
            print(f'ibrepro fleet: {name}: cannot read: {err.strerror}', file=sys.stderr)
            return 2
    try:
        expected = json.loads(args.expected)
    except ValueError as err:
        print(f'ibrepro fleet: --expected: not JSON: {err}', file=sys.stderr)
        return 2
    states, problems = fleet_sweep.read_lines(texts)
    for problem in problems:
        print(f'ibrepro fleet: {problem}', file=sys.stderr)
    if not states:
        print('ibrepro fleet: no node state read', file=sys.stderr)
        return 2
    result = fleet_sweep.sweep(states, expected if isinstance(expected, dict) else {})
    for f in result['faults']:
        print(f"FAULT {f['component']}: {f['fault']}: {f['evidence']}")
    for line in result['skipped']:
        print(f'not judged: {line}')
    print(f"{result['nodes']} node(s), {len(result['faults'])} fault(s)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + '\n')
    return 1 if result['faults'] or problems else 0


def _cli_verdict(args):
    from . import drain as fleet_drain
    if not (args.sweep or args.analysis):
        print('ibrepro fleet verdict: give --sweep and/or --analysis (nothing to judge)', file=sys.stderr)
        return 2
    try:
        inputs = [json.loads(Path(p).read_text()) if p else None for p in (args.sweep, args.analysis)]
        if not all(x is None or isinstance(x, dict) for x in inputs):
            raise ValueError('not a JSON object')
        bad, links, untested = fleet_drain.findings(*inputs)
    except (OSError, ValueError) as err:      # VerdictError is a ValueError: a node name that is no host name
        print(f'ibrepro fleet verdict: {err}', file=sys.stderr)
        return 2
    out = Path(args.out)
    try:   # a node reading the file sees the old verdict or the new one, never half of one; nodes read it: 0644
        trust.write_file(out, fleet_drain.verdict_text(bad, links, args.night, untested=untested), mode=0o644,
                         name='--out')
    except (trust.Refused, OSError) as err:    # before any node is drained
        print(f'ibrepro fleet verdict: {err}', file=sys.stderr)
        return 2
    print(f'{out}: {len(bad)} bad node(s), {len(links)} switch link(s), {len(untested)} finding(s) not drained')
    for component, why in links:
        print(f'switch link (drains no node): {why}')
    for component, why in untested:
        print(f'not drained: {why}')
    commands = fleet_drain.drain_commands(bad)
    for argv in commands:
        print(('draining: ' if args.apply else 'to drain: ') + fleet_drain.printable(argv))
    failed = 0
    if args.apply:
        for argv, status, err in fleet_drain.apply(commands):
            if status:
                failed += 1
                print(f'ibrepro fleet verdict: {fleet_drain.printable(argv)}: exit {status}: {err}', file=sys.stderr)
    # findings that drain nothing (not re-tested, outside the fabric): the night could not judge them
    return 2 if failed else (1 if bad or links else 2 if untested else 0)


#: the localiser's default naming level (ibrepro.fleet.localise.Method.alpha; said in the help without importing it)
_DEFAULT_ALPHA = 0.01


# -- pair rounds: analyse and simulate (ibrepro.fleet.plan, .localise, .simulate) ---------------------------

def _add_pair_round_cli(sub):
    analyse = sub.add_parser('analyse', help="name the components that made a night's pair-round flows slow")
    analyse.add_argument('flows', nargs='?',
                         help='JSON: a list of flow records (round, host, device, port, peer, direction '
                              "'send'/'recv', bw, optional lat), {'flows': [...]} (a pair-round case's fleet.json), "
                              'or a ReFrame run report of the pair-round check')
    analyse.add_argument('--session', metavar='UUID',
                         help="the pair-round check's session stored in ReFrame's results database, judged with "
                              'the history it had (the pair-round nights stored before it)')
    analyse.add_argument('--topology', metavar='FILE',
                         help="Slurm topology.conf, or JSON {leaf: [nodes]}; without it: 'no topology: "
                              "localised to node'")
    analyse.add_argument('--expected', type=float, metavar='MBPS', help="the partition's expected bandwidth")
    analyse.add_argument('--confirmation', metavar='JSON', help="the confirmation run's flow records")
    analyse.add_argument('--alpha', type=float, metavar='LEVEL',
                         help="the naming level (default: the night's own, its partition's fleet_alpha, else "
                              f'{_DEFAULT_ALPHA})')
    analyse.add_argument('--json', metavar='OUT', help='write the result here')
    analyse.set_defaults(func=_cli_analyse)
    sim = sub.add_parser('simulate', help='the pair rounds, localiser and confirmation on a simulated fat tree, '
                                          'with ClusterKit-like and LinkTest-like baselines (simulated figures)')
    sim.add_argument('--nodes', type=int, required=True)
    sim.add_argument('--nights', type=int, default=200, help='nights with one injected fault (default 200)')
    sim.add_argument('--fault-free-nights', type=int, default=20)
    sim.add_argument('--fault', default='random:10%',
                     help='random:<loss>%% (a bandwidth fault of a random kind, default random:10%%), '
                          'switch:<loss>%% (a whole leaf switch), spine:<loss>%% (a whole spine switch) or '
                          'latency:<increase>%%')
    sim.add_argument('--faults', type=int, default=1, metavar='K', help='faults per fault night (default 1)')
    sim.add_argument('--flap', type=float, default=1.0, metavar='P',
                     help='a fault is present in each round with probability P, drawn per round (default 1: '
                          'always; 0.5: flapping)')
    sim.add_argument('--seed', type=int, default=0)
    sim.add_argument('--leaf-size', type=int, default=16)
    sim.add_argument('--spines', type=int, default=0, help='default: the leaf size (non-blocking)')
    sim.add_argument('--link-capacity', type=float, default=None, metavar='MBPS',
                     help='every link, each direction (default 25000: 4x HDR nominal)')
    sim.add_argument('--noise-cv', type=float, default=None,
                     help='CV of the lognormal noise of a flow (default without --noise-from: the modelled 0.01)')
    sim.add_argument('--noise-from', nargs='*', metavar='REPORT', default=None,
                     help="draw each flow's noise from the residuals of the fault-free pair-round nights stored in "
                          'the results database, or in these ReFrame run reports (each flow against its round\'s '
                          'median that night: the tails the fabric has)')
    sim.add_argument('--tail', metavar='P:EFFECT', help='besides, a share P of flows lose EFFECT (e.g. 0.2%%:30%%)')
    sim.add_argument('--leaf-noise', type=float, default=0.0, metavar='CV',
                     help='per night, a lognormal factor of this CV per leaf on every flow touching it')
    sim.add_argument('--round-noise', type=float, default=0.0, metavar='CV',
                     help='per round, a lognormal factor of this CV per leaf on every flow touching it')
    sim.add_argument('--routing', default='plan', choices=ROUTINGS,
                     help="the fabric's real routing: the plan's destination-mod-k (default), a permuted LFT, or "
                          'ideal adaptive routing')
    sim.add_argument('--oversubscription', type=float, default=1.0, metavar='R',
                     help="the leaves' up:down ratio R: 1 (non-blocking, default); the plan reads only the spines")
    sim.add_argument('--latency-cv', type=float, default=None,
                     help="simulate each pair's latency with this CV (default with a latency fault: the "
                          "modelled 0.02; else none)")
    sim.add_argument('--linktest-min', type=float, default=0.95, help="LinkTest-like minimum, x link capacity")
    sim.add_argument('--no-baselines', action='store_true')
    sim.add_argument('--json', metavar='OUT')
    sim.set_defaults(func=_cli_simulate)
    routes = sub.add_parser('routes', help="read the fabric's own routing (ibnetdiscover, dump_fts) into the "
                                           'directory IBREPRO_FLEET_ROUTES names: what a night plans on')
    routes.add_argument('--collect', metavar='DIR', required=True,
                        help='write ibnetdiscover.txt and dump_lfts.txt here, each atomically, once both are read '
                             '(a failure leaves what is there)')
    routes.add_argument('--topology', metavar='FILE',
                        help="the partition's topology.conf: check the fabric has its nodes, say where the routes "
                             'differ from destination-mod-k over its order')
    routes.add_argument('--timeout', type=int, default=300, metavar='S', help='per command (default 300)')
    routes.set_defaults(func=_cli_routes)
    cal = sub.add_parser('calibrate', help="the partition's naming level (fleet_alpha), calibrated by replaying its "
                                           'stored fault-free nights to a stated false-name rate (simulated)')
    cal.add_argument('--noise-from', nargs='*', metavar='REPORT', default=[],
                     help="ReFrame run reports of the partition's pair-round nights (default: the results "
                          'database\'s): the noise replayed is drawn from their fault-free nights')
    where = cal.add_mutually_exclusive_group(required=True)
    where.add_argument('--topology', metavar='FILE', help="the partition's topology.conf or JSON {leaf: [nodes]}")
    where.add_argument('--nodes', type=int, help='a fat tree of this many nodes instead (--leaf-size per leaf)')
    cal.add_argument('--leaf-size', type=int, default=16)
    cal.add_argument('--nights', type=int, default=200, help='fault-free nights replayed per level (default 200)')
    cal.add_argument('--fault-nights', type=int, default=50,
                     help='nights with one random fault besides, for what each level detects (default 50)')
    cal.add_argument('--fault', default='random:10%', help='their fault (default random:10%%)')
    cal.add_argument('--alphas', help='the levels replayed, comma-separated (default 0.001 ... 0.05: '
                                      'ibrepro.fleet.simulate.CALIBRATION_ALPHAS)')
    cal.add_argument('--target', type=float, metavar='RATE',
                     help='false names a night, 95 %% upper bound, at most (default 1/30: one wrong component in '
                          '30 nights)')
    cal.add_argument('--seed', type=int, default=0)
    cal.add_argument('--json', metavar='OUT')
    cal.set_defaults(func=_cli_calibrate)


def _noise_reports(paths):
    """The run reports ``--noise-from`` names, or without paths the sessions stored in the results database (the
    pair-round nights of the last :data:`ibrepro.fleet.history.STORED_NIGHTS`)."""
    from . import history as fleet_history
    if not paths:
        return fleet_history.night_reports(last=fleet_history.STORED_NIGHTS, problems=[])
    reports = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except ValueError as err:
            raise ValueError(f'{path}: not JSON ({err})') from None
        if not isinstance(data, dict) or not isinstance(data.get('runs'), list):
            raise ValueError(f'{path}: not a ReFrame run report (no "runs")')
        reports.append(data)
    return reports


def _stored_noise(paths):
    """``(residuals, robust scale, where they come from)`` of the fault-free pair-round nights in the run reports
    ``paths`` (none: the results database); ValueError when they hold none to draw from."""
    from . import simulate as fleet_simulate
    residuals, nights = fleet_simulate.stored_residuals(_noise_reports(paths))
    where = f'{len(paths)} run report(s)' if paths else 'the results database'
    if not residuals:
        raise ValueError(f'{where} hold(s) no fault-free pair-round night with a round of 4 flows or more')
    cv = fleet_simulate.robust_scale(residuals)
    return residuals, cv, (f'drawn from {len(residuals)} residuals of {nights} fault-free pair-round night(s) in '
                           f'{where} (robust scale {cv:.4f})')


def _load_topology(path):
    """(leaves, spines) of a topology.conf or JSON file (:func:`ibrepro.fleet.night.load_topology`)."""
    from . import night as fleet_night
    return fleet_night.load_topology(Path(path).read_text())


def _cli_analyse(args):
    from .. import paths, results
    from . import history as fleet_history
    from . import localise as fleet_localise
    from . import plan as fleet_plan
    if bool(args.flows) == bool(args.session):
        print('ibrepro fleet analyse: give a flows file or --session UUID', file=sys.stderr)
        return 2
    history = None
    try:
        if args.session:
            reports = results.sessions_by_uuid([args.session])
            if not reports:
                raise ValueError(f'no stored session {args.session} in {paths.results_db()}')
            data = reports[0]
            # judged as its check judged it: with the pair-round nights stored before it
            history, used = fleet_history.history_before(data)
            print(f'history: {len(used)} pair-round night(s) stored before it')
        else:
            data = json.loads(Path(args.flows).read_text())
        if isinstance(data, dict) and 'runs' in data:         # a run report: the pair-round cases' variables
            data = fleet_history.from_report(data)
            if data is None:
                raise ValueError('the run report has no pair-round case (fleet_flows)')
        records = data.get('flows', []) if isinstance(data, dict) else data
        flows = fleet_localise.read_flows(records)
        if args.topology:
            fabric = fleet_plan.fabric_from_leaves(*_load_topology(args.topology))
        else:                       # a pair-round case's JSON carries its fabric
            fabric = fleet_history.night_fabric(data, flows)
        again = fleet_localise.read_flows(data.get('confirmation', [])) if isinstance(data, dict) else []
        if args.confirmation:
            again_data = json.loads(Path(args.confirmation).read_text())
            again = fleet_localise.read_flows(again_data.get('flows', []) if isinstance(again_data, dict)
                                              else again_data)
        stored = data.get('alpha') if isinstance(data, dict) else None      # the partition's, when calibrated
        method = fleet_localise.method_of(args.alpha if args.alpha is not None else stored)
    except (OSError, ValueError, KeyError, results.ResultsError) as err:
        print(f'ibrepro fleet analyse: {err}', file=sys.stderr)
        return 2
    if not flows:
        print('ibrepro fleet analyse: no flow with a bandwidth', file=sys.stderr)
        return 2
    result = fleet_localise.localise(flows, fabric, expected=args.expected, history=history, method=method)
    if again:
        fleet_localise.confirm(result, again, fabric)
    if result.statement:
        print(result.statement)
    if result.named and not again:
        print(f'no confirmation re-tested this night: its {len(result.named)} named component(s) come from the night '
              'alone (`fleet verdict` drains none of them)')
    for leaf, effect in sorted(result.slow_leaves.items()):
        print(f'SLOW LEAF {leaf}: bandwidth {effect:+.1%} on every flow touching it tonight (its switch, its rack '
              'or its load: no part of it the flows can name)')
    for spine, effect in sorted(result.slow_spines.items()):
        print(f'SLOW SPINE {spine}: bandwidth {effect:+.1%} on every flow crossing it tonight (its switch: none of '
              'its links the flows can name)')
    for s in result.suspects:
        state = {True: 'confirmed', False: 'cleared by its confirmation', None: 'not re-tested'}[s.confirmed]
        worst = sorted(s.flows, key=lambda f: f['residual'])[:3]
        print(f"{'NAMED' if s in result.named else 'suspect'} {s.name}: {s.change} over {len(s.flows)} "
              f"flow(s), {s.singled_out}, {state}; e.g. " +
              ', '.join(f"round {f['round']} {f['src']}->{f['dst']} {f[fleet_localise.VALUE[s.metric]]:.3g} "
                        f"{fleet_localise.UNIT[s.metric]}" for f in worst))
    if fabric.has_topology:
        print(f'routing: {fleet_localise.ROUTING_ASSUMED}')
    missed = fleet_localise.untested(flows, fabric)
    if missed:
        print(f'untested tonight (no flow crossed them): {len(missed)} component(s), e.g. {", ".join(missed[:4])}')
    latency = '' if result.latency_scale is None else f', latency noise {result.latency_scale:.2%}'
    print(f'{len(flows)} flow(s), {result.hypotheses} hypotheses, noise {result.scale:.2%}{latency}, '
          f'{len(result.named)} named')
    if args.json:
        Path(args.json).write_text(json.dumps({**fleet_localise.as_json(result, fabric), 'untested': missed},
                                              indent=1, default=list) + '\n')
    return 1 if result.named else 0


def _cli_simulate(args):
    from .. import results
    from . import simulate as fleet_simulate
    try:
        loss, latency, kind = fleet_simulate.parse_fault(args.fault)
        tail = fleet_simulate.parse_tail(args.tail) if args.tail else (0.0, 0.0)
        if args.noise_cv is not None and args.noise_from is not None:
            raise ValueError('give --noise-cv or --noise-from, not both')
        if args.faults < 1 or args.nodes < 2:
            raise ValueError('--faults: at least 1 a fault night; --nodes: at least 2')
    except ValueError as err:
        print(f'ibrepro fleet simulate: {err}', file=sys.stderr)
        return 2
    residuals, cv, source = (), args.noise_cv, 'given (--noise-cv)'
    if args.noise_from is not None:
        try:
            residuals, cv, source = _stored_noise(args.noise_from)
        except (OSError, ValueError, results.ResultsError) as err:
            print(f'ibrepro fleet simulate: --noise-from: {err}; give --noise-cv', file=sys.stderr)
            return 2
    if cv is None:
        cv, source = fleet_simulate.MODELLED_NOISE_CV, 'modelled (an assumption, not measured)'
    latency_cv = args.latency_cv
    if latency_cv is None and latency:
        latency_cv = fleet_simulate.MODELLED_LATENCY_CV
    try:
        model = fleet_simulate.Model(args.nodes, cv, args.leaf_size, args.spines,
                                     args.link_capacity or fleet_simulate.NOMINAL_LINK_MBPS, args.linktest_min,
                                     latency_cv, residuals, args.routing, args.oversubscription, args.leaf_noise,
                                     args.round_noise, tail[0], tail[1], args.flap)
        result = fleet_simulate.run(model, args.nights, loss, latency=latency, seed=args.seed,
                                    fault_free_nights=args.fault_free_nights, baselines=not args.no_baselines,
                                    faults_per_night=args.faults, fault_kind=kind)
    except ValueError as err:
        print(f'ibrepro fleet simulate: {err}', file=sys.stderr)
        return 2
    result['simulation']['noise_cv_source'] = source
    if latency_cv:
        result['simulation']['latency_cv_source'] = ('given (--latency-cv)' if args.latency_cv
                                                     else 'modelled (an assumption, not measured)')
    world = [f'{k} {v}' for k, v in (('routing', args.routing), ('oversubscription', args.oversubscription),
                                      ('leaf noise CV', args.leaf_noise), ('round noise CV', args.round_noise),
                                      ('tail', args.tail), ('flap', args.flap), ('faults a night', args.faults))
             if v not in ('plan', 1, 1.0, 0.0, None)]
    print(f'simulated (not measured): N={args.nodes}, {args.nights} fault nights ({args.fault}), '
          f'{args.fault_free_nights} fault-free, noise CV {cv:g} ({source})'
          + (f", latency CV {latency_cv:g} ({result['simulation']['latency_cv_source']})" if latency_cv else '')
          + (f"; world: {', '.join(world)}" if world else ''))
    print(f"{'harness':12} {'named exactly':>13} {'wrong/night':>11} {'upper95':>8} {'inside/night':>12} "
          f"{'rounds':>7} {'jobs':>6} {'fault-free alarms':>17}")
    for name in ('ibrepro', 'clusterkit', 'linktest'):
        if name in result:
            r = result[name]
            print(f"{name:12} {r['named_exactly'] if r['named_exactly'] is not None else float('nan'):13.3f} "
                  f"{r['wrong_per_night']:11.4f} {r['wrong_per_night_upper95']:8.4f} {r['inside_per_night']:12.4f} "
                  f"{r['rounds']:7.2f} {r['jobs']:6.2f} {r['fault_free_alarm_nights']:17d}")
    if result['ibrepro'].get('named_flapping_per_night'):
        print(f"ibrepro: {result['ibrepro']['named_flapping_per_night']:.3f} component(s) a night named as flapping "
              '(slow in some rounds only, confirmed by its repeated re-tests)')
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + '\n')
    return 0


def _cli_calibrate(args):
    from .. import results
    from . import plan as fleet_plan
    from . import simulate as fleet_simulate
    try:
        alphas = [float(a) for a in args.alphas.split(',')] if args.alphas else fleet_simulate.CALIBRATION_ALPHAS
        target = fleet_simulate.CALIBRATION_TARGET if args.target is None else args.target
        loss, latency, kind = fleet_simulate.parse_fault(args.fault)
        if latency or kind:
            raise ValueError('--fault: a bandwidth fault of a random kind (random:<loss>%)')
        if args.nights < 1 or args.fault_nights < 0 or not 0 < target < 1:
            raise ValueError('--nights: at least 1; --fault-nights: at least 0; --target: a rate in (0, 1)')
        fabric = fleet_plan.fabric_from_leaves(*_load_topology(args.topology)) if args.topology else \
            fleet_plan.fat_tree(args.nodes, args.leaf_size)
        residuals, cv, source = _stored_noise(args.noise_from)
        model = fleet_simulate.Model(len(fabric.nodes), cv, args.leaf_size, fabric.spines, residuals=residuals)
        out = fleet_simulate.calibrate(model, args.nights, alphas=alphas, target=target,
                                       fault_nights=args.fault_nights, loss=loss, seed=args.seed, fabric=fabric)
    except (OSError, ValueError, results.ResultsError) as err:
        print(f'ibrepro fleet calibrate: {err}', file=sys.stderr)
        return 2
    out['simulation']['noise_cv_source'] = source
    print(f'replayed (simulated on the stored noise, not measured): {len(fabric.nodes)} nodes on '
          f'{len(fabric.leaves)} leaves, {args.nights} fault-free nights per level'
          + (f' and {args.fault_nights} with one {args.fault} fault' if args.fault_nights else '')
          + f', noise {source}, seed {args.seed}')
    print(f"{'alpha':>7} {'wrong/night':>11} {'upper95':>8} {'fault-free alarms':>17} {'named exactly':>13}")
    for row in out['levels']:
        named = row['named_exactly']
        print(f"{row['alpha']:7g} {row['wrong_per_night']:11.4f} {row['wrong_per_night_upper95']:8.4f} "
              f"{row['fault_free_alarm_nights']:17d} {named if named is not None else float('nan'):13.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + '\n')
    if out['alpha'] is None:
        print(f'no level keeps the false names at most {target:.4g} a night (95 % upper bound) over '
              f'{args.nights} nights: replay more nights (--nights) or state a higher --target', file=sys.stderr)
        return 1
    print(f"fleet_alpha {out['alpha']:g}: the largest level whose false names a night (95 % upper bound) are at most "
          f"{target:.4g}; set it in the partition's extras ({{'fleet_alpha': {out['alpha']:g}}})")
    return 0


def _cli_routes(args):
    from . import routes as fleet_routes
    try:
        texts, found = fleet_routes.collect(args.timeout)
        said = (f"{len(found['leaves'])} leaves, {len(found['spines'])} spines, "
                f"{sum(map(len, found['leaves'].values()))} HCAs, {len(found['routes'])} leaf-to-node routes")
        if args.topology:
            leaves, _ = _load_topology(args.topology)
            if not fleet_routes.same_nodes(found, leaves):
                raise ValueError(f'the fabric\'s HCAs are not the nodes of {args.topology} (a night would refuse '
                                 'the pair): nothing written')
            differ = fleet_routes.differences(found, leaves)
            said += f'; {len(differ)} differ from destination-mod-k over {args.topology}\'s order'
        for name in fleet_routes.FILES:     # nodes read them: 0644, in a directory only we write
            trust.write_file(Path(args.collect) / name, texts[name], mode=0o644, name='--collect')
    except (OSError, ValueError, trust.Refused) as err:   # RoutesError is a ValueError
        print(f'ibrepro fleet routes: {err}', file=sys.stderr)
        return 2
    print(f'{args.collect}: {said}')
    return 0

"""The fleet's stored nights, read on the login node from the results database (:mod:`ibrepro.results`): a night's
flows, fabric and named components as its pair-round cases stored them, and each component's history of effects
over the last nights (what the localiser takes as each component's normal)."""

from .. import results
from . import localise as fleet_localise
from . import plan as fleet_plan


def night_fabric(data, flows):
    """The fabric of a night (:func:`from_report`, a case's ``fleet.json``): its leaves and spines when it stored
    them, else the nodes of its ``flows`` (read flows) without a topology."""
    if isinstance(data, dict) and data.get('leaves'):
        return fleet_plan.fabric_from_leaves(data['leaves'], data.get('spines', 0), routes=data.get('routes'))
    return fleet_plan.no_topology(sorted({n for f in flows for n in (f['src'], f['dst'])}))


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
    component's effect per metric (mean residual, log units: :func:`ibrepro.fleet.localise.night_effects`; latency
    from RDMA nights) in the last ``nights`` pair-round nights of ``system:partition`` among ``reports`` (run
    reports, oldest first; the sessions of one run are one night, :func:`nights_of`). A night that named a
    component is left out of that component's history: a fault must not become its normal
    (:func:`ibrepro.fleet.localise.localise` takes a component's usual slowness, the median of its history, as
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
    case = next((c for c in results.testcases(report) if results.PAIR_ROUND_FLOWS in c), None)
    if case is None:
        return {}, []
    start = float((report.get('session_info') or {}).get('time_start_unix') or 0)
    reports = night_reports(case.get('system'), case.get('partition'), before=start, db=db, problems=[],
                            exclude={results.run_id(report)})     # an earlier session of its own run is no history
    return stored_history(reports, case.get('system'), case.get('partition'))


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
    return any(results.PAIR_ROUND_FLOWS in c and c.get('system') == system for c in results.testcases(report))


def from_report(report, system=None, partition=None):
    """``{'flows', 'confirmation', 'leaves', 'spines'}`` of a ReFrame run report (``--report-file``, or a session
    stored in the results database): every pair-round case's loggable ``fleet_flows``, ``fleet_confirmation`` and
    ``fleet_fabric`` merged (the night's jobs share one fabric), ``named``, the components its ``fleet_named``
    hold, ``left_out``, the nodes its jobs left out and why (``fleet_left_out``), and ``partition``, the first such
    case's; of ``system`` (and ``partition``) when given; None when the
    report has no such case; ValueError naming the case and field when a stored variable is not of the type the
    check stores."""
    out = {'flows': [], 'confirmation': [], 'leaves': {}, 'spines': 0, 'routes': None, 'named': set(),
           'left_out': {}, 'alpha': None}
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
            if out['alpha'] is None and fabric.get('alpha') is not None:   # the partition's calibrated level
                out['alpha'] = fleet_localise.method_of(fabric['alpha']).alpha
        except ValueError as err:
            raise ValueError(f"test case {case.get('name')!r}: fleet_fabric {err}") from None
    out['named'] = sorted(out['named'])          # the components the night named, JSON-ready
    return out if found else None

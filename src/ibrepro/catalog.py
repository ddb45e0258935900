"""The experiments of the seed papers (reference-data/experiments.yaml), the checks that encode them, and the
tags that name them.

Each experiment (a row of the papers' checklist, identified by its number) is the papers' transcription: where,
what, the status (or why it is out of scope: ``status: out-of-scope``, ``reason``), and what the simulated testbeds
cover (``simulated``:
modelled, partial or cannot-model, with the reason; :func:`cannot_model` skips those families on simulated
partitions). Which test cases reproduce it is written once, in the figure table of the check file of its section
(reframe-checks/<level>/<section>.py), which tags each case ``exp<N>``; :func:`reproducing` reads it back from
the cases' tags, for the catalog, the report and the nightly subset. ``ibrepro catalog`` prints the table and,
for a system
(its ReFrame configuration given explicitly with ``-C``), which families it can run:

* a test variant whose hard requirements (``valid_systems`` / ``valid_prog_environs`` features: an RDMA port, the
  layout's nodes and cores, the tool, MVAPICH2) no partition and environment of the system meets has no test
  case there; :func:`why_not_here` names the missing feature and the one step that would provide it;
* the test cases that exist are set up by a ReFrame dry run (``--dry-run``, nothing runs), and a case is runnable
  unless it was skipped (its ``skip_reason`` says why, e.g. a program a partial install lacks).

:func:`not_run_table` condenses both into the short "not run here, and why" table ``make run`` ends with.
"""

import functools
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from . import paths, vocabulary

EXPERIMENTS_FILE = paths.REFERENCE_DATA / 'experiments.yaml'
STATUSES = ('encoded', 'partial', 'out-of-scope')


class CatalogError(ValueError):
    pass


@functools.lru_cache(maxsize=None)
def experiments():
    """All experiments, keyed by id (the row number of the papers' checklist)."""
    try:
        with open(EXPERIMENTS_FILE) as fp:
            data = yaml.safe_load(fp)
    except (OSError, yaml.YAMLError) as err:
        raise CatalogError(f'{EXPERIMENTS_FILE}: {err}') from None

    return {row['id']: row for row in data['experiments']}


def experiment(exp_id):
    try:
        return experiments()[exp_id]
    except KeyError:
        raise CatalogError(f'no experiment {exp_id} in {EXPERIMENTS_FILE} '
                           f'(known: 1..{max(experiments())})') from None


def tags_for(exp_ids):
    """ReFrame tags naming experiments, seeds and figures: exp<N>, s<seed>, s<seed>-fig<N>, ..."""
    tags = set()
    for exp_id in exp_ids:
        row = experiment(exp_id)
        tags.add(f'exp{exp_id}')
        for seed in row['seeds']:
            tags.add(f's{seed}')
            tags.update(f's{seed}-{fig}' for fig in row['figures'])

    return tags


def cannot_model(check_name, exp_ids):
    """Why a check cannot run on a simulated testbed (a list; empty when it can): the ``simulated`` block of each
    experiment it reproduces, ``cannot-model`` for the whole row or ``cannot_model`` naming the check's family."""
    reasons = []
    for exp_id in exp_ids:
        sim = experiment(exp_id).get('simulated') or {}
        named = check_name.split()[0] in (sim.get('cannot_model') or ())
        if sim.get('status') == 'cannot-model' or named:
            reason = f'cannot be modelled (#{exp_id}): {sim.get("reason", "see reference-data/experiments.yaml")}'
            if reason not in reasons:
                reasons.append(reason)
    return reasons


def check_classes(checks_dir=paths.CHECKS_DIR):
    """{class name: class} of every ReFrame test family under ``checks_dir`` (imports the check files)."""
    import reframe.core.decorators  # noqa: F401  (ReFrame's registry must exist before the files load)

    classes = {}
    for path in sorted(Path(checks_dir).rglob('*.py')):
        name = f'_ibrepro_catalog_{path.stem}_{abs(hash(path))}'
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        for attr, value in vars(module).items():
            if (isinstance(value, type) and value.__module__ == name and not attr.startswith('_')
                    and hasattr(value, 'valid_systems') and hasattr(value, 'num_variants')):
                classes[attr] = value

    return classes


# -- runnable on a system -------------------------------------------------------------------------------

def load_system(config, system=None):
    """ReFrame's runtime for ``config`` (given explicitly, never taken from stored data) and its selected system
    as a dict. Initialises ReFrame's runtime in this process (check classes can then be instantiated)."""
    import reframe.core.runtime as rt
    from reframe.core import config as rfm_config

    try:
        site = rfm_config.load_config(str(config))
        site.select_subconfig(system.split(':')[0] if system else None)
        # ReFrame keeps the first runtime of a process: another configuration loaded before (a catalog of another
        # system, an earlier test) would stay and lend its partitions to this one
        rt._runtime_context = None
        rt.init_runtime(site)
    except Exception as err:     # ReFrame raises its own error types for a bad or non-matching file
        raise CatalogError(f'{config}: {err}') from None
    name = site.get('systems/0/name')
    sysconf = {'name': name, 'partitions': []}
    for part in rt.runtime().system.partitions:
        sysconf['partitions'].append({'name': part.name, 'features': list(part.features), 'extras': dict(part.extras),
                                      'environs': [{'name': e.name, 'features': list(e.features),
                                                    'extras': dict(e.extras)} for e in part.environs]})
    return sysconf


def _instances(checks_dir=paths.CHECKS_DIR):
    """[(family, display name, valid_systems, valid_prog_environs, tags, tool, nodes)] of every test variant, as its
    init hooks left them (needs a ReFrame runtime: :func:`load_system`)."""
    found = []
    for family, cls in check_classes(checks_dir).items():
        for i in range(cls.num_variants):
            test = cls(variant_num=i)
            found.append((family, test.display_name, list(test.valid_systems), list(test.valid_prog_environs),
                          frozenset(test.tags), getattr(test, 'tool', ''), getattr(test, 'num_nodes', None) or 1))
    return found


def variants(checks_dir=paths.CHECKS_DIR):
    """[(family, display name, valid_systems, valid_prog_environs)] of every test variant, as its init hooks
    left them (needs the runtime of :func:`load_system`)."""
    return [v[:4] for v in _instances(checks_dir)]


def _runtime():
    """ReFrame's runtime of this process; the embedded default system's (configs/local.py) if there is none: a
    case's tags do not depend on the system."""
    import reframe.core.runtime as rt

    if rt._runtime_context is None:
        load_system(paths.CONFIGS_DIR / 'local.py')


@functools.lru_cache(maxsize=None)
def _tagged(checks_dir):
    _runtime()
    return [(family, name, tags, tool, nodes) for family, name, _, _, tags, tool, nodes in _instances(checks_dir)]


def reproduces(tags, what):
    """Whether a test case with ``tags`` reproduces ``what``: an experiment (its id) or a figure tag
    (``s<seed>-fig<N>``). The one reading of the paper-to-case mapping, which is written once, in the figure table of
    the check file of the experiment's section (its families tag each case ``exp<N>`` and ``s<seed>-<figure>``)."""
    return (f'exp{what}' if isinstance(what, int) else what) in tags


def reproducing(checks_dir=paths.CHECKS_DIR):
    """{experiment id: [(item, {display name: family})]}: the test cases that reproduce each experiment.

    An item is a family when every variant of it reproduces the experiment (``OSULatency``), else one case
    (``NPB %case=is.B-4x1``): what the catalog and the report print."""
    classes = check_classes(checks_dir)
    cases = _tagged(str(checks_dir))
    found = {}
    for exp_id in sorted({int(t[3:]) for _, _, tags, *_ in cases for t in tags if re.fullmatch(r'exp\d+', t)}):
        families = {}
        for family, name, tags, *_ in cases:
            if reproduces(tags, exp_id):
                families.setdefault(family, {})[name] = family
        found[exp_id] = [item for family, names in families.items()
                         for item in ([(family, names)] if len(names) == classes[family].num_variants
                                      else [(name, {name: family}) for name in names])]
    return found


#: Which tool measures a quantity first where several reproduce it: ours (built everywhere), IMB, OSU, the rest.
TOOL_PREFERENCE = ('bench', 'imb', 'osu')


def reproducing_figure(figure, inter_node=None, checks_dir=paths.CHECKS_DIR):
    """Display names of the test cases that reproduce ``figure`` (``s<seed>-fig<N>``), in :data:`TOOL_PREFERENCE` and,
    among one tool's, the case more figures share first (the papers' common benchmark before a special one);
    ``inter_node`` True or False: only the cases on several nodes, or on one."""
    rank = {tool: i for i, tool in enumerate(TOOL_PREFERENCE)}
    mine = [(rank.get(tool, len(rank)), -sum(1 for t in tags if re.fullmatch(r's\d{3}-\w+', t)), i, name)
            for i, (_, name, tags, tool, nodes) in enumerate(_tagged(str(checks_dir)))
            if reproduces(tags, figure) and inter_node in (None, nodes > 1)]
    return [name for *_, name in sorted(mine)]


def _features(entity):
    return {**dict.fromkeys(entity.get('features', [])), **entity.get('extras', {})}


def _missing(spec, entity):
    """The tokens of one valid_systems/valid_prog_environs entry that ``entity`` does not meet."""
    return [token for token in spec.split() if token != '*' and not _matches(token, _features(entity), [])]


def why_not_here(valid_systems, valid_prog_environs, sysconf):
    """[] if some partition and environment of ``sysconf`` meet the requirements; else [(reason, how to
    enable)] for what the system lacks: the partition features of the partition that comes closest, and the
    environment features no environment of the system has."""
    part_gaps, env_gaps = [], []
    for part in sysconf['partitions']:
        for spec in valid_systems:
            missing = _missing(spec, part)
            if not missing and any(not _missing(es, e) for es in valid_prog_environs for e in part['environs']):
                return []
            part_gaps.append((missing, part))
    envs = [e for part in sysconf['partitions'] for e in part['environs']] or [{}]
    env_gaps = min(([tuple(_missing(es, e)) for es in valid_prog_environs for e in envs]), key=len, default=())
    missing, part = min(part_gaps, key=lambda g: len(g[0]), default=([], None))
    if not part:
        return [('the system has no partition', '')]
    reasons = [_explain(token, part, sysconf) for token in missing]
    reasons += [_explain(token, part, sysconf) for token in env_gaps]
    return list(dict.fromkeys(reasons)) or [('no partition has an environment for it', '')]


def _explain(token, part, sysconf):
    name = token.lstrip('+-%')
    if token.startswith('-'):
        return f'only environments with feature {name!r}, and it runs in one without', ''
    key = name.split('=')[0]
    if token in tuple(f'+{f}' for f in vocabulary.RDMA):
        key = 'rdma'
    m = re.fullmatch(r'(nodes|cores)(\d+)', name)
    if m:
        have = part['extras'].get('nodes' if m.group(1) == 'nodes' else 'cores_per_node', '?')
        return vocabulary.missing(m.group(1), n=m.group(2), have=have)
    return vocabulary.missing(key) or (f'lacks feature {name!r}', '')


def dry_run_cases(config, system=None, checks_dir=paths.CHECKS_DIR):
    """[(display name, 'sys:part+env', skip reason or '')] of every test case on the system (a dry run)."""
    with tempfile.TemporaryDirectory(prefix='ibrepro-catalog-') as tmp:
        report = Path(tmp) / 'report.json'
        cmd = [str(Path(sys.executable).parent / 'reframe'), '-C', str(config), '-c', str(checks_dir),
               '--dry-run', '--prefix', tmp, '--report-file', str(report)]
        if system:
            cmd += ['--system', system]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if not report.exists():
            raise CatalogError(f'reframe --dry-run failed: {proc.stdout[-1500:]}{proc.stderr[-1500:]}')

        cases = []
        for run in json.loads(report.read_text())['runs'][:1]:
            for case in run['testcases']:
                reason = case.get('skip_reason') or ('skipped' if case['result'] == 'skip' else '')
                cases.append((case['name'], f"{case['system']}:{case['partition']}+{case['environ']}", reason))
    return cases


def _matches(spec, features, names):
    """ReFrame's valid_systems / valid_prog_environs semantics for one entry (tokens are ANDed)."""
    for token in spec.split():
        if token == '*':
            continue
        if token.startswith('+'):
            if token[1:] not in features:
                return False
        elif token.startswith('-'):
            if token[1:] in features:
                return False
        elif token.startswith('%'):
            key, _, value = token[1:].partition('=')
            if str(features.get(key) if isinstance(features, dict) else None) != value:
                return False
        elif not any(re.fullmatch(token.replace('*', '.*'), n) for n in names):
            return False
    return True


def system_view(config, system=None, checks_dir=paths.CHECKS_DIR):
    """What ``config``'s system can run: {display name: reason it cannot (or '' if it can)}, and the system."""
    sysconf = load_system(config, system)
    verdicts = {}
    for family, name, vsys, venv in variants(checks_dir):
        why = why_not_here(vsys, venv, sysconf)
        verdicts[name] = (family, why)
    return verdicts, sysconf


def rows(config=None, system=None):
    """The catalog: one dict per experiment with its checks and, given a config, what runs here."""
    cases = dry_run_cases(config, system) if config else []
    verdicts = system_view(config, system)[0] if config else {}
    found = reproducing()
    table = []
    for exp in experiments().values():
        items = found.get(exp['id'], [])
        entry = {'id': exp['id'], 'seeds': exp['seeds'], 'where': exp['where'],
                 'measures': exp['measures'], 'status': exp.get('status', 'missing'),
                 'checks': [item for item, _ in items], 'tool': exp.get('tool', ''),
                 'reason': exp.get('reason', ''), 'simulated': exp.get('simulated') or {},
                 'continues': exp.get('continues') or []}
        if config:
            runnable, reasons = [], []
            for check, names in items:
                mine = [(name, where, why) for name, where, why in cases if name in names]
                ok = [c for c in mine if not c[2]]
                if ok:
                    runnable.append(f'{check} ({len(ok)} case{"s" if len(ok) > 1 else ""})')
                elif mine:
                    why = sorted({c[2] for c in mine})
                    reasons.append(f'{check}: skipped: {why[0]}' + (f' (and {len(why) - 1} other reasons)'
                                                                    if len(why) > 1 else ''))
                else:
                    whys = list(dict.fromkeys(w for n, v in verdicts.items() if n in names for w in v[1]))
                    reasons.append(f'{check}: ' + ('; '.join(f'{why} (to enable: {how})' if how else why
                                                             for why, how in whys[:3]) if whys else 'no such check'))
            entry['runnable'] = runnable
            entry['not_runnable'] = reasons
        table.append(entry)
    return table


def not_run_table(config, system=None):
    """[(family, cases, [reasons], [how to enable])]: the papers' families (and layouts) this system does not run."""
    verdicts, _ = system_view(config, system)
    families = {}
    for name, (family, whys) in verdicts.items():
        if whys:
            entry = families.setdefault(family, [0, {}, {}])
            entry[0] += 1
            for why, how in whys:
                entry[1][re.sub(r'needs (\d+) (nodes|cores)', r'needs N \2', why)] = None
                entry[1].setdefault(('numbers', why), None)
                if how:
                    entry[2][how] = None
    table = []
    for family, (cases, whys, hows) in sorted(families.items()):
        numbers = {}
        for key in whys:
            if isinstance(key, tuple):
                m = re.match(r'needs (\d+) (nodes|cores)', key[1])
                if m:
                    numbers.setdefault(m.group(2), set()).add(int(m.group(1)))
        reasons = []
        for key in whys:
            if isinstance(key, str):
                m = re.match(r'needs N (nodes|cores)', key)
                if m:
                    ns = sorted(numbers.get(m.group(1), ()))
                    span = f'{ns[0]}' if len(ns) == 1 else f'{ns[0]}-{ns[-1]}'
                    key = key.replace('needs N', f'needs {span}')
                reasons.append(key)
        table.append((family, cases, reasons, list(hows)))
    return table


def format_not_run(table, system):
    """The "not run here, and why" table as text: one line per family, each step to enable it once below."""
    if not table:
        return f'Every family of the papers has test cases on {system}.'
    steps = list(dict.fromkeys(h for *_, hows in table for h in hows))
    width = max(len(f) for f, *_ in table)
    lines = [f'Not run on {system}, and why (`ibrepro catalog` has the details):',
             f'  {"family":<{width}}  cases  why  [to enable]']
    for family, cases, reasons, hows in table:
        marks = ' '.join(f'[{steps.index(h) + 1}]' for h in hows)
        lines.append(f'  {family:<{width}}  {cases:>5}  {"; ".join(reasons)}  {marks}')
    lines += [f'  [{i}] {step}' for i, step in enumerate(steps, 1)]
    return '\n'.join(lines)


#: Checks of the system itself (provenance, the fleet's state), not a reproduction of a paper's experiment.
SYSTEM_CHECKS = {'RdmaTopology', 'SoftwareVersions', 'FleetSweep', 'FleetPairs', 'FleetNight', 'FleetConfirmation'}


def validate(checks_dir=paths.CHECKS_DIR, nightly=None):
    """Problems of the catalog: unknown statuses, checks that do not exist, families no row names, cases of the
    nightly subset (``nightly``: reference-data/nightly.yaml) that match no test case."""
    classes = check_classes(checks_dir)
    found = reproducing(checks_dir)
    problems = []
    for exp_id in sorted(set(found) - set(experiments())):
        problems.append(f'test cases name experiment {exp_id}, which the catalog lacks: '
                        + ', '.join(item for item, _ in found[exp_id][:3]))
    for exp in experiments().values():
        status = exp.get('status')
        families = {f for _, names in found.get(exp['id'], []) for f in names.values()}
        if status not in STATUSES:
            problems.append(f'experiment {exp["id"]}: status {status!r} not one of {STATUSES}')
        for row in exp.get('continues') or []:
            if row not in experiments() or experiments()[row].get('continues'):
                problems.append(f'experiment {exp["id"]}: continues {row!r}, which is no experiment of the papers')
        if status in ('out-of-scope', 'partial') and not exp.get('reason'):
            problems.append(f'experiment {exp["id"]}: {status} without a reason')
        if status in ('encoded', 'partial') and not families:
            problems.append(f'experiment {exp["id"]}: {status} but no check\'s figure table names it')
        if status == 'out-of-scope' and families:
            problems.append(f'experiment {exp["id"]}: out-of-scope but reproduced by {", ".join(sorted(families))}')
        sim = exp.get('simulated') or {}
        if status in ('encoded', 'partial') and not sim:
            problems.append(f'experiment {exp["id"]}: {status} but says nothing about the simulated testbeds '
                            '(simulated: status)')
        for check in sim.get('cannot_model') or ():
            if check not in families:
                problems.append(f'experiment {exp["id"]}: simulated.cannot_model {check!r} is none of its checks')
    named = {f for items in found.values() for _, names in items for f in names.values()}
    for name in sorted(set(classes) - named - SYSTEM_CHECKS):
        problems.append(f'check family {name} encodes no experiment of the catalog')
    try:
        cases = nightly_cases(nightly)
    except NightlyError as err:
        return problems + [str(err)]
    for case in sorted(cases):
        problem = _unknown_case(case, classes)
        if problem:     # a typo would leave the case out of every night without a word
            problems.append(f'nightly subset: case {case!r} matches no test case: {problem}')
    return problems


class NightlyError(ValueError):
    """reference-data/nightly.yaml cannot say which cases run every night (file, line and why)."""


@functools.lru_cache(maxsize=None)
def nightly_cases(path=None):
    """Display names of the `nightly` subset (reference-data/nightly.yaml, scripts/nightly_subset.py): its
    ``cases`` (every figure of the papers once) and its ``today`` (the rows beyond the papers, where a partition has
    their hardware).

    A file that cannot be read, or that lists no cases, raises NightlyError: tagging nothing would run a smaller
    night without a word. (Names that match no check: :func:`ibrepro.catalog.validate`.)
    """
    from . import references

    path = path or paths.REFERENCE_DATA / 'nightly.yaml'
    try:
        doc = references.read_yaml(path)
    except references.DataError as err:
        raise NightlyError(f'the nightly subset cannot be read: {err.problem}') from None
    cases = doc.get('cases') if isinstance(doc, dict) else None
    if not isinstance(cases, list) or not cases \
            or not all(isinstance(c, dict) and isinstance(c.get('case'), str) and c['case'] for c in cases):
        raise NightlyError(f'the nightly subset cannot be read: {path}: "cases" must be a non-empty list of '
                           '{case: <display name>, ...} (scripts/nightly_subset.py writes it)')
    today = doc.get('today') or []
    if not isinstance(today, list) or not all(isinstance(c, dict) and isinstance(c.get('case'), str) and c['case']
                                              for c in today):
        raise NightlyError(f'the nightly subset cannot be read: {path}: "today" must be a list of '
                           '{case: <display name>, ...} (scripts/nightly_subset.py writes it)')
    return frozenset(c['case'] for c in cases + today)


def _unknown_case(display_name, classes):
    """Why ``display_name`` (``Family %param=value ...``) names no variant of the check families, or None."""
    family, *params = display_name.split(' %')
    if family not in classes:
        return f'no check family {family}'
    space = classes[family].param_space.params
    for param in params:
        name, _, value = param.partition('=')
        if name not in space:
            return f'{family} has no parameter {name!r}'
        values = [str(space[name].format(v)) for v in space[name].values]
        if value not in values:
            return f'{family} has no {name}={value} (its values: {", ".join(values[:12])})'
    return None


def add_cli(subparsers):
    p = subparsers.add_parser(
        'catalog', help='the papers\' experiments and the checks that encode them',
        description='Print every experiment of the papers: seeds, figure/table, the check families that '
                    'encode it (or why it is out of scope), the tool, and whether the current system can '
                    'run it.')
    p.add_argument('-C', '--config', default=str(paths.CONFIGS_DIR / 'local.py'),
                   help='ReFrame configuration of the system to check (default: configs/local.py)')
    p.add_argument('--system', help='system[:partition] (default: the one matching this host)')
    p.add_argument('--no-system', action='store_true', help='do not check what this system can run')
    p.add_argument('--validate', action='store_true', help='check the catalog against the check files')
    p.add_argument('--not-run', action='store_true', help='only the families (and layouts) this system does not '
                   'run, why, and the step that would enable each')
    p.set_defaults(func=_cli)


def _cli(args):
    if args.validate:
        problems = validate()
        for problem in problems:
            print(f'ibrepro catalog: {problem}', file=sys.stderr)
        print(f'{len(experiments())} experiments, {len(problems)} problem(s)')
        return 1 if problems else 0

    if args.not_run:
        try:
            table = not_run_table(args.config, args.system)
            system = load_system(args.config, args.system)['name']
        except CatalogError as err:
            print(f'ibrepro catalog: {err}', file=sys.stderr)
            return 1
        print(format_not_run(table, system))
        return 0

    try:
        table = rows(None if args.no_system else args.config, args.system)
    except CatalogError as err:
        print(f'ibrepro catalog: {err}', file=sys.stderr)
        return 1

    counts = {}
    for row in table:
        counts[row['status']] = counts.get(row['status'], 0) + 1
        figures = row['where']
        print(f"#{row['id']:<3} {'/'.join(row['seeds']) or 'today':<8} {figures:<38} {row['status']:<12} "
              f"{row['tool']}")
        print(f"     {row['measures']}")
        if row['continues']:        # a family of today's hardware: the papers' rows it carries on
            print('     continues: ' + ', '.join(f"#{i} ({'/'.join(experiment(i)['seeds'])} {experiment(i)['where']})"
                                         for i in row['continues']))
        for check in row['checks']:
            print(f'     check: {check}')
        if row['reason']:
            print(f"     {'why: ' if row['status'] == 'out-of-scope' else 'note: '}{row['reason']}")
        if row['simulated']:
            sim = row['simulated']
            print(f"     simulated: {sim['status']}" + (f": {sim['reason']}" if sim.get('reason') else ''))
        for item in row.get('runnable', []):
            print(f'     runs here: {item}')
        for item in row.get('not_runnable', []):
            print(f'     not here:  {item}')
    print('; '.join(f'{n} {s}' for s, n in sorted(counts.items())) + f' ({len(table)} experiments)')
    return 0

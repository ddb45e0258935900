"""The experiments of the seed papers (reference-data/experiments.yaml), the checks that encode them, and the
tags that name them.

Each experiment (a row of the papers' checklist, identified by its number) lists the check families that
encode it (``checks``: display-name prefixes such as ``PerftestLatency %operation=send``), or says it is out of
scope and why (``status: out-of-scope``, ``reason``), and what the simulated testbeds cover (``simulated``:
modelled, partial or cannot-model, with the reason; :func:`cannot_model` skips those families on simulated
partitions). ``ibrepro catalog`` prints the table and, for the current
system, which families it can run: it asks ReFrame for a dry run (``--dry-run``: every test case is set up, none
is run), so a case is runnable unless it was skipped (its ``skip_reason`` says why); a family with no test case
at all on the system lacks the partition or environment features its ``valid_systems`` /
``valid_prog_environs`` select (typically: no environment provides its benchmark binaries).
"""

import functools
import importlib.util
import json
import os
import re
import runpy
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from . import paths

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
    """ReFrame tags naming experiments, seeds and figures: exp11, s000, s000-fig12, ..."""
    tags = set()
    for exp_id in exp_ids:
        row = experiment(exp_id)
        tags.add(f'exp{exp_id}')
        for seed in row['seeds']:
            tags.add(f's{seed}')
            tags.update(f's{seed}-{fig}' for fig in row['figures'])

    return tags


def _normal(name):
    return re.sub(r'\s+', '', name)


def cannot_model(check_name, exp_ids):
    """Why a check cannot run on a simulated testbed (a list; empty when it can): the ``simulated`` block of each
    experiment it reproduces, ``cannot-model`` for the whole row or ``cannot_model`` naming the check's family."""
    reasons = []
    for exp_id in exp_ids:
        sim = experiment(exp_id).get('simulated') or {}
        named = any(_normal(check_name).startswith(_normal(c)) for c in sim.get('cannot_model') or ())
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


# -- runnable on the current system ------------------------------------------------------------------

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


def why_not(cls, system):
    """Why a check family has no test case on ``system`` (a ReFrame system config dict)."""
    partitions = system.get('partitions', [])
    fit = [p for p in partitions
           if any(_matches(spec, {**dict.fromkeys(p.get('features', [])), **p.get('extras', {})},
                           [system['name'], f"{system['name']}:{p['name']}"])
                  for spec in cls.valid_systems)]
    if not fit:
        have = '; '.join(f"{p['name']}: {' '.join(p.get('features', [])) or 'no features'}" for p in partitions)
        return f'needs a partition with {" or ".join(cls.valid_systems)} (has {have})'

    return (f'needs an environment with {" or ".join(cls.valid_prog_environs)} on '
            f'{", ".join(p["name"] for p in fit)} (its binaries are not installed here)')


def selected_system(config, system=None):
    cfg = runpy.run_path(str(config))['site_configuration']
    host = socket.gethostname()
    for sysconf in cfg['systems']:
        if system and sysconf['name'] == system.split(':')[0]:
            return sysconf
        if not system and any(re.match(h, host) for h in sysconf.get('hostnames', [])):
            return sysconf
    raise CatalogError(f'{config}: no system matches {system or host}')


def rows(config=None, system=None):
    """The catalog: one dict per experiment with its checks and, given a config, what runs here."""
    classes = check_classes()
    cases = dry_run_cases(config, system) if config else []
    sysconf = selected_system(config, system) if config else None
    table = []
    for exp in experiments().values():
        entry = {'id': exp['id'], 'seeds': exp['seeds'], 'where': exp['where'],
                 'measures': exp['measures'], 'status': exp.get('status', 'missing'),
                 'checks': exp.get('checks', []), 'tool': exp.get('tool', ''),
                 'reason': exp.get('reason', ''), 'simulated': exp.get('simulated') or {}}
        if config:
            runnable, reasons = [], []
            for check in entry['checks']:
                mine = [(name, where, why) for name, where, why in cases
                        if _normal(name).startswith(_normal(check))]
                ok = [c for c in mine if not c[2]]
                if ok:
                    runnable.append(f'{check} ({len(ok)} case{"s" if len(ok) > 1 else ""})')
                elif mine:
                    why = sorted({c[2] for c in mine})
                    reasons.append(f'{check}: skipped: {why[0]}' + (f' (and {len(why) - 1} other reasons)'
                                                                    if len(why) > 1 else ''))
                else:
                    cls = classes.get(check.split()[0])
                    reasons.append(f'{check}: ' + (why_not(cls, sysconf) if cls else 'no such check'))
            entry['runnable'] = runnable
            entry['not_runnable'] = reasons
        table.append(entry)
    return table


def validate(checks_dir=paths.CHECKS_DIR):
    """Problems of the catalog: unknown statuses, checks that do not exist, families no row names."""
    classes = check_classes(checks_dir)
    problems, named = [], set()
    for exp in experiments().values():
        status = exp.get('status')
        if status not in STATUSES:
            problems.append(f'experiment {exp["id"]}: status {status!r} not one of {STATUSES}')
        if status in ('out-of-scope', 'partial') and not exp.get('reason'):
            problems.append(f'experiment {exp["id"]}: {status} without a reason')
        if status in ('encoded', 'partial') and not exp.get('checks'):
            problems.append(f'experiment {exp["id"]}: {status} but names no checks')
        for check in exp.get('checks', []):
            named.add(check.split()[0])
            if check.split()[0] not in classes:
                problems.append(f'experiment {exp["id"]}: check {check!r} does not exist in {checks_dir}')
        sim = exp.get('simulated') or {}
        if status in ('encoded', 'partial') and not sim:
            problems.append(f'experiment {exp["id"]}: {status} but says nothing about the simulated testbeds '
                            '(simulated: status)')
        for check in sim.get('cannot_model') or ():
            if not any(_normal(c).startswith(_normal(check)) for c in exp.get('checks', [])):
                problems.append(f'experiment {exp["id"]}: simulated.cannot_model {check!r} is none of its checks')
    for name in sorted(set(classes) - named - {'RdmaTopology', 'SoftwareVersions'}):
        problems.append(f'check family {name} encodes no experiment of the catalog')
    return problems


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
    p.set_defaults(func=_cli)


def _cli(args):
    if args.validate:
        problems = validate()
        for problem in problems:
            print(f'ibrepro catalog: {problem}', file=sys.stderr)
        print(f'{len(experiments())} experiments, {len(problems)} problem(s)')
        return 1 if problems else 0

    try:
        table = rows(None if args.no_system else args.config, args.system)
    except CatalogError as err:
        print(f'ibrepro catalog: {err}', file=sys.stderr)
        return 1

    counts = {}
    for row in table:
        counts[row['status']] = counts.get(row['status'], 0) + 1
        figures = row['where']
        print(f"#{row['id']:<3} {'/'.join(row['seeds']):<8} {figures:<38} {row['status']:<12} "
              f"{row['tool']}")
        print(f"     {row['measures']}")
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

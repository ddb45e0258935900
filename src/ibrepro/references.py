"""The papers' reference data: loading, validation, queries, export, and the ``ibrepro refs`` command.

``reference-data/`` holds one YAML file per seed paper (``papers/``: every number the text states, one
per entry, with the verbatim quote), the testbeds the papers measured on (``testbeds/``), the
per-system ReFrame references (``systems/<system>/references.yaml`` and their ``provenance.yaml``),
the experiment catalog (``experiments.yaml``, when present) and the coverage ignore list. Each kind of
file has a JSON Schema in ``reference-data/schemas/``; :func:`validate` checks the schemas and what
they cannot express (ids unique across seeds, references that resolve, ``value_si`` consistent with
the MB definition, the quote containing the value as printed).

Python API for the report and other modules: :func:`load_papers`, :func:`entries`, :func:`entry`,
:func:`testbeds`, :func:`testbed`, :func:`validate`.
"""

import copy
import csv
import dataclasses
import errno
import hashlib
import io
import json
import math
import os
import re
import stat
import sys
from pathlib import Path

import jsonschema
import yaml

from . import paths

#: Schema file (in reference-data/schemas/) per kind of data file.
SCHEMA_FILES = {
    'paper': 'paper.schema.json',
    'testbed': 'testbed.schema.json',
    'system-references': 'system-references.schema.json',
    'system-provenance': 'system-provenance.schema.json',
    'coverage-ignore': 'coverage-ignore.schema.json',
    'experiments': 'experiments.schema.json',
    'limit-statements': 'limit-statements.schema.json',
    'nightly': 'nightly.schema.json',
    'simulated': 'simulated.schema.json',
}

#: Byte-rate units normalised to MB/s of 10^6 bytes: unit -> {MB definition: factor}.
_SI_FACTORS = {
    'MB/s': {'10^6': 1.0, '2^20': 1.048576},
    'GB/s': {'10^6': 1000.0, '2^20': 1073.741824},
}

#: Fields of an entry, in export order (``unit_si``, ``testbed_config`` and ``limits_config`` are derived).
ENTRY_FIELDS = ('id', 'seed', 'where', 'experiment', 'kind', 'configuration', 'testbed', 'testbed_config',
                'limits_config', 'baseline_testbed', 'message_size', 'metric', 'value', 'unit', 'qualifier',
                'mb_definition', 'value_si', 'unit_si', 'printed', 'parameters', 'restates', 'quote', 'note')

_PARAMETER_KEYS = ('benchmark', 'operation', 'npb_class', 'input', 'nodes', 'processes', 'processes_per_node',
                   'pairs', 'window', 'ports', 'mode', 'placement', 'direction', 'buffer_reuse')


class DataError(ValueError):
    """A reference-data file could not be read; ``str()`` names the file, the line and the reason."""

    def __init__(self, problem):
        self.problem = problem
        super().__init__(str(problem))


@dataclasses.dataclass
class Problem:
    """One validation finding: the file, the entry id or YAML path, the line when known, and why."""

    file: str
    where: str | None
    reason: str
    line: int | None = None

    def __str__(self):
        loc = self.file + (f':{self.line}' if self.line else '')
        return f'{loc}: {self.where}: {self.reason}' if self.where else f'{loc}: {self.reason}'


def data_root(root=None) -> Path:
    return (Path(root) if root else paths.REFERENCE_DATA).resolve()


def _rel(path, root):
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


_YAML_CACHE = {}
#: libyaml's loader when PyYAML has it: 6x faster on the papers' files (same safe subset)
_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)


#: Deeper YAML is refused before it is loaded (libyaml's composer recurses in C: 100,000 levels crash the process).
MAX_YAML_DEPTH = 64

#: Larger files are refused before they are read: the papers' files and a site's references are well below.
MAX_YAML_BYTES = 16 * 2 ** 20


def _unsafe_structure(text):
    """``(reason, line)`` if a YAML text has an anchor or alias, a merge key (``<<``, which ReFrame refuses in a
    references file) or nests deeper than MAX_YAML_DEPTH, else None.

    Aliases are refused everywhere in reference data: nested aliases of a few hundred bytes expand to billions of
    values in whatever walks the data (a schema check, ReFrame's references), the "billion laughs". Reading the
    events expands nothing, recurses nowhere and costs a third of a load.
    """
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, 'anchor', None) is not None:
            name = f'{"*" if isinstance(event, yaml.AliasEvent) else "&"}{event.anchor}'
            return f'YAML anchors and aliases are not accepted ({name}): write the values out', \
                event.start_mark.line + 1
        if isinstance(event, yaml.ScalarEvent) and event.value == '<<' and event.implicit[0]:
            return 'YAML merge keys (<<) are not accepted: write the values out', event.start_mark.line + 1
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                return f'nested deeper than {MAX_YAML_DEPTH} levels', event.start_mark.line + 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def read_text(path, limit=MAX_YAML_BYTES):
    """The bytes of the file at ``path``, opened without following a symbolic link (a link planted in a shared
    directory would make us read another file); OSError for a link, another user's file in a world-writable
    directory, or a file larger than ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, 'a symbolic link (not followed)') from None
        raise
    with os.fdopen(fd, 'rb') as fp:
        info = os.fstat(fp.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, 'not a regular file')
        if info.st_uid not in (0, os.geteuid()) and os.stat(Path(path).parent).st_mode & 0o002:
            # anyone may put a file there first: only ours (or root's) is trusted
            raise OSError(errno.EPERM, f'owned by uid {info.st_uid} in a directory anyone can write')
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f'{info.st_size} bytes, more than the {limit} a YAML file of ibrepro may have')
        return fp.read(limit + 1)


def read_yaml(path, root=None):
    """``yaml.safe_load`` of a file; a syntax error, an anchor or alias, or nesting deeper than MAX_YAML_DEPTH
    raises :class:`DataError` with file and line.

    Parsed files are cached per process by content, callers get a copy.
    """
    rel = _rel(path, data_root(root))
    try:
        text = read_text(path).decode('utf-8')
        key = hashlib.sha1(text.encode()).hexdigest()
        if key not in _YAML_CACHE:
            unsafe = _unsafe_structure(text)
            if unsafe:
                raise DataError(Problem(rel, None, unsafe[0], line=unsafe[1]))
            _YAML_CACHE[key] = yaml.load(text, Loader=_LOADER)
        return copy.deepcopy(_YAML_CACHE[key])
    except OSError as err:
        raise DataError(Problem(rel, None, f'cannot read: {err.strerror or err}')) from None
    except UnicodeDecodeError as err:
        raise DataError(Problem(rel, None, f'not UTF-8 text ({err.reason} at byte {err.start})')) from None
    except yaml.YAMLError as err:
        mark = getattr(err, 'problem_mark', None) or getattr(err, 'context_mark', None)
        reason = ' '.join(str(p) for p in (getattr(err, 'context', None), getattr(err, 'problem', None)) if p)
        raise DataError(Problem(rel, None, f'malformed YAML: {reason or err}',
                                line=mark.line + 1 if mark else None)) from None


def file_kind(path, root=None):
    """The kind of a file under reference-data/ (a key of SCHEMA_FILES), or None if it has none."""
    parts = Path(_rel(path, data_root(root))).parts
    if parts[-1].endswith('.md') or parts[0] == 'schemas':
        return 'doc'
    if len(parts) == 2 and parts[0] == 'ledger' and parts[1].endswith(('.jsonl', '.frozen.json', '.schedule.json')):
        return 'ledger'         # a verdict study's nights, its frozen reference and its schedule (checked below)
    if len(parts) == 2 and parts[0] in ('papers', 'testbeds') and parts[1].endswith('.yaml'):
        return 'paper' if parts[0] == 'papers' else 'testbed'
    if len(parts) == 3 and parts[0] == 'systems' and parts[2] in ('references.yaml', 'provenance.yaml'):
        return 'system-' + parts[2].removesuffix('.yaml')
    if parts == ('coverage-ignore.yaml',):
        return 'coverage-ignore'
    if parts == ('experiments.yaml',):
        return 'experiments'
    if parts == ('limits', 'statements.yaml'):
        return 'limit-statements'
    if parts == ('nightly.yaml',):
        return 'nightly'
    if parts == ('simulated.yaml',):
        return 'simulated'
    return None


def load_schema(kind, root=None):
    return json.loads((data_root(root) / 'schemas' / SCHEMA_FILES[kind]).read_text())


def data_files(root=None):
    """Every data file under reference-data/ (not the schemas nor documentation)."""
    root = data_root(root)
    return sorted(p for p in root.rglob('*') if p.is_file() and file_kind(p, root) not in ('doc', 'ledger')
                  and not any(part.startswith('.') for part in p.relative_to(root).parts))


# ---------------------------------------------------------------------------------------------
# Loading and queries

def load_papers(root=None):
    """seed -> the paper's data (header and ``entries``), as read from papers/*.yaml."""
    papers = {}
    for path in sorted((data_root(root) / 'papers').glob('*.yaml')):
        data = read_yaml(path, root)
        papers[data['seed']] = dict(data, file=_rel(path, data_root(root)))
    return papers


def load_testbed_files(root=None):
    """seed -> the testbed file's data, as read from testbeds/*.yaml."""
    files = {}
    for path in sorted((data_root(root) / 'testbeds').glob('*.yaml')):
        data = read_yaml(path, root)
        files[data['seed']] = dict(data, file=_rel(path, data_root(root)))
    return files


def testbeds(root=None):
    """id -> resolved testbed or configuration: ``values`` (field -> value, a configuration's merged over
    its testbed's), ``fields`` (field -> {value, quote, where, note}), ``seed``, ``label``, ``testbed``
    (the enclosing testbed id), ``kind`` ('testbed' or 'configuration')."""
    resolved = {}
    for seed, data in load_testbed_files(root).items():
        for bed in data.get('testbeds') or []:
            base = dict(bed.get('fields') or {})
            resolved[bed['id']] = _resolved(seed, bed, base, bed['id'], 'testbed')
            for conf in bed.get('configurations') or []:
                resolved[conf['id']] = _resolved(seed, conf, {**base, **(conf.get('fields') or {})},
                                                 bed['id'], 'configuration')
    return resolved


def _resolved(seed, item, fields, testbed_id, kind):
    return {'id': item['id'], 'seed': seed, 'label': item['label'], 'kind': kind, 'testbed': testbed_id,
            'fields': fields, 'values': {name: f.get('value') for name, f in fields.items()}}


def testbed(testbed_id, root=None):
    """One resolved testbed or configuration (see :func:`testbeds`); KeyError if unknown."""
    return testbeds(root)[testbed_id]


def limits_config(values):
    """The :mod:`ibrepro.limits` configuration (spec strings in series, e.g. ``pcie:gen1:x8 ib:sdr:4x``)
    of a resolved testbed's ``values``: its host bus and the link ports it used. None if neither is known."""
    specs = []
    bus = values.get('host_bus')
    if bus:
        specs.append(f"pcie:gen{bus['gen']}:x{bus['lanes']}" if bus['type'] == 'pcie'
                     else f"{bus['type'].replace('-', '')}:{bus['width_bits']}:{bus['mhz']:g}")
    link = values.get('link')
    if link:
        ports = link.get('ports_used', 1)
        suffix = f':{ports}' if ports != 1 else ''
        specs.append({'infiniband': lambda: f"ib:{link['rate'].lower()}:{link['width']}x{suffix}",
                      'myrinet': lambda: f'myrinet:2000{suffix}',
                      'quadrics': lambda: f'quadrics:elan3{suffix}'}[link['tech']]())
    return ' '.join(specs) or None


def _matches_experiment(entry, number):
    exp = entry.get('experiment')
    return number in (exp if isinstance(exp, list) else [exp])


def entries(seed=None, experiment=None, kind=None, metric=None, configuration=None, testbed=None,
            root=None):
    """All paper entries, filtered; each a dict with the fields of ENTRY_FIELDS.

    ``configuration`` is a case-insensitive substring of the configuration label; ``testbed`` an
    exact testbed or configuration id; ``metric`` exact (case-insensitive); ``experiment`` a row number.
    """
    beds = testbeds(root)
    result = []
    for paper in load_papers(root).values():
        for raw in paper.get('entries') or []:
            item = _complete(raw, beds)
            if seed is not None and item['seed'] != str(seed).zfill(3):
                continue
            if experiment is not None and not _matches_experiment(item, int(experiment)):
                continue
            if kind is not None and item['kind'] != kind:
                continue
            if metric is not None and item['metric'].lower() != metric.lower():
                continue
            if configuration is not None and configuration.lower() not in (item['configuration'] or '').lower():
                continue
            if testbed is not None and testbed not in (item['testbed'], item['testbed_config']):
                continue
            result.append(item)
    return result


def entry(entry_id, root=None):
    """One entry by id; KeyError if unknown."""
    for item in entries(root=root):
        if item['id'] == entry_id:
            return item
    raise KeyError(entry_id)


def _complete(raw, beds):
    item = {name: raw.get(name) for name in ENTRY_FIELDS}
    item['unit_si'] = si_unit(raw.get('unit'))
    bed = beds.get(raw.get('testbed'))
    item['testbed_config'] = bed['id'] if bed and bed['kind'] == 'configuration' else None
    item['limits_config'] = limits_config(bed['values']) if item['testbed_config'] else None
    return item


def si_unit(unit):
    """The unit of ``value_si`` for an entry's unit: byte rates become MB/s (10^6 B/s)."""
    return 'MB/s' if unit in _SI_FACTORS else unit


def si_value(value, unit, mb_definition):
    """``value`` in ibrepro units: byte rates in MB/s of 10^6 bytes, anything else unchanged."""
    if isinstance(value, str) or value is None:
        return None
    if unit in _SI_FACTORS:
        return round(value * _SI_FACTORS[unit][mb_definition], 6)
    return value


# ---------------------------------------------------------------------------------------------
# Numbers in text: shared with the coverage check

#: A number as printed: digits with optional thousands commas or decimals ("10,000", "2.6.18").
NUMBER_RE = re.compile(r'(?<![0-9.,])[0-9]+(?:[.,][0-9]+)*')


def normalise_space(text):
    return ' '.join(text.split())


def quote_regex(quote):
    """A regex finding ``quote`` in a text whatever its line breaks and spacing."""
    return re.compile(r'\s+'.join(re.escape(part) for part in quote.split()))


def number_value(token):
    """The float of a printed number; '10,000' -> 10000.0, '2.6.18' -> None."""
    plain = token.replace(',', '') if re.fullmatch(r'[0-9]{1,3}(,[0-9]{3})+', token) else token
    try:
        return float(plain)
    except ValueError:
        return None


def same_number(a, b):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def value_in_quote(item):
    """Does the quote contain the entry's value as printed? (``printed`` when given.)"""
    quote = normalise_space(item['quote'])
    printed = item.get('printed')
    if printed is not None:
        return normalise_space(printed) in quote
    value = item['value']
    if isinstance(value, str):
        return re.search(rf'(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])', quote) is not None
    return any(same_number(number_value(m.group()), value) for m in NUMBER_RE.finditer(quote))


# ---------------------------------------------------------------------------------------------
# Validation

def validate(paths_=None, root=None):
    """Validate reference-data files (all of them, or those under ``paths_``); a list of Problems.

    Cross-references (testbed ids, entry ids, experiment numbers) always resolve against the whole
    reference-data tree, so validating one file still checks what it points at.
    """
    root = data_root(root)
    targets = _expand(paths_, root) if paths_ else data_files(root)
    problems = []
    loaded = {}
    for path in data_files(root) + [p for p in targets if p not in data_files(root)]:
        kind = file_kind(path, root)
        try:
            loaded[path] = (kind, read_yaml(path, root))
        except DataError as err:
            if path in targets:
                problems.append(err.problem)

    context = _Context(root, loaded)
    for path in targets:
        if path not in loaded:
            continue
        kind, data = loaded[path]
        rel = _rel(path, root)
        if kind is None:
            problems.append(Problem(rel, None, 'no schema for this file (expected papers/*.yaml, testbeds/*.yaml, '
                                               'systems/<system>/{references,provenance}.yaml, experiments.yaml, '
                                               'limits/statements.yaml, nightly.yaml, simulated.yaml or '
                                               'coverage-ignore.yaml)'))
            continue
        file_problems = _schema_problems(path, rel, kind, data, root)
        if not file_problems:
            file_problems = _SEMANTIC[kind](context, path, rel, data)
        problems.extend(file_problems)
    if not paths_:
        from . import ledger
        for path in sorted((root / 'ledger').glob('*.jsonl')):
            try:
                ledger.read(path)
            except ledger.LedgerError as err:
                problems.append(Problem(_rel(path, root), None, str(err)))
        from . import charts
        for path in sorted((root / 'ledger').glob('*.json')):
            try:
                doc = json.loads(path.read_text())
                if path.name.endswith('.frozen.json'):
                    charts.Baseline.from_json(doc)
                    if not all(isinstance(doc.get(k), (int, float)) for k in ('rate', 'predicted_rate')):
                        raise ValueError('a frozen reference needs its rate and predicted_rate')
                elif not (isinstance(doc, dict) and {'seed', 'clean', 'episodes'} <= set(doc)):
                    raise ValueError('a schedule is {"seed": S, "clean": N, "episodes": [...]}')
            except (OSError, ValueError) as err:
                problems.append(Problem(_rel(path, root), None, str(err)))
    return problems


def _expand(paths_, root):
    result = []
    for p in map(lambda x: Path(x).resolve(), paths_):
        result.extend([f for f in data_files(root) if p in f.parents] if p.is_dir() else [p])
    return result


def _schema_problems(path, rel, kind, data, root):
    validator = jsonschema.Draft202012Validator(load_schema(kind, root))
    instance = _str_keys(data) if kind.startswith('system-') else data
    problems = []
    leaves = [leaf for err in validator.iter_errors(instance) for leaf in _leaf_errors(err)]
    for err in sorted(leaves, key=lambda e: list(map(str, e.absolute_path))):
        where = _yaml_where(data, list(err.absolute_path))
        problems.append(Problem(rel, where, _schema_reason(err), line=_line_of(path, where)))
    return problems


def _leaf_errors(err):
    """Instead of "is not valid under any of the given schemas": the errors of the alternative that
    fits best (the one whose errors reach deepest into the data), recursively."""
    if err.validator not in ('oneOf', 'anyOf') or not err.context:
        return [err]
    by_alternative = {}
    for sub in err.context:
        by_alternative.setdefault(sub.relative_schema_path[0], []).append(sub)
    best = max(by_alternative.values(), key=lambda subs: max(len(e.absolute_path) for e in subs))
    return [leaf for sub in best for leaf in _leaf_errors(sub)]


def _schema_reason(err):
    path_tail = err.absolute_path[-1] if err.absolute_path else None
    field = f'{path_tail}: ' if isinstance(path_tail, str) else ''
    return f'{field}{err.message}'


def _str_keys(data):
    if isinstance(data, dict):
        return {str(k): _str_keys(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_str_keys(v) for v in data]
    return data


def _yaml_where(data, path):
    """'entry 000-x' / 'testbed 000-y' for paths into a list of items with ids, else the YAML path."""
    node, named, rest = data, None, []
    for key in path:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            rest.append(str(key))
            continue
        if isinstance(key, int) and isinstance(node, dict) and isinstance(node.get('id'), (str, int)):
            kind = {'entries': 'entry', 'testbeds': 'testbed', 'configurations': 'configuration',
                    'rules': 'rule', 'experiments': 'experiment'}.get(rest[-1] if rest else '', 'item')
            named, rest = f'{kind} {node["id"]}', []
        else:
            rest.append(str(key))
    tail = '.'.join(rest)
    if named:
        return f'{named}' + (f' ({tail})' if tail else '')
    return tail or None


def _line_of(path, where):
    """The line of ``id: <id>`` for an entry/testbed, so an editor can jump there."""
    if not where or path is None:
        return None
    match = re.match(r'(?:entry|testbed|configuration|rule|experiment) (\S+)', where)
    if not match:
        return None
    try:
        lines = Path(path).read_text(encoding='utf-8').splitlines()
    except OSError:
        return None
    pattern = re.compile(rf'^\s*(?:-\s*)?id:\s*[\'"]?{re.escape(match.group(1))}[\'"]?\s*(#.*)?$')
    return next((n for n, line in enumerate(lines, 1) if pattern.match(line)), None)


class _Context:
    """Everything loaded, for cross-file checks."""

    def __init__(self, root, loaded):
        self.root = root
        self.loaded = loaded
        self.entry_ids = {}      # id -> (file, entry)
        self.testbed_ids = {}    # id -> file
        self.experiments = None  # experiment id -> its seeds, from experiments.yaml if present
        self.seed_files = {}     # seed text file name -> seed
        for path, (kind, data) in loaded.items():
            rel = _rel(path, root)
            if kind == 'paper' and isinstance(data, dict):
                self.seed_files[data.get('seed_file')] = data.get('seed')
                for item in data.get('entries') or []:
                    if isinstance(item, dict) and isinstance(item.get('id'), str):
                        self.entry_ids.setdefault(item['id'], []).append((rel, item))
            elif kind == 'testbed' and isinstance(data, dict):
                for bed in data.get('testbeds') or []:
                    if not isinstance(bed, dict):
                        continue
                    for item in [bed] + list(bed.get('configurations') or []):
                        if isinstance(item, dict) and isinstance(item.get('id'), str):
                            self.testbed_ids.setdefault(item['id'], []).append(rel)
            elif kind == 'experiments' and isinstance(data, dict):
                self.experiments = {item['id']: set(item.get('seeds') or []) for item in data.get('experiments') or []
                                    if isinstance(item, dict) and isinstance(item.get('id'), int)}


def _check_paper(ctx, path, rel, data):
    problems = []

    def bad(where, reason):
        problems.append(Problem(rel, where, reason, line=_line_of(path, where)))

    seed = data['seed']
    if not Path(rel).name.startswith(seed + '-'):
        bad(None, f"file name should start with the seed '{seed}-'")
    header_mb = data['mb_definition']['value']
    for item in data['entries']:
        where = f'entry {item["id"]}'
        if item['seed'] != seed:
            bad(where, f"seed {item['seed']!r} differs from the file's seed {seed!r}")
        if not item['id'].startswith(seed + '-'):
            bad(where, f"id must start with the seed '{seed}-'")
        if len(ctx.entry_ids.get(item['id'], [])) > 1:
            others = sorted({f for f, _ in ctx.entry_ids[item['id']]})
            bad(where, f'duplicate id (also in: {", ".join(others)})')
        for field in ('testbed', 'baseline_testbed'):
            if item.get(field) and item[field] not in ctx.testbed_ids:
                bad(where, f'{field} {item[field]!r} is not a testbed or configuration id in testbeds/*.yaml')
        if item.get('restates'):
            target = ctx.entry_ids.get(item['restates'])
            if not target:
                bad(where, f"restates {item['restates']!r}, which is not an entry id")
            elif target[0][1].get('value') != item['value']:
                bad(where, f"restates {item['restates']!r} but its value {target[0][1].get('value')!r} differs")
        exps = item['experiment'] if isinstance(item['experiment'], list) else [item['experiment']]
        if ctx.experiments:
            for number in exps:
                if number is None:
                    continue
                if number not in ctx.experiments:
                    bad(where, f'experiment {number} is not in experiments.yaml')
                elif seed not in ctx.experiments[number]:
                    bad(where, f'experiment {number} is about seed(s) {", ".join(sorted(ctx.experiments[number]))}, '
                               f'not {seed}')
        if item['kind'] != 'background' and item['experiment'] is None:
            bad(where, f"a {item['kind']} entry needs an experiment number (null is for background)")
        _check_units(item, header_mb, bad, where)
        if not value_in_quote(item):
            shown = item.get('printed', item['value'])
            bad(where, f'the quote does not contain the value as printed ({shown!r}); '
                       f'give `printed` if the text writes it differently')
    return problems


def _check_units(item, header_mb, bad, where):
    """unit/value types, the MB definition and value_si of one entry; reports through ``bad``."""
    unit, value, mb = item['unit'], item['value'], item['mb_definition']
    if isinstance(value, str) != (unit is None):
        bad(where, 'unit must be null exactly when the value is a string (NPB class, process layout)')
    if unit in _SI_FACTORS:
        if mb is None:
            bad(where, f'unit {unit} needs mb_definition (the paper says {header_mb})')
        elif mb != header_mb:
            bad(where, f"mb_definition {mb} differs from the paper's {header_mb}")
    elif mb is not None:
        bad(where, f'mb_definition must be null for unit {unit!r} (only MB/s and GB/s depend on it)')
    if isinstance(value, (int, float)) and (unit not in _SI_FACTORS or mb):
        expected = si_value(value, unit, mb or '10^6')
        got = item['value_si']
        if got is None or not math.isclose(got, expected, rel_tol=1e-6):
            bad(where, f'value_si {got!r} is inconsistent: {value} {unit} with MB = {mb} is {expected} '
                       f'{si_unit(unit)}')


def _check_testbed(ctx, path, rel, data):
    problems = []
    seed = data['seed']
    if not Path(rel).name.startswith(seed + '-'):
        problems.append(Problem(rel, None, f"file name should start with the seed '{seed}-'"))
    for bed in data['testbeds']:
        for item in [bed] + bed['configurations']:
            kind = 'testbed' if item is bed else 'configuration'
            where = f'{kind} {item["id"]}'
            if not item['id'].startswith(seed + '-'):
                problems.append(Problem(rel, where, f"id must start with the seed '{seed}-'",
                                        line=_line_of(path, where)))
            if len(ctx.testbed_ids.get(item['id'], [])) > 1:
                problems.append(Problem(rel, where, f'duplicate testbed id (also in: '
                                        f'{", ".join(sorted(set(ctx.testbed_ids[item["id"]])))})',
                                        line=_line_of(path, where)))
        for conf in bed['configurations']:
            merged = {**bed['fields'], **conf['fields']}
            for needed in ('hca', 'link'):
                if needed not in merged:
                    where = f'configuration {conf["id"]}'
                    problems.append(Problem(rel, where, f'needs a {needed} field (here or in its testbed)',
                                            line=_line_of(path, where)))
    return problems


def _ref_depth_problems(rel, cls, node, depth, index, problems, trail):
    """Every path below a check class must be len($index) (or 1) levels, then variables -> tuples."""
    for key, val in node.items():
        here = trail + [str(key)]
        if depth < index:
            if not isinstance(val, dict):
                problems.append(Problem(rel, '.'.join(here), f'expected {index - depth} more level(s) of '
                                        f'index keys before the performance variables'))
            else:
                _ref_depth_problems(rel, cls, val, depth + 1, index, problems, here)
        elif not isinstance(val, list):
            problems.append(Problem(rel, '.'.join(here), 'expected a reference tuple [value, lower, upper, unit] '
                                    '(ReFrame would skip the whole check)'))


def check_reference_document(doc, name='references.yaml', root=None):
    """Problems of a per-system ReFrame references document (a dict, as ``ibrepro baseline`` builds it):
    the schema and the nesting depth that ReFrame requires."""
    problems = _schema_problems(None, name, 'system-references', doc, data_root(root))
    return problems or _check_system_references(None, None, name, doc)


def _check_system_references(ctx, path, rel, data):
    problems = []
    for cls, check in (data or {}).items():
        index = len(check.get('$index') or []) or 1
        body = {k: v for k, v in check.items() if k != '$index'}
        _ref_depth_problems(rel, cls, body, 0, index, problems, [cls])
    return problems


def _check_system_provenance(ctx, path, rel, data):
    problems = []
    refs_path = Path(path).with_name('references.yaml')
    refs = ctx.loaded.get(refs_path, (None, None))[1]
    if refs is None:
        return [Problem(rel, None, 'no sibling references.yaml to give provenance for')]
    for cls, node in (data or {}).items():
        if cls not in refs:
            problems.append(Problem(rel, cls, 'no such check class in references.yaml'))
            continue
        _provenance_problems(ctx, rel, [cls], node, {k: v for k, v in refs[cls].items() if k != '$index'},
                             problems)
    return problems


def _provenance_problems(ctx, rel, here, node, refs, problems):
    """Walk provenance.yaml beside references.yaml: the same keys, with sources where references has tuples."""
    for key, value in node.items():
        where = '.'.join(str(k) for k in [*here, key])
        if key not in refs:
            problems.append(Problem(rel, where, 'no such key in references.yaml'))
        elif isinstance(refs[key], dict):
            if isinstance(value, dict) and not ({'entries', 'measured'} & set(value)):
                _provenance_problems(ctx, rel, [*here, key], value, refs[key], problems)
            else:
                problems.append(Problem(rel, where, 'references.yaml has more index levels here'))
        else:
            ids = [value] if isinstance(value, str) else value if isinstance(value, list) \
                else value.get('entries') or []
            for entry_id in ids:
                if entry_id not in ctx.entry_ids:
                    problems.append(Problem(rel, where, f'{entry_id!r} is not a paper entry id'))


def _check_coverage_ignore(ctx, path, rel, data):
    problems = []
    ids = [rule['id'] for rule in data['rules']]
    for rule in data['rules']:
        where = f'rule {rule["id"]}'
        if ids.count(rule['id']) > 1:
            problems.append(Problem(rel, where, 'duplicate rule id', line=_line_of(path, where)))
        if 'pattern' in rule:
            try:
                re.compile(rule['pattern'])
            except re.error as err:
                problems.append(Problem(rel, where, f'bad regular expression: {err}', line=_line_of(path, where)))
    return problems


def _check_experiments(ctx, path, rel, data):
    ids = [item['id'] for item in data['experiments']]
    return [Problem(rel, f'experiment {i}', 'duplicate experiment id', line=_line_of(path, f'experiment {i}'))
            for i in sorted(set(ids)) if ids.count(i) > 1]


def _check_limit_statements(ctx, path, rel, data):
    from . import limits

    problems = []
    for n, item in enumerate(data, 1):
        where = f'statement {n} ({item["spec"]})'
        try:
            limits.parse_spec(item['spec'])
        except ValueError as err:
            problems.append(Problem(rel, where, f'spec does not parse: {err}'))
        if ctx.seed_files and item['seed'] not in ctx.seed_files:
            problems.append(Problem(rel, where, f"seed {item['seed']!r} is not the seed_file of any paper"))
    return problems


def _check_simulated(ctx, path, rel, data):
    """The simulated testbeds: shared sources, paper entries and configurations exist; the entries a quantity sums
    are in its unit."""
    problems = []
    for name, bed in enumerate(data['testbeds']):
        where = f"testbeds[{name}] ({bed['name']})"
        problems += [Problem(rel, where, f'configuration {c!r} is in no testbeds/*.yaml')
                     for c in bed['configurations'] if c not in ctx.testbed_ids]
        for field in ('latency', 'bandwidth', 'eager', 'overhead', 'intra_latency', 'intra_bandwidth'):
            spec = bed[field]
            if isinstance(spec, str) and spec not in data['shared']:
                problems.append(Problem(rel, f'{where}.{field}', f'no shared source {spec!r}'))
            elif isinstance(spec, dict):
                problems += _source_problems(ctx, rel, f'{where}.{field}', spec)
    for name, spec in data['shared'].items():
        problems += _source_problems(ctx, rel, f'shared.{name}', spec)
    for entry_id, configurations in data['baselines'].items():
        if entry_id not in ctx.entry_ids:
            problems.append(Problem(rel, f'baselines.{entry_id}', 'no such paper entry'))
        problems += [Problem(rel, f'baselines.{entry_id}', f'configuration {c!r} is in no testbeds/*.yaml')
                     for c in configurations if c not in ctx.testbed_ids]
    return problems


def _source_problems(ctx, rel, where, spec):
    problems = []
    for entry_id in spec['entries'] + spec.get('cites', []):
        if entry_id not in ctx.entry_ids:
            problems.append(Problem(rel, where, f'no paper entry {entry_id!r}'))
    # a share is a ratio of its entries; a sum adds values of the quantity's unit
    for entry_id in [] if spec.get('share_of_latency') else spec['entries']:
        for _, item in ctx.entry_ids.get(entry_id, []):
            if si_unit(item.get('unit')) != spec['unit']:
                problems.append(Problem(rel, where, f"entry {entry_id!r} is in {si_unit(item.get('unit'))}, "
                                                    f"not {spec['unit']}"))
    return problems


_SEMANTIC = {
    'paper': _check_paper,
    'testbed': _check_testbed,
    'system-references': _check_system_references,
    'system-provenance': _check_system_provenance,
    'coverage-ignore': _check_coverage_ignore,
    'experiments': _check_experiments,
    'limit-statements': _check_limit_statements,
    'nightly': lambda ctx, path, rel, data: [],      # generated by scripts/nightly_subset.py; its test checks it
    'simulated': _check_simulated,
}


# ---------------------------------------------------------------------------------------------
# Export and display

def _flat(item):
    """One entry as a flat row of strings (CSV): lists joined with ';', parameters as param.<key>."""
    row = {}
    for name in ENTRY_FIELDS:
        val = item.get(name)
        if name == 'parameters':
            for key in _PARAMETER_KEYS:
                pval = (val or {}).get(key)
                row[f'param.{key}'] = '' if pval is None else str(pval)
            continue
        if isinstance(val, list):
            val = ';'.join(str(v) for v in val)
        row[name] = '' if val is None else str(val)
    return row


def csv_columns():
    cols = []
    for name in ENTRY_FIELDS:
        cols.extend(f'param.{k}' for k in _PARAMETER_KEYS) if name == 'parameters' else cols.append(name)
    return cols


def export(items, fmt):
    """All ``items`` as JSON (a list of objects) or CSV (a header and one row per entry)."""
    if fmt == 'json':
        return json.dumps(items, indent=2, ensure_ascii=False) + '\n'
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=csv_columns(), lineterminator='\n')
    writer.writeheader()
    for item in items:
        writer.writerow(_flat(item))
    return out.getvalue()


def _fmt_value(item):
    text = str(item['value'])
    qual = {'range-min': 'from', 'range-max': 'to'}.get(item['qualifier'], item['qualifier'])
    unit = f' {item["unit"]}' if item['unit'] else ''
    text = f'{qual} {text}{unit}' if qual else f'{text}{unit}'
    if item['unit'] in _SI_FACTORS and item['mb_definition'] == '2^20':
        text += f' (={item["value_si"]:.1f} MB/s SI)'
    return text


def table(items, width=None):
    """A plain-text table of entries for a terminal."""
    cols = [('id', lambda e: e['id']),
            ('exp', lambda e: ','.join(map(str, e['experiment'])) if isinstance(e['experiment'], list)
             else '' if e['experiment'] is None else str(e['experiment'])),
            ('where', lambda e: e['where']),
            ('configuration', lambda e: e['configuration'] or ''),
            ('size', lambda e: '' if e['message_size'] is None else str(e['message_size'])),
            ('metric', lambda e: e['metric']),
            ('value', _fmt_value)]
    rows = [[get(e) for _, get in cols] for e in items]
    widths = [max([len(name)] + [len(r[i]) for r in rows]) for i, (name, _) in enumerate(cols)]
    limit = {3: 34, 2: 26}
    widths = [min(w, limit.get(i, w)) for i, w in enumerate(widths)]

    def line(cells):
        out = '  '.join(c[:w].ljust(w) if len(c) <= w else c[:w - 1] + '~' for c, w in zip(cells, widths))
        return out.rstrip()
    return '\n'.join([line([n for n, _ in cols]), line(['-' * w for w in widths])] + [line(r) for r in rows])


# ---------------------------------------------------------------------------------------------
# CLI

def add_cli(subparsers):
    p = subparsers.add_parser(
        'refs', help="the papers' reference data: validate, show, export, coverage",
        description="The seed papers' numbers (reference-data/papers), their testbeds "
                    '(reference-data/testbeds) and the per-system ReFrame references, with provenance.')
    sub = p.add_subparsers(dest='refs_command', metavar='ACTION', required=True)

    def root_option(sp):
        sp.add_argument('--root', metavar='DIR', help='the reference-data directory (default: the checkout\'s)')

    v = sub.add_parser('validate', help='check every reference-data file against its schema and the '
                                        'cross-file rules; exit 1 on any problem')
    v.add_argument('paths', nargs='*', metavar='PATH', help='files or directories (default: all)')
    root_option(v)
    v.set_defaults(func=_cli_validate)

    def filters(sp):
        sp.add_argument('--seed', help='000 .. 004')
        sp.add_argument('--experiment', type=int, metavar='N', help='row number of the experiment checklist')
        sp.add_argument('--configuration', metavar='TEXT', help='substring of the configuration, e.g. PCIe, QDR')
        sp.add_argument('--testbed', metavar='ID', help='testbed or configuration id')
        sp.add_argument('--metric', help='e.g. latency, bandwidth, "bidirectional bandwidth", time')
        sp.add_argument('--kind', choices=['result', 'method', 'background'])

    s = sub.add_parser('show', help='print entries as a table')
    filters(s)
    s.add_argument('--quotes', action='store_true', help='print each entry with its quote and note')
    root_option(s)
    s.set_defaults(func=_cli_show)

    e = sub.add_parser('export', help='all entries (filtered) as JSON or CSV, one object/row each')
    filters(e)
    e.add_argument('--format', choices=['json', 'csv'], default='json')
    e.add_argument('-o', '--output', metavar='FILE', help='write here instead of stdout')
    root_option(e)
    e.set_defaults(func=_cli_export)

    t = sub.add_parser('testbeds', help='list testbeds and configurations (host bus, link)')
    root_option(t)
    t.set_defaults(func=_cli_testbeds)

    c = sub.add_parser('coverage', help='check that every number in the seed texts is captured by an entry '
                                        'or explicitly ignored; exit 1 otherwise')
    c.add_argument('--seeds', metavar='DIR', help='directory of the seed texts (default: $IBREPRO_SEEDS)')
    c.add_argument('--seed', action='append', help='only this seed (repeatable)')
    c.add_argument('-v', '--verbose', action='store_true', help='also list the ignored numbers and why')
    root_option(c)
    c.set_defaults(func=_cli_coverage)


def _filters(args):
    return dict(seed=args.seed, experiment=args.experiment, kind=args.kind, metric=args.metric,
                configuration=args.configuration, testbed=args.testbed, root=args.root)


def _cli_validate(args):
    problems = validate(args.paths or None, root=args.root)
    for problem in problems:
        print(f'ibrepro refs validate: {problem}', file=sys.stderr)
    if problems:
        print(f'{len(problems)} problem(s)', file=sys.stderr)
        return 1
    papers = load_papers(args.root)
    count = sum(len(p['entries']) for p in papers.values())
    files = len(args.paths) if args.paths else len(data_files(args.root))
    print(f'OK: {files} file(s) checked; the data holds {count} entries from {len(papers)} papers and '
          f'{len(testbeds(args.root))} testbeds/configurations')
    return 0


def _load_or_exit(fn, *a, **kw):
    try:
        return fn(*a, **kw)
    except DataError as err:
        print(f'ibrepro refs: {err}', file=sys.stderr)
        raise SystemExit(1) from None


def _cli_show(args):
    items = _load_or_exit(entries, **_filters(args))
    if args.quotes:
        for item in items:
            print(f'{item["id"]}  [{item["where"]}]  {_fmt_value(item)}')
            print(f'    "{normalise_space(item["quote"])}"')
            if item.get('note'):
                print(f'    note: {item["note"]}')
    else:
        print(table(items))
    print(f'({len(items)} entries)', file=sys.stderr)
    return 0


def _cli_export(args):
    text = export(_load_or_exit(entries, **_filters(args)), args.format)
    if args.output:
        Path(args.output).write_text(text, encoding='utf-8')
    else:
        sys.stdout.write(text)
    return 0


def _cli_testbeds(args):
    for bed_id, bed in _load_or_exit(testbeds, args.root).items():
        vals = bed['values']
        extras = [f'{k}={json.dumps(vals[k], separators=(",", ":"))}' for k in ('host_bus', 'link') if k in vals]
        indent = '  ' if bed['kind'] == 'configuration' else ''
        print(f'{indent}{bed_id}: {bed["label"]}' + (f'  {" ".join(extras)}' if extras else ''))
    return 0


def _cli_coverage(args):
    from . import refcoverage
    return refcoverage.cli(args)

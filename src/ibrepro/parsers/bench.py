"""ibrepro-bench: our own MPI and verbs benchmarks (``benchmarks/``, documented in its README).

The programs print a self-describing output::

    # ibrepro-bench <benchmark> <version>
    # <key>: <value>                  run parameters (-> ParsedOutput.meta)
    # table: <name>                   one per table
    # <key>: <value>                  table parameters (-> Table.params), e.g. reuse: 50
    bytes lat[us] send[us] ...        header: name[unit]; a column named like a metric
    0 1.23 0.18 ...                   (lat, bw, msgrate, overhead, overlap, mem) is one
    # note: ...                       (-> Table.notes)
    # done                            only when the run completed

Their own failures go to stderr as ``<program>: <kind>: <detail>``: ``invalid option`` ->
invalid-option, ``invalid rank count`` -> invalid-ranks, ``no RDMA device found`` -> no-device,
``timeout`` -> timeout, ``error`` -> abort. Output without ``# done`` is incomplete.
"""

import re

from . import METRIC_UNITS, BenchmarkFailed, Column, ParsedOutput, ParseError, Table, mpi_abort_reason

TOOL = 'bench'  # the module name, as every tool's (the outputs say 'ibrepro-bench')

# Values read to the end of the line and the code strips them: a lazy (.*?)\s*$ is quadratic in a line's length.
_BANNER = re.compile(r'^# ibrepro-bench (\S+) (\S+)[ \t\r]*$', re.M)
_FAILURE = re.compile(r'^(ibrepro_\w+): (invalid option|invalid rank count|no RDMA device found|'
                      r'timeout|error)(?:: (.*)|[ \t\r]*)$', re.M)
_KINDS = {'invalid option': 'invalid-option', 'invalid rank count': 'invalid-ranks',
          'no RDMA device found': 'no-device', 'timeout': 'timeout', 'error': 'abort'}
_KEY_VALUE = re.compile(r'^#\s*([A-Za-z_]\w*):\s?(.*)$')
_COLUMN = re.compile(r'^([A-Za-z_]\w*)(?:\[([^\]]+)\])?$')


def detect(text):
    return _BANNER.search(text) is not None or _FAILURE.search(text) is not None


def _value(token):
    if re.fullmatch(r'-?\d+', token):
        return int(token)
    try:
        return float(token)
    except ValueError:
        return token


def _columns(source, line):
    columns = []
    for token in line.split():
        m = _COLUMN.match(token)
        if not m:
            raise ParseError(source, f'bad column {token!r} in header {line!r}')
        name, unit = m.groups()
        if name in METRIC_UNITS and unit != METRIC_UNITS[name]:
            raise ParseError(source, f'column {token!r}: {name} must be in {METRIC_UNITS[name]}')
        columns.append(Column(token, name, unit or ('B' if name == 'bytes' else None)))
    return columns


def _table(name, columns, params):
    keys = [c.key for c in columns]
    return Table(benchmark=name, columns=columns, rows=[], params=params,
                 metrics={k: k for k in keys if k in METRIC_UNITS},
                 size_key='bytes' if 'bytes' in keys else None)


def parse(text, source):
    banner = _BANNER.search(text)
    failures = _FAILURE.findall(text)
    out = ParsedOutput(tool=TOOL, source=source,
                       version=banner.group(2) if banner else None,
                       meta={'benchmark': banner.group(1)} if banner else {})

    if banner:
        _parse_body(text[banner.end():], out)

    if failures:
        program, kind, detail = failures[0]
        detail = detail.strip()
        raise BenchmarkFailed(source, _KINDS[kind], f'{program}: {kind}'
                              + (f': {detail}' if detail else ''), partial=out)

    abort = mpi_abort_reason(text)
    if abort:
        raise BenchmarkFailed(source, 'abort', abort, partial=out)

    if not banner:
        raise ParseError(source, 'no "# ibrepro-bench" banner')

    if not re.search(r'^# done\s*$', text, re.M):
        sizes = '; '.join(f'{t.benchmark}: last size {t.sizes()[-1] if t.sizes() else "none"}'
                          for t in out.tables) or 'no table'
        raise BenchmarkFailed(source, 'incomplete', f'ibrepro-bench {out.meta["benchmark"]}: '
                              f'no "# done" line ({sizes})', partial=out)

    if not out.tables and out.meta.get('role') != 'server':
        raise ParseError(source, 'ibrepro-bench printed its header but no table')

    return out


def _parse_body(body, out):
    source = out.source
    table, params, name = None, None, None
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith('ibrepro_'):  # stderr lines mixed in
            continue

        if stripped.startswith('#'):
            if stripped == '# done':
                table = name = None
                continue
            kv = _KEY_VALUE.match(stripped)
            if not kv:
                continue
            key, value = kv.group(1), kv.group(2).rstrip()
            if key == 'table':
                name, params, table = value, {}, None
            elif key == 'note':
                if table is not None:
                    table.notes.append(value)
            elif name is not None and table is None:
                params[key] = _value(value)
            elif name is None:
                out.meta[key] = _value(value)
            continue

        if name is None:
            continue  # launcher chatter outside any table
        if table is None:
            table = _table(name, _columns(source, stripped), params)
            out.tables.append(table)
            continue

        tokens = stripped.split()
        if not re.fullmatch(r'-?\d+', tokens[0]):  # rows start with a size or a rank
            table.notes.append(f'not a row: {stripped}')  # e.g. the launcher's messages
            continue
        if len(tokens) != len(table.columns):
            raise ParseError(source, f'{name}: row {stripped!r} has {len(tokens)} fields, '
                                     f'the header has {len(table.columns)}')
        row = {col.key: _value(tok) for col, tok in zip(table.columns, tokens)}
        for col in table.columns:
            if col.unit and not isinstance(row[col.key], (int, float)):
                raise ParseError(source, f'{name}: non-numeric {col.name} in row {stripped!r}')
        table.rows.append(row)

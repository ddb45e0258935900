"""Intel MPI Benchmarks (IMB-MPI1, -NBC, -P2P, -RMA; the Pallas PMB of the papers).

IMB prints one table per benchmark and process count ("# Benchmarking PingPong", "# #processes = 2"),
and for RMA one per mode ("# MODE: AGGREGATE"). Its "Mbytes/sec" is 10^6 bytes/s (2021.x: checked
against t[usec] in the real PingPong output, tests/test_parsers_imb.py). Failures IMB reports itself:

* ``# !! Benchmark PingPong invalid for 1 processes !!`` -> invalid-ranks
* ``Invalid benchmark name X`` (IMB then runs its whole default list, exit 0) -> invalid-benchmark,
  or invalid-option when X looks like an option
* ``32768 time-out.; Time limit ... is over`` in a table -> timeout (the sweep stops there)
"""

import re

from . import BenchmarkFailed, Column, ParsedOutput, ParseError, Table, mpi_abort_reason

TOOL = 'imb'

# Patterns match to the end of a line and the code strips it: a lazy (.*?)\s*$ is quadratic in a line's length.
_BANNER = re.compile(r'^#[ \t]+Intel\(R\) MPI Benchmarks (\S+?),?[ \t]+(.*)$', re.M)
_INVALID_RANKS = re.compile(r'^#\s*!!\s*Benchmark (\S+) invalid for (\d+) processes', re.M)
_INVALID_NAME = re.compile(r'^Invalid benchmark name (\S+)', re.M)
_META = re.compile(r'^#[ \t]+(Date|Machine|System|Release|MPI Version)[ \t]*:(.*)$', re.M)
_CALLING = 'Calling sequence was:'
_FINALIZE = '# All processes entering MPI_Finalize'

# header token -> (row key, unit)
_UNITS = {'usec': 'us', '%': '%'}


def detect(text):
    return _banner(text) is not None


def _banner(text):
    """(version, component) of the first '# Intel(R) MPI Benchmarks 2021.8, MPI-1 part' line, or None."""
    for m in _BANNER.finditer(text):
        component, part, _ = m.group(2).partition(' part')
        if part:
            return m.group(1), component.strip()
    return None


def _calling(text):
    """The command line IMB prints in the '#' lines after 'Calling sequence was:', or None."""
    at = text.find(_CALLING)
    if at < 0 or not text[text.rfind('\n', 0, at) + 1:at].lstrip().startswith('#'):
        return None
    for line in text[at:].split('\n', 4)[1:4]:
        body = line.strip().lstrip('#').strip()
        if body:
            return body if line.lstrip().startswith('#') else None
    return None


def _column(name):
    if name == '#bytes':
        return Column(name, 'bytes', 'B')
    if name == '#repetitions':
        return Column(name, 'repetitions', None)
    if name == 'Mbytes/sec':
        return Column(name, 'mbytes_per_sec', 'MB/s')
    if name == 'Msg/sec':
        return Column(name, 'msg_per_sec', 'msg/s')

    m = re.fullmatch(r'(\w+)\[(usec|%)\]', name)
    if m:
        suffix = 'usec' if m.group(2) == 'usec' else 'pct'
        return Column(name, f'{m.group(1).lower()}_{suffix}', _UNITS[m.group(2)])

    return Column(name, re.sub(r'\W+', '_', name.strip('#')).strip('_').lower(), None)


def _metrics(keys):
    """Which columns become performance variables (see parsers.METRIC_UNITS)."""
    metrics = {}
    for lat in ('t_usec', 't_avg_usec', 't_pure_usec'):
        if lat in keys:
            metrics['lat'] = lat
            break

    if 'mbytes_per_sec' in keys:
        metrics['bw'] = 'mbytes_per_sec'
    if 'msg_per_sec' in keys:
        metrics['msgrate'] = 'msg_per_sec'
    return metrics


def _number(token):
    return int(token) if re.fullmatch(r'-?\d+', token) else float(token)


def _parse_block(source, name, lines, params):
    """Parse the lines after a '# Benchmarking' banner up to the next banner."""
    header, rows, notes = None, [], []
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue

        m = re.match(r'#\s*MODE:\s*(\S+)', stripped)
        if m:
            params['mode'] = m.group(1)
            continue

        if header is None:
            if stripped.startswith(('#bytes', '#repetitions')):
                header = [_column(tok) for tok in stripped.split()]
            continue

        if stripped.startswith('#'):
            continue

        tokens = stripped.split()
        if 'time-out' in stripped:
            notes.append(f'time-out at {tokens[0]} bytes: {stripped.split(";", 1)[-1].strip()}')
            break

        if len(tokens) != len(header):
            raise ParseError(source, f'{name}: row {stripped!r} has {len(tokens)} fields, '
                                     f'the header has {len(header)}')
        try:
            rows.append({col.key: _number(tok) for col, tok in zip(header, tokens)})
        except ValueError:
            raise ParseError(source, f'{name}: non-numeric row {stripped!r}') from None

    if header is None:
        raise ParseError(source, f'{name}: no table header after the banner')

    keys = [c.key for c in header]
    return Table(benchmark=name, columns=header, rows=rows, params=params,
                 metrics=_metrics(keys), size_key='bytes' if 'bytes' in keys else None,
                 notes=notes)


def parse(text, source):
    banner = _banner(text)
    if not banner:
        raise ParseError(source, 'no "Intel(R) MPI Benchmarks" banner')

    out = ParsedOutput(tool=TOOL, source=source, version=banner[0], meta={'component': banner[1]})
    out.meta.update({k.lower().replace(' ', '_'): v.strip() for k, v in _META.findall(text)})
    calling = _calling(text)
    if calling:
        out.meta['command'] = calling

    chunks = re.split(r'^#\s*Benchmarking\s+(\S+)\s*$', text, flags=re.M)
    for name, body in zip(chunks[1::2], chunks[2::2]):
        lines = body.splitlines()
        params = {}
        for line in lines[:4]:
            m = re.match(r'#\s*#processes\s*=\s*(\d+)', line.strip())
            if m:
                params['processes'] = int(m.group(1))
            m = re.match(r'#\s*\(\s*(\d+) additional processes waiting', line.strip())
            if m:
                params['waiting'] = int(m.group(1))

        # RMA prints several MODE tables under one banner: split on the MODE lines.
        parts = re.split(r'^(#\s*MODE:\s*\S+.*)$', body, flags=re.M)
        if len(parts) > 1:
            for mode_line, mode_body in zip(parts[1::2], parts[2::2]):
                out.tables.append(_parse_block(source, name, [mode_line] + mode_body.splitlines(),
                                               dict(params)))
        else:
            out.tables.append(_parse_block(source, name, lines, params))

    _check_failures(text, out)
    return out


def _check_failures(text, out):
    source = out.source
    invalid = _INVALID_RANKS.findall(text)
    if invalid:
        what = ', '.join(f'{bench} with {n} processes' for bench, n in invalid)
        raise BenchmarkFailed(source, 'invalid-ranks', f'IMB: benchmark invalid: {what}',
                              partial=out)

    names = _INVALID_NAME.findall(text)
    if names:
        kind = 'invalid-option' if any(n.startswith('-') for n in names) else 'invalid-benchmark'
        raise BenchmarkFailed(source, kind, 'IMB: invalid benchmark name(s) '
                              + ', '.join(repr(n) for n in names)
                              + ' (IMB ignores them and runs its default list)', partial=out)

    abort = mpi_abort_reason(text)
    if abort:
        raise BenchmarkFailed(source, 'abort', abort, partial=out)

    for table in out.tables:
        for note in table.notes:
            if note.startswith('time-out'):
                raise BenchmarkFailed(source, 'timeout', f'IMB {table.benchmark}: {note}',
                                      partial=out)

    if not out.tables:
        raise ParseError(source, 'IMB printed its header but no benchmark table')

    if _FINALIZE not in text:
        raise BenchmarkFailed(source, 'incomplete',
                              'IMB output ends before "All processes entering MPI_Finalize" '
                              '(killed, timed out or crashed)', partial=out)

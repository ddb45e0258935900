"""OSU Micro-Benchmarks (OMB 5.x, 7.x): point-to-point, multi-pair, collective, one-sided, startup.

An OMB output is one table: a title, option lines, a column header, one row per message size::

    # OSU MPI Latency Test v7.4         title (5.3's osu_init prints none)
    # Datatype: MPI_CHAR.               options (7.x); mbw_mr: "# [ pairs: 2 ] [ window size: 64 ]"
    # Size       Avg Latency(us)        5.x point-to-point: "# Size          Latency (us)"
    1                       0.44

Version differences handled: 7.x prints a blank first line and "# Datatype:", starts latency sweeps
at 1 byte (5.x at 0) and names the latency column "Avg Latency(us)" (5.x "Latency (us)"); ``-f`` adds
Min/Max Latency and Iterations, ``-c`` a Validation column (Pass/Fail); barrier has no size column
(one row, size-less); non-blocking collectives print Overall/Compute/Pure Comm./Overlap; osu_init
prints "nprocs: N, min: X ms, ..." (5.3: no title, no "ms"); osu_hello only a line of text (parsed
with no table). OMB's MB/s is 10^6 bytes/s: ``size / 1e6 * loop * window_size`` in
mpi/pt2pt/osu_bw.c (OMB 5.3, line 127); osu_init's times are milliseconds (mpi/startup/osu_init.c,
5.3, lines 26-27).

Failures OMB reports itself: "This test requires exactly two processes" -> invalid-ranks; getopt's
"invalid option" or OMB's usage text -> invalid-option; a "Fail" in the Validation column or "DATA
VALIDATION ERROR" -> verification; a launcher's abort banner -> abort (timeout if it names a time
limit), the rows measured before kept in ``partial``.
"""

import re

from . import BenchmarkFailed, Column, ParsedOutput, ParseError, Table, mpi_abort_reason

TOOL = 'osu'

_TITLE = re.compile(r'^#\s*OSU (.+?) Test(?: v(\S+))?\s*$', re.M)
_INIT = re.compile(r'^nprocs: (\d+), min: (\d+)(?: ms)?, max: (\d+)(?: ms)?, avg: (\d+)(?: ms)?',
                   re.M)
_HELLO = re.compile(r'^This is a test with (\d+) processes', re.M)
_RANKS = re.compile(r'^This test requires ([^\n]*?processes)', re.M)
_BAD_OPTION = re.compile(r"(?:invalid option -- '?(\S+?)'?$|unrecognized option '?(\S+?)'?$"
                         r"|option requires an argument -- '?(\S+?)'?$|^(Invalid [A-Z][\w ]+))",
                         re.M)
_USAGE = re.compile(r'^Usage: (osu_\w+)', re.M)
# Patterns read to the end of a line and the code strips it: a lazy (.*?)\s*$ is quadratic in a line's length.
_VALIDATION_ERROR = re.compile(r'^DATA VALIDATION ERROR: .*$', re.M)
_HEADER = re.compile(r'^#\s*(?:Size|Avg Latency)\b', re.M)
_ROW = re.compile(r'^\s*[-+]?\d')

# printed unit -> (key suffix, Column unit)
_UNITS = {'us': ('us', 'us'), 'MB/s': ('mb_s', 'MB/s'), '%': ('pct', '%')}


def detect(text):
    return any(p.search(text) for p in (_TITLE, _INIT, _RANKS, _USAGE, _VALIDATION_ERROR))


def _snake(name):
    return re.sub(r'\W+', '_', name).strip('_').lower()


def _column(name):
    if name == 'Size':
        return Column(name, 'bytes', 'B')
    if name == 'MB/s':
        return Column(name, 'mb_s', 'MB/s')
    if name == 'Messages/s':
        return Column(name, 'messages_s', 'msg/s')

    m = re.fullmatch(r'(.*?)\s*\((us|MB/s|%)\)', name)
    if m:
        suffix, unit = _UNITS[m.group(2)]
        return Column(name, f'{_snake(m.group(1))}_{suffix}', unit)

    return Column(name, _snake(name), None)


def _metrics(keys):
    metrics = {}
    lat = [k for k in ('latency_us', 'avg_latency_us', 'overall_us') if k in keys]
    if lat:
        metrics['lat'] = lat[0]
    bw = [k for k in ('bandwidth_mb_s', 'mb_s') if k in keys]
    if bw:
        metrics['bw'] = bw[0]
    if 'messages_s' in keys:
        metrics['msgrate'] = 'messages_s'
    return metrics


def _value(token, column, source, line):
    if column.key == 'validation':
        return token
    try:
        return int(token) if re.fullmatch(r'[-+]?\d+', token) else float(token)
    except ValueError:
        raise ParseError(source, f'non-numeric {column.name!r} value in row {line.strip()!r}') \
            from None


def _options(lines):
    """Option lines between title and header: '# Datatype: MPI_CHAR.', '# [ pairs: 2 ] [ ... ]'."""
    params, notes = {}, []
    for line in lines:
        body = line.lstrip('#').strip()
        pairs = [(k.strip(), v.strip()) for k, v in re.findall(r'\[([^:\[\]\n]*):([^\[\]\n]*)\]', body)]
        pairs = [(k, v) for k, v in pairs if k and v]
        if not pairs:
            key, colon, value = body.partition(':')
            key, value = key.rstrip(), value.strip()
            value = value[:-1] if value.endswith('.') else value
            pairs = [(key, value)] if colon and value and re.fullmatch(r'[A-Za-z][\w .-]*', key) else []
        for key, value in pairs:
            params[_snake(key)] = int(value) if value.isdigit() else value
        if body and not pairs:
            notes.append(body)    # e.g. "Overall = Coll. Init + Compute + MPI_Test + MPI_Wait"
    return params, notes


def _table(text, source, benchmark, option_lines):
    """``text`` starts at the column header line."""
    params, notes = _options(option_lines)
    header, *lines = text.split('\n')
    names = re.split(r'\s{2,}', header.lstrip('#').strip())
    columns = [_column(n) for n in names]
    rows = []
    for line in lines:
        if not _ROW.match(line):
            continue    # launcher messages, blank lines, the validation error line
        tokens = line.split()
        if len(tokens) != len(columns):
            raise ParseError(source, f'{benchmark}: row {line.strip()!r} has {len(tokens)} fields, '
                                     f'the header {names} has {len(columns)}')
        rows.append({c.key: _value(t, c, source, line) for c, t in zip(columns, tokens)})

    keys = [c.key for c in columns]
    return Table(benchmark=benchmark, columns=columns, rows=rows, params=params,
                 metrics=_metrics(keys), size_key='bytes' if 'bytes' in keys else None,
                 notes=notes)


def _init_table(m, benchmark):
    nprocs, low, high, avg = (int(g) for g in m.groups())
    columns = [Column('nprocs', 'nprocs'), Column('min', 'min_ms', 'ms'),
               Column('max', 'max_ms', 'ms'), Column('avg', 'avg_ms', 'ms'),
               Column('avg (derived, seconds)', 'avg_s', 's')]
    row = {'nprocs': nprocs, 'min_ms': low, 'max_ms': high, 'avg_ms': avg, 'avg_s': avg / 1000}
    return Table(benchmark=benchmark, columns=columns, rows=[row], params={'processes': nprocs},
                 metrics={'time': 'avg_s'}, size_key=None)


def parse(text, source):
    _check_usage_failures(text, source)
    title = _TITLE.search(text)
    benchmark = title.group(1) if title else None
    out = ParsedOutput(tool=TOOL, source=source, version=title.group(2) if title else None,
                       meta={'title': title.group(0).lstrip('#').strip()} if title else {})

    init, hello = _INIT.search(text), _HELLO.search(text)
    if init:
        out.tables.append(_init_table(init, benchmark or 'MPI Init'))
    elif hello:
        # osu_hello measures nothing: it proves MPI starts; no table, the rank count in meta.
        out.meta['processes'] = int(hello.group(1))
    elif title and _HEADER.search(text, title.end()):
        start = _HEADER.search(text, title.end()).start()
        options = [ln for ln in text[title.end():start].split('\n') if ln.startswith('#')]
        out.tables.append(_table(text[start:], source, benchmark, options))
    elif title:
        _check_abort(text, out)
        raise ParseError(source, f'OSU {benchmark}: no "# Size" column header after the title')
    else:
        raise ParseError(source, 'no "# OSU ... Test" title and no osu_init/osu_hello line')

    _check_failures(text, out)
    return out


def _check_usage_failures(text, source):
    """Failures before any table: wrong rank count, rejected option."""
    ranks = _RANKS.search(text)
    if ranks:
        raise BenchmarkFailed(source, 'invalid-ranks',
                              f'OSU: "This test requires {ranks.group(1)}"')

    bad, usage = _BAD_OPTION.search(text), _USAGE.search(text)
    if bad or usage:
        program = usage.group(1) if usage else 'the OSU benchmark'
        if bad and bad.group(4):
            what = bad.group(4)                     # OMB's own "Invalid Message Size" etc.
        elif bad:
            what = 'option ' + repr(next(g for g in bad.groups() if g))
        else:
            what = 'it printed its usage text'
        raise BenchmarkFailed(source, 'invalid-option',
                              f'{program} rejected the command line: {what}')


def _check_abort(text, out):
    reason = mpi_abort_reason(text)
    if not reason:
        return

    kind = 'timeout' if 'time limit' in reason else 'abort'
    if 'signal 15' in reason:   # the output cannot tell who sent it
        reason += ' (SIGTERM: usually a time limit such as timeout(1) or the scheduler, or a kill)'
    table = out.tables[0] if out.tables else None
    if table and table.rows:
        reason += f'; {len(table.rows)} rows kept'
        if table.size_key:
            reason += f', last size {table.rows[-1][table.size_key]} B'
    raise BenchmarkFailed(out.source, kind, f'OSU {table.benchmark if table else "benchmark"}: '
                                            f'{reason}', partial=out)


def _check_failures(text, out):
    error = _VALIDATION_ERROR.search(text)
    for table in out.tables:
        failed = [row for row in table.rows if row.get('validation', 'Pass') != 'Pass']
        if failed or error:
            where = (f'{failed[0]["validation"]} at {failed[0].get("bytes")} bytes' if failed
                     else 'no Fail row printed')
            detail = f' ({error.group(0).strip()})' if error else ''
            raise BenchmarkFailed(out.source, 'verification',
                                  f'OSU {table.benchmark}: data validation {where}{detail}',
                                  partial=out)

    _check_abort(text, out)
    for table in out.tables:
        if not table.rows:
            raise BenchmarkFailed(out.source, 'incomplete', f'OSU {table.benchmark}: column '
                                  'header printed but no result row', partial=out)

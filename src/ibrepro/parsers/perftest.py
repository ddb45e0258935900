"""perftest (linux-rdma/perftest: ib_{write,read,send,atomic}_{lat,bw}, raw_ethernet_*).

An output is a settings block, the QP addresses, then one result table::

    ---------------------------------------------------------------------------------------
                        RDMA_Write BW Test
     Dual-port       : OFF          Device         : rxe0
     Number of qps   : 1            Transport type : IB
     ...
     #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
     65536      5000             30.70              28.42                 0.000455

Units. perftest's "MB/sec" is 2^20 bytes/s and its "Gb/sec" 10^9 bit/s: the report divides by
``format_factor = (user_param->report_fmt == MBS) ? 0x100000 : 125000000`` (src/perftest_parameters.c
line 3377 in tag v4.5-0.17, whose binary prints "Version: 6.06"; unchanged on master, line 4766). Later releases
(MOFED/DOCA builds, upstream 25.x and 26.x) print the same 2^20 unit as "MiB/sec" (``RESULT_FMT`` in
src/perftest_parameters.h, tag 26.04.17: "BW peak[MiB/sec] BW average[MiB/sec] MsgRate[Mpps]").
The printed columns keep the printed values (units 'MiB/s', 'Gb/s', 'Mpps'); derived ``*_si``
columns hold them in ibrepro's MB/s (10^6 B/s) and msg/s, and feed the ``bw``/``msgrate`` metrics.
``lat`` is t_avg where printed (the papers report the average of the measured iterations, 003
Sec. IV.B.1), else t_typical (perftest's median, printed by every version).

Sides. The server prints "Waiting for client to connect" and is recorded as ``meta['role']``.
Servers of ping-pong tests (write_lat, send_lat) measure for themselves; servers of read_lat and
atomic_lat are passive and print no table (parsed with no table); send_bw's server measures its
receive side; the passive servers of half-duplex write/read/atomic BW tests print the client's final
report received over the socket (src/write_bw.c lines 248-256, v4.5-0.17), so with ``-a`` only the
last size appears there.

JSON (``--out_json``, perftest >= 25.x): {"test_info": {...}, "results": {...}}, one size per report.
Latency reports (t_min .. percentile_99.9, in usec) parse like the table. Bandwidth reports do not: BW_peak and
BW_average carry no unit and test_info records no report format (MiB/sec by default, Gb/sec with
``--report_gbits``; ``write_test_info_to_file`` in src/perftest_parameters.c, tag 26.04.17), so they raise
ParseError pointing at the table printed on stdout, which says its unit.

Not results: ``--help`` and ``--version`` outputs raise ParseError. No RDMA device ("Did not detect
devices", "No IB devices found", "IB device X not found") -> BenchmarkFailed no-device.
"""

import json
import re

from . import BenchmarkFailed, Column, ParsedOutput, ParseError, Table

TOOL = 'perftest'

_RULE = r'-{40,}'
_TITLE = re.compile(rf'^{_RULE}\s*\n {{2,}}(\S[^\n]*? Test)\s*$', re.M)
_SERVER = 'Waiting for client to connect'
# the program as invoked: "ib_write_bw", or its full path ("/usr/local/bin/ib_write_bw", perftest 26.x)
_USAGE = re.compile(r'^Usage:[ \t]*\n[ \t]+(?:[^\s/]*/)*((?:ib|raw_ethernet)_\w+)[ \t]+start a server', re.M)
_JSON = re.compile(r'\A\s*\{\s*"test_info"\s*:')
_VERSION = re.compile(r'^Version: (\S+)\s*$', re.M)
_NO_DEVICE = re.compile(r'^[ \t]*(Did not detect devices|Unable to find the Infiniband/RoCE device|'
                        r'No IB devices found|IB device \S+ not found|Failed to get IB devices list|'
                        r"Couldn't get device list|Couldn't get context for the device)\b.*$", re.M)
# The connection to the node was lost mid-run (a killed soft-RoCE guest, a dropped ssh): what was printed stays
_LOST = re.compile(r'^\S*(guest-exec|ssh)\S*: .*(lost the connection|Connection closed)', re.I)
# A shell's word for a process a signal ended ("Terminated", "bash: line 1:  4242 Killed  ib_write_bw ...")
_KILLED = re.compile(r'^(?:\S+: line \d+: +\d+ +)?(Terminated|Killed)\b')
_NO_PEER = re.compile(r"^Couldn't connect to (\S+)\s*$", re.M)
_SETTING = re.compile(r'^\s*([A-Za-z][\w \t.*/-]*):(.*)$')    # stripped in _settings (linear in the line)
# One header column: "#bytes", "t_min[usec]", "BW peak[MB/sec]", "99.9% percentile[usec]", ...
_HEADER_COLUMN = re.compile(r'#\w+|(?:[\w.%]{1,40} )?[\w.%]{1,40}\[[^\]\n]{0,40}\]|tps average')   # bounded: linear
_WARNING = re.compile(r'^(Correlation coefficient[^\n]*|Device not recognized[^\n]*|'
                      r'[ \t]*WARNING:[^\n]*|Conflicting CPU frequency[^\n]*)$', re.M)

# printed unit -> (Column unit, factor to ibrepro's unit or None, ibrepro unit)
_UNITS = {
    'usec': ('us', None, None),
    'MB/sec': ('MiB/s', 1048576 / 1e6, 'MB/s'),    # 0x100000 bytes, see the module docstring
    'MiB/sec': ('MiB/s', 1048576 / 1e6, 'MB/s'),   # the same unit, as perftest >= 4.5-0.20 spells it
    'Gb/sec': ('Gb/s', 125000000 / 1e6, 'MB/s'),   # 10^9 bit = 125000000 bytes
    'Mpps': ('Mpps', 1e6, 'msg/s'),
}
# settings line label -> meta key (the rest stays in meta['settings'] as printed)
_META = {'Device': 'device', 'Transport type': 'transport', 'Connection type': 'connection',
         'Mtu': 'mtu', 'Link type': 'link_type', 'Number of qps': 'qps', 'Dual-port': 'dual_port',
         'rdma_cm QPs': 'rdma_cm', 'GID index': 'gid_index'}


def detect(text):
    return bool(_JSON.match(text) or _TITLE.search(text) or _SERVER in text or _USAGE.search(text)
                or _NO_PEER.search(text) or _NO_DEVICE.search(text)
                or re.fullmatch(r'Version: \d+(?:\.\d+)+', text.strip()))


def _snake(text):
    return re.sub(r'\W+', '_', text).strip('_').lower()


def _columns(header, source):
    """Columns as printed, each followed by its derived SI column if it has one, and
    {derived key: (printed key, factor)}."""
    names = _HEADER_COLUMN.findall(header)
    leftover = _HEADER_COLUMN.sub('', header).strip()
    if leftover or not names:
        raise ParseError(source, f'perftest: unknown column header {header.strip()!r}')

    columns, derived = [], {}
    for name in names:
        m = re.fullmatch(r'(.*?)\[(.*)\]', name)
        label, printed_unit = (m.group(1), m.group(2)) if m else (name, None)
        pct = re.fullmatch(r'([\d.]+)% percentile', label)
        key = f'p{_snake(pct.group(1))}' if pct else _snake(label)
        unit, factor, si_unit = _UNITS.get(printed_unit, (printed_unit, None, None))
        unit = 'B' if name == '#bytes' else unit
        columns.append(Column(name, f'{key}_{_snake(printed_unit)}' if printed_unit else key, unit))
        if factor:
            derived[f'{key}_si'] = (columns[-1].key, factor)
            columns.append(Column(f'{name} in {si_unit} (derived)', f'{key}_si', si_unit))
    return columns, derived


def _number(token, name, source, line):
    try:
        return int(token) if re.fullmatch(r'\d+', token) else float(token)    # "-nan" -> nan
    except ValueError:
        raise ParseError(source, f'perftest: non-numeric {name!r} in row {line.strip()!r}') \
            from None


def _metrics(keys):
    metrics = {}
    for lat in ('t_avg_usec', 't_typical_usec'):
        if lat in keys:
            metrics['lat'] = lat
            break
    if 'bw_average_si' in keys:
        metrics['bw'] = 'bw_average_si'
    if 'msgrate_si' in keys:
        metrics['msgrate'] = 'msgrate_si'
    return metrics


def _table(lines, benchmark, params, source):
    """``(table, problems, end)``: ``lines`` start at the ' #bytes' header and run to the end of the output; the
    table holds the valid rows, ``problems`` names the rows refused (a value perftest could not measure: inf or
    nan after a failed clock calibration), ``end`` the shell's line that ended the output early (``Terminated``,
    ``Killed``), if any."""
    columns, derived = _columns(lines[0], source)
    printed = [c for c in columns if c.key not in derived]
    rows, problems, end = [], [], None
    for line in lines[1:]:
        if re.match(_RULE, line.strip()) or not line.strip():
            break
        if _WARNING.fullmatch(line):
            continue    # stderr warnings land between the rows (perftest's stdout is buffered apart)
        if _LOST.match(line):
            raise BenchmarkFailed(source, 'abort', f'perftest {benchmark}: {line.strip()}')
        if _KILLED.match(line):
            end = line.strip()
            break
        tokens = line.split()
        if len(tokens) != len(printed) or not tokens[0].isdigit():
            raise ParseError(source, f'perftest {benchmark}: row {line.strip()!r} has '
                                     f'{len(tokens)} fields, the header has {len(printed)}')
        row = {c.key: _number(t, c.name, source, line) for c, t in zip(printed, tokens)}
        for key, (source_key, factor) in derived.items():
            row[key] = row[source_key] * factor
        rows.append(row)

    keys = [c.key for c in columns]
    table = Table(benchmark=benchmark, columns=columns, rows=[], params=params,
                  metrics=_metrics(keys), size_key='bytes' if 'bytes' in keys else None)
    for row in rows:
        bad = [k for k in table.metrics.values() if row[k] in (float('inf'), float('-inf')) or row[k] != row[k]]
        if bad:
            problems.append(f'{", ".join(bad)} = {row[bad[0]]} at {row["bytes"]} B')
        else:
            table.rows.append(row)
    return table, problems, end


def _settings(block):
    """' Dual-port       : OFF\t\tDevice         : rxe0' -> {'Dual-port': 'OFF', 'Device': 'rxe0'}
    (two settings a line are split by two tabs; 'rdma_cm QPs\t : OFF' has one inside)."""
    settings = {}
    for line in block.splitlines():
        for part in re.split(r'\t{2,}', line):
            m = _SETTING.match(part)
            if m:
                settings[m.group(1).rstrip()] = m.group(2).strip()
    return settings


def _meta_value(value):
    m = re.fullmatch(r'(\d+)(?:\[B\])?', value)     # "1", "1024[B]"
    return int(m.group(1)) if m else value


def parse(text, source):
    if _JSON.match(text):
        return _parse_json(text, source)
    _check_not_a_result(text, source)
    title = _TITLE.search(text)
    server = _SERVER in text
    peer = _NO_PEER.search(text)
    if peer and not title:
        raise BenchmarkFailed(source, 'no-peer', f"perftest: couldn't connect to its server at {peer.group(1)} "
                              '(server not started, wrong address, or no route)')
    if not title:
        raise ParseError(source, 'perftest server waited for a client but printed no test header'
                         if server else 'perftest output has no test header')

    settings = _settings(re.split(_RULE, text[title.end():], maxsplit=1)[0])
    benchmark = re.sub(r' Test$', '', title.group(1))
    version = _VERSION.search(text)
    out = ParsedOutput(tool=TOOL, source=source, version=version.group(1) if version else None)
    out.meta.update({'test': title.group(1), 'role': 'server' if server else 'client'})
    out.meta.update({_META[k]: _meta_value(v) for k, v in settings.items() if k in _META})
    out.meta['settings'] = settings
    warnings = [w.strip() for w in _WARNING.findall(text)]
    if warnings:
        out.meta['warnings'] = warnings

    params = {'connection': settings.get('Connection type'),
              'bidirectional': 'Bidirectional' in benchmark}
    lines = text[title.end():].splitlines()
    header_at = [i for i, line in enumerate(lines) if line.lstrip().startswith('#bytes')]
    if header_at:
        table, problems, end = _table(lines[header_at[0]:], benchmark, params, source)
        if server and re.fullmatch(r'(RDMA_Write|RDMA_Read|Atomic \w+) BW', benchmark):
            table.notes.append("passive server of a half-duplex BW test: the client's final "
                               'report, received over the socket (only its last size with -a)')
        out.tables.append(table)
        # the bad rows are refused by name; the valid ones stay, as the partial result
        kept = f'; the {len(table.rows)} other row(s) are kept' if table.rows else ''
        if problems:
            raise BenchmarkFailed(source, 'invalid-result', f'perftest {benchmark}: {"; ".join(problems)} (its '
                                  'clock calibration failed: "Correlation coefficient" warning?)' + kept, partial=out)
        if end:
            last = f' after {table.rows[-1]["bytes"]} B' if table.rows and 'bytes' in table.rows[-1] else ''
            raise BenchmarkFailed(source, 'abort', f'perftest {benchmark}: stopped{last}: the output ends with '
                                  f'{end!r} (killed: a time limit, or the job was cancelled)' + kept, partial=out)
        if not table.rows:
            raise BenchmarkFailed(source, 'incomplete',
                                  f'perftest {benchmark}: result header but no row', partial=out)
    elif not server:
        last = text.strip().splitlines()[-1].strip()
        raise BenchmarkFailed(source, 'incomplete', f'perftest {benchmark}: the client printed '
                              f'no result table; last line: {last!r}', partial=out)
    else:
        out.meta['note'] = 'passive server: perftest measures this test on the client side only'
    return out


def _check_not_a_result(text, source):
    usage = _USAGE.search(text)
    if usage:
        raise ParseError(source, f'perftest {usage.group(1)} --help output (usage text), '
                                 'not a result')

    if re.fullmatch(r'Version: \S+', text.strip()):
        raise ParseError(source, f'perftest --version output ({text.strip()}), not a result')

    missing = _NO_DEVICE.findall(text)
    if missing and not _TITLE.search(text):
        raise BenchmarkFailed(source, 'no-device',
                              'perftest: ' + '; '.join(m.strip() for m in missing))



# JSON result key -> printed column, as the table of the same test prints it (src/perftest_parameters.h)
_JSON_LATENCY = {'t_min': 't_min[usec]', 't_max': 't_max[usec]', 't_typical': 't_typical[usec]',
                 't_avg': 't_avg[usec]', 't_stdev': 't_stdev[usec]', 'percentile_99': '99% percentile[usec]',
                 'percentile_99.9': '99.9% percentile[usec]'}


def _parse_json(text, source):
    try:
        report = json.loads(text)
        info, results = report['test_info'], report['results']
        test = str(info['test'])
    except (ValueError, KeyError, TypeError) as err:
        raise ParseError(source, f'perftest --out_json report unreadable ({type(err).__name__}: {err})') from None
    m = re.fullmatch(r'(\w+?)_((?:Bidirectional_)?(?:BW|Latency))_Test', test)
    if not m or not isinstance(results, dict) or not isinstance(info, dict):
        raise ParseError(source, f'perftest --out_json report of an unknown test {test!r:.80}')
    benchmark = f"{re.sub(r'^Atomic_', 'Atomic ', m.group(1))} {m.group(2).replace('_', ' ')}"
    if 'BW_average' in results:
        raise ParseError(source, f'perftest --out_json report of {benchmark}: its bandwidth carries no unit (MiB/sec '
                                 'by default, Gb/sec with --report_gbits) and test_info does not say which: parse the '
                                 'table perftest printed on stdout')
    printed = ['#bytes', '#iterations'] + [_JSON_LATENCY[k] for k in _JSON_LATENCY if k in results]
    values = [results.get('MsgSize'), results.get('n_iterations')] + [results[k] for k in _JSON_LATENCY if k in results]
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values) or len(printed) < 3:
        raise ParseError(source, f'perftest --out_json report of {benchmark}: results are not the numbers of a '
                                 f'latency test: {json.dumps(results)[:120]}')
    out = ParsedOutput(tool=TOOL, source=source, version=None)
    out.meta.update({'test': test.replace('_', ' '), 'role': None, 'format': 'json'})
    snake_meta = {_snake(label): key for label, key in _META.items()}    # "rdma_cm_QPs" is "rdma_cm QPs"
    out.meta.update({snake_meta[_snake(k)]: v for k, v in info.items() if _snake(k) in snake_meta})
    lines = [' '.join(printed), ' '.join(str(v) for v in values)]
    params = {'connection': info.get('Connection_type'), 'bidirectional': 'Bidirectional' in benchmark}
    table, problems, _ = _table(lines, benchmark, params, source)
    out.tables.append(table)
    if problems:
        raise BenchmarkFailed(source, 'invalid-result', f'perftest {benchmark}: {"; ".join(problems)}', partial=out)
    return out

"""NAS Parallel Benchmarks, MPI versions (NPB 3.3.x, 3.4.x: BT, CG, EP, FT, IS, LU, MG, SP).

Every NPB program ends with the same summary block, which is all we read::

     FT Benchmark Completed.
     Class           =                        A
     Size            =            256x 256x 128
     Time in seconds =                     4.75
     Mop/s total     =                  1501.76
     Verification    =               SUCCESSFUL
     Version         =                    3.3.1
     Compile options:
        MPIF77       = mpif77.openmpi

One table, one row, no message size (``size_key=None``): metrics ``time`` (s) and ``mops``
(Mop/s total). Failures: "Verification = UNSUCCESSFUL" -> verification (the measured row is
kept); IS's "ERROR: Number of processes (3) is not a power of two" -> invalid-ranks (the same
class of failure as OSU's "requires exactly two processes"; the MPI_ABORT is in the reason);
a launcher's abort banner without a summary -> abort; no summary at all -> incomplete.
"""

import re

from . import BenchmarkFailed, Column, ParsedOutput, ParseError, Table, mpi_abort_reason

TOOL = 'npb'

_BANNER = re.compile(r'NAS Parallel Benchmarks (\S+) -- (\w+) Benchmark')
# Blanks are [ \t] and values read to the end of the line, stripped by the code: a lazy (.*?)\s*$ is quadratic in
# a line's length, and a \s* after ^ in multi-line mode in the number of blank lines.
_COMPLETED = re.compile(r'^[ \t]*(\w+) Benchmark Completed\.?[ \t]*$', re.M)
_LABEL = re.compile(r'[A-Za-z][\w /.]*')
_COMPILE_OPTION = re.compile(r'^[ \t]{4}(\w+)[ \t]*=(.*)$')
_POWER_OF_TWO = re.compile(r'^[ \t]*ERROR: (Number of processes \((\d+)\) is not a power of two)[^\n]*',
                           re.M)

# summary label -> Column (the row keeps every printed field; these get names and units)
_COLUMNS = {
    'Class': Column('Class', 'class'),
    'Size': Column('Size', 'size'),
    'Iterations': Column('Iterations', 'iterations'),
    'Time in seconds': Column('Time in seconds', 'time_s', 's'),
    'Total processes': Column('Total processes', 'total_processes'),
    'Active processes': Column('Active processes', 'active_processes'),
    'Compiled procs': Column('Compiled procs', 'compiled_procs'),
    'Mop/s total': Column('Mop/s total', 'mops_total', 'Mop/s'),
    'Mop/s/process': Column('Mop/s/process', 'mops_per_process', 'Mop/s'),
    'Operation type': Column('Operation type', 'operation_type'),
    'Verification': Column('Verification', 'verification'),
}
_META_FIELDS = {'Version': 'version', 'Compile date': 'compile_date'}


def detect(text):
    return bool(_BANNER.search(text) or _POWER_OF_TWO.search(text)
                or re.search(r'^[ \t]*\w+ Benchmark Completed\.?[ \t]*\r?\n[ \t]*Class[ \t]+=', text, re.M))


def _value(text):
    text = 'x'.join(part.strip() for part in text.split('x'))      # "256x 256x 128" -> "256x256x128"
    if re.fullmatch(r'\d+', text):
        return int(text)
    if re.fullmatch(r'\d*\.\d+(?:[eE][-+]?\d+)?', text):
        return float(text)
    return text


def _summary(lines, source):
    """The 'X = Y' lines after 'Benchmark Completed' and the compile options after them."""
    row, meta, columns, options = {}, {}, [], {}
    in_options = False
    for line in lines:
        if line.strip() == 'Compile options:':
            in_options = True
            continue
        if in_options:
            m = _COMPILE_OPTION.match(line)
            if m:
                options[m.group(1)] = m.group(2).strip()
            elif line.strip():
                break
            continue

        label, equals, value = line.partition('=')
        label, value = label.strip(), value.strip()
        if not equals or not _LABEL.fullmatch(label):
            continue
        if label in _META_FIELDS:
            meta[_META_FIELDS[label]] = value
        elif label in _COLUMNS:
            columns.append(_COLUMNS[label])
            row[_COLUMNS[label].key] = _value(value)
        else:
            key = re.sub(r'\W+', '_', label).strip('_').lower()
            columns.append(Column(label, key))
            row[key] = _value(value)

    for key in ('time_s', 'mops_total'):
        if not isinstance(row.get(key), (int, float)):
            raise ParseError(source, f'NPB summary has no numeric {key!r} '
                                     f'(found {row.get(key)!r})')
    meta['compile_options'] = options
    return row, columns, meta


def parse(text, source):
    banner = _BANNER.search(text)
    out = ParsedOutput(tool=TOOL, source=source, version=banner.group(1) if banner else None)
    if banner:
        out.meta['banner'] = banner.group(0)

    _check_process_count(text, source, out)
    completed = _COMPLETED.search(text)
    if not completed:
        abort = mpi_abort_reason(text)
        what = f'NPB {banner.group(2) if banner else "benchmark"}'
        if abort:
            kind = 'timeout' if 'time limit' in abort else 'abort'
            raise BenchmarkFailed(source, kind, f'{what}: {abort}', partial=out)
        if not banner:
            raise ParseError(source, 'no "NAS Parallel Benchmarks" banner and no summary')
        raise BenchmarkFailed(source, 'incomplete', f'{what}: output ends before '
                              '"Benchmark Completed" (killed, timed out or crashed)', partial=out)

    row, columns, meta = _summary(text[completed.end():].splitlines(), source)
    out.version = meta.pop('version', out.version)     # "3.3.1" is finer than the banner's "3.3"
    out.meta.update(meta)
    name = completed.group(1)
    params = {'class': row.get('class'), 'processes': row.get('total_processes')}
    out.tables.append(Table(benchmark=name, columns=columns, rows=[row], params=params,
                            metrics={'time': 'time_s', 'mops': 'mops_total'}, size_key=None))

    verification = str(row.get('verification', ''))
    if verification == 'UNSUCCESSFUL':
        raise BenchmarkFailed(source, 'verification',
                              f'NPB {name} class {row.get("class")}: Verification = UNSUCCESSFUL',
                              partial=out)
    if verification != 'SUCCESSFUL':
        out.tables[0].notes.append(f'Verification = {verification or "(not printed)"}')
    return out


def _check_process_count(text, source, out):
    m = _POWER_OF_TWO.search(text)
    if m:
        abort = mpi_abort_reason(text)
        raise BenchmarkFailed(source, 'invalid-ranks',
                              f'NPB needs a power-of-two process count: "{m.group(1)}"'
                              + (f' ({abort})' if abort else ''), partial=out)

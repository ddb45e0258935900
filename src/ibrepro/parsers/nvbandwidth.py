"""nvbandwidth (NVIDIA): host-device and device-device copy bandwidth and latency of the GPUs of one node.

Its text output (``nvbandwidth``)::

    nvbandwidth Version: v0.8
    ...
    Device 0: NVIDIA H200 (00000000:00:06)

    Running host_to_device_memcpy_ce.
    memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
               0
     0     55.48

    SUM host_to_device_memcpy_ce 55.48

and its JSON (``nvbandwidth -j``): ``{"nvbandwidth": {"testcases": [{"name", "status", "bandwidth_description",
"bandwidth_matrix": [["55.5031"]], "sum"}]}}``. Each test case becomes one table per measured cell of its matrix
(``params``: ``row``, the CPU or the source GPU; ``column``, the GPU), so that every GPU's value is its own
variable: ``bw`` in MB/s (nvbandwidth's GB/s are 10^9 B/s), or ``lat`` in us for the latency cases (its ns).
A test case a one-GPU node cannot run is "Waived" (the text prints no name): kept in ``meta['waived']`` (JSON: by
name). Cells printed ``N/A`` (no path between the two) are not values.
"""

import json
import re

from . import Column, ParsedOutput, ParseError, Table

TOOL = 'nvbandwidth'

_VERSION = re.compile(r'^nvbandwidth Version: (\S+)[ \t\r]*$', re.M)
_RUNNING = re.compile(r'^Running (\w+)\.[ \t\r]*$', re.M)
_DEVICE = re.compile(r'^Device (\d+): (.+?)[ \t\r]*$', re.M)
_KEYS = {'CUDA Runtime Version': 'cuda_runtime', 'CUDA Driver Version': 'cuda_driver', 'Driver Version': 'driver'}
_NUMBER = re.compile(r'-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')


def detect(text):
    head = text.lstrip()[:4096]
    return _VERSION.search(text) is not None or (head.startswith('{') and '"nvbandwidth"' in head)


def _unit(description, source):
    """``(metric, factor to ibrepro's unit)`` of a test case's description ``... (GB/s)`` or ``... (ns)``."""
    if description.rstrip().endswith('(GB/s)'):
        return 'bw', 1000.0
    if description.rstrip().endswith('(ns)'):
        return 'lat', 0.001
    raise ParseError(source, f'unknown unit in {description!r} (expected GB/s or ns)')


def _tables(name, description, matrix, source):
    """One table per measured cell of ``matrix`` (``{(row, column): value as printed}``)."""
    metric, factor = _unit(description, source)
    tables = []
    for (row, column), printed in sorted(matrix.items()):
        if printed in ('N/A', ''):
            continue
        if not _NUMBER.fullmatch(printed):
            raise ParseError(source, f'{name}: cell ({row}, {column}) is {printed!r}, not a number')
        key = 'bw_mbps' if metric == 'bw' else 'lat_us'
        tables.append(Table(benchmark=name, columns=[Column(description, key, 'MB/s' if metric == 'bw' else 'us')],
                            rows=[{key: float(f'{float(printed) * factor:.12g}')}],   # no binary residue
                            params={'row': row, 'column': column},
                            metrics={metric: key}, size_key=None))
    return tables


def _parse_json(text, source):
    try:
        doc = json.loads(text)['nvbandwidth']
    except (ValueError, KeyError, TypeError) as err:
        raise ParseError(source, f'not nvbandwidth JSON ({err})') from None
    out = ParsedOutput(tool=TOOL, source=source, meta={
        'cuda_runtime': doc.get('CUDA Runtime Version'), 'driver': doc.get('Driver Version'),
        'devices': list(doc.get('GPU Device list') or []), 'waived': []})
    cases = doc.get('testcases') or []
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise ParseError(source, 'testcases is not a list of test cases')
    for case in cases:
        name, status = case.get('name'), case.get('status')
        if not isinstance(name, str) or not re.fullmatch(r'\w+', name):
            raise ParseError(source, f'a test case without a name: {str(case)[:120]}')
        if status == 'Waived':
            out.meta['waived'].append(name)
            continue
        if status != 'Passed':
            raise ParseError(source, f'{name}: status {status!r}')
        rows = case.get('bandwidth_matrix') or []
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise ParseError(source, f'{name}: bandwidth_matrix is not a list of rows')
        matrix = {(i, j): str(v).strip() for i, row in enumerate(rows) for j, v in enumerate(row)}
        out.tables += _tables(name, str(case.get('bandwidth_description', '')), matrix, source)
    return out


def _parse_text(text, source):
    version = _VERSION.search(text)
    meta = {'devices': [f'{n}: {d}' for n, d in _DEVICE.findall(text)],
            'waived': [None] * len(re.findall(r'^Waived:', text, re.M))}
    for line in text.splitlines():
        key, _, value = line.partition(':')
        if key in _KEYS and value.strip():
            meta[_KEYS[key]] = value.strip()
    out = ParsedOutput(tool=TOOL, source=source, version=version.group(1) if version else None, meta=meta)
    starts = list(_RUNNING.finditer(text))
    for m, end in zip(starts, [s.start() for s in starts[1:]] + [len(text)]):
        name = m.group(1)
        lines = [line.rstrip() for line in text[m.end():end].splitlines() if line.strip()]
        # the block ends at its SUM line (the next test's "Waived:" lines, the closing NOTE follow it)
        last = next((i for i, line in enumerate(lines) if line.startswith(f'SUM {name} ')), None)
        if last is None or last < 3:
            raise ParseError(source, f'{name}: its matrix is incomplete (no "SUM {name}" line after it)')
        description, header, cells = lines[0], lines[1].split(), lines[2:last]
        matrix = {}
        for line in cells:
            row, *values = line.split()
            if len(values) != len(header):
                raise ParseError(source, f'{name}: row {line!r} has {len(values)} cells, the header {len(header)}')
            matrix.update({(int(row), int(column)): v for column, v in zip(header, values)})
        out.tables += _tables(name, description, matrix, source)
    return out


def parse(text, source):
    out = _parse_json(text, source) if text.lstrip().startswith('{') else _parse_text(text, source)
    if not out.tables:
        raise ParseError(source, 'nvbandwidth measured no test case'
                         + (f' ({len(out.meta["waived"])} waived)' if out.meta.get('waived') else ''))
    return out

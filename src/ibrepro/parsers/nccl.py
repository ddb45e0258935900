"""nccl-tests (NVIDIA): the time and the bus bandwidth of one NCCL collective (or send/receive) over a size sweep.

Its output (``all_reduce_perf -b 8 -e 128M -f 2``, nccl-tests 2.17)::

    # Collective test starting: all_reduce_perf
    # nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 ...
    #
    # Using devices
    #  Rank  0 Group  0 Pid 204199 on  nid005471 device  0 [0009:01:00] NVIDIA GH200 120GB
    ...
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw ...
               8             2     float     sum      -1    17.93    0.00    0.00      0    17.72    0.00 ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 19.7866

Each row: size (B), count, type, reduction, root, then out-of-place and in-place time (us), algorithm and bus
bandwidth (GB/s = 10^9 B/s) and wrong elements (``N/A`` without ``-c 1``; releases before 2.10 print an ``error``
column and no root). One table per output (``params``: ``gpus``, the ranks' GPUs; ``nodes``); the out-of-place
columns are the metrics: ``lat`` (us) and ``bw``, the bus bandwidth in MB/s (nccl-tests' figure to set beside a
link's rate). Rows of size 0 (a float collective below 4 B) carry nothing and are left out.

``NCCL_DEBUG=INFO`` lines anywhere in the text say what NCCL chose (``meta``): ``networks`` (``Using network IB``),
``channels`` (each ``... via NET/IB/0/GDRDMA``, ``via P2P/IPC``, ``via SHM/direct/direct`` with how often),
``net_devices`` (``NET/IB : Using [0]mlx5_0:1/IB``), ``affinity`` (the CPUs NCCL bound each GPU's threads to:
``Setting affinity for GPU 0 to ff,ffff0000``); :mod:`ibrepro.nccl_transport` judges them.
Open MPI's ``--tag-output`` prefix (``[1,0]<stdout>:``) is removed first.

A wrong element count, "Out of bounds values : N FAILED", or no "Avg bus bandwidth" line after the table fail the
output; NCCL's and CUDA's own failure lines ("Test NCCL failure ...", "NCCL WARN ...") are its reason.
"""

import re

from . import BenchmarkFailed, Column, ParsedOutput, ParseError, Table

TOOL = 'nccl'  # the module name, as every tool's (the package is nccl-tests)

_TAG = re.compile(r'^\[\d+,\d+\]<std(?:out|err)>:', re.M)
_THREADS = re.compile(r'^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)', re.M)
_STARTING = re.compile(r'^# Collective test starting: (\w+?)(?:_perf)?[ \t\r]*$', re.M)
_VERSION = re.compile(r'^# nccl-tests version (\S+)', re.M)
_NCCL_VERSION = re.compile(r'NCCL version (\d+\.\d+\.\d+\S*)')
_RANK = re.compile(r'^#\s+Rank\s+(\d+) Group\s+\d+ Pid\s+\d+ on\s+(\S+) device\s+(\d+) \[([^\]]+)\] (.+?)[ \t\r]*$',
                   re.M)
_OOB = re.compile(r'^# Out of bounds values : (\d+) (OK|FAILED)', re.M)
_AVG = re.compile(r'^# Avg bus bandwidth\s*: (\S+)', re.M)
_NETWORK = re.compile(r'NCCL INFO Using network (.+?)[ \t\r]*$', re.M)
_CHANNEL = re.compile(r'NCCL INFO Channel \d+/\d+ : \d+\[\w+\] -> \d+\[\w+\](?: \[(?:send|receive)\])? '
                      r'via (\S+(?: \S+)*?)(?: comm 0x\w+.*)?[ \t\r]*$', re.M)
_NET_DEVICES = re.compile(r'NCCL INFO NET/(\w+) : Using (\[\d+\][^;\n]+?)[ \t\r]*(?:;.*)?$', re.M)
_AFFINITY = re.compile(r'^(\S+?):\d+:\d+ \[\d+\] NCCL INFO Setting affinity for GPU (\d+) to ([0-9a-fA-F,]+)', re.M)
_FAILURE = re.compile(r'^.*(?:Test (?:NCCL|CUDA) failure|NCCL WARN) .*$', re.M)
_NUMBER = r'-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?'
_ROW = re.compile(rf'^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(?:(-?\d+)\s+)?'
                  rf'({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s+(\S+)\s+'
                  rf'({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s+(\S+)[ \t\r]*$', re.M)

_COLUMNS = [Column('size', 'bytes', 'B'), Column('count', 'count'), Column('type', 'type'),
            Column('redop', 'redop'), Column('root', 'root'),
            Column('time', 'time_us', 'us'), Column('algbw', 'algbw_mbps', 'MB/s'),
            Column('busbw', 'busbw_mbps', 'MB/s'), Column('#wrong', 'wrong'),
            Column('time (in-place)', 'time_inplace_us', 'us'),
            Column('algbw (in-place)', 'algbw_inplace_mbps', 'MB/s'),
            Column('busbw (in-place)', 'busbw_inplace_mbps', 'MB/s'), Column('#wrong (in-place)', 'wrong_inplace')]


def detect(text):
    return _THREADS.search(_TAG.sub('', text[:65536])) is not None


def _mbps(printed):
    return float(f'{float(printed) * 1000.0:.12g}')     # GB/s -> MB/s, no binary residue


def _wrong(printed, source, size):
    """The wrong elements as printed: an integer, ``N/A`` (not checked: None), or an old release's error (float)."""
    if printed == 'N/A':
        return None
    try:
        value = float(printed)
    except ValueError:
        raise ParseError(source, f'size {size}: #wrong is {printed!r}, not a number or N/A') from None
    return int(value) if value.is_integer() else value


def parse(text, source):
    text = _TAG.sub('', text)
    threads = _THREADS.search(text)
    if threads is None:
        raise ParseError(source, 'not nccl-tests output (no "# nThread ... nGpus ..." line)')
    failure = _FAILURE.search(text)
    starting = _STARTING.search(text)
    name = starting.group(1) if starting else 'nccl'
    ranks = [{'rank': int(r), 'host': host, 'device': int(d), 'bus': bus, 'gpu': gpu}
             for r, host, d, bus, gpu in _RANK.findall(text)]
    version, nccl = _VERSION.search(text), _NCCL_VERSION.search(text)
    channels = {}
    for via in _CHANNEL.findall(text):
        channels[via] = channels.get(via, 0) + 1
    meta = {'nccl_version': nccl.group(1) if nccl else None, 'ranks': ranks,
            'min_bytes': int(threads.group(3)), 'max_bytes': int(threads.group(4)),
            'networks': sorted(set(_NETWORK.findall(text))), 'channels': channels,
            'net_devices': sorted({f'{kind}: {devices}' for kind, devices in _NET_DEVICES.findall(text)}),
            'affinity': sorted({f'{host} GPU {gpu}: {mask}' for host, gpu, mask in _AFFINITY.findall(text)})}
    out = ParsedOutput(tool=TOOL, source=source, version=version.group(1) if version else None, meta=meta)

    rows, empty = [], 0
    for m in _ROW.finditer(text):
        size = int(m.group(1))
        if size == 0:
            empty += 1
            continue
        rows.append({'bytes': size, 'count': int(m.group(2)), 'type': m.group(3), 'redop': m.group(4),
                     'root': int(m.group(5)) if m.group(5) is not None else None,
                     'time_us': float(m.group(6)), 'algbw_mbps': _mbps(m.group(7)),
                     'busbw_mbps': _mbps(m.group(8)), 'wrong': _wrong(m.group(9), source, size),
                     'time_inplace_us': float(m.group(10)), 'algbw_inplace_mbps': _mbps(m.group(11)),
                     'busbw_inplace_mbps': _mbps(m.group(12)), 'wrong_inplace': _wrong(m.group(13), source, size)})
    table = Table(benchmark=name, columns=_COLUMNS, rows=rows,
                  params={'gpus': len(ranks) or None, 'nodes': len({r['host'] for r in ranks}) or None},
                  metrics={'lat': 'time_us', 'bw': 'busbw_mbps'},
                  notes=[f'{empty} row(s) of size 0 left out'] if empty else [])
    out.tables.append(table)
    said = f' ({failure.group(0).strip()[:300]})' if failure else ''
    if not rows:
        raise BenchmarkFailed(source, 'abort' if failure else 'incomplete',
                              f'{TOOL} {name} measured no size{said}', partial=out)
    wrong = [r['bytes'] for r in rows if any(isinstance(r[k], (int, float)) and r[k] != 0
                                             for k in ('wrong', 'wrong_inplace'))]
    if wrong:
        raise BenchmarkFailed(source, 'verification', f'{TOOL} {name}: wrong elements at {len(wrong)} size(s), '
                              f'first {wrong[0]} B', partial=out)
    oob = _OOB.search(text)
    if oob and oob.group(2) == 'FAILED':
        raise BenchmarkFailed(source, 'verification', f'{TOOL} {name}: {oob.group(1)} out-of-bounds values',
                              partial=out)
    avg = _AVG.search(text)
    if avg is None:
        raise BenchmarkFailed(source, 'abort' if failure else 'incomplete',
                              f'{TOOL} {name} stops after {rows[-1]["bytes"]} B (no "Avg bus bandwidth" line)'
                              f'{said}', partial=out)
    if failure:
        raise BenchmarkFailed(source, 'abort', f'{TOOL} {name}: {failure.group(0).strip()[:300]}', partial=out)
    meta['avg_busbw_gbps'] = float(avg.group(1))
    return out

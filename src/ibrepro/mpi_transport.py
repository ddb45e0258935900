"""Which transport an MPI job really used, as UCX itself reports it (Open MPI's ``pml ucx``, MPICH's ``ch4:ucx``).

A job script that promises one rail (``UCX_NET_DEVICES=mlx5_0:1``, :data:`ibrepro.rfm.launch.ONE_RAIL`) only
constrains UCX; what it chose is what it prints with ``UCX_PROTO_INFO=y`` (UCX 1.13 and later): per endpoint
configuration (``self``, ``intra-node``, ``inter-node``) and operation, a table of message-size ranges with the
protocol and the ``transport/device`` of each, e.g. ``rc_mlx5/mlx5_0:1`` or ``tcp/eth0``. The jobs write it to one
log per process (``UCX_LOG_FILE``, :data:`LOG_FILES`), so the benchmark's output stays as it is. :func:`read`
summarises the tagged-message tables (what MPI point-to-point and collectives send) per peer kind, and
:func:`off_rail` says when an inter-node transport is not the rail the job promised: the case then measured
another path than the one it names, and fails saying so.
"""

import glob
import os
import re

#: The UCX log files of a job's processes, in its stage directory (``UCX_LOG_FILE``: %h host, %p process id).
LOG_FILES = 'ucx-%h-%p.log'
_LOG_GLOB = 'ucx-*.log'

#: The environment that makes UCX say what it chose, into :data:`LOG_FILES`.
ENV = {'UCX_PROTO_INFO': 'y', 'UCX_LOG_FILE': LOG_FILES}

#: The most bytes of UCX logs read per job (a job of many ranks writes one table set per process).
MAX_BYTES = 16 * 2**20

# ``| ucp_context_0 intra-node cfg#1 | tagged message by ucp_tag_send* from host memory |``
_HEADER = re.compile(r'\|\s*ucp_context_\d+\s+(?P<peer>[\w-]+)\s+cfg#\d+\s*\|\s*(?P<operation>[^|]+?)\s*\|')
# ``|   0..92 | eager short | sysv/memory |`` (``inf`` open-ended; ``256K`` with a unit)
_ROW = re.compile(r'\|\s*(?P<range>\d+[KMG]?\.\.(?:\d+[KMG]?|inf))\s*\|\s*(?P<protocol>[^|]+?)\s*\|'
                  r'\s*(?P<transport>[^|\s]+)\s*\|')
#: What UCX logged as a problem (a line of its own format: ``[time] [host:pid:thread] file:line UCX ERROR ...``).
_PROBLEM = re.compile(r'\bUCX\s+(ERROR|WARN)\b.*')

#: The operation whose tables say how MPI's messages go: a plain tagged send (its fast-completion and multi-lane
#: variants choose among the same transports).
TAGGED = 'tagged message by ucp_tag_send* from host memory'


def tables(text):
    """Every protocol-selection row of UCX's ``UCX_PROTO_INFO`` output: ``[{'peer', 'operation', 'range',
    'protocol', 'transport'}]``."""
    rows, current = [], None
    for line in text.splitlines():
        header = _HEADER.search(line)
        if header:
            current = (header.group('peer'), ' '.join(header.group('operation').split()))
            continue
        row = _ROW.search(line)
        if row and current:
            rows.append({'peer': current[0], 'operation': current[1], 'range': row.group('range'),
                         'protocol': ' '.join(row.group('protocol').split()), 'transport': row.group('transport')})
    return rows


def summarise(texts):
    """``({peer kind: [transport/device, ...]}, [UCX's errors and warnings])`` of the tagged sends in ``texts`` (one
    per process): the peer kinds as UCX names them (``self``, ``intra-node``, ``inter-node``), each transport once."""
    found, problems = {}, []
    for text in texts:
        for row in tables(text):
            if row['operation'] == TAGGED:
                found.setdefault(row['peer'], set()).add(row['transport'])
        for m in _PROBLEM.finditer(text):
            said = ' '.join(m.group(0).split())[:300]
            if said not in problems:       # every process says the same
                problems.append(said)
    return {peer: sorted(ts) for peer, ts in sorted(found.items())}, problems


def read(stagedir):
    """:func:`summarise` of the UCX logs a job left in ``stagedir`` (``({}, [])`` when it left none: no UCX, or a
    UCX older than 1.13, says nothing)."""
    texts, left = [], MAX_BYTES
    for path in sorted(glob.glob(os.path.join(glob.escape(str(stagedir)), _LOG_GLOB))):
        if left <= 0 or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, 'rb') as f:
            data = f.read(left)
        left -= len(data)
        texts.append(data.decode('utf-8', 'replace'))
    return summarise(texts)


def off_rail(summary, device, port=1):
    """Why the inter-node transports of ``summary`` are not the rail ``device:port`` ('' when they are, or when the
    job had no inter-node peer): a transport on another device (``tcp/eth0``, ``rc_mlx5/mlx5_1:1``) is another
    path than the one the case names."""
    rail = f'{device}:{port}'
    other = [t for t in summary.get('inter-node', []) if t.split('/', 1)[-1] != rail]
    if not other:
        return ''
    return (f'MPI sent inter-node messages over {", ".join(other)}, not the rail {rail} its job set (UCX_NET_DEVICES); '
            'UCX_PROTO_INFO in the ucx-*.log files of the stage directory')

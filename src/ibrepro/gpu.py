"""Host-device copies of a node's GPUs beside the PCI Express link that limits them: the papers' I/O-bus
experiment (000/003 Sec. IV.B: PCI-X against PCIe x8; 001 Sec. 5.1: PCIe 2.0 against 1.1) on today's GPU nodes.

nvbandwidth (:mod:`ibrepro.parsers.nvbandwidth`) measures each GPU's copies; the node's sysfs
(:func:`ibrepro.topology.read_gpus`, :func:`ibrepro.topology.gpu_link`) gives the link each GPU trained to. Here the
two meet: one value per GPU (``bw_gpu<N>``, MB/s) and, per GPU, its PCI address, its link and the fraction of the
link's data rate the copy reached (the papers' "PCIe efficiency": what the bus delivers of its raw rate).
"""

import re

from . import topology

#: The copies of the family: name -> (nvbandwidth test case, what it measures). CE: the GPU's copy engines
#: (cuMemcpyAsync), what applications and NCCL's host transfers use; SM: a copy kernel on the GPU's cores.
COPIES = {
    'h2d-ce': ('host_to_device_memcpy_ce', 'host to device, copy engine'),
    'd2h-ce': ('device_to_host_memcpy_ce', 'device to host, copy engine'),
    'h2d-bidir-ce': ('host_to_device_bidirectional_memcpy_ce', 'host to device while device to host runs, copy '
                                                               'engine'),
    'd2h-bidir-ce': ('device_to_host_bidirectional_memcpy_ce', 'device to host while host to device runs, copy '
                                                               'engine'),
    'h2d-sm': ('host_to_device_memcpy_sm', 'host to device, copy kernel'),
    'd2h-sm': ('device_to_host_memcpy_sm', 'device to host, copy kernel'),
}

# nvbandwidth's device line: "0: NVIDIA H200 (00000000:00:06)" (its JSON adds ": (host)"): the CUDA PCI bus id,
# domain:bus:device, that sysfs names <domain>:<bus>:<device>.<function>
_DEVICE = re.compile(r'^(\d+): (.+?) \((?:[0-9a-fA-F]{4})?([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\)')


class GpuError(ValueError):
    """An nvbandwidth output that does not give the copy asked for (test case, why)."""


def devices(parsed):
    """{GPU index: (name, PCI address as sysfs names it)} from nvbandwidth's device list."""
    found = {}
    for line in parsed.meta.get('devices') or []:
        m = _DEVICE.match(str(line))
        if m:
            index, name, domain, bus, dev = m.groups()
            found[int(index)] = (name, f'{domain}:{bus}:{dev}.0'.lower())
    return found


def copy_values(parsed, copy):
    """``[(variable, MB/s)]``, one ``bw_gpu<N>`` per GPU, of copy ``copy`` (a key of :data:`COPIES`) in an
    nvbandwidth output; GpuError when it did not run it (waived: a test case this node cannot run)."""
    testcase = COPIES[copy][0]
    tables = [t for t in parsed.tables if t.benchmark == testcase]
    if not tables:
        waived = testcase in (parsed.meta.get('waived') or [])
        raise GpuError(f'nvbandwidth did not measure {testcase}' + (' (waived on this node)' if waived else ''))
    values = {}
    for table in tables:       # one table per GPU (the matrix's column: CPU -> GPU N, or GPU N -> CPU)
        gpu = table.params['column']
        value = table.rows[0].get(table.metrics['bw'])
        if gpu in values:
            raise GpuError(f'{testcase}: two values for GPU {gpu} (a matrix this family does not read)')
        values[gpu] = value
    return [(f'bw_gpu{gpu}', value) for gpu, value in sorted(values.items())]


def beside_links(values, parsed, topo):
    """Each GPU's value beside its link: ``{'gpu<N>': {'name', 'address', 'link', 'limit_MBps', 'fraction',
    'degraded'}}``; a GPU whose address sysfs does not show, or whose link state it does not give, keeps its
    address and ``link`` None (said, not guessed)."""
    by_address = {g['name']: g for g in (topo or {}).get('gpus') or []}
    names = devices(parsed)
    beside = {}
    for variable, value in values:
        index = int(variable[len('bw_gpu'):])
        name, address = names.get(index, (None, None))
        gpu = by_address.get(address)
        link = topology.gpu_link(gpu) if gpu else None
        beside[f'gpu{index}'] = {
            'name': name, 'address': address, 'value_MBps': value,
            'link': link['spec'] if link else None,
            'limit_MBps': round(link['limit_MBps'], 1) if link else None,
            'fraction': round(value / link['limit_MBps'], 4) if link else None,
            'degraded': link['degraded'] if link else None,
        }
    return beside


# -- GPUDirect RDMA by PCIe distance: what distance costs ----------------------------------------------------------

#: The families of catalog row 45 and how a case names its memory: the parameter and its values, host first.
GPUDIRECT_FAMILIES = {'GpuDirectRdma': ('operation', 'memory', {'host': 'host', 'gpu-near': 'near', 'gpu-far': 'far'}),
                      'OSUDevicePointToPoint': ('benchmark', 'gpu', {'near': 'near', 'far': 'far'})}


def representative(variables):
    """``(value, metric, how)`` of a case's {variable: value}: the peak bandwidth (``bw_<size>``), else the latency
    at the smallest size (``lat_<size>``); None when it has neither."""
    from .compare import curve          # the report's reading of a curve

    bw, lat = curve(variables, 'bw'), curve(variables, 'lat')
    if bw:
        size = max(bw, key=bw.get)
        return bw[size], 'bw', f'peak, at {size} B'
    if lat:
        size = min(s for s in lat)
        return lat[size], 'lat', f'at {size} B'
    return None


def distance_costs(cases):
    """The cases of catalog row 45 side by side: ``cases`` is ``[(partition, environ, family, params, variables,
    gpu_placement)]``; one row per partition, environment, family and operation, with the value of host memory
    (where the family measures it), the nearest GPU and the farthest, their GPUs' distances, and the ratios that
    say what distance costs (bandwidth: the GPU's over host memory's, far over near; latency the same way, so a
    ratio above 1 is slower for latency and faster for bandwidth, as ``metric`` says)."""
    groups = {}
    for partition, environ, family, params, variables, placement in cases:
        if family not in GPUDIRECT_FAMILIES:
            continue
        op_param, mem_param, memories = GPUDIRECT_FAMILIES[family]
        memory = memories.get(params.get(mem_param))
        found = representative(variables)
        if memory is None or found is None:
            continue
        value, metric, how = found
        distances = sorted({str(p['distance']) for p in (placement or {}).values()})
        row = groups.setdefault((partition, environ, family, str(params.get(op_param))),
                                {'partition': partition, 'environ': environ, 'family': family,
                                 'operation': str(params.get(op_param)), 'metric': metric})
        row[memory] = {'value': value, 'how': how, 'distance': ', '.join(distances) or None}
    rows = []
    for key in sorted(groups):
        row = groups[key]
        host, near, far = (row.get(m, {}).get('value') for m in ('host', 'near', 'far'))
        row['near_vs_host'] = near / host if near is not None and host else None
        row['far_vs_host'] = far / host if far is not None and host else None
        row['far_vs_near'] = far / near if far is not None and near else None
        rows.append(row)
    return rows

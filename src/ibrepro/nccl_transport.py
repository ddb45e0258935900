"""Which path NCCL really used between GPUs, as its own ``NCCL_DEBUG=INFO`` lines say (read with the nccl-tests
output by :mod:`ibrepro.parsers.nccl`): the network it loaded (``Using network IB``) and each channel's transport
(``via NET/IB/0/GDRDMA``, ``via P2P/IPC``, ``via SHM/direct/direct``).

A case across nodes measures the partition's fabric only if NCCL sent over it: NCCL falls back to TCP sockets
without a word in its result table when its IB transport cannot start (no verbs library in the container, a wrong
``NCCL_IB_HCA``), and moves GPU memory through host memory when GPUDirect RDMA is not available (no nvidia-peermem
or DMA-BUF), both at a fraction of the fabric's bandwidth. :func:`problem` names either, as CSCS's nccl-tests
checks assert the provider NCCL chose.
"""

#: The network a partition's NCCL should use where its extras name none (``nccl_network``): NCCL's verbs transport,
#: which it calls IB on InfiniBand and on RoCE alike.
DEFAULT_NETWORK = 'IB'


def network_family(name):
    """NCCL's name of a network, with HPC-X's SHARP plugin (``IBext_v8``, ``IBext_v10``) counted as the verbs
    transport ``IB`` it extends."""
    return 'IB' if name == 'IB' or name.startswith('IBext') else name


def summary(meta):
    """What the run's lines say: the networks, the channels across the network and within a node with counts, and
    the CPUs NCCL bound each GPU's threads to (the job binds no rank: this is the binding that happened)."""
    channels = meta.get('channels') or {}
    return {'networks': list(meta.get('networks') or []), 'net_devices': list(meta.get('net_devices') or []),
            'affinity': list(meta.get('affinity') or []),
            'network_channels': {via: n for via, n in channels.items() if via.startswith('NET/')},
            'node_channels': {via: n for via, n in channels.items() if not via.startswith('NET/')}}


def problem(meta, nodes, network=DEFAULT_NETWORK, gpudirect=False):
    """Why the run did not measure the fabric it was meant to ('' when it did, or within one node where no network
    is used). ``network``: NCCL's name of the partition's (``IB``, ``AWS Libfabric``); ``gpudirect``: the partition
    promises GPUDirect RDMA, so every channel across the network must say ``GDRDMA``."""
    if nodes < 2:
        return ''
    said = summary(meta)
    net = said['network_channels']
    used = sorted({network_family(n) for n in said['networks']}
                  | {network_family(via.split('/')[1]) for via in net if via.count('/') >= 2})
    if not used:
        return ('NCCL said nothing of the network it used (no "Using network" or "via NET/" line: NCCL_DEBUG=INFO '
                'not in effect?), so what was measured cannot be told from a TCP fallback')
    if used != [network_family(network)]:
        return (f'NCCL sent over {" and ".join(used)}, not {network}: its {network} transport did not start (its '
                'libraries, NCCL_IB_HCA, NCCL_NET or a plugin), so the fabric was not measured')
    if gpudirect:
        if not net:
            return ('the partition promises GPUDirect RDMA, but no "via NET/..." line says whether NCCL used it '
                    '(NCCL_DEBUG=INFO with the INIT subsystem)')
        without = sorted(via for via in net if not via.endswith('/GDRDMA'))
        if without:
            count = sum(net[via] for via in without)
            return (f'{count} channel(s) via {without[0]} without GDRDMA: GPU memory went through host memory, not '
                    'GPUDirect RDMA, which the partition promises (nvidia-peermem or DMA-BUF, NCCL_NET_GDR_LEVEL)')
    return ''

#!/usr/bin/env python3
"""Write reference-data/systems/testbeds/{references,provenance}.yaml from the papers' numbers.

The testbeds configuration (configs/testbeds.py) describes the papers' testbeds as partitions; its references
are what "the paper's system" scored, each value taken from a paper entry (reference-data/papers/) by its id,
so nothing here is typed by hand but the mapping below: which check, parameters, partition, environment and
performance variable each stated number belongs to.

Message sizes: the papers give "small" latencies and "large"/peak bandwidths. A small-message latency is
compared at the smallest size the tool sweeps (OMB 1 B, perftest 2 B); a large-message or peak bandwidth with
the check's peak over its sweep (``bw_peak``, one of the representative variables references judge); a number
stated at one size at that size. The band around each paper value is ours: 25 % in the worse direction
(TOLERANCE), enough to tell "like the paper's system" from "not", nothing the papers state.

    .venv/bin/python scripts/testbed_references.py     # rewrites both files
"""

import sys

import yaml

from ibrepro import parsers, paths, references

TOLERANCE = 0.25

# (check, {parameter: value} in the check's order, partition, environment, variable) <- paper entry id
MAPPING = [
    # 000/003: PCIe x8 MT25208 vs PCI-X 64/133 MT23108, verbs level (perftest, ibrepro_rdma)
    ('PerftestLatency', {'operation': 'send'}, 'pcie-sdr', 'verbs', 'lat_2', '003-fig2-send-recv-lat-pcie'),
    ('PerftestLatency', {'operation': 'send'}, 'pcix-sdr', 'verbs', 'lat_2', '003-fig2-send-recv-lat-pcix'),
    ('PerftestLatency', {'operation': 'rdma_write'}, 'pcie-sdr', 'verbs', 'lat_2', '003-fig3-rdma-write-lat-pcie'),
    ('PerftestLatency', {'operation': 'rdma_write'}, 'pcix-sdr', 'verbs', 'lat_2', '003-fig3-rdma-write-lat-pcix'),
    ('PerftestLatency', {'operation': 'rdma_read'}, 'pcie-sdr', 'verbs', 'lat_2', '003-fig4-rdma-read-lat-pcie'),
    ('PerftestLatency', {'operation': 'rdma_read'}, 'pcix-sdr', 'verbs', 'lat_2', '003-fig4-rdma-read-lat-pcix'),
    ('PerftestBandwidth', {'direction': 'uni'}, 'pcie-sdr', 'verbs', 'bw_peak', '003-fig6-uni-bw-pcie'),
    ('PerftestBandwidth', {'direction': 'uni'}, 'pcix-sdr', 'verbs', 'bw_peak', '003-fig6-uni-bw-pcix'),
    ('PerftestBandwidth', {'direction': 'bi'}, 'pcie-sdr', 'verbs', 'bw_peak', '003-fig7-bi-bw-pcie'),
    ('PerftestBandwidth', {'direction': 'bi'}, 'pcix-sdr', 'verbs', 'bw_peak', '003-fig7-bi-bw-pcix'),
    ('VerbsTwoPort', {'case': 'stripe-uni-1proc'}, 'pcie-sdr', 'verbs', 'bw_peak', '003-fig8-2port-uni-bw-pcie'),
    ('VerbsTwoPort', {'case': 'stripe-uni-1proc'}, 'pcix-sdr', 'verbs', 'bw_peak', '003-fig8-2port-uni-bw-pcix'),
    ('VerbsTwoPort', {'case': 'stripe-bi-1proc'}, 'pcie-sdr', 'verbs', 'bw_peak',
     '003-fig9-2port-bi-bw-pcie-striping'),
    ('VerbsTwoPort', {'case': 'bind-bi-1proc'}, 'pcie-sdr', 'verbs', 'bw_peak',
     '003-fig9-2port-bi-bw-pcie-binding'),
    ('VerbsTwoPort', {'case': 'stripe-uni-2proc'}, 'pcie-sdr', 'verbs', 'bw_peak',
     '003-fig10-2proc-uni-bw-pcie-striping'),
    ('VerbsTwoPort', {'case': 'bind-uni-2proc'}, 'pcie-sdr', 'verbs', 'bw_peak',
     '003-fig10-2proc-uni-bw-pcie-binding'),
    ('VerbsTwoPort', {'case': 'stripe-bi-2proc'}, 'pcie-sdr', 'verbs', 'bw_peak',
     '003-fig11-2proc-bi-bw-pcie-striping'),
    ('VerbsTwoPort', {'case': 'bind-bi-2proc'}, 'pcie-sdr', 'verbs', 'bw_peak',
     '003-fig11-2proc-bi-bw-pcie-binding'),
    # 000/003 MPI level (MVAPICH 1 port; 2 ports striped)
    ('OSULatency', {}, 'pcie-sdr', 'mvapich2', 'lat_1', '003-fig12-mpi-lat-pcie'),
    ('OSULatency', {}, 'pcix-sdr', 'mvapich2', 'lat_1', '003-fig12-mpi-lat-pcix'),
    ('OSUBandwidth', {'window': 64}, 'pcie-sdr', 'mvapich2', 'bw_peak', '003-fig13-mpi-uni-bw-pcie'),
    ('OSUBandwidth', {'window': 64}, 'pcix-sdr', 'mvapich2', 'bw_peak', '003-fig13-mpi-uni-bw-pcix'),
    ('MVAPICH2MultiRail', {'benchmark': 'osu_bw', 'ports': 2}, 'pcie-sdr', 'mvapich2', 'bw_peak',
     '003-fig13-mpi-uni-bw-pcie-2port'),
    ('OSUBiBandwidth', {'window': 64}, 'pcie-sdr', 'mvapich2', 'bw_peak', '003-fig14-mpi-bi-bw-pcie'),
    ('OSUBiBandwidth', {'window': 64}, 'pcix-sdr', 'mvapich2', 'bw_peak', '003-fig14-mpi-bi-bw-pcix'),
    ('MVAPICH2MultiRail', {'benchmark': 'osu_bibw', 'ports': 2}, 'pcie-sdr', 'mvapich2', 'bw_peak',
     '003-fig14-mpi-bi-bw-pcie-2port'),
    # 001: ConnectX QDR on PCIe 2.0, back to back
    ('OSULatency', {}, 'connectx-qdr', 'mvapich2', 'lat_1', '001-fig2a-lat-qdr'),
    ('OSUBandwidth', {'window': 64}, 'connectx-qdr', 'mvapich2', 'bw_peak', '001-fig2b-bw-qdr-2.0'),
    ('OSUBiBandwidth', {'window': 64}, 'connectx-qdr', 'mvapich2', 'bw_peak', '001-fig2c-bibw-qdr-2.0'),
    ('OSUMultiPair', {'benchmark': 'osu_multi_lat', 'pairs': 4}, 'connectx-qdr', 'mvapich2', 'lat_1',
     '001-fig3-multi-lat-qdr-4pair'),
    ('OSUMultiPair', {'benchmark': 'osu_mbw_mr', 'pairs': 4}, 'connectx-qdr', 'mvapich2', 'bw_2048',
     '001-fig3e-multi-bw-qdr-2.0'),
    # 002: InfiniBand (MVAPICH 0.9.1) on PCI-X, 8 nodes; and on 66 MHz PCI
    ('OSULatency', {}, 'ib-pcix-8node', 'mvapich2', 'lat_1', '002-fig1-lat-ib'),
    ('OSUBandwidth', {'window': 16}, 'ib-pcix-8node', 'mvapich2', 'bw_peak', '002-fig2-bw-ib-w16'),
    ('OSUBandwidth', {'window': 16}, 'ib-pci-8node', 'mvapich2', 'bw_peak', '002-fig27-bw-pci'),
    ('OSUCollective', {'case': 'osu_alltoall-8x1'}, 'ib-pcix-8node', 'mvapich2', 'lat_1', '002-fig11-alltoall-ib-pcix'),
    ('OSUCollective', {'case': 'osu_allreduce-8x1'}, 'ib-pcix-8node', 'mvapich2', 'lat_4',
     '002-fig12-allreduce-ib-pcix'),
]

# 002 Table 2 (InfiniBand, 8 nodes): the NPB class B run times
TABLE2 = {'is': '002-tab2-is-ib-pcix-8', 'cg': '002-tab2-cg-ib-pcix-8', 'mg': '002-tab2-mg-ib-pcix-8',
          'lu': '002-tab2-lu-ib-pcix-8', 'ft': '002-tab2-ft-ib-pcix-8'}
MAPPING += [('NPB', {'case': f'{p}.B-8x1'}, 'ib-pcix-8node', 'mvapich2', 'time', e) for p, e in TABLE2.items()]

UNITS = {'us': 'us', 'MB/s': 'MB/s', 's': 's'}


def reference_value(entry):
    """The paper's number in ibrepro's unit (MB/s = 10^6 B/s)."""
    value, unit = entry['value_si'], entry['unit_si']
    if unit == 'GB/s':
        value, unit = value * 1000, 'MB/s'
    if unit not in UNITS:
        raise ValueError(f'{entry["id"]}: unit {unit!r} has no perf-variable counterpart')
    return value, UNITS[unit]


def build():
    refs, provenance = {}, {}
    for check, params, partition, environ, variable, entry_id in MAPPING:
        entry = references.entry(entry_id)
        value, unit = reference_value(entry)
        metric = variable.split('_')[0]
        tol = TOLERANCE
        bounds = [-tol, None] if parsers.METRIC_BETTER[metric] == 'higher' else [None, tol]
        node = refs.setdefault(check, {'$index': ['$partition', '$environ', *params]})
        node = node.setdefault(f'testbeds:{partition}', {}).setdefault(environ, {})
        for value_key in params.values():
            node = node.setdefault(value_key, {})
        node[variable] = [value, *bounds, unit]
        source = provenance.setdefault(check, {}).setdefault(f'testbeds:{partition}', {}).setdefault(
            environ, {})
        for value_key in params.values():
            source = source.setdefault(value_key, {})
        source[variable] = entry_id
    return refs, provenance


def main():
    out = paths.system_references_dir('testbeds')
    out.mkdir(parents=True, exist_ok=True)
    refs, provenance = build()
    header = '# Generated by scripts/testbed_references.py from reference-data/papers: do not edit.\n'
    (out / 'references.yaml').write_text(
        header + '# The papers\' numbers as ReFrame references ($ref); provenance.yaml names each entry.\n'
        + yaml.safe_dump(refs, sort_keys=False, default_flow_style=None, width=120))
    (out / 'provenance.yaml').write_text(
        header + '# The shape of references.yaml, with the paper entry id of each reference value.\n'
        + yaml.safe_dump(provenance, sort_keys=False, width=120))
    print(f'{out}: {len(MAPPING)} references from {len({m[-1] for m in MAPPING})} paper entries')
    return 0


if __name__ == '__main__':
    sys.exit(main())

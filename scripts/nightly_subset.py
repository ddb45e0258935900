#!/usr/bin/env python3
"""Write reference-data/nightly.yaml: the `nightly` subset, one test case for every figure of the papers.

The whole catalog is ~1000 test cases on a site partition; a nightly regression run needs every figure of the
papers once, on two nodes where the figure allows it, in about half an hour. This script chooses the cases by
greedy set cover over the figure tags (``s000-fig12``) of every test variant, as its init hooks tag it: first
among the cases that fit two nodes, the one that covers the most figures not yet covered per estimated second;
then, for the figures only larger layouts reproduce (4x1, 8x1 collectives and NPB), the cheapest such case.
Checks tag the chosen cases ``nightly`` (:func:`ibrepro.catalog.nightly_cases`); ``--mode nightly`` selects them.

Estimated times are a model, not measurements (there is no InfiniBand here): seconds per case on an HDR cluster
like the example cluster's ``hdr`` partition, Slurm's job start included (:data:`JOB_OVERHEAD`), per family and
parameters (:func:`estimate`). The soft-RoCE and namespace clusters of CI are emulation and say nothing of
real run times.

    .venv/bin/python scripts/nightly_subset.py      # rewrites the file; tests check it is current
"""

import re
import sys

import yaml

from ibrepro import catalog, paths

OUT = paths.REFERENCE_DATA / 'nightly.yaml'
CONFIG = paths.CONFIGS_DIR / 'example-cluster.py'
PARTITION = 'example-cluster:hdr'
TWO_NODES = 2

#: Seconds Slurm takes to start and end one job (sbatch, prolog, epilog, sacct), assumed.
JOB_OVERHEAD = 10

#: Seconds of the benchmark itself per family on HDR, assumed from each tool's default sweep and iterations:
#: IMB/OSU point-to-point 1 B..4 MiB, collectives to 1 MiB, perftest -a sweeps (2 B..8 MiB), concurrent flows in
#: 11 rounds of 4 s (duration mode) plus ~1.5 s to connect each, our benchmarks' default sweeps.
RUN_SECONDS = {
    'IMBPointToPoint': 15, 'IMBCollective': 25, 'OSULatency': 10, 'OSUBandwidth': 10, 'OSUBiBandwidth': 10,
    'OSUIntraNode': 10, 'OSUMultiPair': 20, 'OSUCollective': 20, 'MVAPICH2MultiRail': 10,
    'MVAPICH2MultiRailCollective': 20, 'MVAPICH2RailPolicy': 20, 'MVAPICH2Inline': 10,
    'PerftestLatency': 20, 'PerftestBandwidth': 20, 'PerftestDualPort': 20, 'PerftestBinding': 60,
    'PerftestMultiPair': 60, 'VerbsTwoPort': 40, 'HostOverhead': 30, 'BiDirectionalLatency': 20,
    'BiDirectionalBandwidth': 20, 'OverlapPotential': 60, 'BufferReuse': 30, 'MemoryUsage': 10,
}

#: Rows beyond the papers (the catalog's ``continues``): their nightly cases, chosen by hand, which run only where
#: a partition has the hardware. GPU host-device copies, copy engine, one direction each: the quietest signal a
#: night has (robust sd 0.03-0.08 % over 25 runs on the shared H200: a 1 % change shows in one night).
#: GPUDirect RDMA: write bandwidth from and into the nearest GPU's memory, the path a GPU job's transfers take (a
#: node whose HCA cannot reach GPU memory, nvidia-peermem not loaded, fails it). NCCL: all-reduce across two nodes,
#: the collective GPU jobs run, over the path NCCL says it chose (a fallback from the fabric fails it).
TODAY = [{'case': 'GpuHostDevice %copy=h2d-ce', 'row': 44, 'where': 'partitions with feature gpu'},
         {'case': 'GpuHostDevice %copy=d2h-ce', 'row': 44, 'where': 'partitions with feature gpu'},
         {'case': 'GpuDirectRdma %operation=write_bw %memory=gpu-near', 'row': 45,
          'where': 'partitions with feature gpudirect'},
         {'case': 'NcclBusBandwidth %collective=all_reduce %nodes=2', 'row': 46,
          'where': 'partitions with feature gpu and two nodes'}]

#: NPB class B run times (s) on two HDR nodes (one process per node), assumed; halved per doubling of processes.
NPB_2X1 = {'is': 5, 'ep': 15, 'cg': 30, 'mg': 10, 'ft': 40, 'lu': 150, 'sp': 150, 'bt': 150}


def estimate(family, name, environments):
    """Estimated seconds of one test variant in all its environments on the partition."""
    if family == 'NPB':
        m = re.search(r'case=(\w\w)\.(\w)-(\d+)x(\d+)', name)
        program, cls, nodes, per_node = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        scale = {'A': 0.25, 'B': 1.0, 'C': 4.0}.get(cls, 1.0)
        seconds = NPB_2X1[program] * scale * 2 / (nodes * per_node)
    else:
        seconds = RUN_SECONDS.get(family, 30)
    return (JOB_OVERHEAD + seconds) * max(1, environments)


def cases():
    """[(family, display name, figures, nodes, environments on the partition)] of every test variant."""
    sysconf = catalog.load_system(CONFIG, PARTITION)
    (part,) = [p for p in sysconf['partitions'] if f'{sysconf["name"]}:{p["name"]}' == PARTITION]
    found = []
    for family, cls in catalog.check_classes().items():
        for i in range(cls.num_variants):
            test = cls(variant_num=i)
            figures = sorted(t for t in test.tags if re.fullmatch(r's\d{3}-\w+', t))
            if not figures:
                continue
            fits = [spec for spec in test.valid_systems if not catalog._missing(spec, part)]
            envs = [e for e in part['environs'] if any(not catalog._missing(s, e) for s in test.valid_prog_environs)]
            if not fits or not envs:
                continue
            nodes = getattr(test, 'num_nodes', None) or (2 if family.startswith(('Perftest', 'Verbs')) else 1)
            found.append((family, test.display_name, figures, nodes, len(envs)))
    return found


def choose(all_cases):
    """Greedy set cover: two-node cases first, then larger layouts for what they alone reproduce."""
    wanted = {f for *_, figures, _, _ in all_cases for f in figures}
    chosen, covered = [], set()
    for limit in (TWO_NODES, None):
        pool = [c for c in all_cases if limit is None or c[3] <= limit]
        while True:
            best = max(pool, default=None, key=lambda c: (len(set(c[2]) - covered) / estimate(c[0], c[1], c[4]),
                                                          -estimate(c[0], c[1], c[4])))
            if best is None or not set(best[2]) - covered:
                break
            chosen.append(best)
            covered |= set(best[2])
    return chosen, wanted - covered


def build():
    chosen, uncovered = choose(cases())
    entries = [{'case': name, 'nodes': nodes, 'environments': envs, 'estimate_s': round(estimate(f, name, envs)),
                'figures': figures} for f, name, figures, nodes, envs in sorted(chosen, key=lambda c: (c[3], c[1]))]
    two = [e for e in entries if e['nodes'] <= TWO_NODES]
    return {
        'partition': PARTITION,
        'method': 'greedy set cover of the figure tags; two-node cases first (scripts/nightly_subset.py)',
        'estimate': {'two_nodes': {'cases': sum(e['environments'] for e in two),
                                   'minutes': round(sum(e['estimate_s'] for e in two) / 60, 1)},
                     'all': {'cases': sum(e['environments'] for e in entries),
                             'minutes': round(sum(e['estimate_s'] for e in entries) / 60, 1)},
                     'basis': 'modelled seconds per case on HDR including a 10 s Slurm job start (not measured)'},
        'uncovered_figures': sorted(uncovered),
        'cases': entries,
        'today': TODAY,
    }


def main():
    doc = build()
    OUT.write_text('# Generated by scripts/nightly_subset.py: the `nightly` subset, every figure of the papers once.\n'
                   + yaml.safe_dump(doc, sort_keys=False, width=120))
    est = doc['estimate']
    print(f'{OUT}: {len(doc["cases"])} variants; two nodes: {est["two_nodes"]["cases"]} cases, '
          f'~{est["two_nodes"]["minutes"]} min; all: {est["all"]["cases"]} cases, ~{est["all"]["minutes"]} min; '
          f'uncovered figures: {doc["uncovered_figures"] or "none"}')
    return 0


if __name__ == '__main__':
    sys.exit(main())

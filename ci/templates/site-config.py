#!/usr/bin/env python3
"""Make the namespace cluster's site configuration from the template, as docs/site-setup.md step 3 says: copy
configs/example-cluster.py and change what is marked SITE (host names, partition, nodes, rails, environments).

    ci/templates/site-config.py OUT HOSTNAME_PATTERN [NODE_PYTHON]

NODE_PYTHON: the Python of the partition's nodes (extras ``python``; default the template's ``python3``), e.g. a
3.6 interpreter as on EL8 nodes.

The namespace nodes have no RDMA device: the partition has no rails and no `ib` feature, and the environments are
the MPI wheels of `make setup` over TCP (as configs/ci-cluster.py, which says why each setting is needed). Each edit
must match the template exactly once: a changed template fails here, naming the edit, instead of a quietly
different configuration.
"""

import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / 'configs' / 'example-cluster.py'

ENVIRONMENTS = '''ENVIRONMENTS = [
    # SITE (CI): the MPI wheels of `make setup`, TCP between the namespace nodes (configs/ci-cluster.py says why)
    rfmconfig.site_environment(
        'impi', descr='Intel MPI 2021.14 + IMB (PyPI impi-rt, make setup) over TCP',
        prefix=f'{VIEWS}/impi', mpi='impi', slurm_mpi_type='pmi2', tools=['imb'], target_systems=[SYSTEM],
        # one value per name: this LD_LIBRARY_PATH replaces site_environment's own (<prefix>/lib), so it names both
        env_vars=[['LD_LIBRARY_PATH', rfmconfig.path_value(
                      [f'{VIEWS}/impi/lib', f'{VIEWS}/impi/lib/libfabric'], 'LD_LIBRARY_PATH')],
                  ['FI_PROVIDER_PATH', f'{VIEWS}/impi/lib/libfabric/prov'], ['FI_PROVIDER', 'tcp']]),
    rfmconfig.site_environment(
        'mpich', descr='MPICH (PyPI mpich, make setup) and our own benchmarks over TCP',
        prefix=f'{VIEWS}/mpich', mpi='mpich', slurm_mpi_type='pmi2', tools=['ibrepro-bench'],
        target_systems=[SYSTEM],
        env_vars=[['PATH', rfmconfig.path_value([rfmconfig.BENCH_BIN], 'PATH')],
                  ['MPIR_CVAR_CH4_NETMOD', 'ofi'], ['FI_PROVIDER', 'tcp']]),
]
'''


def edits(hostname, node_python=None):
    cores = os.cpu_count() or 1
    python = f', python={node_python!r}' if node_python else ''
    return [
        # SITE: your login nodes (here: the host that runs the pipeline's login jobs)
        ('hostnames', r"'hostnames': \[r'\^example-login\\d\+\$'\],", f"'hostnames': [{hostname!r}],"),
        # SITE: the partition of today's nodes: node1 + node2 of Slurm partition `ci` (access: --partition=<name>)
        ('partition', r"_partition\('hdr', .*?\),\n        \*\(\[GPU_PARTITION\] if GPU_NODES else \[\]\),\n    \],",
         f"_partition('ci', 'namespace nodes node1 + node2, TCP over veth (no RDMA)', nodes=2, "
         f"cores_per_node={cores}, rdma_devices=[], ib_ports=0, interconnect='TCP over veth'{python}),\n"
         "        *([GPU_PARTITION] if GPU_NODES else []),\n    ],"),
        # no InfiniBand or RoCE here: neither feature (the verbs families need one)
        ('features', r"'features': \['mpi', 'ib', ", "'features': ['mpi', "),
        ('environs', r"'environs': \['openmpi', 'mvapich2', 'verbs', \*environs\],",
         "'environs': ['impi', 'mpich', *environs],"),
        # SITE: where your builds are
        ('views', r"VIEWS = '/opt/ibrepro/views'", "VIEWS = str(paths.DEPS_DIR)"),
        ('environments', r"ENVIRONMENTS = \[\n.*?\n\]\n", ENVIRONMENTS),
    ]


def main(out, hostname, node_python=None):
    text = TEMPLATE.read_text()
    for name, pattern, new in edits(hostname, node_python):
        found = len(re.findall(pattern, text, flags=re.S))
        if found != 1:
            sys.exit(f'site-config.py: the {name} edit matches {found} places of {TEMPLATE} (not 1): update it '
                     'to the template')
        text = re.sub(pattern, lambda _: new, text, flags=re.S)
    Path(out).write_text(text)


if __name__ == '__main__':
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(*sys.argv[1:])

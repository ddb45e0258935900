"""ReFrame pieces of the simulated testbeds: the ``smpirun`` launcher and the ``simulated`` system.

``configs/simulated.py`` is ``rfmconfig.site_configuration(systems=[system()], environments=[smpi environment])``.
Importing this module registers the launcher.

One partition per testbed of :data:`ibrepro.simulated.platform.TESTBEDS`, each with

* ``access: ['--smpi-testbed=<name>']``: the launcher reads the testbed from it (as the soft-RoCE launcher reads
  its guest), writes the platform file (named by its hash) and puts the model's ``--cfg`` options on the
  ``smpirun`` command line of the job script, so the script says exactly what ran;
* features as a real partition of that hardware has them (``mpi``, ``shm``, the bus ``pcie``/``pcix``/``pci``,
  the link rate ``ib-sdr``..., the layout features ``nodes<N>``/``cores<P>``) plus ``simulated``, but not ``ib``:
  there is no verbs device;
* extras ``nodes``, ``cores_per_node`` (layouts), ``simulated: True``, ``testbed`` and ``simulation``: SimGrid's
  version, the platform's sha256, the ``smpirun`` options and every model parameter with its source. Every check
  records ``simulation`` with its results (:class:`ibrepro.rfm.PaperExperiment`), so each stored session says
  which model produced it.
"""

import os
import shlex
import sys

from reframe.core.backends import register_launcher
from reframe.core.launchers import JobLauncher

from .. import paths, rfmconfig
from . import FEATURE, SYSTEM, build, platform

#: Simulations are single-threaded and need no quiet machine (computation is not simulated): one per core.
MAX_JOBS = max(1, min(2, os.cpu_count() or 1))

_ACCESS = '--smpi-testbed='


def testbed_of(access):
    """The testbed named by a partition's access options."""
    for option in access:
        if option.startswith(_ACCESS):
            return option[len(_ACCESS):]
    raise ValueError(f'no {_ACCESS}<name> in the partition\'s access options {access!r}')


@register_launcher('smpirun')
class SmpirunLauncher(JobLauncher):
    """``smpirun`` on the partition's platform, through :mod:`ibrepro.simulated.launch` (host file, program path)."""

    def command(self, job):
        name = testbed_of(job.sched_access)
        params = platform.model(name)
        path = platform.materialize(name)
        ranks = job.num_tasks or 1
        per_node = job.num_tasks_per_node or 1
        cmd = [sys.executable, '-m', 'ibrepro.simulated.launch', '--platform', str(path),
               '--per-node', str(per_node), '-np', str(ranks), *platform.options(params)]
        return [shlex.quote(arg) for arg in cmd]


def simulation_record(name, version):
    """What a session stores about the model of testbed ``name`` (extras ``simulation``)."""
    desc = platform.describe(name)
    return {
        'simgrid': version,
        'testbed': name,
        'configurations': desc['configurations'],
        'platform_sha256': desc['platform_sha256'],
        'options': desc['options'],
        'parameters': {k: {'value': v['value'], 'unit': v['unit'], 'source': v['source'],
                           'entries': v['entries']}
                       for k, v in desc['parameters'].items()},
    }


def partition(name, version):
    t = platform.TESTBEDS[name]
    return {
        'name': name,
        'descr': f'simulated (SimGrid SMPI model, not a measurement): {t.descr}',
        'scheduler': 'local',
        'launcher': 'smpirun',
        'access': [f'{_ACCESS}{name}'],
        'environs': ['smpi'],
        'max_jobs': MAX_JOBS,
        'features': ['mpi', 'shm', FEATURE, *t.features, *rfmconfig.layout_features(t.nodes, t.cores_per_node)],
        'extras': {
            'nodes': t.nodes, 'cores_per_node': t.cores_per_node, 'simulated': True,
            'interconnect': f'simulated {t.link} on {t.bus} (SimGrid SMPI model of {"/".join(t.configurations)})',
            'testbed': '/'.join(t.configurations),
            'simulation': simulation_record(name, version),
        },
    }


def system():
    """The ``simulated`` system: one partition per testbed model."""
    version = build.simgrid_version()
    return {
        'name': SYSTEM,
        'descr': "the papers' testbeds as SimGrid SMPI models: model values, not measurements"
                 + ('' if version else f' [{build.missing_reason()}]'),
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'prefix': str(paths.data_home() / 'rfm'),
        'partitions': [partition(name, version) for name in platform.TESTBEDS],
    }

"""Software provenance of every partition and environment: MPI library, benchmark tools, rdma-core, Spack lock.

Runs ``ibrepro software --json`` inside a job of each programming environment, so the stored session says what
the benchmarks really ran with (loggable variable ``software``), and records the partition and environment as
the configuration described them (``platform``: descriptions, features, extras; ``ibrepro report`` labels
``extras: {emulated: True}`` partitions and one-node systems from it).
"""

import json
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from ibrepro.rfm.system import IbreproCommand


@rfm.simple_test
class SoftwareVersions(IbreproCommand):
    descr = 'MPI library, benchmark tools, rdma-core and Spack lock of the environment (ibrepro software)'
    executable_opts = ['-m', 'ibrepro.cli', 'software', '--json']
    tags = {'system', 'software', 'nightly'}

    #: `ibrepro software --json` in this environment (set after the run)
    software = variable(dict, value={}, loggable=True)

    #: the system, partition and environment as configured: descr, features, extras (set before the run)
    platform = variable(dict, value={}, loggable=True)

    @run_before('run')
    def run_in_the_job_itself(self):
        # one process, no MPI launcher needed (an environment whose MPI is broken still says what it has)
        self.job.launcher = getlauncher('local')()

    @run_before('run')
    def describe_platform(self):
        system, part, env = self.current_system, self.current_partition, self.current_environ
        self.platform = {
            'system': system.name, 'system_descr': system.descr,
            'partition': part.name, 'partition_descr': part.descr,
            'features': list(part.features), 'extras': dict(part.extras),
            'environ': env.name, 'environ_features': list(env.features), 'environ_extras': dict(env.extras),
        }

    @sanity_function
    def software_is_json(self):
        stdout = os.path.join(self.stagedir, sn.evaluate(self.stdout))
        try:
            with open(stdout) as f:
                found = json.load(f)
        except (OSError, ValueError) as err:
            with open(os.path.join(self.stagedir, sn.evaluate(self.stderr)), errors='replace') as f:
                tail = f.read()[-500:].strip()
            raise SanityError(f'ibrepro software --json gave no JSON ({err}); stderr: {tail or "empty"}')

        if not isinstance(found, dict) or 'mpi' not in found:
            raise SanityError('ibrepro software --json: no "mpi" entry in the output')

        self.software = found
        return True

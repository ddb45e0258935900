#!/usr/bin/env python3
"""What a Jacamar CI batch runner does with each job of a child pipeline, for gitlab-ci-local's shell executor.

    ci/templates/jacamar.py CHILD.yml OUT.yml BATCH_DIR

Jacamar's Slurm executor submits a job's before_script and script as one batch job, made from the job's
SCHEDULER_PARAMETERS, and waits for it; the script runs on the allocation's first node, inside the allocation (so
ibrepro.rfmconfig.site_configuration runs the tests as job steps of it). gitlab-ci-local has no such executor: each
job's lines go to BATCH_DIR/<job>.sh, and the job's script becomes ci/templates/jacamar-batch.sh, which submits that
file with `sbatch --wait $SCHEDULER_PARAMETERS` and prints its output. A job without SCHEDULER_PARAMETERS is for a
shell runner on the login node (ci/nightly.sh, IBREPRO_CHILD_JOBS=login) and stays as it is; nothing else of the
pipeline changes.
"""

import re
import shlex
import sys
from pathlib import Path

import yaml

BATCH = 'ci/templates/jacamar-batch.sh'


def main(child, out, batch_dir):
    pipeline = yaml.safe_load(Path(child).read_text())
    default = pipeline.get('default', {})
    batch_dir = Path(batch_dir)
    batch_dir.mkdir(parents=True, exist_ok=True)
    jobs = 0
    for name, job in pipeline.items():
        if not (isinstance(job, dict) and 'script' in job):
            continue
        jobs += 1
        if 'SCHEDULER_PARAMETERS' not in (job.get('variables') or {}):
            continue        # a job for a login-node shell runner (IBREPRO_CHILD_JOBS=login): runs as it is
        if not re.fullmatch(r'[A-Za-z0-9_.%=@-]+', name):
            sys.exit(f'jacamar.py: job name {name!r} cannot name a file')
        lines = [*job.get('before_script', default.get('before_script', [])), *job['script']]
        script = batch_dir / f'{name}.sh'
        script.write_text('#!/bin/bash\nset -eo pipefail\n' + ''.join(f'{line}\n' for line in lines))
        script.chmod(0o755)
        job['before_script'] = []       # in the batch job, as Jacamar runs it
        job['script'] = [f'{BATCH} {shlex.quote(str(script.resolve()))}']
    if not jobs:
        sys.exit(f'jacamar.py: {child} has no job with a script')
    Path(out).write_text(yaml.safe_dump(pipeline, sort_keys=False, width=10**6))


if __name__ == '__main__':
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])

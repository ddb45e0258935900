#!/bin/bash
# nightly.sh: ibrepro's nightly mode in CI (ci/gitlab/nightly.yml and ci/github/nightly.yml call it).
#
#   ci/nightly.sh run             run the checks once (reframe --mode=nightly); the session is stored
#   ci/nightly.sh generate FILE   GitLab child pipeline, one job per test case (reframe --ci-generate)
#   ci/nightly.sh report          this night against its history, its suspects re-run (ibrepro nightly --no-run):
#                                 the report directory (index.html, summary.md); exit 0 clean, 1 regression,
#                                 2 could not judge, 3 inconclusive or not judged yet (a new system)
#
# Environment (all optional):
#   IBREPRO_CONFIG      ReFrame configuration               (configs/ci-cluster.py)
#   IBREPRO_SYSTEM      its system (or system:partition) to run: every child job names it with --system
#                       (default: the system whose hostnames match the host that generates)
#   IBREPRO_CHECKS      check directory, searched recursively (reframe-checks)
#   IBREPRO_NIGHTLY     id of this nightly run; every session stores it as session extra `nightly`
#                       (the CI run id; default: the date and time)
#   IBREPRO_HOME        results database and reports: must persist from one night to the next
#   IBREPRO_REPORT_DIR  where the report is written       (nightly-report)
#   IBREPRO_CHILD_JOBS  how the GitLab child jobs run (login):
#                         login       on a login-node runner: each runs ReFrame there, which submits its case's
#                                     job (the scripts of the confirmation too); the nodes need only the
#                                     partition's python (>= 3.6)
#                         allocation  on a Jacamar batch runner: each runs inside an allocation of its partition,
#                                     its case as job steps (ReFrame and `make setup` on the node: Python >= 3.10)
#   IBREPRO_CHILD_TAGS  runner tags of the GitLab child jobs, comma-separated (ibrepro-login; allocation:
#                       ibrepro-batch)
#   IBREPRO_RESOURCE_GROUP  GitLab resource_group of the child jobs: one runs at a time, as performance runs
#                       never share the fabric (ibrepro-fabric); empty: the site opts out
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
CONFIG=${IBREPRO_CONFIG:-configs/ci-cluster.py}
CHECKS=${IBREPRO_CHECKS:-reframe-checks}
export IBREPRO_NIGHTLY=${IBREPRO_NIGHTLY:-$(date +%Y%m%dT%H%M%S)}
REPORT_DIR=${IBREPRO_REPORT_DIR:-nightly-report}
PYTHON=${PYTHON:-python3}
SYSTEM=${IBREPRO_SYSTEM:-}
RESOURCE_GROUP=${IBREPRO_RESOURCE_GROUP-ibrepro-fabric}
CHILD_JOBS=${IBREPRO_CHILD_JOBS:-login}
case $CHILD_JOBS in
  login) CHILD_TAGS=${IBREPRO_CHILD_TAGS:-ibrepro-login} ;;
  allocation) CHILD_TAGS=${IBREPRO_CHILD_TAGS:-ibrepro-batch} ;;
  *) echo "nightly.sh: IBREPRO_CHILD_JOBS=$CHILD_JOBS: say login or allocation" >&2; exit 2 ;;
esac
# both reach a command line and the generated YAML: names only
[[ $SYSTEM =~ ^[A-Za-z0-9_.:-]*$ ]] || { echo "nightly.sh: IBREPRO_SYSTEM=$SYSTEM is not a system name" >&2; exit 2; }
[[ $RESOURCE_GROUP =~ ^[A-Za-z0-9_.-]*$ ]] ||
  { echo "nightly.sh: IBREPRO_RESOURCE_GROUP=$RESOURCE_GROUP is not a resource group name" >&2; exit 2; }
SYSTEM_OPT=(${SYSTEM:+--system="$SYSTEM"})

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

run() {
  mkdir -p "$REPORT_DIR"
  reframe -C "$CONFIG" "${SYSTEM_OPT[@]}" -c "$CHECKS" -R --mode=nightly -r \
          --report-file="$REPORT_DIR/run-report.json" --report-junit="$REPORT_DIR/junit.xml"
}

generate() {
  local file=${1:?usage: nightly.sh generate FILE}
  # the child jobs run on compute nodes, whose names the configuration need not match: they name the system
  # this host is (a host no system names fails here, loudly: rfmconfig.configured_host)
  local system=$SYSTEM
  if [ -z "$system" ]; then
    system=$(reframe -C "$CONFIG" --show-config=systems/0/name | tail -n 1 | tr -d '"') ||
      { echo "nightly.sh: $CONFIG names no system for $(hostname): set IBREPRO_SYSTEM" >&2; exit 1; }
    [[ $system =~ ^[A-Za-z0-9_.-]+$ && $system != generic ]] ||
      { echo "nightly.sh: $CONFIG names no system for $(hostname) (ReFrame picked '$system'): set IBREPRO_SYSTEM" >&2
        exit 1; }
  fi
  reframe -C "$CONFIG" --system="$system" -c "$CHECKS" -R --mode=nightly --ci-generate="$file"
  # the nodes each test case needs (its layout), so that each child job asks Slurm for exactly those; the
  # partitions each case runs on (its test cases), and each partition's access options (where its jobs go)
  local described cases partitions
  described=$(mktemp) cases=$(mktemp) partitions=$(mktemp)
  reframe -C "$CONFIG" --system="$system" -c "$CHECKS" -R --mode=nightly --describe > "$described"
  reframe -C "$CONFIG" --system="$system" -c "$CHECKS" -R --mode=nightly --list=C > "$cases"
  reframe -C "$CONFIG" --system="$system" --show-config=systems/0/partitions > "$partitions"
  # ReFrame writes the config's absolute path into every job, one job per test for all its partitions, and no
  # runner settings: make one job per test and partition, each using its own checkout, with runner tags, the
  # set-up of a fresh checkout, the id of this night and an allocation of the nodes its test needs in its partition.
  "$PYTHON" - "$file" "$REPO" "$CHILD_TAGS" "$IBREPRO_NIGHTLY" "$described" \
             "$system" "$RESOURCE_GROUP" "$cases" "$partitions" "$CHILD_JOBS" <<'PY'
import json
import re
import sys
import yaml

path, repo, tags, nightly, described, system, group, cases, partitions, child_jobs = sys.argv[1:]
with open(path) as f:
    pipeline = yaml.safe_load(f)


def json_after(text, opening):
    """The JSON document ReFrame printed after its log lines (the first line that opens one)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(opening))
    return json.loads('\n'.join(lines[start:]))


with open(described) as f:
    nodes = {t['hashcode']: t.get('job_nodes') or 1 for t in json_after(f.read(), '[')}
with open(partitions) as f:
    access = {p['name']: p.get('access') or [] for p in json_after(f.read(), '[')}
placed = {}       # test hash -> the partitions its test cases run on, in ReFrame's order
with open(cases) as f:
    for h, part in re.findall(r' /([0-9a-f]{8}) @[^:\s]+:([A-Za-z0-9_.-]+)\+', f.read()):
        placed.setdefault(h, [])
        if part not in placed[h]:
            placed[h].append(part)
for part, options in access.items():    # they reach the job's sbatch/salloc command line: plain options only
    for option in options:
        if not re.fullmatch(r'[A-Za-z0-9_=.,:@/+ -]+', str(option)):
            sys.exit(f'nightly.sh: partition {part}: access option {option!r} is not a plain sbatch option')

jobs = {}
for name, job in pipeline.items():
    if not (isinstance(job, dict) and 'script' in job):
        jobs[name] = job
        continue
    hashes = re.findall(r'-n /([0-9a-f]{8})\b', ' '.join(job['script']))
    need = max((nodes.get(h, 1) for h in hashes), default=1)
    parts = [p for h in hashes for p in placed.get(h, [])]
    if not parts:
        sys.exit(f'nightly.sh: test {name} runs on no partition of {system} (reframe --list=C)')
    for part in dict.fromkeys(parts):
        # the job's name, its report files and the jobs it needs carry the partition: a test of two partitions
        # is two jobs, each in an allocation of its own partition
        own = f'{name}@{part}'
        script = [line.replace(f'{repo}/', '${CI_PROJECT_DIR}/').replace(f'{name}-report.', f'{own}-report.')
                  for line in job['script']]
        for dep in job.get('needs', []):            # --restore-session= of the reports of the jobs it needs
            script = [line.replace(f'{dep}-report.', f'{dep}@{part}-report.') for line in script]
        script = [re.sub(r'^reframe ', f'reframe --system={system.split(":")[0]}:{part} ', line) for line in script]
        place = ' '.join(access.get(part, []))
        jobs[own] = {
            **job, 'script': script,
            # the case's ReFrame report, and its junit report for GitLab's test view, whatever the job's status
            'artifacts': {**job.get('artifacts', {}),
                          'paths': [p.replace(f'{name}-report.', f'{own}-report.')
                                    for p in job.get('artifacts', {}).get('paths', [])],
                          'reports': {'junit': [f'{own}-report.xml']}, 'when': 'always'},
            'needs': [f'{n}@{part}' for n in job.get('needs', [])],
        }
        if child_jobs == 'allocation':
            # Jacamar makes each child job's allocation from SCHEDULER_PARAMETERS: whole nodes (performance runs),
            # the partition's own access options (its Slurm partition, account); its tests run as job steps of
            # that allocation (rfmconfig.in_allocation), not as jobs of their own, and check that they ran in it
            jobs[own]['variables'] = {
                'SCHEDULER_PARAMETERS': ' '.join(filter(None, [f'--nodes={need} --exclusive', place,
                                                               '${IBREPRO_SCHEDULER_OPTIONS}'])),
                'IBREPRO_IN_ALLOCATION': '1'}
        # login: ReFrame on the runner submits the case's job itself, with the partition's access options
        if group:
            jobs[own]['resource_group'] = group     # one child job at a time: performance runs never share the fabric
pipeline = jobs
if not any(isinstance(job, dict) and 'script' in job for job in pipeline.values()):
    sys.exit(f'nightly.sh: no test case of system {system} to run (reframe --ci-generate wrote no job)')

pipeline = {
    'variables': {'IBREPRO_NIGHTLY': nightly},      # the sessions' `nightly` extra (--mode=nightly)
    'default': {
        'tags': [t for t in tags.split(',') if t],
        'before_script': ['make setup', 'source .venv/bin/activate'],
    },
    **pipeline,
}
with open(path, 'w') as f:
    yaml.safe_dump(pipeline, f, sort_keys=False, width=10**6)
PY
  rm -f "$described" "$cases" "$partitions"
  echo "child pipeline: $file"
}

report() {
  # this night against its history, its suspects re-run at once (ibrepro nightly --no-run: the confirmation
  # is one more ReFrame session of this night), then the report. Exit status: 0 clean, 1 regression,
  # 2 could not judge (also: the night stored no session at all), 3 inconclusive (too noisy to judge, or a new
  # system not judged yet: fewer than 8 nights stored)
  mkdir -p "$REPORT_DIR"
  "$PYTHON" - "$IBREPRO_NIGHTLY" <<'PY' || exit 2
import sys
from ibrepro import results

night = sys.argv[1]
try:   # the values index: an unreadable session of another night is left out (the report names it)
    stored = results.session_index()
except results.ResultsError as err:     # no database yet: a first night whose jobs stored nothing
    sys.exit(f'no session of nightly {night} is stored: {err}')
if not any(run == night for _, _, _, run in stored):
    sys.exit(f'no readable session of nightly {night} is stored in the results database')
PY
  ibrepro nightly --no-run -C "$CONFIG" --night "$IBREPRO_NIGHTLY" --output-dir "$REPORT_DIR"
}

case ${1:-} in
  run) run ;;
  generate) shift; generate "$@" ;;
  report) report ;;
  *) usage ;;
esac

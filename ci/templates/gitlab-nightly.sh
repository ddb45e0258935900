#!/bin/bash
# gitlab-nightly.sh PROJECT [NAME=VALUE ...]: one scheduled night of ci/gitlab/nightly.yml, run by gitlab-ci-local
# (shell executor) in PROJECT, a checkout whose .gitlab-ci.yml includes the template; NAME=VALUE are the project's
# CI/CD variables (e.g. IBREPRO_CONFIG=configs/mysite.py). Exit status: the pipeline's, as GitLab would set it
# (0 passed, 1 a job failed: named on stderr).
#
#   1. generate-checks, a new pipeline (its id is the night's id)
#   2. run-checks: gitlab-ci-local 4.73.0 runs a trigger's child pipeline itself, as an experiment: the
#      child's result never reaches the trigger job (strategy: depend is ignored) and there is no batch executor.
#      So, as its maintainers advise (gitlab-ci-local issue #94), the generated child pipeline runs with --file,
#      with the variables GitLab passes down (the parent's global variables and the trigger job's), one job at a
#      time (--concurrency 1: gitlab-ci-local ignores resource_group): with IBREPRO_CHILD_JOBS=login (the default)
#      each on this host, the login node, whose ReFrame submits the case's job; with =allocation each inside its
#      own Slurm allocation as a Jacamar runner makes it (ci/templates/jacamar.py). It fails when a child job fails.
#   3. nightly-report (when: always), in the parent pipeline.
#
# GITLAB_CI_LOCAL: the gitlab-ci-local command. SLURM_CONF and PATH reach the jobs as a login node's would.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GCL=${GITLAB_CI_LOCAL:-gitlab-ci-local}
project=${1:?usage: gitlab-nightly.sh PROJECT [NAME=VALUE ...]}
shift
vars=()
for v in "$@"; do
  [[ $v =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || { echo "gitlab-nightly.sh: $v is not NAME=VALUE" >&2; exit 2; }
  vars+=(--variable "$v")
done
cd "$project"
# a scheduled pipeline: the template's workflow rules run only those (and web ones)
parent=(--variable CI_PIPELINE_SOURCE=schedule "${vars[@]}" --no-color --ignore-predefined-vars CI_PIPELINE_SOURCE)
failed=()
# gitlab-ci-local's own exit status takes a job with `allow_failure: exit_codes: [3]` as allowed to fail whatever its
# exit code (4.73.0: Executor.getFailed tests allowFailure for truth), so the report job's exit 2 would pass. Its
# summary says it right (FAIL, not WARN): a run failed when a summary line says FAIL.
gcl() {
  local log status=0
  log=$(mktemp)
  "$GCL" "$@" 2>&1 | tee "$log" || status=$?
  if grep -qE '^ *FAIL +[^ ]' "$log"; then status=1; fi
  rm -f "$log"
  return "$status"
}

echo "== generate-checks"
# --needs starts a new pipeline (a new CI_PIPELINE_ID); the report below runs in the same one
gcl --needs generate-checks "${parent[@]}" || failed+=(generate-checks)

if [ ${#failed[@]} = 0 ]; then
  echo "== run-checks: the child pipeline"
  child=.gitlab-ci-local/artifacts/generate-checks/child-pipeline.yml
  # what GitLab passes to a child pipeline: the parent's global variables, the trigger job's, the project's
  passed=$("$GCL" --preview "${parent[@]}" | "${PYTHON:-python3}" -c '
import sys, yaml
parent = yaml.safe_load(sys.stdin)
for name, value in {**(parent.get("variables") or {}), **(parent["run-checks"].get("variables") or {})}.items():
    if "\n" in str(value):
        sys.exit(f"gitlab-nightly.sh: variable {name} holds a line break")
    print("--variable"); print(f"{name}={value}")')
  down=()
  [ -z "$passed" ] || mapfile -t down <<< "$passed"
  rm -rf .jacamar && "${PYTHON:-python3}" "$HERE/jacamar.py" "$child" .jacamar/child-pipeline.yml .jacamar
  gcl --file .jacamar/child-pipeline.yml --state-dir .gitlab-ci-local-child --concurrency 1 \
         "${down[@]}" "${vars[@]}" --variable CI_PIPELINE_SOURCE=parent_pipeline --no-color \
         --ignore-predefined-vars CI_PIPELINE_SOURCE || failed+=(run-checks)
fi

echo "== nightly-report"
gcl nightly-report "${parent[@]}" || failed+=(nightly-report)

if [ ${#failed[@]} != 0 ]; then
  echo "gitlab-nightly.sh: the pipeline failed: ${failed[*]}" >&2
  exit 1
fi
echo "gitlab-nightly.sh: the pipeline passed"

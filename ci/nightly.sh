#!/bin/bash
# nightly.sh: ibrepro's nightly mode in CI (ci/gitlab/nightly.yml and ci/github/nightly.yml call it).
#
#   ci/nightly.sh run             run the checks once (reframe --mode=nightly); the session is stored
#   ci/nightly.sh generate FILE   GitLab child pipeline, one job per test case (reframe --ci-generate)
#   ci/nightly.sh report          compare this nightly with the previous one, write the report
#                                 directory; exit 1 if a check failed or performance regressed
#
# Environment (all optional):
#   IBREPRO_CONFIG      ReFrame configuration               (configs/ci-cluster.py)
#   IBREPRO_CHECKS      check directory, searched recursively (reframe-checks)
#   IBREPRO_NIGHTLY     id of this nightly run; every session stores it as session extra `nightly`
#                       (the CI run id; default: the date and time)
#   IBREPRO_HOME        results database and reports: must persist from one night to the next
#   IBREPRO_REPORT_DIR  where the report is written       (nightly-report)
#   IBREPRO_REGRESSION_PCT  a performance value this much worse than the previous night is a
#                       regression (20; lower is better for us and s, higher for the rest)
#   IBREPRO_CHILD_TAGS  runner tags of the GitLab child jobs, comma-separated (ibrepro-batch)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
CONFIG=${IBREPRO_CONFIG:-configs/ci-cluster.py}
CHECKS=${IBREPRO_CHECKS:-reframe-checks}
export IBREPRO_NIGHTLY=${IBREPRO_NIGHTLY:-$(date +%Y%m%dT%H%M%S)}
REPORT_DIR=${IBREPRO_REPORT_DIR:-nightly-report}
PYTHON=${PYTHON:-python3}

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

run() {
  mkdir -p "$REPORT_DIR"
  reframe -C "$CONFIG" -c "$CHECKS" -R --mode=nightly -r \
          --report-file="$REPORT_DIR/run-report.json" --report-junit="$REPORT_DIR/junit.xml"
}

generate() {
  local file=${1:?usage: nightly.sh generate FILE}
  reframe -C "$CONFIG" -c "$CHECKS" -R --mode=nightly --ci-generate="$file"
  # ReFrame writes the config's absolute path into every job, and no runner settings: make the
  # jobs use their own checkout, give them runner tags, the set-up of a fresh checkout and the
  # id of this night.
  "$PYTHON" - "$file" "$REPO" "${IBREPRO_CHILD_TAGS:-ibrepro-batch}" "$IBREPRO_NIGHTLY" <<'PY'
import sys
import yaml

path, repo, tags, nightly = sys.argv[1:]
with open(path) as f:
    pipeline = yaml.safe_load(f)

for name, job in pipeline.items():
    if isinstance(job, dict) and 'script' in job:
        job['script'] = [line.replace(f'{repo}/', '${CI_PROJECT_DIR}/') for line in job['script']]

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
  echo "child pipeline: $file"
}

report() {
  mkdir -p "$REPORT_DIR"
  if ibrepro report --help 2>/dev/null | grep -q -- '--nightly'; then
    # the project's report: history, papers, link limits; exit 1 on regression
    ibrepro report --nightly | tee "$REPORT_DIR/report.md"
    return "${PIPESTATUS[0]}"
  fi

  # Until `ibrepro report --nightly` exists: ReFrame's own comparison, this night (lhs) against
  # the last value of every earlier night (rhs).
  local this="nightly=='$IBREPRO_NIGHTLY'" earlier="nightly!='$IBREPRO_NIGHTLY'"
  reframe -C "$CONFIG" --describe-stored-sessions="now-7d:now?$this" > "$REPORT_DIR/sessions.json"
  reframe -C "$CONFIG" --performance-compare="now-7d:now?$this/now-90d:now?$earlier/last:/+presult" \
          --table-format=csv > "$REPORT_DIR/compare.csv"
  "$PYTHON" - "$REPORT_DIR" "$IBREPRO_NIGHTLY" "${IBREPRO_REGRESSION_PCT:-20}" <<'PY'
import csv
import json
import sys
from pathlib import Path

out, nightly, pct = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
sessions = json.loads((out / 'sessions.json').read_text())
rows = list(csv.DictReader((out / 'compare.csv').read_text().splitlines()))
lines = [f'# Nightly {nightly}', '']
problems = []
if not sessions:
    problems.append(f'no session of nightly {nightly} is stored in the results database')

for s in sessions:
    info = s['session_info']
    lines.append(f"* session {info['uuid']}: {info['num_cases']} test case(s), "
                 f"{info['num_failures']} failure(s)")
    for run in s['runs'][-1:]:
        for tc in run['testcases']:
            if tc['result'] != 'pass':
                problems.append(f"{tc['name']} @{tc['system']}:{tc['partition']}+{tc['environ']}: "
                                f"{tc['fail_phase']}: {tc['fail_reason']}")

lines += ['', '| test | sysenv | pvar | unit | this night | previous | change | result |', '|---|---|---|---|---|---|---|---|']
for r in rows:
    now, before = r['pval (last) (lhs)'], r['pval (last) (rhs)']
    change = ''
    try:
        now, before = float(now), float(before)
        worse = (now - before) / before * 100 * (1 if r['punit'] in ('us', 's') else -1)
        change = f'{worse:+.1f}% worse' if worse > 0 else f'{-worse:.1f}% better'
        if worse > pct:
            problems.append(f"{r['name']} {r['sysenv']} {r['pvar']}: {before} -> {now} {r['punit']} "
                            f"({worse:.1f}% worse than the previous night, limit {pct}%)")
    except (ValueError, ZeroDivisionError):
        pass       # no previous night for this value
    lines.append(f"| {r['name']} | {r['sysenv']} | {r['pvar']} | {r['punit']} | {now} | {before} | "
                 f"{change} | {r['presult (lhs)']} |")

lines += ['', '## Problems', ''] + [f'* {p}' for p in problems or ['none']]
(out / 'report.md').write_text('\n'.join(lines) + '\n')
print('\n'.join(lines))
sys.exit(1 if problems else 0)
PY
}

case ${1:-} in
  run) run ;;
  generate) shift; generate "$@" ;;
  report) report ;;
  *) usage ;;
esac

#!/usr/bin/env bash
# scripts/run-checks.sh CONFIG [REFRAME OPTIONS...]: `reframe -C CONFIG -c reframe-checks -r [OPTIONS]` as make run
# and make nightly run it, then where the results are and the papers' families that did not run here, and why.
# Exit status: ReFrame's (non-zero when a check failed), and non-zero when ReFrame did not store the session
# (a corrupted or locked results database: ReFrame only warns, and the night would be lost silently).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/.venv/bin
config=$1; shift
log=$(mktemp "${TMPDIR:-/tmp}/ibrepro-run.XXXXXX")
trap 'rm -f "$log"' EXIT

"$bin/reframe" -C "$config" -c "$here/reframe-checks" -r "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if ! grep -q '^Current session stored with UUID' "$log"; then
    echo "run-checks: ReFrame did not store this session in the results database (see its warnings above):" \
         "nothing of this run reaches the history or the report" >&2
    [ "$status" = 0 ] && status=3
fi
echo
"$bin/ibrepro" where || { [ "$status" = 0 ] && status=1; }
echo
"$bin/ibrepro" catalog --not-run -C "$config" || true
exit "$status"

#!/bin/bash
# install-gitlab-ci-local.sh: gitlab-ci-local from npm into build/gitlab-ci-local, exactly the tree of
# ci/templates/gitlab-ci-local/package-lock.json (`npm ci`); nothing when that version is there already.
# Needs Node.js >= 20 and npm (4.74.0 and later need Node.js 22: "TypeError: ....union is not a function"), and
# rsync (gitlab-ci-local copies a shell job's artifacts with it; apt-get installs it when root).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCK=$REPO/ci/templates/gitlab-ci-local
DEST=$REPO/build/gitlab-ci-local
BIN=$DEST/node_modules/.bin/gitlab-ci-local
want=$(sed -n 's/.*"gitlab-ci-local": "\(.*\)".*/\1/p' "$LOCK/package.json")

command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "install-gitlab-ci-local.sh: Node.js >= 20 and npm are needed (node, npm on PATH)" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] ||
  { echo "install-gitlab-ci-local.sh: gitlab-ci-local $want needs Node.js >= 20, found $(node --version)" >&2; exit 1; }
if ! command -v rsync >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "install-gitlab-ci-local.sh: rsync is needed (gitlab-ci-local's artifacts)" >&2; exit 1; }
  apt-get install -y -qq --no-install-recommends rsync >/dev/null
fi

if [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null)" = "$want" ]; then
  echo "gitlab-ci-local $want is installed: $BIN"
  exit 0
fi
rm -rf "$DEST" && mkdir -p "$DEST"
cp "$LOCK/package.json" "$LOCK/package-lock.json" "$DEST/"
started=$(date +%s)
(cd "$DEST" && npm ci --no-audit --no-fund --loglevel=error)
echo "gitlab-ci-local $("$BIN" --version) installed in $(( $(date +%s) - started )) s: $BIN"

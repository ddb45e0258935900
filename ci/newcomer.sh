#!/usr/bin/env bash
# ci/newcomer.sh: the README's commands as a newcomer meets them, before CI installs anything else.
#
# A fresh clone of this checkout under a path with a space, owned by a user who is not root, and a PATH with the
# machine's tools but no system MPI and no perftest (whatever this machine has installed): `make setup`,
# `make test` and `make run` must pass, in that order, and `make run` ends with the "not run here, and why"
# table. Needs root (it creates the unprivileged user, $IBREPRO_NEWCOMER or ibrepro-newcomer) and what a
# newcomer is told to have: Python >= 3.10 with venv, a C compiler, make, git. With IBREPRO_NEWCOMER_PASSED set,
# the ids of the tests its `make test` passed are written to that file (.ci/run does not run them again).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
user=${IBREPRO_NEWCOMER:-ibrepro-newcomer}
[ "$(id -u)" = 0 ] || { echo "newcomer.sh: run as root (it creates the unprivileged user $user)" >&2; exit 2; }
id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"

base=$(mktemp -d /tmp/ibrepro-newcomer.XXXXXX)
trap 'rm -rf "$base"' EXIT

# The machine's tools, without any MPI launcher, MPI compiler or benchmark a package may have installed.
bin=$base/bin
mkdir "$bin"
for dir in /usr/local/bin /usr/bin /bin; do
    for tool in "$dir"/*; do
        name=${tool##*/}
        case $name in
            mpirun*|mpiexec*|mpicc*|mpicxx*|mpic++*|mpif*|orterun*|prterun*|ompi_info|mpichversion|\
            ib_*_lat|ib_*_bw|raw_ethernet_*|osu_*|IMB-*|*.[SWABCDEF].x) continue ;;
        esac
        [ -e "$bin/$name" ] || ln -s "$tool" "$bin/$name"
    done
done

checkout="$base/new comer/ibrepro"
mkdir -p "$base/new comer"
git clone -q "$here" "$checkout"
chown -R "$user": "$base"
home=$(getent passwd "$user" | cut -d: -f6)
echo "newcomer: $user in '$checkout', PATH without MPI or perftest"
started=$(date +%s)
runuser -u "$user" -- env -i HOME="$home" PATH="$bin" LANG=C.UTF-8 TERM=dumb IBREPRO_PASSED_LIST="$base/passed" \
    bash -c 'set -e; cd "$1"; make setup; make test; make run' newcomer "$checkout"
if [ -n "${IBREPRO_NEWCOMER_PASSED:-}" ]; then
    cp "$base/passed" "$IBREPRO_NEWCOMER_PASSED"
    echo "newcomer: the $(wc -l < "$IBREPRO_NEWCOMER_PASSED") tests make test passed are listed in $IBREPRO_NEWCOMER_PASSED"
fi
echo "newcomer: make setup, make test, make run passed in $(( $(date +%s) - started )) s"

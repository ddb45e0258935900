#!/usr/bin/env bash
# Build one ibrepro Spack environment (configs/spack/<env>/spack.yaml) and its view.
#
#   scripts/spack-setup.sh [--reconcretize] [--mirror-create DIR] [ENV]   (make spack SPACK_ENV=ENV)
#
# 1. clones the pinned Spack and spack-packages into .deps/spack and .deps/spack-packages
#    (or checks that existing clones sit at the pinned commits),
# 2. gives Spack a Python with clingo from PyPI (.deps/spack-python), so no Spack bootstrap
#    download is needed,
# 3. configures the clone: the pinned builtin repository and an optional source mirror
#    (SPACK_MIRROR) in its own scope (above ~/.spack), compilers and externals (build tools,
#    rdma-core) in its site scope (below ~/.spack, so a user's own externals win),
# 4. concretizes and installs the environment; Spack then links the view
#    .deps/spack-view/<ENV>, which the ReFrame configuration puts on PATH.
# With --mirror-create DIR it stops after concretizing and writes a source mirror to DIR
# (for air-gapped sites, docs/spack.md). Safe to re-run: finished steps are skipped; after
# changing externals (packages.yaml), pass --reconcretize to solve the environment afresh.
#
# Environment: SPACK_MIRROR (path or URL of a source mirror), SPACK_JOBS (default: nproc),
# SPACK_EXTERNALS=0 (skip `spack external find`), SPACK_GIT_URL / SPACK_PACKAGES_GIT_URL
# (other clone sources, e.g. local copies), SPACK_PYTHON (a Python that imports clingo).
set -euo pipefail

SPACK_TAG=v1.1.0
SPACK_COMMIT=2e907202bcc8209a6a62243aab50c179b524cc3b
SPACK_PACKAGES_TAG=v2026.06.0
SPACK_PACKAGES_COMMIT=d4f7c711a6a42f1c4d551c8fd10fce9a11340a81
CLINGO_REQUIREMENT='clingo==5.8.3'
# What `spack external find` looks for: build tools (not worth rebuilding), the verbs stack,
# which must be the system's own on an InfiniBand cluster, and numactl (perftest 26.04 links it).
EXTERNALS=(autoconf automake libtool m4 gmake cmake perl pkgconf bison flex findutils diffutils
    gawk sed tar gzip xz bzip2 coreutils git rdma-core numactl)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=$ROOT/.deps

say() { printf '==> %s\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }
die() { printf 'spack-setup: error: %s\n' "$*" >&2; exit 1; }

usage() {
    printf 'usage: %s [--reconcretize] [--mirror-create DIR] [ENV]\nenvironments:' "$0"
    for manifest in "$ROOT"/configs/spack/*/spack.yaml; do
        printf ' %s' "$(basename "$(dirname "$manifest")")"
    done
    printf '\n'
}

mirror_create=
concretize_flags=()
env_name=
while (($#)); do
    case $1 in
    --mirror-create) mirror_create=${2:?--mirror-create needs a directory}; shift 2 ;;
    --reconcretize) concretize_flags=(--force); shift ;;
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
    *) env_name=$1; shift ;;
    esac
done
# `make spack SPACK_ENV=generic` also exports SPACK_ENV, which Spack itself reads as the path
# of the active environment: take the name from it, then hide it from Spack.
env_name=${env_name:-${SPACK_ENV:-generic}}
unset SPACK_ENV
env_dir=$ROOT/configs/spack/$env_name
[[ -f $env_dir/spack.yaml ]] || { usage >&2; die "no environment '$env_name' ($env_dir/spack.yaml)"; }

# Clone URL TAG COMMIT into DIR, or check an existing clone is at COMMIT.
clone_pinned() {
    local dir=$1 url=$2 tag=$3 commit=$4 head
    if [[ ! -d $dir/.git ]]; then
        run git -c advice.detachedHead=false clone --quiet --depth 1 --branch "$tag" "$url" "$dir"
    fi
    head=$(git -C "$dir" rev-parse HEAD)
    if [[ $head != "$commit" ]]; then
        say "$dir is at $head, checking out $tag ($commit)"
        run git -C "$dir" fetch --quiet --depth 1 origin tag "$tag"
        run git -C "$dir" -c advice.detachedHead=false checkout --quiet "$commit"
    fi
    say "$(basename "$dir") $tag at $commit"
}

clone_pinned "$DEPS/spack" "${SPACK_GIT_URL:-https://github.com/spack/spack.git}" \
    "$SPACK_TAG" "$SPACK_COMMIT"
clone_pinned "$DEPS/spack-packages" \
    "${SPACK_PACKAGES_GIT_URL:-https://github.com/spack/spack-packages.git}" \
    "$SPACK_PACKAGES_TAG" "$SPACK_PACKAGES_COMMIT"

# Spack's concretizer needs clingo; PyPI's wheel spares the bootstrap download from GitHub.
if [[ -z ${SPACK_PYTHON:-} ]]; then
    SPACK_PYTHON=$DEPS/spack-python/bin/python
    [[ -x $SPACK_PYTHON ]] || run python3 -m venv "$DEPS/spack-python"
    if ! "$SPACK_PYTHON" -c 'import clingo' 2>/dev/null; then
        run "$SPACK_PYTHON" -m pip install --quiet "$CLINGO_REQUIREMENT"
    fi
fi
"$SPACK_PYTHON" -c 'import clingo' || die "$SPACK_PYTHON cannot import clingo"
export SPACK_PYTHON

# What a shell needs to use this Spack by hand (`. .deps/spack-env.sh`).
cat >"$DEPS/spack-env.sh" <<EOF
# written by scripts/spack-setup.sh
export SPACK_PYTHON=$SPACK_PYTHON
export PATH=$DEPS/spack/bin:\$PATH
EOF
spack=("$DEPS/spack/bin/spack")

# Configuration goes into our own clone only: nothing outside .deps/ is touched.
# $spack/etc/spack is the "spack" scope (it wins over ~/.spack): the pins live there.
pins=$DEPS/spack/etc/spack
cat >"$pins/repos.yaml" <<EOF
# written by scripts/spack-setup.sh: the pinned builtin packages ($SPACK_PACKAGES_TAG)
repos:
  builtin: $DEPS/spack-packages/repos/spack_repo/builtin
EOF
cat >"$pins/config.yaml" <<EOF
# written by scripts/spack-setup.sh: build stages inside the clone, not in the /tmp/\$user
# directory that every Spack of this user shares
config:
  build_stage:
  - \$spack/var/spack/stage
EOF
if [[ -n ${SPACK_MIRROR:-} ]]; then
    [[ $SPACK_MIRROR == *://* ]] || SPACK_MIRROR=file://$(cd "$SPACK_MIRROR" && pwd)
    cat >"$pins/mirrors.yaml" <<EOF
# written by scripts/spack-setup.sh (SPACK_MIRROR)
mirrors:
  ibrepro-mirror: $SPACK_MIRROR
EOF
    say "source mirror: $SPACK_MIRROR"
fi

# Both only add what is not configured yet.
run "${spack[@]}" compiler find --scope site
if [[ ${SPACK_EXTERNALS:-1} != 0 ]]; then
    run "${spack[@]}" external find --scope site "${EXTERNALS[@]}"
fi
# perftest includes <infiniband/umad.h> and links libibumad: an rdma-core found in /usr only
# brings them with the distribution's development package (Debian/Ubuntu: libibumad-dev).
if [[ -e /usr/include/infiniband/verbs.h && ! -e /usr/include/infiniband/umad.h ]]; then
    say "warning: /usr/include/infiniband/umad.h is missing: perftest will not build against" \
        "the system's rdma-core (Debian/Ubuntu: apt-get install libibumad-dev)"
fi

run "${spack[@]}" -e "$env_dir" concretize "${concretize_flags[@]}"
if [[ -n $mirror_create ]]; then
    # ibrepro-benchmarks is built from the checkout (`develop:`): nothing to mirror
    run "${spack[@]}" -e "$env_dir" mirror create --directory "$mirror_create" --all \
        --exclude-specs ibrepro-benchmarks
    say "source mirror written to $mirror_create; on the target: SPACK_MIRROR=<copy of it> $0 $env_name"
    exit 0
fi
# The stamp says the view is complete: ibrepro declares environment spack-<ENV> only then (a partly built view
# would offer half the benchmarks, or an MPI without its launcher). It also names the MPI's own prefix: an external
# MPI (packages.yaml) is not linked into the view, and its mpirun is the one the benchmarks were built with.
stamp=$DEPS/spack-view/.complete-$env_name.json
rm -f "$stamp"
run "${spack[@]}" -e "$env_dir" install --jobs "${SPACK_JOBS:-$(nproc)}"

view=$DEPS/spack-view/$env_name
[[ -d $view ]] || die "the install finished but the view $view is missing"
mpi_prefix=$("${spack[@]}" -e "$env_dir" location -i mpi 2>/dev/null || true)
"$SPACK_PYTHON" - "$stamp" "$env_name" "$mpi_prefix" <<'PY'
import json, sys, time
stamp, env, mpi_prefix = sys.argv[1:]
with open(stamp, 'w') as f:
    json.dump({'environment': env, 'mpi_prefix': mpi_prefix or None, 'installed': time.strftime('%Y-%m-%dT%H:%M:%SZ',
              time.gmtime())}, f)
PY
say "environment $env_name installed; view: $view"
say "use it by hand with: . $DEPS/spack-env.sh && spack -e $env_dir find"

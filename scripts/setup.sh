#!/usr/bin/env bash
# make setup: everything the embedded default system needs, without root, idempotent.
#   .venv/           Python environment with ibrepro (editable) and the pinned dependencies (constraints.txt)
#   .deps/impi/      Intel MPI 2021.14 + IMB 2021.8 (PyPI impi-rt)   } each MPI in its own prefix:
#   .deps/mpich/     MPICH with mpicc (PyPI mpich)                    } their mpiexec names collide
#   build/bench/bin/ our own benchmarks (benchmarks/), built with that mpicc
# pip honours PIP_INDEX_URL / PIP_FIND_LINKS / PIP_NO_INDEX, so an air-gapped site installs from a wheelhouse
# (see README: `make wheelhouse` on a connected machine).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv
DEPS=${IBREPRO_DEPS:-.deps}
started=$(date +%s)

say() { printf '[setup] %s\n' "$*"; }

# A checkout under a path with white space: the MPI wheels' compiler wrapper and launchers do not quote their own
# install path, so their prefixes go where there is none (the user's cache), and .deps points there.
if [ -z "${IBREPRO_DEPS:-}" ] && [[ $PWD =~ [[:space:]] ]]; then
    DEPS="${XDG_CACHE_HOME:-$HOME/.cache}/ibrepro/deps-$(printf %s "$PWD" | sha1sum | cut -c1-12)"
    if [[ $DEPS =~ [[:space:]] ]]; then
        echo "[setup] this checkout's path has white space, and so has $DEPS: set IBREPRO_DEPS to a directory" \
             "without any" >&2
        exit 1
    fi
    mkdir -p "$DEPS"
    if [ "$(readlink .deps 2>/dev/null)" != "$DEPS" ]; then
        rm -rf .deps && ln -s "$DEPS" .deps
    fi
    say "the checkout's path has white space: the MPI prefixes go to $DEPS (.deps points there)"
fi

# The exact version pinned for a package in constraints.txt.
pinned() { sed -n "s/^$1==//p" constraints.txt; }

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || { echo "[setup] Python >= 3.10 needed (found $("$PYTHON" --version 2>&1)); set PYTHON=" >&2; exit 1; }

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV with $("$PYTHON" --version)"
    "$PYTHON" -m venv "$VENV"
else
    say "$VENV exists"
fi

stamp=$VENV/.ibrepro-installed
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ] && [ "$stamp" -nt constraints.txt ]; then
    say "ibrepro and its dependencies are installed (up to date with pyproject.toml and constraints.txt)"
else
    say "installing ibrepro (editable) and pinned dependencies into $VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
    touch "$stamp"
fi

# install_prefix NAME PACKAGE CHECK_FILE: one MPI wheel into its own prefix under $DEPS
install_prefix() {
    local name=$1 package=$2 check=$3 version
    version=$(pinned "$package")
    if [ -x "$DEPS/$name/$check" ] && [ "$(cat "$DEPS/$name/.version" 2>/dev/null)" = "$version" ]; then
        say "$package $version is installed in $DEPS/$name"
        return
    fi
    say "installing $package $version into $DEPS/$name"
    rm -rf "$DEPS/$name"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-warn-script-location \
        --no-deps --prefix "$DEPS/$name" "$package==$version"
    echo "$version" > "$DEPS/$name/.version"
}

install_prefix impi impi-rt bin/IMB-MPI1
install_prefix mpich mpich bin/mpicc

# Our own benchmarks (benchmarks/), built with the mpich wheel's mpicc; the verbs program only where the
# rdma-core headers are (the Makefile says so otherwise). make's own timestamps keep a second run instant.
say "building our benchmarks into build/bench/bin (benchmarks/Makefile)"
mpicc=$DEPS/mpich/bin/mpicc
case $mpicc in /*) ;; *) mpicc=../$mpicc ;; esac       # relative to benchmarks/
make -s -C benchmarks BUILD=../build/bench MPICC="$mpicc" all
# The injector (a controlled slowdown, src/ibrepro/rfm/inject.py) goes to .deps: LD_PRELOAD cannot carry a path
# with white space, and .deps is elsewhere when the checkout's path has one
inject_build=$(cd "$DEPS" && pwd -P)/inject
make -s -C benchmarks BUILD="$inject_build" MPICC="$mpicc" inject

say "done in $(( $(date +%s) - started )) s. Next: make test, then make run"

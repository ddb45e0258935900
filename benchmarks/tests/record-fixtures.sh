#!/bin/bash
# Record real outputs of the ibrepro-bench programs as parser fixtures, and print their MANIFEST
# rows (append them to tests/fixtures/MANIFEST.md). Run from the repository root after building:
#   make -C benchmarks BUILD=../build/bench MPICC=$PWD/.deps/mpich/bin/mpicc
#   benchmarks/tests/record-fixtures.sh build/bench/bin .deps/mpich/bin/mpiexec
# stdout and stderr of each run go together into one file, as the process wrote them.
# ONLY=<regex> records only the files whose name matches.
set -u
BIN=${1:-build/bench/bin}
MPIEXEC=${2:-.deps/mpich/bin/mpiexec}
VERSION=$(cat benchmarks/VERSION)
OUT=tests/fixtures/ibrepro-bench/$VERSION
MPI="MPICH $("$(dirname "$MPIEXEC")/mpichversion" --version 2>/dev/null | awk '{print $NF}') (PyPI mpich wheel), shm"
mkdir -p "$OUT"

record() {  # record FILE RANKS NOTE -- COMMAND...
    local file=$1 ranks=$2 note=$3 lib=$MPI; shift 4
    [[ -z "${ONLY:-}" || $file =~ $ONLY ]] || return 0
    [[ $file == rdma* ]] && lib="none: verbs ($(dpkg-query -W -f '${Package} ${Version}' libibverbs1 2>/dev/null))"
    local t0 t1 rc date
    date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    t0=$(date +%s.%N)
    timeout 600 "$@" > "$OUT/$file" 2>&1; rc=$?
    t1=$(date +%s.%N)
    printf '| `ibrepro-bench/%s/%s` | ibrepro-bench | %s | %s | %s | %s | %.1f | %s | `%s` | %s |\n' \
        "$VERSION" "$file" "$VERSION" "$ranks" "$lib" "$rc" "$(echo "$t1 - $t0" | bc)" "$date" "$*" "$note"
}

record overhead-2.txt 2 "defaults" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_overhead"
record bilat-2.txt 2 "defaults" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_bilat"
record bibw-2.txt 2 "defaults (W=16)" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_bibw"
record bibw.w64-2.txt 2 "window 64, up to 1 MiB" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_bibw" -W 64 -m 1:1M
record overlap-2.txt 2 "defaults (tolerance 10%)" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_overlap"
record reuse_lat-2.txt 2 "R = 0,50,100; fresh buffers capped at 256 MiB per rank" -- \
    "$MPIEXEC" -n 2 "$BIN/ibrepro_reuse" --max-memory 256
record reuse_bw-2.txt 2 "R = 0,50,100; W=16; capped at 256 MiB per rank" -- \
    "$MPIEXEC" -n 2 "$BIN/ibrepro_reuse" --mode bw --max-memory 256
record imb.PingPong-2.txt 2 "up to 1 MiB, 200 iterations" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_imb" -b PingPong -m 0:1M -i 200
record imb.Biband-2.txt 2 "W=64, up to 64 KiB, 50 iterations" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_imb" -b Biband -m 1:64K -i 50
record imb.Alltoall-4.txt 4 "4 ranks on 2 cores (oversubscribed), up to 64 KiB, 100 iterations" -- \
    "$MPIEXEC" -n 4 "$BIN/ibrepro_imb" -b Alltoall -m 0:64K -i 100
record imb.Allreduce-4.txt 4 "4 ranks on 2 cores; 1 and 2 B skipped (below one float)" -- \
    "$MPIEXEC" -n 4 "$BIN/ibrepro_imb" -b Allreduce -m 0:64 -i 100
record imb.badoption-2.txt 2 "unknown benchmark name" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_imb" -b Foo
record imb.ranks-3.txt 3 "Uniband needs exactly 2 processes" -- "$MPIEXEC" -n 3 "$BIN/ibrepro_imb" -b Uniband
record memory-1.txt 1 "" -- "$MPIEXEC" -n 1 "$BIN/ibrepro_memory"
record memory-2.txt 2 "" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_memory"
record memory-4.txt 4 "4 ranks on 2 cores (oversubscribed)" -- "$MPIEXEC" -n 4 "$BIN/ibrepro_memory"
record bilat.ranks-3.txt 3 "wrong rank count, exit 2 expected" -- "$MPIEXEC" -n 3 "$BIN/ibrepro_bilat"
record bibw.badoption-2.txt 2 "invalid option, exit 2 expected" -- "$MPIEXEC" -n 2 "$BIN/ibrepro_bibw" -W 0
record bilat.interrupted-2.txt 2 "interrupted by SIGINT after 3 s (timeout -s INT 3), incomplete" -- \
    timeout -s INT 3 "$MPIEXEC" -n 2 "$BIN/ibrepro_bilat" -i 100000 -I 10000
if [ -x "$BIN/ibrepro_rdma" ]; then
    record rdma_write_bw-nodevice.txt client "no RDMA device on this machine, exit 3 expected" -- \
        "$BIN/ibrepro_rdma" 192.0.2.1
    record rdma_server-nodevice.txt server "no RDMA device on this machine, exit 3 expected" -- \
        "$BIN/ibrepro_rdma"
    record rdma.badoption.txt server "client option given to the server, exit 2 expected" -- \
        "$BIN/ibrepro_rdma" -W 16
    record rdma-help.txt - "--help" -- "$BIN/ibrepro_rdma" --help
fi

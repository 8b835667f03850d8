#!/usr/bin/env bash
# Measures the UPC++ figures of `figures.cpp` with an installed UPC++ (the C++ library
# this project reimplements, on GASNet-EX), for comparison with this project's benches
# on the same machine:
#
#   benches/originals/run.sh
#
# Needs `upcxx` and `upcxx-meta` of a UPC++ install built with the smp and mpi
# networks on PATH, and `mpicxx` and `mpirun` (Open MPI). Two runs of 2 ranks:
#   smp  GASNet-EX's smp conduit: compare with `cargo bench --bench app` (2 ranks) and,
#        for the RPC round trip, `cargo bench --features mpi --bench mpi`'s smp job
#        (the same RPC; the upcxx bench's figure of that name is an empty RPC);
#   net  GASNet-EX's mpi conduit with GASNET_SUPERNODE_MAXSIZE=1, every rank its own
#        "host", as the mpi bench's net job runs with GEX_MPI_HOST_RANKS=1: compare
#        with `cargo bench --features mpi --bench mpi`.
# Run it between runs of those benches: the machine's speed drifts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${TMPDIR:-/tmp}/pgas-originals
mkdir -p "$out"

for tool in upcxx upcxx-meta mpicxx mpirun; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "originals: $tool is not on PATH (see the comment at the top of $0)" >&2
        exit 1
    }
done

upcxx -O3 -std=c++17 -network=smp "$here/figures.cpp" -o "$out/figures-smp"
# The mpi network's libraries need MPI's: link through mpicxx.
(
    export UPCXX_NETWORK=mpi UPCXX_CODEMODE=O3
    # shellcheck disable=SC2046 # the flags are lists of words
    mpicxx $(upcxx-meta CPPFLAGS) $(upcxx-meta CXXFLAGS) -std=c++17 \
        "$here/figures.cpp" -o "$out/figures-mpi" \
        $(upcxx-meta LDFLAGS) $(upcxx-meta LIBS)
)

echo "== smp: GASNET_PSHM_NODES=2"
GASNET_PSHM_NODES=2 "$out/figures-smp"

echo "== net: mpirun -n 2, GASNET_SUPERNODE_MAXSIZE=1"
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
mpirun "${root[@]}" --oversubscribe -n 2 -x GASNET_SUPERNODE_MAXSIZE=1 "$out/figures-mpi"

#!/usr/bin/env bash
# The memory-kinds checks (UPC++ ch. 16, `cuda_device`) on a machine with an NVIDIA
# GPU, in two halves, so that they also run on a GPU machine that cannot build the
# project (no Rust toolchain, no network to fetch crates):
#
#   scripts/gpu-check.sh build DIR
#       on a machine that builds the project: builds in release, and copies into DIR
#       without their debug information (about 8 MB, x86-64; they run where the C
#       library is as new as the build machine's or newer), the programs that use
#       the GPU: the tests gex/tests/kinds.rs, gex/tests/kinds_remote.rs and
#       upcxx/tests/memory_kinds.rs, the example gpu_stencil and the kinds bench.
#   scripts/gpu-check.sh run DIR OUT
#       on the GPU machine, from the repository's root: what the driver reports of the
#       GPUs (compute mode and MIG: several processes must be able to share a device),
#       then each program with a time limit, its output in OUT/<name>.log, the
#       bench's JSON in OUT/bench-results/kinds.json, and what the driver reports,
#       each exit status and every test that skipped its device part in
#       OUT/summary.txt (eight files in all). Each program may run GPU_CHECK_SECONDS
#       (default 300). Exits non-zero if any program failed.
#
# Where the GPU machine builds, the same checks are `cargo test -p gex --test kinds
# --test kinds_remote`, `cargo test -p upcxx --test memory_kinds`,
# `UPCXX_RANKS=4 cargo run --release --example gpu_stencil` and
# `cargo bench --bench kinds`.
#
# The CUDA driver is loaded at run time (`cudarc`), so the programs need no CUDA at
# build time. A toolkit's `stubs` directory on LD_LIBRARY_PATH would hide the real
# driver: the run says so.
set -euo pipefail

usage() {
    echo "usage: $0 build DIR | run DIR OUT" >&2
    exit 2
}

# The executables cargo reports building, one per line, for the cargo arguments given.
executables() {
    cargo "$@" --message-format=json |
        jq -r 'select(.reason == "compiler-artifact" and .executable != null) | .executable'
}

# Copies executable $1 into $DIR as $2, without debug information.
keep() {
    strip -o "$DIR/$2" "$1"
}

build() {
    mkdir -p "$DIR"
    keep "$(executables test --release -p gex --test kinds --no-run)" test-kinds
    keep "$(executables test --release -p gex --test kinds_remote --no-run)" test-kinds_remote
    keep "$(executables test --release -p upcxx --test memory_kinds --no-run)" test-memory_kinds
    keep "$(executables build --release --example gpu_stencil)" gpu_stencil
    keep "$(executables bench --bench kinds --no-run)" bench-kinds
    ls -l "$DIR"
}

# Runs `$2...` with a time limit, its output in $OUT/$1.log, and notes its status.
check() {
    local name=$1
    shift
    echo "== $name: $*"
    local status=0
    timeout "${GPU_CHECK_SECONDS:-300}" "$@" > "$OUT/$name.log" 2>&1 || status=$?
    tail -n 5 "$OUT/$name.log"
    echo "$name: exit $status" | tee -a "$OUT/summary.txt"
    [ "$status" -eq 0 ] || failed=1
}

run() {
    mkdir -p "$OUT"
    {
        nvidia-smi --query-gpu=index,name,driver_version,compute_mode,mig.mode.current,memory.total \
            --format=csv 2>&1 || echo "nvidia-smi failed"
        case "${LD_LIBRARY_PATH:-}" in
            *stubs*) echo "LD_LIBRARY_PATH names a stubs directory: it hides the real driver" ;;
        esac
        ldconfig -p | grep -E 'libcuda\.so' || echo "the loader's cache has no libcuda.so"
    } | tee "$OUT/summary.txt"
    failed=0
    # --nocapture: a test that finds no device says so on stderr and passes; the
    # summary lists those lines, so that a skip is not read as a pass.
    check kinds "$DIR/test-kinds" --nocapture
    check kinds_remote "$DIR/test-kinds_remote" --nocapture
    check memory_kinds "$DIR/test-memory_kinds" --nocapture
    check gpu_stencil_2 env UPCXX_RANKS=2 "$DIR/gpu_stencil"
    check gpu_stencil_4 env UPCXX_RANKS=4 "$DIR/gpu_stencil"
    # The bench writes its JSON under CARGO_TARGET_DIR/bench-results.
    check bench_kinds env CARGO_TARGET_DIR="$OUT" "$DIR/bench-kinds" --bench
    grep -H -i 'skipped' "$OUT"/*.log | tee -a "$OUT/summary.txt" || echo "nothing skipped" | tee -a "$OUT/summary.txt"
    cat "$OUT/summary.txt"
    exit "$failed"
}

[ $# -ge 2 ] || usage
DIR=$2
case $1 in
    build) build ;;
    run)
        [ $# -eq 3 ] || usage
        OUT=$3
        run
        ;;
    *) usage ;;
esac

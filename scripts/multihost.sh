#!/usr/bin/env bash
# A multi-host MPI job on one machine: network namespaces joined by veth pairs act as
# hosts, and the mpi conduit's examples run with their ranks split across them.
#
#     scripts/multihost.sh [--hosts N] [--slots K] [--no-checks] [COMMAND...]
#
# Set-up: N namespaces (default 3) `<tag>-1`..`<tag>-N`, the hosts `gexh1`..`gexhN`
# at 10.77.0.1..N, each with one veth (`eth0`) whose peer is a port of a bridge in a
# further namespace `<tag>-sw`, so nothing is added to the machine's own network. The
# host names resolve through /etc/netns/<ns>/hosts (bound over /etc/hosts by
# `ip netns exec`). mpirun runs on gexh1 and starts the daemons of the other hosts
# through scripts/multihost-agent.sh, its remote shell: each host has its own network
# stack and its own host name, as a real cluster node has, and shares the machine's
# files. Open MPI's out-of-band channel and TCP transport use the hosts' subnet only,
# and its one-sided component pt2pt is allowed (Debian's openmpi-mca-params.conf turns it
# off; rdma, the other, has no transport over TCP): the conduit's world window needs it.
#
# Checks, each with the ranks split across the hosts (round robin, then in blocks):
#   * every rank's host name is that of the host mpirun put it on;
#   * `gex_network` (AMs, puts and gets between every pair, checked) reports one gex
#     host per namespace, the ranks of a host being those with its host name: the mpi
#     conduit's MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) sees the namespaces as
#     hosts, without GEX_MPI_HOST_RANKS;
#   * its AMs from other hosts all come over MPI and those of its own host through the
#     host queues (GEX_MPI_STATS=1);
#   * its transfers between hosts cross the veths (each host's eth0 receives at least
#     the bytes of the puts and gets addressed to it), and with shared memory as the
#     only transport (`btl self,vader`) the job cannot connect the hosts: no shared
#     memory joins ranks of different namespaces;
#   * `upcxx-run --conduit mpi` (if built) runs its job there, the segment size and the
#     conduit's settings (GEX_MPI_STATS, GEX_MPI_THREAD) reaching every host;
#   * `gex_hello`, `dht`, `stencil`, `gex_atomics` and `gpu_stencil` (on emulated
#     devices: its halos move device to device between hosts) run and check their
#     results, and
#     `upcxx_hosts` its own (RMA and atomics to every rank), each rank's local team
#     being the ranks with its host name, and its gets from and puts to another host
#     returning before they complete (`rma-overlap`).
# Then (at once with --no-checks) COMMAND, if given, runs in the machine's own namespace
# with GEX_MPIRUN (read by upcxx-run, the tests' mpi mode and the bench) naming a
# launcher (one path) that runs
# `mpirun` with the options above on gexh1: append `-n RANKS PROGRAM ARGS...`.
# GEX_MULTIHOST_MAP_BY (default `node`) is its --map-by, GEX_MULTIHOST_BTL (default
# `self,vader,tcp`) its btl list.
#
# Everything is torn down on exit, also after a failure or an interrupt: the jobs'
# processes, the namespaces (their veths and the bridge with them), /etc/netns/<ns>,
# and the jobs' session directories and shared-memory files, which the launcher puts
# in a directory of the run rather than /tmp and /dev/shm.
# Without the means to create namespaces (root: CAP_NET_ADMIN and CAP_SYS_ADMIN; `ip`,
# `unshare`) the script prints why and `skipped`, and exits 0.
#
# The examples must be built: `cargo build --features mpi --examples` (CARGO_TARGET_DIR
# is honoured).
set -euo pipefail

usage() {
    sed -n '5p' "$0" | sed 's/^#  *//' >&2
    exit 2
}

hosts=3
slots=2
checks=1
while [ $# -gt 0 ]; do
    case $1 in
    --hosts) hosts=${2:-}; shift 2 || usage ;;
    --slots) slots=${2:-}; shift 2 || usage ;;
    --no-checks) checks=0; shift ;;
    --) shift; break ;;
    -h | --help) usage ;;
    -*) usage ;;
    *) break ;;
    esac
done
case $hosts in [2-9]) ;; *) echo "multihost: --hosts takes 2 to 9" >&2; exit 2 ;; esac
case $slots in [1-9]) ;; *) echo "multihost: --slots takes 1 to 9" >&2; exit 2 ;; esac

repo=$(cd "$(dirname "$0")/.." && pwd)
agent=$repo/scripts/multihost-agent.sh
examples=${CARGO_TARGET_DIR:-$repo/target}
case $examples in /*) ;; *) examples=$repo/$examples ;; esac
launcher=$examples/debug/upcxx-run
examples=$examples/debug/examples
subnet=10.77.0
# Seconds one job may run.
limit=120

skip() {
    echo "multihost: $*"
    echo "multihost: skipped"
    exit 0
}
fail() {
    echo "multihost: FAILED: $*" >&2
    exit 1
}

for tool in ip unshare hostname mpirun timeout awk; do
    command -v "$tool" >/dev/null 2>&1 || skip "no \`$tool\` command"
done
[ "$(id -u)" = 0 ] || skip "creating network namespaces needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
for ex in gex_hello gex_network dht stencil gex_atomics upcxx_hosts gpu_stencil; do
    [ -x "$examples/$ex" ] ||
        fail "$examples/$ex is not built: run \`cargo build --features mpi --examples\`"
done

# A tag of this run's namespaces, so that runs at the same time do not meet.
tag=gexmh$$
work=$(mktemp -d "${TMPDIR:-/tmp}/gex-multihost.XXXXXX")
made=()

teardown() {
    local rc=$? ns pids left tries
    set +e
    trap - EXIT INT TERM
    # The processes in the namespaces are this run's jobs: end them before the
    # namespaces, which live on while a process is in one.
    for tries in 1 2 3 4 5 6 7 8 9 10 11; do
        pids=
        for ns in "${made[@]}"; do
            pids+=" $(ip netns pids "$ns" 2>/dev/null)"
        done
        [ -z "${pids// /}" ] && break
        if [ "$tries" -le 10 ]; then
            # shellcheck disable=SC2086 # one word per process id
            kill $pids 2>/dev/null
            sleep 0.5
        else
            # shellcheck disable=SC2086
            kill -KILL $pids 2>/dev/null
            sleep 0.5
        fi
    done
    for ns in "${made[@]}"; do
        ip netns del "$ns" 2>/dev/null
        rm -rf "/etc/netns/$ns"
    done
    rmdir /etc/netns 2>/dev/null
    rm -rf "$work"
    left=$(ip netns list 2>/dev/null | awk -v t="$tag-" 'index($1, t) == 1 { print $1 }')
    if [ -n "$left" ]; then
        echo "multihost: FAILED: namespaces left behind: $left" >&2
        [ "$rc" = 0 ] && rc=1
    fi
    exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- set-up --------------------------------------------------------------------------

sw=$tag-sw
ip netns add "$sw" 2>"$work/err" ||
    skip "cannot create a network namespace: $(cat "$work/err")"
made+=("$sw")
ip netns exec "$sw" unshare --uts true 2>"$work/err" ||
    skip "cannot create a UTS namespace: $(cat "$work/err")"
ip -n "$sw" link set lo up
ip -n "$sw" link add br0 type bridge 2>"$work/err" ||
    skip "cannot create a bridge: $(cat "$work/err")"
ip -n "$sw" link set br0 up

hostlist=
{
    echo "127.0.0.1 localhost"
    echo "::1 localhost"
    for i in $(seq "$hosts"); do echo "$subnet.$i gexh$i"; done
} >"$work/etc-hosts"
for i in $(seq "$hosts"); do
    ns=$tag-$i
    ip netns add "$ns"
    made+=("$ns")
    ip -n "$sw" link add "v$i" type veth peer name eth0 netns "$ns" 2>"$work/err" ||
        skip "cannot create a veth pair: $(cat "$work/err")"
    ip -n "$sw" link set "v$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    mkdir -p "/etc/netns/$ns"
    cp "$work/etc-hosts" "/etc/netns/$ns/hosts"
    echo "gexh$i $ns" >>"$work/hosts"
    hostlist+=${hostlist:+,}gexh$i:$slots
done

# Open MPI splits the agent's name at spaces, and users of GEX_MPIRUN split it too.
case $agent$work in *[[:space:]]*)
    fail "the paths $agent and $work must not contain white space" ;;
esac
root=
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
cat >"$work/mpirun" <<EOF
#!/bin/sh
# mpirun on gexh1, its ranks on the hosts $hostlist (scripts/multihost.sh).
# Open MPI's session directories in the run's, unless the caller chose a place.
OMPI_MCA_orte_tmpdir_base=\${OMPI_MCA_orte_tmpdir_base:-$work/tmp}
export OMPI_MCA_orte_tmpdir_base
exec ip netns exec $tag-1 unshare --uts env GEX_MULTIHOST_HOSTS=$work/hosts \\
    sh -c 'hostname gexh1 && exec "\$0" "\$@"' mpirun $root --oversubscribe \\
    --host $hostlist --map-by "\${GEX_MULTIHOST_MAP_BY:-node}" \\
    --mca plm_rsh_agent $agent --mca plm_rsh_no_tree_spawn 1 \\
    --mca oob_tcp_if_include $subnet.0/24 --mca btl_tcp_if_include $subnet.0/24 \\
    --mca btl "\${GEX_MULTIHOST_BTL:-self,vader,tcp}" --mca osc ^ucx \\
    --mca btl_vader_backing_directory $work/tmp "\$@"
EOF
mkdir "$work/tmp"
chmod +x "$work/mpirun"
export GEX_MPIRUN=$work/mpirun
# The hosts of this set-up are the namespaces, not a cap on the host teams.
unset GEX_MPI_HOST_RANKS
echo "multihost: $hosts hosts (gexh1..gexh$hosts, namespaces $tag-*), $slots slots per host"

# ---- checks --------------------------------------------------------------------------

# job WHAT ARGS...: runs `$GEX_MPIRUN ARGS...` within the time limit; its standard
# output is in $work/out, its standard error in $work/err; returns its status.
job() {
    local what=$1
    shift
    echo "multihost: $what"
    timeout -k 10 "$limit" "$GEX_MPIRUN" "$@" >"$work/out" 2>"$work/err"
}
# must WHAT ARGS...: job, which must succeed.
must() {
    job "$@" || fail "$1: exit $?:
$(cat "$work/out" "$work/err")"
}
# verified WHAT ARGS...: must, of a program that prints `verified` last.
verified() {
    must "$@"
    [ "$(tail -n1 "$work/out")" = verified ] || fail "$1: $(cat "$work/out" "$work/err")"
}
# The rank number and host name of each rank, printed by the rank's own process before
# it becomes the program: `rank R on HOST`.
on_host=(sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)" && exec "$0" "$@"')
# ranks_for MAP: the ranks of a job that splits unevenly under --map-by MAP: round
# robin wraps round the hosts (node); blocks of $slots fill all but the last host, or
# one rank per host with one slot each (slot; more ranks than slots would oversubscribe
# the hosts, which Open MPI spreads in its own way).
ranks_for() {
    if [ "$1" = node ]; then
        echo $((hosts + 2))
    elif [ "$slots" = 1 ]; then
        echo "$hosts"
    else
        echo $((hosts * slots - 1))
    fi
}
# host_of R MAP: the host of rank R under --map-by MAP: round robin over the hosts
# (node), or $slots ranks on each host in turn (slot).
host_of() {
    if [ "$2" = node ]; then
        echo "gexh$(($1 % hosts + 1))"
    else
        echo "gexh$(($1 / slots + 1))"
    fi
}
# rx_bytes I: the bytes host I has received on its veth.
rx_bytes() {
    ip netns exec "$tag-$1" cat /sys/class/net/eth0/statistics/rx_bytes
}
# Pairs every rank's host name (`rank R on HOST`) with its gex host (`rank R of N: host
# H of T`) in gex_network's output: the names must map one to one onto the gex hosts,
# and every rank must count as many gex hosts as there are namespaces.
same_hosts() {
    awk -v n="$1" -v hosts="$hosts" '
        / on gexh/ { name[$2] = $4 }
        /: host / { sub(":", "", $4); gex[$2] = $6; total[$2] = $8 }
        END {
            for (r = 0; r < n; r++) {
                if (!(r in name) || !(r in gex)) { print "rank " r " said nothing"; exit 1 }
                if (total[r] != hosts) { print "rank " r " counts " total[r] " hosts"; exit 1 }
                if ((name[r] in g) && g[name[r]] != gex[r]) {
                    print name[r] " is gex hosts " g[name[r]] " and " gex[r]; exit 1
                }
                if ((gex[r] in h) && h[gex[r]] != name[r]) {
                    print "gex host " gex[r] " is on " h[gex[r]] " and " name[r]; exit 1
                }
                g[name[r]] = gex[r]
                h[gex[r]] = name[r]
            }
        }' "$work/out"
}

# Checks in upcxx_hosts' output that every rank's local team (`rank R of N: local team
# [A, B]`) is the ranks with its host name (`rank R on HOST`).
same_local_team() {
    awk -v n="$1" '
        / on gexh/ { name[$2] = $4 }
        /: local team / { line = $0; sub(/.*local team /, "", line); team[$2] = line }
        END {
            for (r = 0; r < n; r++) {
                want = ""
                for (q = 0; q < n; q++) if (name[q] == name[r]) want = want (want == "" ? "" : ", ") q
                if (team[r] != "[" want "]") {
                    print "rank " r " on " name[r] " has local team " team[r] ", not [" want "]"
                    exit 1
                }
            }
        }' "$work/out"
}

# Checks gex_network's AM counts (GEX_MPI_STATS=1: `gex: rank R: AMs handled: H from
# the host queues, M over MPI` on standard error): every rank sends 500 Short, a Medium
# and a Long request to every rank, each answered, so a rank with k ranks on its host
# (itself included) of n handles 1004 (n - k) AMs from other hosts, which must all
# have come over MPI, and 1004 k from its own host, through the host queues (either
# path may carry a few more: the conduit's own messages).
am_paths() {
    awk -v n="$1" '
        FNR == NR && / on gexh/ { name[$2] = $4; on[$4]++; next }
        / AMs handled: / {
            r = $3; sub(":", "", r)
            host[r] = $6; net[r] = $11
        }
        END {
            for (r = 0; r < n; r++) {
                k = on[name[r]]
                if (!(r in net)) { print "rank " r " reported no AM counts"; exit 1 }
                if (net[r] < 1004 * (n - k)) {
                    print "rank " r " on " name[r] " handled " net[r] " AMs over MPI, fewer than the " 1004 * (n - k) " from other hosts"
                    exit 1
                }
                if (host[r] < 1004 * k) {
                    print "rank " r " on " name[r] " handled " host[r] " AMs from the host queues, fewer than the " 1004 * k " from its host"
                    exit 1
                }
            }
        }' "$work/out" "$work/err"
}

run_checks() {
    local map n r i got why before
    # Every rank's host name is that of its host, under both mappings.
    for map in node slot; do
        n=$(ranks_for "$map")
        GEX_MULTIHOST_MAP_BY=$map must "host names: $n ranks, --map-by $map" \
            -n "$n" "${on_host[@]}" true
        for r in $(seq 0 $((n - 1))); do
            grep -qx "rank $r on $(host_of "$r" "$map")" "$work/out" ||
                fail "rank $r of $n is not on $(host_of "$r" "$map") (--map-by $map):
$(cat "$work/out")"
        done
    done

    # gex_network: the gex hosts are the namespaces, and the transfers between them
    # cross the veths.
    for map in node slot; do
        n=$(ranks_for "$map")
        before=()
        for i in $(seq "$hosts"); do before+=("$(rx_bytes "$i")"); done
        GEX_MULTIHOST_MAP_BY=$map must "gex_network: $n ranks, --map-by $map" \
            -n "$n" -x GEX_MPI_STATS=1 "${on_host[@]}" "$examples/gex_network"
        grep -q "AMs, puts and gets between every pair verified" "$work/out" ||
            fail "gex_network did not verify its transfers:
$(cat "$work/out" "$work/err")"
        why=$(same_hosts "$n") || fail "the gex hosts are not the namespaces: $why
$(cat "$work/out")"
        why=$(am_paths "$n") || fail "AMs took the wrong path: $why
$(cat "$work/out" "$work/err")"
        # Every rank puts 256 KiB into the next rank and gets it back; round robin puts
        # the next rank on another host, so every host receives at least 512 KiB.
        if [ "$map" = node ]; then
            for i in $(seq "$hosts"); do
                got=$(($(rx_bytes "$i") - before[i - 1]))
                echo "multihost:   gexh$i received $got bytes on its veth"
                [ "$got" -ge $((512 << 10)) ] ||
                    fail "gexh$i received $got bytes on its veth, fewer than its transfers"
            done
        fi
    done

    # Shared memory as the only transport: ranks of different namespaces cannot reach
    # each other.
    if GEX_MULTIHOST_BTL=self,vader job "gex_network, shared memory only (must fail)" \
        -n "$hosts" "$examples/gex_network"; then
        fail "gex_network ran across hosts with shared memory only:
$(cat "$work/out")"
    fi
    grep -q "unable to reach each other" "$work/err" ||
        fail "gex_network with shared memory only failed, but not for want of a transport:
$(cat "$work/err")"

    # upcxx-run --conduit mpi through the launcher: its segment size and the
    # conduit's settings set where it starts reach the ranks of the other hosts (`-x`;
    # their environment is otherwise a login's): else the conduit would stop the job,
    # and those ranks would not report their AM counts (GEX_MPI_STATS).
    if [ -x "$launcher" ]; then
        n=$((hosts + 1))
        echo "multihost: upcxx-run --conduit mpi -n $n gex_network"
        GEX_MPI_STATS=1 GEX_MPI_THREAD=single timeout -k 10 "$limit" "$launcher" \
            --conduit mpi -n "$n" --segment-size 64M \
            "${on_host[@]}" "$examples/gex_network" >"$work/out" 2>"$work/err" ||
            fail "upcxx-run --conduit mpi: exit $?:
$(cat "$work/out" "$work/err")"
        why=$(same_hosts "$n") || fail "upcxx-run: the gex hosts are not the namespaces: $why
$(cat "$work/out")"
        why=$(am_paths "$n") || fail "upcxx-run: $why
$(cat "$work/out" "$work/err")"
    else
        echo "multihost: upcxx-run not built (cargo build -p upcxx-run): not run"
    fi

    # The examples, their ranks round robin over the hosts.
    for n in 2 $((hosts + 2)); do
        must "gex_hello: $n ranks" -n "$n" "$examples/gex_hello"
        for r in $(seq 0 $((n - 1))); do
            grep -qx "Hello from rank $r of $n" "$work/out" ||
                fail "gex_hello on $n ranks: rank $r missing:
$(cat "$work/out")"
        done
        verified "dht: $n ranks" -n "$n" "$examples/dht" 2000
        verified "stencil: $n ranks" -n "$n" "$examples/stencil"
        verified "gex_atomics: $n ranks" -n "$n" "$examples/gex_atomics"
        # Halos moved device to device between hosts: copies by messages, in flight.
        verified "gpu_stencil on emulated devices: $n ranks" -n "$n" \
            -x GPU_STENCIL_DEVICE=emulated "$examples/gpu_stencil"
        verified "upcxx_hosts: $n ranks" -n "$n" "${on_host[@]}" "$examples/upcxx_hosts"
        why=$(same_local_team "$n") || fail "upcxx_hosts: $why
$(cat "$work/out")"
        # Gets from and puts to another host return before they complete: the
        # window is served by osc pt2pt here, which needs the target to enter MPI.
        verified "upcxx_hosts rma-overlap: $n ranks" -n "$n" "$examples/upcxx_hosts" \
            rma-overlap "$work/rma-overlap-$n"
    done
    echo "multihost: every check passed"
}
if [ "$checks" = 1 ]; then
    run_checks
fi

# ---- the given command ---------------------------------------------------------------

if [ $# -gt 0 ]; then
    echo "multihost: GEX_MPIRUN=$GEX_MPIRUN $*"
    "$@"
fi

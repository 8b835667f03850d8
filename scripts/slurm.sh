#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, and a command run under it: jobs started by
# `srun` get their ranks as on a Slurm cluster (slurmd starts them, PMIx gives them
# their rank; no mpirun).
#
#     scripts/slurm.sh COMMAND...
#
# Set-up: a directory of the run holds everything: a MUNGE key and its daemon's socket
# (Slurm authenticates with MUNGE), slurm.conf (one node, this host, with more CPUs
# than it has so that jobs of up to 64 ranks start at once, PMIx as the default MPI
# plugin, no cgroups), and the state, spool, logs and pid files of slurmctld and slurmd.
# Nothing outside it is read or changed: COMMAND gets SLURM_CONF (read by srun, sinfo,
# scontrol) naming that slurm.conf, and GEX_MPIRUN=srun, the launcher of
# `upcxx-run --conduit mpi`, of the tests' mpi mode and of the benches.
#
# The daemons listen on ports 16817 and 16818 of this host. Everything is stopped and
# removed on exit, also after a failure or an interrupt, and so are the files that
# appeared in /dev/shm meanwhile: Open MPI's shared-memory transport leaves one per
# rank of a job that did not finalize (mpirun removes them; under srun a cluster's
# epilog does). Without root or without the
# programs (Debian: slurmd slurmctld slurm-client munge), the script prints why and
# `skipped`, and exits 0.
set -euo pipefail

if [ $# -eq 0 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '6p' "$0" | sed 's/^#  *//' >&2
    exit 2
fi

skip() {
    echo "slurm: $1: skipped" >&2
    exit 0
}
[ "$(id -u)" = 0 ] || skip "the daemons run as root here, and this is not root"
# The daemons are in the system directories, which a non-login PATH may lack.
PATH=$PATH:/usr/sbin:/sbin
for p in munged mungekey slurmctld slurmd srun sinfo scontrol; do
    command -v "$p" >/dev/null 2>&1 || skip "$p is not installed"
done

dir=$(mktemp -d /tmp/gex-slurm.XXXXXX)
shm_before=$(ls /dev/shm)
stop() {
    for d in slurmd slurmctld munged; do
        [ -f "$dir/$d.pid" ] && kill "$(cat "$dir/$d.pid")" 2>/dev/null || true
    done
    # slurmd's step daemons of jobs still running (COMMAND interrupted).
    pkill -f "slurmstepd.*$dir" 2>/dev/null || true
    sleep 0.5
    rm -rf "$dir"
    for f in /dev/shm/vader_segment.*; do
        [ -e "$f" ] || continue
        grep -qxF "${f#/dev/shm/}" <<<"$shm_before" || rm -f "$f"
    done
}
trap stop EXIT
trap 'exit 130' INT TERM

fail() {
    echo "slurm: $1" >&2
    for log in "$dir"/*.log; do
        [ -f "$log" ] && { echo "--- $log" >&2; tail -20 "$log" >&2; }
    done
    exit 1
}

mungekey --create --keyfile="$dir/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 600 "$dir/munge.key"
munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" \
    --seed-file="$dir/munged.seed" || fail "munged did not start"

node=$(hostname -s)
mkdir -p "$dir/state" "$dir/spool"
cat >"$dir/slurm.conf" <<EOF
ClusterName=gexlocal
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=64 RealMemory=1000 State=UNKNOWN
PartitionName=gex Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$dir/slurm.conf
slurmctld -i || fail "slurmctld did not start"
slurmd || fail "slurmd did not start"
for _ in $(seq 100); do
    state=$(sinfo -h -o %t 2>/dev/null || true)
    case $state in idle*) break ;; esac
    sleep 0.2
done
case $state in idle*) ;; *) fail "the node did not come up (state: ${state:-none})" ;; esac
srun -n 2 true || fail "srun cannot start a job"
echo "slurm: one node ($node), slurm.conf in $dir" >&2

export GEX_MPIRUN=srun
"$@"

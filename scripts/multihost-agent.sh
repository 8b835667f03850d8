#!/bin/sh
# The remote-shell agent of a multi-host job on one machine (scripts/multihost.sh):
# mpirun calls it, as it would call ssh, with `--mca plm_rsh_agent`:
#
#     multihost-agent.sh HOST COMMAND-WORDS...
#
# HOST is a host name of the file named by GEX_MULTIHOST_HOSTS (lines `NAME NETNS`).
# Like sshd, the agent runs the words as one shell command line on that host: in its
# network namespace (`ip netns exec`, which also binds /etc/netns/NETNS/hosts over
# /etc/hosts, so the host names resolve there) and in a new UTS namespace named HOST
# (`ip netns exec` keeps the machine's host name), from a clean environment as a
# login would give.
set -eu

if [ $# -lt 2 ]; then
    echo "multihost-agent: usage: $0 HOST COMMAND..." >&2
    exit 2
fi
host=$1
shift
map=${GEX_MULTIHOST_HOSTS:?multihost-agent: GEX_MULTIHOST_HOSTS names no host file}
netns=$(awk -v h="$host" '$1 == h { print $2 }' "$map")
if [ -z "$netns" ]; then
    echo "multihost-agent: $host is not a host of $map" >&2
    exit 255
fi

exec ip netns exec "$netns" unshare --uts \
    env -i PATH="$PATH" HOME="${HOME:-/}" LANG=C \
    sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"

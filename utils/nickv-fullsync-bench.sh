#!/usr/bin/env bash
# nickv-fullsync-bench.sh -- what a full sync through Nic-KV costs, against
# one straight from the master (why Nic-KV sends SKV replicas' full syncs
# back to the master; NIC-KV.md, "Full syncs").
#
#   utils/nickv-fullsync-bench.sh [--keys 1000000] [--value 100] [--rounds 3]
#
# A master with --keys keys of --value bytes (DEBUG POPULATE) and Nic-KV on
# loopback. Each round, a fresh replica with capa nickv turned off (so that
# it behaves like an upstream Redis replica and is never redirected) does
# a full sync twice: with replicaof <Nic-KV> (the RDB passes through
# Nic-KV) and with replicaof <master>. For each it prints the RDB size,
# the seconds until the replica's link is up, and the CPU seconds the
# master and Nic-KV spent (INFO cpu, before and after). Medians.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/build/redis/src"
. "$top/utils/lib.sh"
keys=1000000 value=100 rounds=3
while [ $# -gt 0 ]; do
    case "$1" in
        --keys) keys=$2; shift 2 ;;
        --value) value=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "nickv-fullsync-bench: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$bin/nic-kv" ] || { echo "nickv-fullsync-bench: build SKV first (make)" >&2; exit 1; }

base=$((19000 + RANDOM % 500 * 2))
mport=$base nkport=$((base + 1)) rport=$((base + 2))
work=$(mktemp -d)
nk_pid=""
now() { date +%s.%N; }
cleanup() {
    set +e
    [ -n "$nk_pid" ] && kill "$nk_pid" 2>/dev/null && wait "$nk_pid" 2>/dev/null
    cli "$rport" shutdown nosave >/dev/null 2>&1
    cli "$mport" shutdown nosave >/dev/null 2>&1
    sleep 0.5
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$work" 2>/dev/null
    return 0
}
trap cleanup EXIT

"$bin/redis-server" --port "$mport" --save '' --appendonly no --dir "$work" --daemonize yes \
    --logfile "$work/master.log" --repl-diskless-sync no --repl-backlog-size 256mb \
    --enable-debug-command yes
wait_for 300 '[ "$(cli $mport ping 2>/dev/null)" = PONG ]'
cli "$mport" debug populate "$keys" key "$value" >/dev/null
"$bin/nic-kv" --port "$nkport" --master-port "$mport" --logfile "$work/nickv.log" --state-file "$work/nickv.state" &
nk_pid=$!
wait_for 300 '[ "$(field $nkport upstream master_link_status)" = up ]'

results="$work/results"
: > "$results"
sync_once() { # label target-port
    rm -rf "$work/replica" && mkdir -p "$work/replica"
    "$bin/redis-server" --port "$rport" --save '' --appendonly no --dir "$work/replica" \
        --daemonize yes --logfile "$work/replica.log" --nickv-offload no
    wait_for 300 '[ "$(cli $rport ping 2>/dev/null)" = PONG ]'
    local m0 n0 t0 m1 n1 t1
    m0=$(cpu "$mport" 3); n0=$(cpu "$nkport" 3); t0=$(now)
    cli "$rport" replicaof 127.0.0.1 "$2" >/dev/null
    wait_for 300 '[ "$(field $rport replication master_link_status)" = up ]'
    t1=$(now); m1=$(cpu "$mport" 3); n1=$(cpu "$nkport" 3)
    [ "$(cli "$rport" dbsize)" = "$(cli "$mport" dbsize)" ] || { echo "replica incomplete" >&2; exit 1; }
    echo "$1 $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') $(awk -v a="$m0" -v b="$m1" 'BEGIN { printf "%.3f", b - a }') $(awk -v a="$n0" -v b="$n1" 'BEGIN { printf "%.3f", b - a }')" >> "$results"
    cli "$rport" shutdown nosave >/dev/null 2>&1 || true
    wait_for 300 '! cli $rport ping >/dev/null 2>&1'
}
for _ in $(seq "$rounds"); do
    sync_once through-nickv "$nkport"
    sync_once from-master "$mport"
done
rdb=$(ls -l "$work/dump.rdb" 2>/dev/null | awk '{ print $5 }')
printf '%-14s %10s %10s %16s %18s %22s\n' path "rdb MB" seconds "master cpu-s" "Nic-KV cpu-s" "Nic-KV cpu-s per GB"
for p in through-nickv from-master; do
    s=$(awk -v p="$p" '$1 == p { print $2 }' "$results" | median)
    m=$(awk -v p="$p" '$1 == p { print $3 }' "$results" | median)
    n=$(awk -v p="$p" '$1 == p { print $4 }' "$results" | median)
    printf '%-14s %10.1f %10s %16s %18s %22.2f\n' "$p" "$(echo "$rdb" | awk '{ print $1 / 1048576 }')" "$s" "$m" "$n" \
        "$(awk -v n="$n" -v r="$rdb" 'BEGIN { print n / (r / 1073741824) }')"
done
echo "($keys keys of $value bytes, $rounds rounds, medians; disk-based RDB, loopback TCP)"

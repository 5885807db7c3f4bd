#!/usr/bin/env bash
# cluster-bench.sh -- Redis Cluster scale-out, with and without a Nic-KV
# per shard: throughput and the masters' CPU per write.
#
#   utils/cluster-bench.sh [--shards 3] [--replicas "1 2"] [--writes 300000]
#                          [--rounds 5] [--clients 30] [--pipelines "1 16"]
#                          [--no-pin]
#
# Each round, for each replica count N, builds a cluster of --shards
# masters with N replicas each on loopback (redis-cli --cluster create),
# and runs redis-benchmark --cluster SET (random keys over every shard)
# against it twice: with every replica on its master ("direct"), then with
# a nic-kv per shard that the shard's replicas stream from ("nickv": each
# master hands its replicas over, as in a deployment with a DPU per
# master). It reads, before and after each run, every master's INFO cpu
# (used_cpu_sys + used_cpu_user) and prints, per (N, mode, pipeline), the
# medians over the rounds of:
#   ops/s            redis-benchmark's SET rate over the whole cluster
#   cpu-s/1M writes  the masters' CPU seconds, summed, per million writes
#   sends/write      the masters' replication stream writes per write
#                    (INFO nickv repl_stream_writes, summed)
# then the masters' CPU per write through Nic-KV against direct, per N.
#
# Placement, as utils/nickv-bench.sh does it: the masters and the
# benchmark run on core 0 (the "hosts"), the replicas and the Nic-KVs on
# the other cores (standing in for the replicas' machines and the DPUs'
# ARM cores), which a SCHED_IDLE busy loop keeps busy in both modes, so
# that how busy the rest of the machine is does not differ between the
# modes compared. --no-pin lets the scheduler place everything. Absolute
# numbers vary with the machine's load; the modes alternate within a
# round so that drift hits both alike, and the ratios are what to quote.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/build/redis/src"
. "$top/utils/lib.sh"
shards=3 replica_counts="1 2" writes=300000 rounds=5 clients=30 pipelines="1 16" pin=1
while [ $# -gt 0 ]; do
    case "$1" in
        --shards) shards=$2; shift 2 ;;
        --replicas) replica_counts=$2; shift 2 ;;
        --writes) writes=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        --pipelines) pipelines=$2; shift 2 ;;
        --no-pin) pin=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "cluster-bench: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$bin/nic-kv" ] || { echo "cluster-bench: build SKV first (make)" >&2; exit 1; }

host_cpu=() rest_cpu=() idle_pids=()
if [ "$pin" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    host_cpu=(taskset -c 0) rest_cpu=(taskset -c "1-$(($(nproc) - 1))")
fi

# Ports below the ephemeral range, and so are their cluster bus ports
# (port + 10000): an outgoing connection cannot hold one.
base=$((12000 + RANDOM % 300 * 10))
work=$(mktemp -d)
results="$work/results"
: > "$results"
nk_pids=()
cli_quiet=1

ports() { # every node's port, masters first
    local n=$1
    seq "$base" $((base + shards * (n + 1) - 1))
}

teardown() {
    [ ${#nk_pids[@]} -gt 0 ] && kill "${nk_pids[@]}" 2>/dev/null || true
    for pid in "${nk_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    nk_pids=()
    for p in $(seq "$base" $((base + 60))); do cli "$p" shutdown nosave >/dev/null 2>&1 || true; done
    rm -rf "$work"/node-* "$work"/nickv-*
}

cleanup() {
    [ ${#idle_pids[@]} -gt 0 ] && kill "${idle_pids[@]}" 2>/dev/null || true
    teardown
    rm -rf "$work"
}
trap cleanup EXIT

# The masters' summed INFO cpu, and repl_stream_writes.
masters_cpu() {
    local s=0
    for p in $(seq "$base" $((base + shards - 1))); do s=$(awk -v a="$s" -v b="$(cpu "$p")" 'BEGIN { printf "%.6f", a + b }'); done
    echo "$s"
}
# The masters' write syscalls and bytes written so far, summed ("syscw wchar").
masters_io() {
    for p in $(seq "$base" $((base + shards - 1))); do pidio "$p"; done |
        awk '{ s += $1; b += $2 } END { print s + 0, b + 0 }'
}
masters_sends() {
    local s=0 v
    for p in $(seq "$base" $((base + shards - 1))); do
        v=$(field "$p" nickv repl_stream_writes); s=$((s + ${v:-0}))
    done
    echo "$s"
}

cluster_up() { # replicas per shard
    local n=$1 addrs=() pin
    for p in $(ports "$n"); do
        mkdir -p "$work/node-$p"
        # redis-cli --cluster create makes the first $shards nodes masters.
        if [ "$p" -lt $((base + shards)) ]; then pin=("${host_cpu[@]}"); else pin=("${rest_cpu[@]}"); fi
        "${pin[@]}" "$bin/redis-server" --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/node-$p" \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
            --logfile "$work/node-$p/log" --daemonize yes --repl-diskless-sync-delay 0
        addrs+=("127.0.0.1:$p")
    done
    for p in $(ports "$n"); do wait_for 10 'cli '"$p"' ping >/dev/null 2>&1'; done
    "$bin/redis-cli" --cluster create "${addrs[@]}" --cluster-replicas "$n" --cluster-yes > "$work/create.log" 2>&1 ||
        { cat "$work/create.log" >&2; exit 1; }
    for p in $(ports "$n"); do wait_for 30 'cli '"$p"' cluster info | grep -q "^cluster_state:ok"'; done
    for p in $(seq "$base" $((base + shards - 1))); do
        wait_for 60 '[ "$(cli '"$p"' info replication | grep -c "^slave.*state=online")" = '"$n"' ]'
    done
}

nickvs_up() { # replicas per shard
    local n=$1 i=0
    for p in $(seq "$base" $((base + shards - 1))); do
        mkdir -p "$work/nickv-$p"
        "${rest_cpu[@]}" "$bin/nic-kv" --port $((base + 100 + i)) --master-port "$p" --logfile "$work/nickv-$p/log" \
            --state-file "$work/nickv-$p/state" &
        nk_pids+=($!)
        i=$((i + 1))
    done
    for p in $(seq "$base" $((base + shards - 1))); do
        wait_for 60 '[ "$(field '"$p"' nickv nickv_replicas)" = '"$n"' ]'
    done
    sleep 1
}

measure() { # replicas mode pipeline
    local c0 c1 w0 w1 io0 io1 out rps
    c0=$(masters_cpu); w0=$(masters_sends); io0=$(masters_io)
    out=$("${host_cpu[@]}" "$bin/redis-benchmark" -p "$base" --cluster -t set -n "$writes" -c "$clients" -P "$3" -r 1000000 \
          --csv 2>/dev/null)
    c1=$(masters_cpu); w1=$(masters_sends); io1=$(masters_io)
    rps=$(echo "$out" | tr -d '"' | awk -F, '$1 == "SET" { print $2 }')
    record_run "$results" "$1" "$2" "$3" "$c0" "$c1" "$w0" "$w1" "$writes" "$rps" "$io0" "$io1"
}

# One SCHED_IDLE busy loop per core of the replicas' (see "Placement").
start_idle_loops

for round in $(seq 1 "$rounds"); do
    for n in $replica_counts; do
        cluster_up "$n"
        for p in $pipelines; do measure "$n" direct "$p"; done
        teardown
        cluster_up "$n"
        nickvs_up "$n"
        for p in $pipelines; do measure "$n" nickv "$p"; done
        teardown
        echo "cluster-bench: round $round, $n replica(s) per shard done" >&2
    done
done

print_medians "$results" "$work/medians"
echo
for p in $pipelines; do
    for n in $replica_counts; do
        # A difference only when the CPU spreads (columns 7-8) do not overlap.
        awk -v n="$n" -v p="$p" -v rounds="$rounds" '$1 == n && $3 == p { c[$2] = $4; r[$2] = $5; lo[$2] = $7; hi[$2] = $8 }
            END { v = (hi["nickv"] < lo["direct"] || hi["direct"] < lo["nickv"]) ? "differs" : "within noise"
                  if (rounds < 5) v = "fewer than 5 rounds: no verdict"
                  if (c["direct"] > 0 && r["direct"] > 0)
                printf "pipeline %-3s %d replica(s) per shard: masters CPU per write %+.1f%% (%s), ops/s %+.1f%% through Nic-KV vs direct\n",
                       p, n, (c["nickv"] / c["direct"] - 1) * 100, v,
                       (r["nickv"] / r["direct"] - 1) * 100 }' "$work/medians"
    done
done
if [ ${#host_cpu[@]} -gt 0 ]; then where="masters and benchmark on core 0, replicas and Nic-KVs on cores 1-$(($(nproc) - 1)), kept busy by a SCHED_IDLE loop"
else where="no pinning"; fi
echo "($shards shards, $writes writes per run, $clients clients, $rounds rounds, medians with the CPU's min-max; $where)"

#!/usr/bin/env bash
# run-skv.sh -- SKV's main job on one machine: a master, Nic-KV and three
# replicas on loopback, in the foreground. Ctrl-C stops them all cleanly.
#
#   master    127.0.0.1:6379   (redis.conf; RDMA on 6380 too when this
#                               machine has an RDMA device)
#   Nic-KV    127.0.0.1:7380   (nic-kv/nic-kv.conf)
#   replicas  127.0.0.1:6381, 6382, 6383   (replicaof the master; the
#                               master hands them over to Nic-KV)
#
# Data and logs go to build/run/. SKV_PORT moves the whole set (master on
# SKV_PORT, replicas on the next ports, Nic-KV on SKV_PORT + 1001).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/build/bin"
run="$top/build/run"
mport=${SKV_PORT:-6379}
rport=$((mport + 1))
nkport=$((mport + 1001))
replicas="$((mport + 2)) $((mport + 3)) $((mport + 4))"

[ -x "$bin/redis-server" ] && [ -x "$bin/nic-kv" ] || { echo "run-skv: build SKV first: make" >&2; exit 1; }
mkdir -p "$run"
cli() { "$bin/redis-cli" -p "$1" "${@:2}" 2>/dev/null; }
field() { cli "$1" info "$2" | tr -d '\r' | sed -n "s/^$3://p"; }

pids=()
stopping=0
stop_all() {
    [ $stopping = 1 ] && return
    stopping=1
    echo
    echo "run-skv: stopping (replicas, Nic-KV, then the master: it saves its data)"
    for p in $replicas; do cli "$p" shutdown >/dev/null; done
    cli "$nkport" shutdown >/dev/null
    cli "$mport" shutdown >/dev/null
    wait
    echo "run-skv: stopped"
    exit 0
}
trap stop_all INT TERM

for p in $mport $nkport $replicas; do
    if cli "$p" ping >/dev/null; then
        echo "run-skv: port $p is in use (another SKV running? stop it, or set SKV_PORT)" >&2
        exit 1
    fi
done

rdma_args=()
if ls /sys/class/infiniband/* >/dev/null 2>&1; then
    rdma_args=(--rdma-port "$rport")
fi

mkdir -p "$run/master"
"$bin/redis-server" "$top/redis.conf" --port "$mport" --dir "$run/master" \
    --logfile "$run/master/redis.log" "${rdma_args[@]}" &
pids+=($!)
"$bin/nic-kv" "$top/nic-kv/nic-kv.conf" --port "$nkport" --master-port "$mport" \
    --logfile "$run/nic-kv.log" &
pids+=($!)
for p in $replicas; do
    mkdir -p "$run/replica-$p"
    "$bin/redis-server" "$top/redis.conf" --port "$p" --dir "$run/replica-$p" \
        --logfile "$run/replica-$p/redis.log" --replicaof 127.0.0.1 "$mport" &
    pids+=($!)
done

# Wait until the replicas stream from Nic-KV (the master hands them over
# once they are in sync and Nic-KV's backlog has started).
for _ in $(seq 100); do
    cli "$mport" set skv:started "$(date)" >/dev/null
    [ "$(field "$mport" nickv nickv_replicas)" = 3 ] && break
    sleep 0.2
done

cat <<EOT

SKV $("$bin/redis-server" --version | sed 's/.*skv=//') (upstream Redis $("$bin/redis-server" --version | sed 's/.* v=\([^ ]*\).*/\1/')) is running:
  master    127.0.0.1:$mport   $( [ ${#rdma_args[@]} -gt 0 ] && echo "and RDMA port $rport" )
  Nic-KV    127.0.0.1:$nkport   streaming to $(field "$nkport" replicas connected_replicas) replicas
  replicas  $(for p in $replicas; do echo -n "127.0.0.1:$p  "; done)
  data and logs in $run

Try, in another terminal:
  $bin/redis-cli -p $mport set hello world
  $bin/redis-cli -p $((mport + 2)) get hello
  $bin/redis-cli -p $mport info replication        # replicas via=nickv, and nickv:
  $bin/redis-cli -p $nkport info replicas           # what Nic-KV sends to whom
  $bin/redis-cli -p $mport wait 3 1000              # acknowledged by all three
  $bin/redis-benchmark -p $mport -q -t set -n 100000
$( [ ${#rdma_args[@]} -gt 0 ] && echo "  $bin/redis-cli --rdma -h <rdma-address> -p $rport ping" )
Ctrl-C stops everything.
EOT
wait

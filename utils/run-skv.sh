#!/usr/bin/env bash
# run-skv.sh -- SKV's main job on one machine: a master, Nic-KV and three
# replicas, in the foreground. Ctrl-C stops them all cleanly.
#
#   master    127.0.0.1:6379   (redis.conf)
#   Nic-KV    127.0.0.1:7380   (nic-kv/nic-kv.conf)
#   replicas  127.0.0.1:6381, 6382, 6383   (replicaof the master; the
#                               master hands them over to Nic-KV)
#
# Over TCP on loopback; over RDMA when this machine has an RDMA device with
# an IPv4 address on its network interface (SKV_RDMA_ADDR picks one): the
# master also listens on RDMA port 6380, Nic-KV streams from it over RDMA
# and listens on RDMA port 7381, and the replicas replicate over RDMA.
#
# Three generated passwords, one per role (NIC-KV.md, "Security model"):
#   - the operator's: the default user's on every node (requirepass) and
#     Nic-KV's adminpass; printed, and kept in build/run/password;
#   - the replicas': the ACL user "replica" (+psync +replconf +ping,
#     nothing else) that every node replicates as (masteruser/masterauth),
#     and Nic-KV's requirepass; kept in build/run/replica-password;
#   - Nic-KV's own: the ACL user "nickv", defined on every node (a replica
#     promoted takes leases from it), used by Nic-KV alone; kept in
#     build/run/nickv-password. nickv-lease yes needs such a user: with the
#     default one, any client could grant the master a lease.
# A replica's password lets it replicate and nothing more: it cannot turn
# the lease off, promote itself or read the data. Nic-KV names every node
# a member (node lines): it sends its password to them and nothing else.
#
# Nic-KV fails over (failover yes in nic-kv.conf; every node runs with
# nickv-lease yes): kill -9 the master and a replica takes over. Each node
# gets a copy of redis.conf in its directory, fresh at every start, which
# the failover may rewrite (CONFIG REWRITE); Nic-KV's state file starts
# afresh too.
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
cli_quiet=1     # ports are probed before anything listens on them
. "$top/utils/lib.sh"

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

# The IPv4 address of a network interface with an RDMA device on it.
rdma_address() {
    local dev
    [ -n "${SKV_RDMA_ADDR:-}" ] && { echo "$SKV_RDMA_ADDR"; return; }
    command -v rdma >/dev/null || return
    for dev in $(rdma link show 2>/dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p'); do
        ip -4 -o addr show dev "$dev" 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}'
    done | head -n 1
}

rdma_addr=$(rdma_address)
rm -f "$run/nic-kv.state" "$run/password" "$run/nickv-password" "$run/replica-password"
pass=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
nkpass=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
replpass=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077; echo "$pass" > "$run/password"; echo "$nkpass" > "$run/nickv-password"
 echo "$replpass" > "$run/replica-password")
export REDISCLI_AUTH=$pass
# What Nic-KV does on a node: replicate, probe, grant the lease, fail over,
# read a cluster's view. (Each rule a word of its own: redis-server joins
# them into one line.)
nickv_acl=(nickv on ">$nkpass" +psync +replconf +ping +auth +info +replicaof "+config|rewrite" "+client|kill"
           "+cluster|nodes")
# What a replica does on its master: replicate, nothing else.
replica_acl=(replica on ">$replpass" +psync +replconf +ping)
node_args=(--nickv-lease yes --requirepass "$pass" --user "${nickv_acl[@]}" --user "${replica_acl[@]}"
           --nickv-user nickv --masteruser replica --masterauth "$replpass")
master_args=("${node_args[@]}")
nickv_args=(--state-file "$run/nic-kv.state" --masteruser nickv --masterauth "$nkpass"
            --requirepass "$replpass" --replica-user replica --adminpass "$pass")
for p in $mport $replicas; do nickv_args+=(--node "127.0.0.1:$p"); done
replica_args=("${node_args[@]}" --replicaof 127.0.0.1 "$mport")
if [ -n "$rdma_addr" ]; then
    nkrport=$((nkport + 1))
    master_args+=(--bind "127.0.0.1 $rdma_addr" --rdma-port "$rport" --rdma-bind "$rdma_addr")
    nickv_args+=(--master-host "$rdma_addr" --master-rdma-port "$rport"
                 --rdma-port "$nkrport" --rdma-bind "$rdma_addr" --announce-ip "$rdma_addr")
    # The master lists its replicas at their RDMA address: members there too.
    for p in $mport $replicas; do nickv_args+=(--node "$rdma_addr:$p"); done
    replica_args=("${node_args[@]}" --replicaof "$rdma_addr" "$rport" --rdma-replication yes)
fi

mkdir -p "$run/master"
cp "$top/redis.conf" "$run/master/redis.conf"
"$bin/redis-server" "$run/master/redis.conf" --port "$mport" --dir "$run/master" \
    --logfile "$run/master/redis.log" "${master_args[@]}" &
pids+=($!)
"$bin/nic-kv" "$top/nic-kv/nic-kv.conf" --port "$nkport" --master-port "$mport" \
    --logfile "$run/nic-kv.log" "${nickv_args[@]}" &
pids+=($!)
for p in $replicas; do
    mkdir -p "$run/replica-$p"
    cp "$top/redis.conf" "$run/replica-$p/redis.conf"
    "$bin/redis-server" "$run/replica-$p/redis.conf" --port "$p" --dir "$run/replica-$p" \
        --logfile "$run/replica-$p/redis.log" "${replica_args[@]}" &
    pids+=($!)
done

# Wait until the replicas stream from Nic-KV (the master hands them over
# once they are in sync and Nic-KV's backlog has started).
for _ in $(seq 100); do
    cli "$mport" set skv:started "$(date)" >/dev/null
    [ "$(field "$mport" nickv nickv_replicas)" = 3 ] && break
    sleep 0.2
done

if [ -n "$rdma_addr" ]; then
    transport="over RDMA on $rdma_addr"
    where="  master    127.0.0.1:$mport and RDMA $rdma_addr:$rport
  Nic-KV    127.0.0.1:$nkport and RDMA $rdma_addr:$nkrport, streaming from the master over RDMA
            to $(field "$nkport" replicas connected_replicas) replicas ($(field "$nkport" replicas replica0 | sed 's/.*transport=\([a-z]*\).*/\1/'))"
else
    transport="over TCP on loopback (no RDMA device here)"
    where="  master    127.0.0.1:$mport
  Nic-KV    127.0.0.1:$nkport   streaming to $(field "$nkport" replicas connected_replicas) replicas"
fi
auth="
Your password (the default user's on every node, Nic-KV's adminpass; in $run/password):
  export REDISCLI_AUTH=$pass
The replicas replicate as the ACL user replica (+psync +replconf +ping only; its
password in $run/replica-password). Nic-KV authenticates to the nodes as the
ACL user nickv (its password in $run/nickv-password: nobody else needs it)."

cat <<EOT

SKV $("$bin/redis-server" --version | sed 's/.*skv=//') (upstream Redis $("$bin/redis-server" --version | sed 's/.* v=\([^ ]*\).*/\1/')) is running, $transport:
$where
  replicas  $(for p in $replicas; do echo -n "127.0.0.1:$p  "; done)
  data and logs in $run
$auth
Try, in another terminal:
  $bin/redis-cli -p $mport set hello world
  $bin/redis-cli -p $((mport + 2)) get hello
  $bin/redis-cli -p $mport info replication        # replicas via=nickv, and nickv:
  $bin/redis-cli -p $nkport info replicas           # what Nic-KV sends to whom
  $bin/redis-cli -p $mport wait 3 1000              # acknowledged by all three
  $bin/redis-benchmark -p $mport -q -t set -n 100000
  $bin/redis-cli -p $nkport info failover           # Nic-KV's probes of every node
  $bin/redis-cli -p $nkport sentinel get-master-addr-by-name mymaster   # clients find the master
  $bin/redis-cli -p $nkport config set min-slaves 3 # then kill -STOP a replica: -NOREPLICAS
Fail over (Nic-KV replaces a master that dies or hangs):
  kill -9 ${pids[0]}                               # the master
  $bin/redis-cli -p $nkport info failover | grep -E '^(failovers|last_failover|master):'
  $bin/redis-cli -p $nkport sentinel get-master-addr-by-name mymaster   # a replica, now master
$( [ -n "$rdma_addr" ] && echo "  $bin/redis-cli --rdma -h $rdma_addr -p $rport ping            # the master, over RDMA
  $bin/redis-cli --rdma -h $rdma_addr -p $nkrport info rdma       # Nic-KV's zero-copy counters" )
Measure and watch (the benchmarks start nodes of their own, a few minutes each):
  $bin/redis-cli -p $nkport --stat                  # Nic-KV's memory, clients, commands, every second
  $bin/redis-cli -p $nkport info sentinel           # the master it follows, and its failover state
  $top/utils/nickv-bench.sh       # master CPU per write, direct vs Nic-KV
  $top/utils/failover-bench.sh    # what a client sees through failovers
  (their plots, in $top/build/: nickv-bench/cpu-per-write.png, failover-bench/throughput.png)
Ctrl-C stops everything.
EOT
wait

#!/usr/bin/env bash
# rdma-bench.sh -- redis-benchmark over TCP and over RDMA, side by side.
#
#   utils/rdma-bench.sh [options]
#     --host ADDR        the server's address, used for both TCP and RDMA
#                        (default: start a server of our own on --bind)
#     --port P           its TCP port (default 6379 / ours: 7379)
#     --rdma-port R      its rdma-port (default 6380 / ours: 7380)
#     --bind ADDR        address of an RDMA device, for the server this
#                        script starts (default 10.77.0.1, the VM's)
#     --clients "1 4 8 16"   client counts (the SKV paper's Fig. 10)
#     --tests set,get    redis-benchmark tests
#     -n N               requests per run (default 100000)
#     -P N               pipeline depth (default 1)
#     --vm               run the whole thing inside the Soft-RoCE VM
#                        (utils/rdma-vm.sh): for machines without RDMA
#
# Prints one table: for each test and client count, ops/s, p50 and p99 in
# ms over TCP and over RDMA, and the RDMA/TCP throughput ratio. Both
# transports hit the same server in the same run, alternately.
#
# On real hardware: start SKV with rdma-port and rdma-bind on the NIC's
# address, run this from another host with --host <that address>
# (redis-benchmark from this build has --rdma). Under Soft-RoCE (--vm) all
# of it is software on one machine: the numbers say the code works, not how
# fast RDMA is.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/build/redis/src"
host="" port="" rport="" bind=10.77.0.1
clients="1 4 8 16" tests="set,get" n=100000 pipeline=1 vm=0

while [ $# -gt 0 ]; do
    case "$1" in
        --host) host=$2; shift 2 ;;
        --port) port=$2; shift 2 ;;
        --rdma-port) rport=$2; shift 2 ;;
        --bind) bind=$2; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        --tests) tests=$2; shift 2 ;;
        -n) n=$2; shift 2 ;;
        -P) pipeline=$2; shift 2 ;;
        --vm) vm=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "rdma-bench: unknown option $1" >&2; exit 2 ;;
    esac
done

[ -x "$bin/redis-benchmark" ] || { echo "rdma-bench: build SKV first (make)" >&2; exit 1; }

if [ $vm = 1 ]; then
    "$top/utils/setup-deps.sh" vm
    exec "$top/utils/rdma-vm.sh" "$top/utils/rdma-bench.sh" --clients "$clients" \
        --tests "$tests" -n "$n" -P "$pipeline"
fi

server_pid=""
cleanup() { [ -n "$server_pid" ] && "$bin/redis-cli" -p "$port" shutdown nosave >/dev/null 2>&1 || true; }
trap cleanup EXIT
if [ -z "$host" ]; then
    host=$bind port=${port:-7379} rport=${rport:-7380}
    dir=$(mktemp -d)
    "$bin/redis-server" --port "$port" --bind "$bind 127.0.0.1" --rdma-port "$rport" --rdma-bind "$bind" \
        --protected-mode no --save '' --appendonly no --dir "$dir" --logfile "$dir/server.log" --daemonize yes
    server_pid=started
    for _ in $(seq 50); do "$bin/redis-cli" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
    if [ "$("$bin/redis-cli" -p "$port" info rdma | tr -d '\r' | sed -n 's/^rdma_listener://p')" != on ]; then
        echo "rdma-bench: the server has no RDMA listener:" >&2
        "$bin/redis-cli" -p "$port" info rdma | grep rdma_listener >&2
        echo "(no RDMA device for $bind here? try --vm)" >&2
        exit 1
    fi
else
    port=${port:-6379} rport=${rport:-6380}
fi

# run <transport> <clients>: "test rps p50 p99" lines
run() {
    local flags=(-h "$host" -p "$port")
    [ "$1" = rdma ] && flags=(--rdma -h "$host" -p "$rport")
    "$bin/redis-benchmark" "${flags[@]}" -c "$2" -n "$n" -P "$pipeline" -t "$tests" --csv 2>/dev/null |
        tr -d '"' | awk -F, 'NR > 1 { print $1, $2, $5, $7 }'
}

printf '%-12s %7s | %12s %8s %8s | %12s %8s %8s | %6s\n' test clients "tcp ops/s" "p50 ms" "p99 ms" \
    "rdma ops/s" "p50 ms" "p99 ms" "ratio"
for c in $clients; do
    tcp=$(run tcp "$c")
    rdma=$(run rdma "$c")
    while read -r t rps p50 p99; do
        read -r _ rrps rp50 rp99 <<<"$(grep "^$t " <<<"$rdma" || echo "$t 0 - -")"
        ratio=$(awk -v a="$rrps" -v b="$rps" 'BEGIN { printf (b > 0 ? "%.2f" : "-"), a / b }')
        printf '%-12s %7s | %12s %8s %8s | %12s %8s %8s | %6s\n' "$t" "$c" "$rps" "$p50" "$p99" \
            "$rrps" "$rp50" "$rp99" "$ratio"
    done <<<"$tcp"
done
echo "(n=$n per run, pipeline $pipeline, server $host tcp:$port rdma:$rport)"

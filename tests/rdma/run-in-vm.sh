#!/usr/bin/env bash
# run-in-vm.sh -- SKV's RDMA test suite; runs inside the Soft-RoCE VM.
#
#   utils/rdma-vm.sh tests/rdma/run-in-vm.sh      (what `make test` does)
#   utils/rdma-vm.sh env SKV_RDMA_UPSTREAM=0 tests/rdma/run-in-vm.sh
#                                                   (SKV's RDMA tests only)
#   utils/rdma-vm.sh env SKV_RDMA_UPSTREAM=0 SKV_RDMA_TESTS=nickv tests/rdma/run-in-vm.sh
#                                                   (one file of them)
#   ... SKV_RDMA_ONLY="/listener" ...                (tests matching a regex)
#
# 1. SKV's RDMA tests (tests/rdma/*.tcl) in upstream's harness: redis-cli,
#    redis-benchmark and the async API over RDMA, replication over RDMA,
#    bad peers, memlock, AUTH/ACL/protected mode, maxclients.
# 2. A representative part of upstream's own suite with every client
#    command carried over RDMA: the harness talks TCP to skv-rdma-tool's
#    proxy on loopback, which opens one RDMA connection to the server per
#    harness connection.
#
# The output is upstream's harness output ([ok]/[err] lines), twice.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
tree="$top/build/redis"
cd "$tree" || exit 1
ln -sfn "$top/tests" "$tree/tests/skv"
# The harness puts unix sockets in tests/tmp, which the host's shared
# filesystem cannot hold: give it a tmpfs of the guest's own.
mkdir -p "$tree/tests/tmp"
mount -t tmpfs -o size=1500m skv-tests "$tree/tests/tmp" || exit 1
status=0

# ------------------------------------------------------ SKV's RDMA tests ---
# (SKV_RDMA_TESTS="nickv basic" runs only those files.) One harness run per
# file: an exception (a Tcl error outside an assertion) ends its harness
# run, and would otherwise take the files after it along.
only=()
# (SKV_RDMA_ONLY="/regex" runs only the tests whose names match.)
[ -n "${SKV_RDMA_ONLY:-}" ] && only=(--only "$SKV_RDMA_ONLY")
echo "=== SKV RDMA tests"
nfile=0
for f in "$top"/tests/rdma/*.tcl; do
    name=$(basename "$f" .tcl)
    if [ -n "${SKV_RDMA_TESTS:-}" ] && [[ " $SKV_RDMA_TESTS " != *" $name "* ]]; then continue; fi
    # Ports of its own (27000 + 100 per file), and no daemon left behind
    # by the file before, whatever happened to it.
    pkill -9 -f '^src/(nic-kv|skv-rdma-tool) ' 2>/dev/null
    SKV_RDMA_PORT_BASE=$((27000 + 100 * nfile)) \
        ./runtest --clients 1 --timeout 1800 --single "skv/rdma/$name" "${only[@]}" || status=1
    nfile=$((nfile + 1))
done

# ------------------------------------- upstream's suite, through RDMA ---
# (SKV_RDMA_UPSTREAM=0 skips it, for a quicker loop while developing.)
[ "${SKV_RDMA_UPSTREAM:-1}" = 0 ] && exit $status
# Two groups run side by side (the VM has two CPUs), each with its own
# server and proxy. unit/protocol goes first in its group: in external
# mode, a unit that raises a config (proto-max-bulk-len) leaves it raised.
groups=("unit/protocol unit/type/zset unit/pubsub unit/multi"
        "unit/type/string unit/type/list unit/type/hash unit/type/set unit/scripting")
work="$tree/tests/tmp/rdma-upstream"
mkdir -p "$work"
echo "=== upstream units over RDMA: ${groups[*]}"
pids=()
for g in 0 1; do
    rport=$((26990 + g)) tport=$((26980 + g)) pport=$((26970 + g))
    src/redis-server --port "$tport" --bind 127.0.0.1 --rdma-port "$rport" --rdma-bind 10.77.0.1 \
        --protected-mode no --enable-debug-command yes --save '' --dir "$work" \
        --logfile "$work/server$g.log" --daemonize yes
    src/skv-rdma-tool proxy "$pport" 10.77.0.1 "$rport" > "$work/proxy$g.log" 2>&1 &
    for _ in $(seq 50); do
        src/redis-cli -p "$pport" ping 2>/dev/null | grep -q PONG && break
        sleep 0.2
    done
    single=()
    for u in ${groups[$g]}; do single+=(--single "$u"); done
    ./runtest --host 127.0.0.1 --port "$pport" --baseport $((22000 + g * 1000)) --tags -slow \
        --timeout 1800 "${single[@]}" > "$work/runtest$g.log" 2>&1 &
    pids+=($!)
done
for g in 0 1; do
    wait "${pids[$g]}" || status=1
    echo "=== group $g: ${groups[$g]}"
    cat "$work/runtest$g.log"
    # Every command above came over RDMA: the only TCP client of these
    # servers is this script.
    src/redis-cli -p $((26980 + g)) info rdma | grep -E "listener:|errors_[a-z_]*:[1-9]"
    src/redis-cli -p $((26980 + g)) shutdown nosave > /dev/null 2>&1
done
pkill -f "skv-rdma-tool proxy" 2>/dev/null
exit $status

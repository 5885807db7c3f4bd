#!/usr/bin/env bash
# failover-bench.sh -- a client's view of Nic-KV's failovers: throughput in
# 100 ms buckets through a replica crash and a master crash, and the window
# from a master's kill -9 to the first write its successor acknowledges
# (median and max of --runs). Prints a table; the buckets and a plot go to
# build/failover-bench/ (throughput.csv, throughput.png). With --coordinator
# also whole-server losses: Nic-KVs coordinated through etcd beside
# Sentinel (down-after 1000 and 200 ms), a table in server.csv. With
# --detect also detection beside Sentinel: kill -9, SIGSTOP 2 s and DEBUG
# SLEEP 0.3/1/3 s of the master (failovers, fault to first acknowledged
# write, longest pause, the client's NOREPLICAS/READONLY/MASTERDOWN, in
# detect.csv), and Nic-KV's lease-time 500/300/200/150 ms (a healthy
# master's refused commands with and without redis-benchmark beside it,
# and the kill -9 window, in lease.csv).
#
#   utils/failover-bench.sh [--runs 10] [--port 26379] [--coordinator] [--detect]
#                           [--coord-configs 2/500,1/300] (leader-ttl s/lease-time ms)
#                           [--faults kill,stop,sleep-0.3,sleep-1,sleep-3]
#                           [--lease-times 500,300,200,150] [--steady 30] [--load-clients 4]
#                           [--wait-cmd CMD] (run and waited for before each detect/lease run)
#                           [--scenarios replica,master,failback,server,nickv,detect,lease,kills,mixed]
#                           [--kills 10] [--faults-per-run 21] [--seed 1] (kills, mixed)
#
# Needs a build (make; or SKV_BIN=<a build's bin directory>, e.g. the main
# tree's from a worktree), redis-py (utils/setup-deps.sh test installs it
# into build/pyclients; SKV_PYTHON names another python with it) and, for
# the whole-server scenarios, Debian's etcd-server and etcd-client; installs
# gnuplot-nox for the plot when apt can. The machine is shared: quote the
# ratio and the window, which a noisy neighbour moves less than absolute
# throughput. See failover-bench.py.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
export SKV_BIN=${SKV_BIN:-$top/build/bin}
py=${SKV_PYTHON:-$top/build/pyclients/bin/python3}
[ -x "$SKV_BIN/nic-kv" ] || { echo "failover-bench: build SKV first: make (or set SKV_BIN)" >&2; exit 1; }
[ -x "$py" ] || "$top/utils/setup-deps.sh" test
if ! command -v gnuplot >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q gnuplot-nox >/dev/null 2>&1 || echo "failover-bench: no gnuplot: no plot" >&2
fi
exec "$py" "$top/utils/failover-bench.py" "$@"

#!/usr/bin/env bash
# failover-bench.sh -- a client's view of Nic-KV's failovers: throughput in
# 100 ms buckets through a replica crash and a master crash, and the window
# from a master's kill -9 to the first write its successor acknowledges
# (median and max of --runs). Prints a table; the buckets and a plot go to
# build/failover-bench/ (throughput.csv, throughput.png).
#
#   utils/failover-bench.sh [--runs 10] [--port 26379]
#
# Needs a build (make) and redis-py (utils/setup-deps.sh test installs it
# into build/pyclients); installs gnuplot-nox for the plot when apt can.
# The machine is shared: quote the ratio and the window, which a noisy
# neighbour moves less than absolute throughput. See failover-bench.py.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$top/build/bin/nic-kv" ] || { echo "failover-bench: build SKV first: make" >&2; exit 1; }
[ -x "$top/build/pyclients/bin/python3" ] || "$top/utils/setup-deps.sh" test
if ! command -v gnuplot >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q gnuplot-nox >/dev/null 2>&1 || echo "failover-bench: no gnuplot: no plot" >&2
fi
exec "$top/build/pyclients/bin/python3" "$top/utils/failover-bench.py" "$@"

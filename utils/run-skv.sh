#!/usr/bin/env bash
# run-skv.sh -- start SKV's main job on this machine, in the foreground.
#
# Today that is one SKV server (redis-server with SKV's redis.conf) on
# 127.0.0.1:6379, its data in build/run/. Ctrl-C stops it cleanly (SIGINT
# makes redis-server save and exit, as upstream).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/build/bin"
run="$top/build/run"
port=${SKV_PORT:-6379}

[ -x "$bin/redis-server" ] || { echo "run-skv: build SKV first: make" >&2; exit 1; }
mkdir -p "$run"
cd "$run"

cat <<EOT
SKV $("$bin/redis-server" --version | sed 's/.*skv=//') (upstream Redis $("$bin/redis-server" --version | sed 's/.* v=\([^ ]*\).*/\1/'))
  server  127.0.0.1:$port   config $top/redis.conf   data $run
Try, in another terminal:
  $bin/redis-cli -p $port ping
  $bin/redis-cli -p $port info server | grep -E 'redis_version|skv_version'
  $bin/redis-benchmark -p $port -q -t set,get -n 100000
Ctrl-C stops it.
EOT
exec "$bin/redis-server" "$top/redis.conf" --port "$port" --dir "$run"

# lib.sh -- shell helpers shared by the utils scripts (sourced, not run).
#
#   top=$(cd "$(dirname "$0")/.." && pwd)
#   bin="$top/build/redis/src"          # where redis-cli is
#   . "$top/utils/lib.sh"
#
# A script that probes ports which may be closed sets cli_quiet=1 first, so
# that cli's "Could not connect" messages go nowhere.

# cli PORT ARGS...: redis-cli to 127.0.0.1:PORT.
cli() {
    if [ "${cli_quiet:-0}" = 1 ]; then
        "$bin/redis-cli" -p "$1" "${@:2}" 2>/dev/null
    else
        "$bin/redis-cli" -p "$1" "${@:2}"
    fi
}

# field PORT SECTION NAME: the value of one INFO field; empty if the field
# is absent or the server does not answer (yet).
field() { cli "$1" info "$2" 2>/dev/null | tr -d '\r' | sed -n "s/^$3://p"; }

# cpu PORT [DECIMALS]: the server's CPU seconds so far, user + system
# (INFO cpu), with DECIMALS decimals (6).
cpu() {
    cli "$1" info cpu | tr -d '\r' |
        awk -F: -v d="${2:-6}" '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%." d "f", s }'
}

# median: the median of the numbers on stdin, one a line.
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# record_run RESULTS REPLICAS MODE PIPELINE CPU0 CPU1 SENDS0 SENDS1 WRITES OPS:
# one run's line, for print_medians: CPU seconds per million writes and
# stream sends per write from the counters read before and after.
record_run() {
    awk -v n="$2" -v m="$3" -v p="$4" -v c0="$5" -v c1="$6" -v w0="$7" -v w1="$8" -v w="$9" -v rps="${10:-0}" \
        'BEGIN { printf "%s %s %s %.3f %.4f %s\n", n, m, p, (c1 - c0) * 1e6 / w, (w1 - w0) / w, rps }' >> "$1"
}

# start_idle_loops: one SCHED_IDLE busy loop on each core of rest_cpu's
# (cores 1 and up, when the script pins), their pids added to idle_pids:
# they keep those cores equally busy in every mode compared, and yield to
# any real work there.
start_idle_loops() {
    [ ${#rest_cpu[@]} -gt 0 ] && command -v chrt >/dev/null || return 0
    for c in $(seq 1 $(($(nproc) - 1))); do
        chrt -i 0 taskset -c "$c" bash -c 'while :; do :; done' &
        idle_pids+=($!)
    done
}

# print_medians RESULTS MEDIANS: RESULTS has a line per run, "replicas mode
# pipeline cpu-s/1M-writes sends/write ops/s"; prints the table of their
# medians per (replicas, mode, pipeline) and appends "replicas mode
# pipeline cpu ops/s sends" lines of those medians to MEDIANS (sends last,
# so that readers of the first five columns need not change).
print_medians() {
    local n m p c s r
    printf '%-9s %-7s %-9s %18s %13s %12s\n' replicas mode pipeline "cpu-s/1M writes" "sends/write" "ops/s"
    sort -k1,1n -k3,3n -k2,2 "$1" | awk '{ print $1, $2, $3 }' | uniq | while read -r n m p; do
        c=$(awk -v n="$n" -v m="$m" -v p="$p" '$1 == n && $2 == m && $3 == p { print $4 }' "$1" | median)
        s=$(awk -v n="$n" -v m="$m" -v p="$p" '$1 == n && $2 == m && $3 == p { print $5 }' "$1" | median)
        r=$(awk -v n="$n" -v m="$m" -v p="$p" '$1 == n && $2 == m && $3 == p { print $6 }' "$1" | median)
        printf '%-9s %-7s %-9s %18s %13s %12s\n' "$n" "$m" "$p" "$c" "$s" "$r"
        echo "$n $m $p $c $r $s" >> "$2"
    done
}

# wait_for SECONDS CONDITION...: eval CONDITION every 50 ms until it holds
# (returns 0) or SECONDS have passed (says so on stderr, returns 1).
wait_for() {
    local t=$1; shift
    for _ in $(seq $((t * 20))); do eval "$@" && return 0; sleep 0.05; done
    echo "$(basename "$0" .sh): timed out waiting for: $*" >&2
    return 1
}

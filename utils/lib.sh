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

# record_run RESULTS REPLICAS MODE PIPELINE CPU0 CPU1 SENDS0 SENDS1 WRITES OPS
#            [IO0 IO1]:
# one run's line, for print_medians: CPU seconds per million writes,
# stream sends per write, ops/s and, given the server's /proc/PID/io
# before and after (pidio's "syscw wchar"), its write syscalls and bytes
# written per write. Those two move with the code, hardly with how busy the
# machine is: beside a CPU figure, they tell a code change from noise.
record_run() {
    local io0=${11:-"0 0"} io1=${12:-"0 0"}
    awk -v n="$2" -v m="$3" -v p="$4" -v c0="$5" -v c1="$6" -v w0="$7" -v w1="$8" -v w="$9" -v rps="${10:-0}" \
        -v io0="$io0" -v io1="$io1" \
        'BEGIN { split(io0, a, " "); split(io1, b, " ")
                 printf "%s %s %s %.3f %.4f %s %.3f %.1f\n", n, m, p, (c1 - c0) * 1e6 / w, (w1 - w0) / w, rps,
                        (b[1] - a[1]) / w, (b[2] - a[2]) / w }' >> "$1"
}

# pidio PORT: "syscw wchar" of the server on PORT (its /proc/PID/io: write
# syscalls and bytes written so far), "0 0" when unreadable.
pidio() {
    local pid
    pid=$(field "$1" server process_id)
    awk '/^syscw:/ { s = $2 } /^wchar:/ { b = $2 } END { print (s ? s : 0), (b ? b : 0) }' \
        "/proc/$pid/io" 2>/dev/null || echo "0 0"
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

# print_medians RESULTS MEDIANS: RESULTS has a line per run (record_run's
# "replicas mode pipeline cpu-s/1M-writes sends/write ops/s syscw/write
# bytes/write"); prints per (replicas, mode, pipeline) the median CPU with
# its spread over the runs (min-max) and the medians of the rest, and
# appends "replicas mode pipeline cpu ops/s sends cpu-min cpu-max
# syscw/write bytes/write" lines to MEDIANS (the first six as before, so
# that readers of those need not change). A difference between two rows is
# one only when their CPU spreads do not overlap (spread_verdict).
print_medians() {
    local n m p c s r lo hi sc b
    col() { awk -v n="$n" -v m="$m" -v p="$p" -v k="$2" '$1 == n && $2 == m && $3 == p { print $k }' "$1"; }
    printf '%-9s %-7s %-9s %18s %17s %12s %10s %12s %12s\n' replicas mode pipeline "cpu-s/1M writes" "(min-max)" \
        "sends/write" "ops/s" "syscw/write" "bytes/write"
    sort -k1,1n -k3,3n -k2,2 "$1" | awk '{ print $1, $2, $3 }' | uniq | while read -r n m p; do
        c=$(col "$1" 4 | median); s=$(col "$1" 5 | median); r=$(col "$1" 6 | median)
        lo=$(col "$1" 4 | sort -n | head -n 1); hi=$(col "$1" 4 | sort -n | tail -n 1)
        sc=$(col "$1" 7 | median); b=$(col "$1" 8 | median)
        printf '%-9s %-7s %-9s %18s %17s %12s %10s %12s %12s\n' "$n" "$m" "$p" "$c" "($lo-$hi)" "$s" "$r" "${sc:-0}" "${b:-0}"
        echo "$n $m $p $c $r $s $lo $hi ${sc:-0} ${b:-0}" >> "$2"
    done
}

# spread_verdict LO1 HI1 LO2 HI2: "differs" when the ranges [LO1, HI1] and
# [LO2, HI2] do not overlap, else "within noise".
spread_verdict() {
    awk -v a="$1" -v b="$2" -v c="$3" -v d="$4" \
        'BEGIN { print (b < c || d < a) ? "differs" : "within noise" }'
}

# wait_for SECONDS CONDITION...: eval CONDITION every 50 ms until it holds
# (returns 0) or SECONDS have passed (says so on stderr, returns 1).
wait_for() {
    local t=$1; shift
    for _ in $(seq $((t * 20))); do eval "$@" && return 0; sleep 0.05; done
    echo "$(basename "$0" .sh): timed out waiting for: $*" >&2
    return 1
}

#!/usr/bin/env bash
# nickv-bench.sh -- the master's CPU per write, direct vs through Nic-KV.
#
#   utils/nickv-bench.sh [--replicas "0 1 3 8"] [--writes 200000] [--rounds 5]
#                        [--clients 16] [--pipelines "1 16"] [--no-pin]
#                        [--port PORT]
#
# Each round, for each replica count, starts a master and that many
# replicas on loopback and measures them directly on the master, then
# behind Nic-KV (the master hands them over); --rounds rounds, medians.
# The rounds are the outer loop, so that slow drift of a shared machine
# hits every replica count alike. Each run is redis-benchmark SET with
# --clients clients, random keys, with and without pipelining. It reads
# from the master, before and after:
#   INFO cpu      used_cpu_sys + used_cpu_user  -> CPU seconds per 1M writes
#   INFO nickv    repl_stream_writes            -> stream writes per write
#   /proc/PID/io  syscw, wchar                  -> write syscalls and bytes
#                                                  written per write
# and prints one table of medians, with the CPU figure's spread over the
# rounds (min-max; 5 rounds at least for a claim),  then the ratio the target is about: the
# master's CPU per write with N replicas behind Nic-KV over its CPU per write
# with one direct replica. Mode "spin" is a control: one direct replica
# while a busy loop occupies the replicas' cores (see below). The medians
# also go to build/nickv-bench/cpu-per-write.csv and, drawn with gnuplot
# (gnuplot-nox is installed when missing and apt can), to
# build/nickv-bench/cpu-per-write.png: CPU seconds per 1M writes against
# the replica count, direct and through Nic-KV, a panel per pipeline
# setting.
#
# Placement: the master and redis-benchmark run on core 0 (the "host"), the
# replicas and Nic-KV on the other cores (standing in for the replicas'
# machines and the DPU's own ARM cores). Without that, on a small machine
# the replicas and Nic-KV preempt the master and change how many commands
# it handles per event-loop turn, which moves its CPU per write more than
# the fan-out itself does. Those other cores are also kept busy in every
# mode by a SCHED_IDLE busy loop, which the replicas and Nic-KV preempt
# whenever they have work: how busy the rest of the machine is changes the
# master's CPU seconds per write here (measured: +26% when a loop competes
# on core 1, the "spin" control), so it must not differ between the modes
# compared. --no-pin lets the scheduler place everything, with no busy loop.
# --port is the master's port (Nic-KV takes the next, the replicas those
# after it; at the end the script shuts down whatever answers on PORT to
# PORT + 20); by default a random one from 17000 up.
# The machine is shared, so absolute numbers vary from run to run; the runs
# alternate so that noise hits both sides alike, and medians are quoted.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/build/redis/src"
. "$top/utils/lib.sh"
replica_counts="0 1 3 8" writes=200000 rounds=5 clients=16 pipelines="1 16" pin=1
base=$((17000 + RANDOM % 1000 * 10))
while [ $# -gt 0 ]; do
    case "$1" in
        --replicas) replica_counts=$2; shift 2 ;;
        --writes) writes=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        --pipelines) pipelines=$2; shift 2 ;;
        --no-pin) pin=0; shift ;;
        --port) base=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "nickv-bench: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -x "$bin/nic-kv" ] || { echo "nickv-bench: build SKV first (make)" >&2; exit 1; }
if ! command -v gnuplot >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q gnuplot-nox >/dev/null 2>&1 || echo "nickv-bench: no gnuplot: no plot" >&2
fi

host_cpu=() rest_cpu=()
if [ "$pin" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    host_cpu=(taskset -c 0) rest_cpu=(taskset -c "1-$(($(nproc) - 1))")
fi
idle_pids=()

mport=$base nkport=$((base + 1))
work=$(mktemp -d)
results="$work/results"
: > "$results"
nk_pid=""

cleanup() {
    [ -n "$nk_pid" ] && kill "$nk_pid" 2>/dev/null || true
    [ ${#idle_pids[@]} -gt 0 ] && kill "${idle_pids[@]}" 2>/dev/null || true
    for p in $(seq "$mport" $((mport + 20))); do cli "$p" shutdown nosave >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT

start_server() { # port [replicaof-port]
    local args=(--port "$1" --bind 127.0.0.1 --save '' --appendonly no --dir "$work"
                --dbfilename "dump-$1.rdb" --logfile "$work/$1.log" --daemonize yes
                --repl-diskless-sync-delay 0)
    local pin=("${host_cpu[@]}")
    if [ $# -ge 2 ]; then args+=(--replicaof 127.0.0.1 "$2"); pin=("${rest_cpu[@]}"); fi
    "${pin[@]}" "$bin/redis-server" "${args[@]}"
    wait_for 10 'cli '"$1"' ping >/dev/null 2>&1'
}

measure() { # replicas mode pipeline
    local c0 c1 w0 w1 io0 io1 out rps
    c0=$(cpu "$mport"); w0=$(field "$mport" nickv repl_stream_writes); io0=$(pidio "$mport")
    out=$("${host_cpu[@]}" "$bin/redis-benchmark" -p "$mport" -t set -n "$writes" -c "$clients" -P "$3" -r 100000 --csv 2>/dev/null)
    c1=$(cpu "$mport"); w1=$(field "$mport" nickv repl_stream_writes); io1=$(pidio "$mport")
    rps=$(echo "$out" | tr -d '"' | awk -F, 'NR == 2 { print $2 }')
    record_run "$results" "$1" "$2" "$3" "$c0" "$c1" "$w0" "$w1" "$writes" "$rps" "$io0" "$io1"
}

# The stream reaches all n replicas: a write that WAIT sees acknowledged by
# n. A replica listed online may not get the stream yet: after a diskless
# sync the master starts it on the replica's first ACK, and a run measured
# before that (it happened after a round without replicas) costs the master
# no fan-out at all: 0 sends and 5 bytes written per write.
stream_flows() { # replicas
    [ "$1" = 0 ] && return 0
    wait_for 60 'cli $mport set nickv-bench:barrier 1 >/dev/null && [ "$(cli $mport wait '"$1"' 1000)" = '"$1"' ]'
}

# One SCHED_IDLE busy loop per core of the replicas' (see "Placement").
start_idle_loops

# Rounds outside, replica counts inside: each round brings every replica
# count up afresh, so that slow drift of this shared machine hits all of
# them alike (the target compares one count with another).
for round in $(seq 1 "$rounds"); do
    for n in $replica_counts; do
        start_server "$mport"
        for i in $(seq 1 "$n"); do start_server $((mport + 1 + i)) "$mport"; done
        wait_for 60 '[ "$(cli $mport info replication | grep -c "^slave.*state=online")" = '"$n"' ]'
        # Direct: no Nic-KV, every replica on the master.
        stream_flows "$n"
        for p in $pipelines; do measure "$n" direct "$p"; done
        if [ "$n" != 0 ]; then
            # Control (pinned runs, one replica): direct again, with a
            # busy loop competing on the replicas' cores. It shows how much
            # of the master's CPU per write moves just because those cores
            # are busier, with no change in fan-out.
            if [ "$n" = 1 ] && [ ${#rest_cpu[@]} -gt 0 ]; then
                "${rest_cpu[@]}" bash -c 'while :; do :; done' &
                spin_pid=$!
                for p in $pipelines; do measure "$n" spin "$p"; done
                kill "$spin_pid"; wait "$spin_pid" 2>/dev/null || true
            fi
            # Through Nic-KV: the master hands the replicas over.
            "${rest_cpu[@]}" "$bin/nic-kv" --port "$nkport" --master-port "$mport" --logfile "$work/nickv.log" \
                --state-file "$work/nickv.state" &
            nk_pid=$!
            wait_for 60 '[ "$(field $mport nickv nickv_replicas)" = '"$n"' ]'
            sleep 1
            stream_flows "$n"
            for p in $pipelines; do measure "$n" nickv "$p"; done
            kill "$nk_pid"; wait "$nk_pid" 2>/dev/null || true; nk_pid=""
        fi
        for p in $(seq "$mport" $((mport + 1 + n))); do cli "$p" shutdown nosave >/dev/null 2>&1 || true; done
        sleep 1
    done
done

# Medians per (replicas, mode, pipeline).
print_medians "$results" "$work/medians"
echo
# Each ratio with what the spreads say: a difference is one only when the
# two rows' CPU ranges over the rounds do not overlap.
ratio_lines() { # pipeline floor-replicas floor-mode select-awk-condition label
    local row
    row=$(awk -v p="$1" -v n="$2" -v m="$3" '$1 == n && $2 == m && $3 == p' "$work/medians")
    [ -n "$row" ] || return 0
    set -- "$1" "$row" "$4" "$5"
    awk -v p="$1" "\$3 == p && ($3)" "$work/medians" |
    while read -r n m _ c _ _ lo hi _ _; do
        read -r _ _ _ fc _ _ flo fhi _ _ <<< "$2"
        printf "pipeline %-3s %d replicas %-6s: CPU per write %+.1f%% vs %s (%s)\n" "$1" "$n" "$m" \
            "$(awk -v a="$c" -v b="$fc" 'BEGIN { print (a / b - 1) * 100 }')" "$4" \
            "$(if [ "$rounds" -ge 5 ]; then spread_verdict "$flo" "$fhi" "$lo" "$hi"
               else echo "fewer than 5 rounds: no verdict"; fi)"
    done
}
for p in $pipelines; do
    ratio_lines "$p" 1 direct '$1 > 0 && !($1 == 1 && $2 == "direct")' "1 direct replica"
    # Through Nic-KV the master's work is the same for any N (one link):
    # what N still changes is only what else runs on this machine.
    ratio_lines "$p" 1 nickv '$1 > 1 && $2 == "nickv"' "1 replica behind Nic-KV"
done
if [ ${#host_cpu[@]} -gt 0 ]; then where="master and benchmark on core 0, replicas and Nic-KV on cores 1-$(($(nproc) - 1)), kept busy by a SCHED_IDLE loop"
else where="no pinning"; fi
echo "($writes writes per run, $clients clients, $rounds rounds, medians with the CPU's min-max; $where)"

# The medians as CSV, and drawn. A panel per pipeline setting, each with
# its own y axis from 0: pipelined writes cost the master several times
# less CPU, so on one axis their lines would lie flat at the bottom. The
# "spin" control is in the CSV only.
out="$top/build/nickv-bench"
mkdir -p "$out"
csv="$out/cpu-per-write.csv" png="$out/cpu-per-write.png"
{
    echo "replicas,mode,pipeline,cpu_s_per_1M_writes,stream_sends_per_write,ops_per_s,cpu_min,cpu_max,write_syscalls_per_write,bytes_written_per_write"
    awk '{ print $1 "," $2 "," $3 "," $4 "," $6 "," $5 "," $7 "," $8 "," $9 "," $10 }' "$work/medians"
} > "$csv"
if command -v gnuplot >/dev/null; then
    npanels=$(echo $pipelines | wc -w)
    xtics=$(echo $replica_counts | tr ' ' '\n' | sort -n | paste -sd, -)
    xmax=$(echo $replica_counts | tr ' ' '\n' | sort -n | tail -n 1)
    {
        cat <<EOT
set terminal pngcairo size $((npanels > 1 ? 500 * npanels : 900)),440
set output '$png'
set datafile separator ','
set datafile missing NaN
# One series: the CPU column of the rows of mode m and pipeline p, NaN (a
# missing point, which the line skips) elsewhere.
sel(m, p) = (strcol(2) eq m && column(3) == p) ? column(4) : NaN
set multiplot layout 1,$npanels title "The master's CPU per write: redis-benchmark SET, $clients clients, TCP on loopback; medians of $rounds rounds"
set key bottom right
set xlabel 'replicas'
set ylabel 'master CPU seconds per 1M writes'
set xrange [-0.5:$xmax + 0.5]
set xtics ($xtics)
set yrange [0:*]
set grid ytics
EOT
        for p in $pipelines; do
            if [ "$p" = 1 ]; then echo "set title 'no pipelining'"; else echo "set title 'pipeline $p (-P $p)'"; fi
            echo "plot '$csv' every ::1 using 1:(sel('direct', $p)) with linespoints lw 2 pt 7 title 'direct', \\"
            echo "     '$csv' every ::1 using 1:(sel('nickv', $p)) with linespoints lw 2 pt 5 title 'through Nic-KV'"
        done
        echo "unset multiplot"
    } | gnuplot && echo "medians: $csv; plot: $png" ||
        echo "medians: $csv; no plot (gnuplot failed)"
else
    echo "medians: $csv; no plot (no gnuplot)"
fi

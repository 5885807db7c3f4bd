#!/usr/bin/env bash
# check-model.sh -- check the fencing protocol's model (model/fencing.pml) with spin.
#
#   utils/check-model.sh              the model as main has it: every
#                                     configuration below must pass
#   utils/check-model.sh --mutations  each mutation (a bug SKV once had, put
#                                     back into the model) must be caught:
#                                     spin reports a violation and a trail
#   utils/check-model.sh --all        both
#   --model FILE                      another model file (the tests use it)
#
# Configurations (DESIGN.md, "The model", says what each covers):
#   small   3 nodes, 1 write, 2 faults: exhaustive, safety (assertions)
#   live    3 nodes, 1 write, 1 fault: exhaustive, the LTL claim `live`
#           under weak fairness (a master is named once the faults stop)
#   large   4 nodes (3 replicas), 1 write, 2 faults: bit-state (-DBITSTATE),
#           safety; a bit-state search may miss states, pan's hash factor
#           says how likely: it is printed
# Mutations run on the small configuration, but MUT_RESUME_AFTER_LAPSE: 3
# nodes, 1 write, 4 faults, bit-state (-w30).
#
# Prints a table (config, states, time, result) and exits non-zero when a
# configuration fails or a mutation is not caught. Two jobs at a time
# (SKV_MODEL_JOBS). Work files, and the trails of what failed, go to
# build/check-model/ (a trail replays with: spin -t -p <flags> fencing.pml,
# in that directory).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
model="$top/model/fencing.pml"
work="$top/build/check-model"
jobs=${SKV_MODEL_JOBS:-2}
mode=main

while [ $# -gt 0 ]; do
    case $1 in
        --mutations) mode=mutations ;;
        --all) mode=all ;;
        --model) model=$2; shift ;;
        *) echo "usage: check-model.sh [--mutations|--all] [--model FILE]" >&2; exit 2 ;;
    esac
    shift
done

command -v spin >/dev/null || { echo "check-model: spin is not installed (apt-get install spin; utils/setup-deps.sh test)" >&2; exit 2; }
command -v cc >/dev/null || { echo "check-model: no C compiler (cc)" >&2; exit 2; }
[ -r "$model" ] || { echo "check-model: no model at $model" >&2; exit 2; }

small="-DNODES=3 -DMAXW=1 -DFAULTS=2"
live="-DNODES=3 -DMAXW=1 -DFAULTS=1"
large="-DNODES=4 -DMAXW=1 -DFAULTS=2"
mutations="MUT_GRANT_ANY_HOLDER MUT_WINDOW_FROM_NOW MUT_STALE_MEMBER MUT_COUNT_BEFORE_RECORD MUT_ROLLBACK_NO_BUMP"
# MUT_RESUME_AFTER_LAPSE needs four faults, the small configuration has two
# (DESIGN.md, "The model"): it runs with four, bit-state.
lapse="-DNODES=3 -DMAXW=1 -DFAULTS=4"

# One run, in a directory of its own: name, spin's flags, the C flags for
# pan, pan's flags. Writes <dir>/out (pan's output) and <dir>/secs.
run_one() {
    local name=$1 sflags=$2 cflags=$3 pflags=$4 dir="$work/$1" start
    rm -rf "$dir" && mkdir -p "$dir" && cp "$model" "$dir/fencing.pml"
    start=$(date +%s%N)
    (
        cd "$dir" || exit 1
        # shellcheck disable=SC2086
        spin $sflags -a fencing.pml > spin.out 2>&1 || { cat spin.out; exit 1; }
        # shellcheck disable=SC2086
        cc -O2 -w $cflags -o pan pan.c || exit 1
        # shellcheck disable=SC2086
        ./pan $pflags
    ) > "$dir/out" 2>&1
    echo "$?" > "$dir/status"
    echo $(( ($(date +%s%N) - start) / 1000000 )) > "$dir/secs"
    echo "$sflags" > "$dir/flags"
}

# What a run found: "ok", or the violation; and its states, stored.
verdict() {
    local out="$work/$1/out"
    if grep -q 'assertion violated' "$out"; then
        echo "violated: $(grep -m1 -o 'assertion violated.*' "$out" | sed 's/ (at depth.*//' | cut -c1-70)"
    elif grep -q 'acceptance cycle' "$out"; then
        echo "violated: acceptance cycle (liveness)"
    elif grep -q 'max search depth too small' "$out"; then
        echo "incomplete: depth limit reached"
    elif grep -q 'errors: 0' "$out"; then
        echo ok
    else
        echo "error: $(grep -v '^$' "$out" | tail -1 | cut -c1-70)"
    fi
}
states() { grep -m1 -o '[0-9.e+]* states, stored' "$work/$1/out" | awk '{printf "%d", $1}'; }
secs() { local ms; ms=$(cat "$work/$1/secs"); printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)); }

export -f run_one
export model work

mkdir -p "$work"
failures=0
runs=()
[ "$mode" != mutations ] && runs+=(
    "small|$small|-DSAFETY -DNOCLAIM -DMEMLIM=8192|-m1000000"
    "live|$live|-DNFAIR=3 -DMEMLIM=8192|-m1000000 -a -f -N live"
    "large|$large|-DSAFETY -DNOCLAIM -DBITSTATE|-m1000000 -w24"
)
[ "$mode" != main ] && runs+=(
    "MUT_RESUME_AFTER_LAPSE|$lapse -DMUT_RESUME_AFTER_LAPSE|-DSAFETY -DNOCLAIM -DBITSTATE|-m1000000 -w30"
)
[ "$mode" != main ] && for m in $mutations; do
    runs+=("$m|$small -D$m|-DSAFETY -DNOCLAIM -DMEMLIM=8192|-m1000000")
done

printf '%s\n' "${runs[@]}" |
    xargs -P "$jobs" -I{} bash -c 'IFS="|" read -r n s c p <<< "{}"; run_one "$n" "$s" "$c" "$p"'

printf '%-26s %12s %9s  %s\n' config states time result
for r in "${runs[@]}"; do
    name=${r%%|*}
    v=$(verdict "$name")
    case $name in
        MUT_*)
            # Caught: a violation, and a trail that spin replays to it.
            trail="$work/$name/fencing.pml.trail"
            if [[ $v == violated:* ]] && [ -s "$trail" ] &&
               (cd "$work/$name" && spin $(cat flags) -t fencing.pml 2>&1 | grep -q 'assertion violated'); then
                result="caught, $v (trail ${trail#$top/})"
            else
                result="NOT CAUGHT: $v"
                failures=$((failures + 1))
            fi ;;
        *)
            result=$v
            [ "$v" = ok ] || failures=$((failures + 1)) ;;
    esac
    printf '%-26s %12s %8ss  %s\n' "$name" "$(states "$name")" "$(secs "$name")" "$result"
    if [ "$name" = large ]; then
        hf=$(grep -m1 -o 'hash factor: [0-9.e+]*' "$work/large/out")
        [ -n "$hf" ] && printf '%-26s %s\n' "" "bit-state $hf (pan: best above 100; lower, states may be missed)"
    fi
done

if [ "$failures" = 0 ]; then
    echo "check-model: ok"
else
    echo "check-model: $failures failure(s)"
    exit 1
fi

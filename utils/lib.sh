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

# wait_for SECONDS CONDITION...: eval CONDITION every 50 ms until it holds
# (returns 0) or SECONDS have passed (says so on stderr, returns 1).
wait_for() {
    local t=$1; shift
    for _ in $(seq $((t * 20))); do eval "$@" && return 0; sleep 0.05; done
    echo "$(basename "$0" .sh): timed out waiting for: $*" >&2
    return 1
}

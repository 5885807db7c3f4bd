#!/usr/bin/env bash
# check-layers.sh -- SKV's own code keeps to nic-kv/LAYERS (its calls and its
# #includes), and no function of it runs over 100 lines.
#
#   utils/check-layers.sh [--objdir DIR] [--src DIR] [--layers FILE]
#                         [--layers-only] [--length-only] [--max N] [FILE.c ...]
#
# The layers: for each binary nic-kv/LAYERS names ([nic-kv], ...), every
# part's object file (DIR, default build/redis/src: where `make` puts them)
# is read with nm. Each symbol a part uses but does not define is looked up
# among the symbols the binary's other parts define; a part may use it when
# the part that defines it is in its own layer, in a layer its row names, or
# is named by its row, or when the symbol is one of the section's "shared"
# ones. Symbols no part defines (upstream's, libc's) are not ours to check.
# Every nic-kv/*.c must have a row. A violation is one line:
#   nickv_probe.o calls nkFailoverJoining (nickv_failover.c, layer server/failover): not allowed by nic-kv/LAYERS
#
# The headers: each part's source (under DIR of --src, default the top of
# the repository) is read for its #include "...": a header belongs to the
# part of the section whose file has its name with .c (nickv_probe.h:
# nickv_probe.c), or to the one its section's "header" line names ("-":
# every part's). A part may include the header of a part it may call, by
# the same rule as calls; headers no part owns (upstream's, libc's) are not
# checked. Every nic-kv/*.h must have an owner. A violation:
#   nickv_probe.c includes nickv_failover.h (nickv_failover.c, layer server/failover): not allowed by nic-kv/LAYERS
#
# The length: every function in nic-kv/*.c and in SKV's own src/*.c (the
# objects src/skv.mk lists; or the FILE.c given) is at most --max lines
# (100), counted from the line that names it to its closing brace at
# column 0, both included.
#
# Prints a summary, then "check-layers: ok", or the failures and exit 1.
# Run by `make check-layers`, and by `make test` (its "layers" suite).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
objdir=$top/build/redis/src
srcdir=$top
layers=$top/nic-kv/LAYERS
do_layers=1 do_length=1 max=100
files=()
while [ $# -gt 0 ]; do
    case $1 in
    --objdir) objdir=$2; shift 2 ;;
    --src) srcdir=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --layers-only) do_length=0; shift ;;
    --length-only) do_layers=0; shift ;;
    --max) max=$2; shift 2 ;;
    -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check-layers: unknown option $1" >&2; exit 2 ;;
    *) files+=("$1"); shift ;;
    esac
done
case $max in ''|*[!0-9]*) echo "check-layers: --max takes a number of lines" >&2; exit 2 ;; esac

failures=0

# ------------------------------------------------------------- Layers ---

# The rows of one section of LAYERS: "part layer may-call..." lines, comments
# and blank lines dropped; "shared" and "header" lines printed as they are.
section_rows() { # section
    awk -v want="$1" '
        { sub(/#.*/, ""); gsub(/^[ \t]+|[ \t]+$/, "") }
        $0 == "" { next }
        /^\[.*\]$/ { cur = substr($0, 2, length($0) - 2); next }
        cur == want { print }' "$layers"
}

check_section() { # section
    local sec=$1 rows part layer obj missing=0
    rows=$(section_rows "$sec")
    # part -> layer and the words of its row; object -> part.
    local tmp
    tmp=$(mktemp -d) || return 1
    printf '%s\n' "$rows" | grep -v -e '^shared ' -e '^header ' > "$tmp/rows"
    printf '%s\n' "$rows" | awk '$1 == "shared" { for (i = 2; i <= NF; i++) print $i }' > "$tmp/shared"
    printf '%s\n' "$rows" | awk '$1 == "header" { print $2, $3 }' > "$tmp/headers"
    while read -r hdr _; do
        [ -f "$srcdir/$hdr" ] || { echo "check-layers: [$sec] names header $hdr, which does not exist"; missing=1; }
    done < "$tmp/headers"
    while read -r part layer _; do
        obj=$objdir/$(basename "${part%.c}").o
        if [ ! -f "$srcdir/$part" ]; then
            echo "check-layers: [$sec] names $part, which does not exist"
            missing=1; continue
        fi
        if [ ! -f "$obj" ]; then
            echo "check-layers: [$sec] no object for $part in $objdir (build first: make)"
            missing=1; continue
        fi
        nm --defined-only -g "$obj" | awk -v p="$part" 'NF == 3 { print $3, p }' >> "$tmp/defs"
        nm -u "$obj" | awk -v o="$(basename "$obj")" '{ print o, $NF }' >> "$tmp/uses"
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$srcdir/$part" |
            awk -v p="$part" '{ print p, $1 }' >> "$tmp/incs"
    done < "$tmp/rows"
    [ "$missing" = 0 ] || { rm -rf "$tmp"; return 1; }
    touch "$tmp/defs" "$tmp/uses" "$tmp/incs"
    awk -v layersfile="${layers#$top/}" '
        FILENAME == ARGV[1] {
            base = $1; sub(/.*\//, "", base); src[base] = $1; sub(/\.c$/, ".o", base)
            part[base] = $1; layer[$1] = $2
            for (i = 3; i <= NF; i++) if ($i != "-") { may[$1, $i] = 1; word[$i] = $1 }
            next
        }
        FILENAME == ARGV[2] { shared[$1] = 1; next }
        FILENAME == ARGV[3] {
            h = $1; sub(/.*\//, "", h); owner[h] = $2
            if ($2 != "-" && !($2 in layer)) { printf "check-layers: header %s belongs to %s, which has no row in %s\n", $1, $2, layersfile; bad++ }
            next
        }
        FILENAME == ARGV[4] { if (!($1 in def)) def[$1] = $2; else if (def[$1] != $2) dup[$1] = 1; next }
        FILENAME == ARGV[5] {
            # A part includes a header: whose is it?
            from = $1; h = $2; sub(/.*\//, "", h)
            if (h in owner) to = owner[h]
            else { c = h; sub(/\.h$/, ".c", c); if (!(c in src)) next; to = src[c] }
            if (to == "-" || to == from) next
            if (layer[to] == layer[from] || may[from, layer[to]] || may[from, to]) next
            f = from; sub(/.*\//, "", f); t = to; sub(/.*\//, "", t)
            printf "%s includes %s (%s, layer %s): not allowed by %s\n", f, h, t, layer[to], layersfile
            bad++
            next
        }
        {
            from = part[$1]; sym = $2
            if (!(sym in def) || (sym in shared)) next
            to = def[sym]
            if (to == from) next
            calls[from]++
            if (layer[to] == layer[from] || may[from, layer[to]] || may[from, to]) next
            t = to; sub(/.*\//, "", t)
            printf "%s calls %s (%s, layer %s): not allowed by %s\n", $1, sym, t, layer[to], layersfile
            bad++
        }
        END {
            for (w in word) {
                known = (w in layer)
                for (p in layer) if (layer[p] == w) known = 1
                if (!known) { printf "check-layers: %s may call %s, which is no layer or part of %s\n", word[w], w, layersfile; bad++ }
            }
            for (s in dup) { printf "check-layers: %s is defined by more than one part\n", s; bad++ }
            exit bad > 0
        }' "$tmp/rows" "$tmp/shared" "$tmp/headers" "$tmp/defs" "$tmp/incs" "$tmp/uses"
    local status=$?
    rm -rf "$tmp"
    return $status
}

if [ "$do_layers" = 1 ]; then
    [ -f "$layers" ] || { echo "check-layers: no $layers" >&2; exit 2; }
    # Every source of the daemon has a row, and every header an owner (a
    # part of its name, or a "header" line): a new file cannot slip past.
    for f in "$srcdir"/nic-kv/*.c; do
        rel=nic-kv/$(basename "$f")
        grep -q -E "^[[:space:]]*$rel[[:space:]]" "$layers" ||
            { echo "check-layers: $rel has no row in nic-kv/LAYERS"; failures=$((failures + 1)); }
    done
    for f in "$srcdir"/nic-kv/*.h; do
        rel=nic-kv/$(basename "$f")
        grep -q -E "^[[:space:]]*(${rel%.h}\.c|header[[:space:]]+$rel)[[:space:]]" "$layers" ||
            { echo "check-layers: $rel belongs to no part of nic-kv/LAYERS (no ${rel%.h}.c, no \"header\" line)"; failures=$((failures + 1)); }
    done
    for sec in $(awk '/^\[.*\][ \t]*$/ { gsub(/[][ \t]/, ""); print }' "$layers"); do
        out=$(check_section "$sec")
        status=$?
        nparts=$(section_rows "$sec" | grep -v -e '^shared ' -e '^header ' -c)
        if [ "$status" = 0 ]; then
            printf 'layers  [%s] %d parts: every call allowed, every #include too\n' "$sec" "$nparts"
        else
            printf '%s\n' "$out"
            failures=$((failures + $(printf '%s\n' "$out" | grep -c .)))
        fi
    done
fi

# ------------------------------------------------------------- Length ---

# SKV's own sources: nic-kv/*.c, and those of src/ that src/skv.mk builds
# as ours (SKV_OWN_OBJ, and NICKV_OWN's src/nickv_msg.c).
own_src() {
    local names n
    names=$(sed -n -e 's/^SKV_OWN_OBJ *= *//p' -e 's/^NICKV_OWN *+\{0,1\}= *//p' "$top/src/skv.mk" |
            tr ' ' '\n' | sed -n 's/\.o$//p; /^[a-z_]*$/p' | sort -u)
    for n in $names; do
        [ -f "$top/src/$n.c" ] && echo "$top/src/$n.c"
    done
    ls "$top"/nic-kv/*.c
}

# The functions of the files given longer than max lines: "file:line name
# (N lines)". A definition starts at a line in column 0 that begins with a
# name and has a "(" (not a declaration: no ";" before its "{"), and ends
# at the next "}" in column 0.
long_functions() { # max files...
    local m=$1; shift
    awk -v max="$m" '
        FNR == 1 { cand = 0; infn = 0 }
        infn {
            if (/^}/) {
                n = FNR - start + 1; count++
                if (n > max) { printf "%s:%d %s (%d lines, at most %d)\n", FILENAME, start, name, n, max; bad++ }
                infn = 0
            }
            next
        }
        /^[A-Za-z_]/ && /\(/ && !/^(typedef|struct|union|enum)[ \t]/ && !/^[^(]*=/ {
            cand = FNR; name = $0; sub(/[ \t]*\(.*/, "", name); sub(/.*[ \t*]/, "", name)
            if (/\{[ \t]*(\/\*.*)?$/) { start = cand; cand = 0; infn = 1 }
            else if (/[{;]/) cand = 0       # a one-line body, or a declaration
            next
        }
        cand && (/^\{/ || /\{[ \t]*(\/\*.*)?$/) { start = cand; cand = 0; infn = 1; next }
        cand && (/;[ \t]*(\/\*.*)?$/ || /^[^ \t]/) { cand = 0 }
        END { printf "scanned %d functions\n", count > "/dev/stderr"; exit bad > 0 }' "$@"
}

if [ "$do_length" = 1 ]; then
    if [ ${#files[@]} = 0 ]; then
        mapfile -t files < <(own_src)
    fi
    out=$(long_functions "$max" "${files[@]}" 2>"${TMPDIR:-/tmp}/check-layers.$$")
    status=$?
    scanned=$(cat "${TMPDIR:-/tmp}/check-layers.$$"); rm -f "${TMPDIR:-/tmp}/check-layers.$$"
    if [ "$status" = 0 ]; then
        printf 'length  %d files, %s: none over %d lines\n' "${#files[@]}" "$scanned" "$max"
    else
        printf '%s\n' "$out" | sed "s|^$top/||"
        failures=$((failures + $(printf '%s\n' "$out" | grep -c .)))
    fi
fi

if [ "$failures" != 0 ]; then
    echo "check-layers: $failures failure(s)"
    exit 1
fi
echo "check-layers: ok"

#!/bin/sh
# User-space instructions per transaction of each daemon under callgrind (load-independent,
# unlike ring.sh's CPU times): the Section 7.1 workload with the clients as guests on their
# rings of a kayvee-xenstored on the cross-process test Xen, as dom0 on its Unix socket (a
# fresh daemon per row), and on Debian's C xenstored's socket. Whole runs including start-up
# and the clients' set-up; Ir per transaction = the daemon's total / (clients x txs).
# Repeated runs of one binary differ by a few per cent (how many requests each loop pass
# finds).
#
#   bench/xenstore/callgrind.sh [clients] [txs]      (defaults: 128 50)
#   ROWS="ring socket cx" (default: all three); OUT=DIR keeps the callgrind files there;
#   POLICY=coalesce (default) | per-node | abort-on-any-commit; BIN=DIR takes the binaries
#   (kayvee-xenstored, xs-bench) from DIR instead of building them
#
# Then, per row: callgrind_annotate --inclusive=no OUT/ROW.cg | head -60
set -e
CLIENTS=${1:-128}
TXS=${2:-50}
ROWS=${ROWS:-ring socket cx}
POLICY=${POLICY:-coalesce}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PEERS=${PEERS:-/work/shared/peers/xenstored}
if [ -z "$BIN" ]; then
    cargo build --release -q -p kayvee-xenstored -p kayvee-bench-xenstore \
        --manifest-path "$ROOT/Cargo.toml"
    BIN=$ROOT/target/release
fi
OUT=${OUT:-$(mktemp -d /tmp/xs-callgrind.XXXXXX)}
mkdir -p "$OUT"
PID=
trap 'if [ -n "$PID" ]; then kill "$PID" 2>/dev/null; fi' EXIT
TXNS=$((CLIENTS * TXS))

# Wait for a socket, then stop the daemon (callgrind writes its file on the way out) and
# print its row.
wait_socket() {
    i=0
    while [ ! -S "$1" ]; do
        sleep 0.2
        i=$((i + 1))
        if [ $i -gt 300 ]; then echo "no socket at $1" >&2; exit 1; fi
    done
}
finish() {
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=
    total=$(callgrind_annotate "$OUT/$1.cg" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    printf '%-22s Ir total %13s   Ir per transaction %s\n' "$2" "$total" \
        "$(awk -v t="$total" -v n="$TXNS" 'BEGIN { printf "%.1fk", t / n / 1000 }')"
}

echo "# callgrind $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$ROOT" rev-parse --short HEAD)" \
    "clients=$CLIENTS txs=$TXS policy=$POLICY, files in $OUT"
for row in $ROWS; do
    case $row in
    ring | socket)
        rm -rf "$OUT/xen" "$OUT/kv.sock"
        XENSTORED_PATH=$OUT/kv.sock valgrind --tool=callgrind \
            --callgrind-out-file="$OUT/$row.cg" "$BIN/kayvee-xenstored" --no-fork \
            --conflict-policy "$POLICY" --test-xen "$OUT/xen" 2>"$OUT/$row.valgrind" &
        PID=$!
        wait_socket "$OUT/kv.sock"
        if [ "$row" = ring ]; then
            "$BIN/xs-bench" --transport dir-ring --xen-dir "$OUT/xen" --socket "$OUT/kv.sock" \
                --label "kayvee/$POLICY/ring" --workload 7.1 --clients "$CLIENTS" \
                --txs "$TXS" >"$OUT/$row.bench"
        else
            "$BIN/xs-bench" --socket "$OUT/kv.sock" --label "kayvee/$POLICY/socket" \
                --workload 7.1 --clients "$CLIENTS" --txs "$TXS" >"$OUT/$row.bench"
        fi
        finish "$row" "kayvee/$row"
        ;;
    cx)
        # As the peers' start.sh runs it: no hypervisor, the fakexen shim under it.
        mkdir -p "$OUT/cx"
        SHIM=$(sh "$PEERS/build.sh" "$OUT/cx")
        rm -f "$OUT/cx/socket"
        FAKEXEN_MAXDOM=0 XENSTORED_RUNDIR=$OUT/cx LD_PRELOAD=$SHIM valgrind --tool=callgrind \
            --callgrind-out-file="$OUT/cx.cg" /usr/lib/xen-4.17/bin/xenstored -N \
            >"$OUT/cx.out" 2>"$OUT/cx.valgrind" </dev/null &
        PID=$!
        wait_socket "$OUT/cx/socket"
        "$BIN/xs-bench" --socket "$OUT/cx/socket" --label cxenstored/socket --workload 7.1 \
            --clients "$CLIENTS" --txs "$TXS" >"$OUT/cx.bench"
        finish cx cxenstored/socket
        ;;
    *) echo "unknown row $row (ring, socket, cx)" >&2; exit 2 ;;
    esac
done

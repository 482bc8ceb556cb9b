#!/bin/sh
# Side-by-side Xenstore benchmark: kayvee-xenstored under each conflict policy, then Debian's
# C xenstored and OCaml oxenstored (if installed; started via ../shared/peers/xenstored).
#
#   bench/xenstore/run.sh [clients] [txs]      (defaults: 128 500, the paper's Section 7.1)
#
# Builds in release mode. Each daemon gets a fresh socket under a temp dir.
set -e
CLIENTS=${1:-128}
TXS=${2:-500}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PEERS=${PEERS:-$ROOT/../../shared/peers/xenstored}
[ -d "$PEERS" ] || PEERS=/work/shared/peers/xenstored
cargo build --release -q -p kayvee-xenstored -p kayvee-bench-xenstore --manifest-path "$ROOT/Cargo.toml"
BIN=$ROOT/target/release
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

LIMIT=${LIMIT:-120}
one() { # label socket workload clients txs [extra...]
    label=$1; sock=$2; w=$3; c=$4; t=$5; shift 5
    timeout "$LIMIT" "$BIN/xs-bench" --socket "$sock" --label "$label" --workload "$w" \
        --clients "$c" --txs "$t" "$@" || echo "$label workload=$w clients=$c txs=$t TIMEOUT after ${LIMIT}s (live-lock)"
}
workloads() { # label socket
    one "$1" "$2" 7.1 "$CLIENTS" "$TXS"
    one "$1" "$2" 7.1-create "$CLIENTS" "$TXS"
    one "$1" "$2" 7.3 32 20 --sleep-ms 10
}

for policy in coalesce per-node abort-on-any-commit; do
    S=$TMP/kv-$policy.sock
    XENSTORED_PATH=$S "$BIN/kayvee-xenstored" --no-fork --conflict-policy $policy &
    PID=$!
    while [ ! -S "$S" ]; do sleep 0.05; done
    workloads "kayvee/$policy" "$S"
    kill $PID; wait $PID 2>/dev/null || true
done

for peer in cxenstored oxenstored; do
    if [ -x /usr/lib/xen-4.17/bin/xenstored ] && [ -f "$PEERS/start.sh" ]; then
        D=$TMP/$peer
        if sh "$PEERS/start.sh" $peer "$D" >/dev/null 2>&1; then
            workloads "$peer" "$D/socket" || true
            sh "$PEERS/stop.sh" "$D" >/dev/null 2>&1 || true
        fi
    fi
done

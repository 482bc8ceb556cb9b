#!/bin/sh
# Side-by-side Xenstore benchmark: kayvee-xenstored under each conflict policy, then Debian's
# C xenstored and OCaml oxenstored (if installed; started via ../shared/peers/xenstored).
#
#   bench/xenstore/run.sh [clients] [txs]      (defaults: 128 500, the paper's Section 7.1)
#
# Builds in release mode. Each daemon gets a fresh socket under a temp dir. Every workload runs
# twice per daemon: with xs-bench (Rust, wire protocol, one thread per client) and with
# libxs-bench (C, libxenstore, one forked process per client), built here with `cc -O2` when
# <xenstore.h> is installed (libxen-dev). CLIENT=xs|libxs runs only one of them.
# Last comes null-xenstored (null-xenstored.c, built here): a daemon with no store that answers
# every request with a canned reply, the best any daemon could do with these clients here.
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

LIBXS=
if [ "${CLIENT:-}" != xs ]; then
    if [ -f /usr/include/xenstore.h ] &&
        cc -O2 -o "$TMP/libxs-bench" "$ROOT/bench/xenstore/libxs-bench.c" -lxenstore; then
        LIBXS=$TMP/libxs-bench
    else
        echo "# libxs-bench skipped: <xenstore.h>/libxenstore missing (apt-get install libxen-dev)"
    fi
fi

LIMIT=${LIMIT:-120}
one() { # tool label socket workload clients txs [extra...]
    tool=$1; label=$2; sock=$3; w=$4; c=$5; t=$6; shift 6
    XENSTORED_PATH=$sock timeout "$LIMIT" "$tool" --label "$label" --workload "$w" \
        --clients "$c" --txs "$t" "$@" || echo "$label workload=$w clients=$c txs=$t TIMEOUT or failure after <= ${LIMIT}s (live-lock?)"
}
both() { # label socket workload clients txs [extra...]: xs-bench, then libxs-bench
    label=$1; shift
    [ "${CLIENT:-}" = libxs ] || one "$BIN/xs-bench" "$label" "$@"
    [ -z "$LIBXS" ] || one "$LIBXS" "$label+libxs" "$@"
}
workloads() { # label socket
    both "$1" "$2" 7.1 "$CLIENTS" "$TXS"
    both "$1" "$2" 7.1-create "$CLIENTS" "$TXS"
    both "$1" "$2" 7.3 32 20 --sleep-ms 10
    echo "# load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%SZ)"
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

if cc -O2 -o "$TMP/null-xenstored" "$ROOT/bench/xenstore/null-xenstored.c"; then
    "$TMP/null-xenstored" "$TMP/null.sock" &
    PID=$!
    while [ ! -S "$TMP/null.sock" ]; do sleep 0.05; done
    workloads null-xenstored "$TMP/null.sock"
    kill $PID; wait $PID 2>/dev/null || true
fi

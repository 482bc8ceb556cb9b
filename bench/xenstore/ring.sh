#!/bin/sh
# Guests' rings against the socket: each round runs xs-bench's workload with the clients as
# guests on their shared rings of a kayvee-xenstored on the cross-process test Xen (pages as
# files, event channels as FIFOs; a fresh daemon per round), then as dom0 on that daemon's
# Unix socket, then on Debian's C xenstored's socket. Each line is followed by the daemon's
# CPU per 1000 transactions (/proc/PID/stat). cxenstored cannot serve rings without a
# hypervisor, so its row is the socket one.
#
#   bench/xenstore/ring.sh [rounds] [workload] [clients] [txs]   (defaults: 3 7.1 128 500)
#   POLICY=coalesce (default) | per-node | abort-on-any-commit
set -e
ROUNDS=${1:-3}
W=${2:-7.1}
CLIENTS=${3:-128}
TXS=${4:-500}
POLICY=${POLICY:-coalesce}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PEERS=${PEERS:-/work/shared/peers/xenstored}
cargo build --release -q -p kayvee-xenstored -p kayvee-bench-xenstore \
    --manifest-path "$ROOT/Cargo.toml"
BIN=$ROOT/target/release
TMP=$(mktemp -d /tmp/xs-ring-bench.XXXXXX)
sh "$PEERS/start.sh" cxenstored "$TMP/cx" >/dev/null
CX=$(cat "$TMP/cx/daemon.pid")
KV=
trap 'kill $KV 2>/dev/null; sh "$PEERS/stop.sh" "$TMP/cx" >/dev/null 2>&1; rm -rf "$TMP"' EXIT
echo "# ring $(date -u +%Y-%m-%dT%H:%M:%SZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
r=0
while [ $r -lt "$ROUNDS" ]; do
    rm -rf "$TMP/xen" "$TMP/kv.sock"
    XENSTORED_PATH=$TMP/kv.sock "$BIN/kayvee-xenstored" --no-fork --conflict-policy "$POLICY" \
        --test-xen "$TMP/xen" &
    KV=$!
    while [ ! -S "$TMP/kv.sock" ]; do sleep 0.05; done
    "$BIN/xs-bench" --transport dir-ring --xen-dir "$TMP/xen" --socket "$TMP/kv.sock" \
        --daemon-pid "$KV" --label "kayvee/$POLICY/ring" --workload "$W" \
        --clients "$CLIENTS" --txs "$TXS"
    "$BIN/xs-bench" --socket "$TMP/kv.sock" --daemon-pid "$KV" \
        --label "kayvee/$POLICY/socket" --workload "$W" --clients "$CLIENTS" --txs "$TXS"
    kill "$KV"
    wait "$KV" 2>/dev/null || true
    KV=
    "$BIN/xs-bench" --socket "$TMP/cx/socket" --daemon-pid "$CX" --label "cxenstored/socket" \
        --workload "$W" --clients "$CLIENTS" --txs "$TXS"
    echo "# load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%SZ)"
    r=$((r + 1))
done

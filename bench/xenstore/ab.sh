#!/bin/sh
# Interleaved A/B: kayvee-xenstored (one conflict policy) against Debian's C xenstored, both
# running at once and driven alternately by the libxenstore client, so machine-load swings hit
# both sides alike (run.sh measures the daemons one after the other, minutes apart).
#
#   bench/xenstore/ab.sh [rounds] [workload] [clients] [txs]   (defaults: 3 7.1 128 500)
#   POLICY=coalesce (default) | per-node | abort-on-any-commit
#   KV_BASE=/path/to/an/older/kayvee-xenstored  also runs that binary each round (label
#                                               kayvee-base), to compare builds under one load
#   NULL=0  skips null-xenstored (on by default): a daemon with no store that answers every
#           request with a canned reply (null-xenstored.c), i.e. the best tx/s any daemon could
#           reach with these clients on this machine; the bound for the ratio to cxenstored
#
# Prints one libxs-bench line per run (with CPU ms per 1000 transactions of the clients and of
# the daemon, from /proc/PID/stat), and the load average after each round.
set -e
ROUNDS=${1:-3}
W=${2:-7.1}
CLIENTS=${3:-128}
TXS=${4:-500}
POLICY=${POLICY:-coalesce}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PEERS=${PEERS:-/work/shared/peers/xenstored}
cargo build --release -q -p kayvee-xenstored --manifest-path "$ROOT/Cargo.toml"
TMP=$(mktemp -d)
cc -O2 -o "$TMP/libxs-bench" "$ROOT/bench/xenstore/libxs-bench.c" -lxenstore
cc -O2 -o "$TMP/null-xenstored" "$ROOT/bench/xenstore/null-xenstored.c"
S=$TMP/kv.sock
XENSTORED_PATH=$S "$ROOT/target/release/kayvee-xenstored" --no-fork --conflict-policy "$POLICY" &
KV=$!
sh "$PEERS/start.sh" cxenstored "$TMP/cx" >/dev/null
CX=$(cat "$TMP/cx/daemon.pid")
BASE=
if [ -n "${KV_BASE:-}" ]; then
    XENSTORED_PATH=$TMP/base.sock "$KV_BASE" --no-fork --conflict-policy "$POLICY" &
    BASE=$!
    while [ ! -S "$TMP/base.sock" ]; do sleep 0.05; done
fi
NUL=
if [ "${NULL:-1}" != 0 ]; then
    "$TMP/null-xenstored" "$TMP/null.sock" &
    NUL=$!
    while [ ! -S "$TMP/null.sock" ]; do sleep 0.05; done
fi
trap 'kill $KV $BASE $NUL; sh "$PEERS/stop.sh" "$TMP/cx" >/dev/null 2>&1; rm -rf "$TMP"' EXIT
while [ ! -S "$S" ]; do sleep 0.05; done
echo "# ab $(date -u +%Y-%m-%dT%H:%M:%SZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
r=0
while [ $r -lt "$ROUNDS" ]; do
    XENSTORED_PATH=$S "$TMP/libxs-bench" --label "kayvee/$POLICY+libxs" --workload "$W" \
        --clients "$CLIENTS" --txs "$TXS" --daemon-pid "$KV"
    if [ -n "$BASE" ]; then
        XENSTORED_PATH=$TMP/base.sock "$TMP/libxs-bench" --label "kayvee-base/$POLICY+libxs" \
            --workload "$W" --clients "$CLIENTS" --txs "$TXS" --daemon-pid "$BASE"
    fi
    XENSTORED_PATH=$TMP/cx/socket "$TMP/libxs-bench" --label "cxenstored+libxs" --workload "$W" \
        --clients "$CLIENTS" --txs "$TXS" --daemon-pid "$CX"
    if [ -n "$NUL" ]; then
        XENSTORED_PATH=$TMP/null.sock "$TMP/libxs-bench" --label "null-xenstored+libxs" \
            --workload "$W" --clients "$CLIENTS" --txs "$TXS" --daemon-pid "$NUL"
    fi
    echo "# load: $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%SZ)"
    r=$((r + 1))
done

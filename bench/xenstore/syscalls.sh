#!/bin/sh
# System calls per transaction of each daemon (perf's syscall tracepoints on the daemon's
# process, low overhead unlike strace): the Section 7.1 workload on kayvee-xenstored's rings
# (cross-process test Xen), on its Unix socket (a fresh daemon per row), and on Debian's C
# xenstored's socket, with the daemon's context switches (being switched out: preempted by a
# client it woke, or going to sleep) and the wakeups it made (sched_wakeup events on its CPU
# time). Counts depend on how many requests each loop pass finds (the machine's
# load); compare rows from one run.
#
#   bench/xenstore/syscalls.sh [clients] [txs]      (defaults: 128 500)
#   ROWS="ring socket cx" (default: all three); BIN=DIR takes the binaries from DIR;
#   POLICY=coalesce (default); needs perf with tracepoint access (root)
set -e
CLIENTS=${1:-128}
TXS=${2:-500}
ROWS=${ROWS:-ring socket cx}
POLICY=${POLICY:-coalesce}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PEERS=${PEERS:-/work/shared/peers/xenstored}
if [ -z "$BIN" ]; then
    cargo build --release -q -p kayvee-xenstored -p kayvee-bench-xenstore \
        --manifest-path "$ROOT/Cargo.toml"
    BIN=$ROOT/target/release
fi
OUT=$(mktemp -d /tmp/xs-syscalls.XXXXXX)
PID=
PERF=
trap 'kill $PERF $PID 2>/dev/null; rm -rf "$OUT"' EXIT
TXNS=$((CLIENTS * TXS))
CALLS=io_uring_enter,read,write,epoll_wait,epoll_ctl,recvfrom,sendto,recvmsg,sendmsg,writev,readv,poll,ppoll,select,pselect6,clock_gettime
EVENTS=context-switches,sched:sched_wakeup,raw_syscalls:sys_enter
for c in $(echo $CALLS | tr , ' '); do EVENTS="$EVENTS,syscalls:sys_enter_$c"; done

wait_socket() {
    i=0
    while [ ! -S "$1" ]; do
        sleep 0.05
        i=$((i + 1))
        if [ $i -gt 600 ]; then echo "no socket at $1" >&2; exit 1; fi
    done
}
# Count the daemon's system calls while $@ runs, then print its row.
count() {
    label=$1
    shift
    perf stat -x, -e "$EVENTS" -p "$PID" -o "$OUT/perf" &
    PERF=$!
    sleep 0.3
    "$@" >"$OUT/bench"
    kill -INT $PERF
    wait $PERF 2>/dev/null || true
    PERF=
    grep -o 'eagain=[0-9]*' "$OUT/bench" | head -1 >"$OUT/eagain"
    awk -F, -v n="$TXNS" -v label="$label" -v eagain="$(cat "$OUT/eagain")" '
        /sys_enter/ && $1 ~ /^[0-9]+$/ && $1 > 0 {
            name = $3; sub(".*sys_enter_?", "", name); if (name == "") name = "all"
            v[name] = $1 / n
        }
        /context-switches/ && $1 ~ /^[0-9]+$/ { cs = $1 / n }
        /sched_wakeup/ && $1 ~ /^[0-9]+$/ { wk = $1 / n }
        END {
            printf "%-18s %s per transaction: switches %.2f, wakeups %.2f, system calls %.2f", label, eagain, cs, wk, v["all"]
            for (k in v) if (k != "all") printf ", %s %.2f", k, v[k]
            printf "\n"
        }' "$OUT/perf"
}

echo "# syscalls $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$ROOT" rev-parse --short HEAD)" \
    "clients=$CLIENTS txs=$TXS policy=$POLICY load: $(cut -d' ' -f1-3 /proc/loadavg)"
for row in $ROWS; do
    case $row in
    ring | socket)
        rm -rf "$OUT/xen" "$OUT/kv.sock"
        XENSTORED_PATH=$OUT/kv.sock "$BIN/kayvee-xenstored" --no-fork \
            --conflict-policy "$POLICY" --test-xen "$OUT/xen" &
        PID=$!
        wait_socket "$OUT/kv.sock"
        if [ "$row" = ring ]; then
            count "kayvee/ring" "$BIN/xs-bench" --transport dir-ring --xen-dir "$OUT/xen" \
                --socket "$OUT/kv.sock" --label "kayvee/$POLICY/ring" --workload 7.1 \
                --clients "$CLIENTS" --txs "$TXS"
        else
            count "kayvee/socket" "$BIN/xs-bench" --socket "$OUT/kv.sock" \
                --label "kayvee/$POLICY/socket" --workload 7.1 --clients "$CLIENTS" --txs "$TXS"
        fi
        kill "$PID"
        wait "$PID" 2>/dev/null || true
        PID=
        ;;
    cx)
        mkdir -p "$OUT/cx"
        SHIM=$(sh "$PEERS/build.sh" "$OUT/cx")
        rm -f "$OUT/cx/socket"
        FAKEXEN_MAXDOM=0 XENSTORED_RUNDIR=$OUT/cx LD_PRELOAD=$SHIM \
            /usr/lib/xen-4.17/bin/xenstored -N >"$OUT/cx.out" 2>&1 </dev/null &
        PID=$!
        wait_socket "$OUT/cx/socket"
        count "cxenstored/socket" "$BIN/xs-bench" --socket "$OUT/cx/socket" \
            --label cxenstored/socket --workload 7.1 --clients "$CLIENTS" --txs "$TXS"
        kill "$PID"
        wait "$PID" 2>/dev/null || true
        PID=
        ;;
    *) echo "unknown row $row (ring, socket, cx)" >&2; exit 2 ;;
    esac
done

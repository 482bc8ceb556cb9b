#!/bin/sh
# Kayvee unikernel over a tap device: boots the image under QEMU TCG (microvm) on a tap inside a
# network namespace this script creates (and deletes on exit), then runs redis-benchmark
# SET/GET (8 clients, pipeline 1 and 16) against it from inside the namespace, and against a
# redis-server started in the same namespace for a side-by-side figure. Needs root (ip netns),
# qemu-system-x86_64, redis-tools and redis-server. No slirp: no port forward, no relay.
#
#   bench/unikernel-tap.sh [IMAGE]     (default: the image `cargo xtask image` builds)
set -eu
IMG=${1:-unikernel/target/x86_64-unknown-linux-gnu/release/kayvee-unikernel}
NS=kayvee-uk-tap-$$
LOG=${TMPDIR:-/tmp}/kayvee-uk-tap-$$.log
QPIDF=${TMPDIR:-/tmp}/kayvee-uk-tap-$$.qemu.pid
RPIDF=${TMPDIR:-/tmp}/kayvee-uk-tap-$$.redis.pid
# `ip netns exec` in the background leaves the real process orphaned: stop QEMU and
# redis-server by their pid files, then delete the namespace.
cleanup() {
    for f in "$QPIDF" "$RPIDF"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
        rm -f "$f"
    done
    sleep 0.5
    ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
in_ns() { ip netns exec "$NS" "$@"; }

ip netns add "$NS"
in_ns ip link set lo up
in_ns ip tuntap add dev tap0 mode tap
in_ns ip addr add 172.16.0.1/24 dev tap0
in_ns ip link set tap0 up
in_ns qemu-system-x86_64 -M microvm,pic=off,rtc=off,acpi=off,auto-kernel-cmdline=off \
    -accel tcg -m 256M -nodefaults -no-user-config -display none -serial "file:$LOG" \
    -pidfile "$QPIDF" \
    -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
    -netdev tap,id=n0,ifname=tap0,script=no,downscript=no,vhost=off \
    -device virtio-net-device,netdev=n0 -kernel "$IMG" \
    -append "ip=172.16.0.2/24 gw=172.16.0.1 port=6379 time=$(date +%s)" &
i=0
until in_ns redis-cli -h 172.16.0.2 PING 2>/dev/null | grep -q PONG; do
    i=$((i + 1))
    [ $i -gt 300 ] && { echo "no PONG over tap within 30 s; console:"; cat "$LOG"; exit 1; }
    sleep 0.1
done
grep "virtio-net at" "$LOG" || true
bench() { # $1 = label, $2 = host
    in_ns redis-benchmark -h "$2" -p "$3" -t set,get -n 20000 -c 8 -P 1 -q |
        tr '\r' '\n' | grep 'per second' | sed "s/^/$1 -P 1: /"
    in_ns redis-benchmark -h "$2" -p "$3" -t set,get -n 200000 -c 8 -P 16 -q |
        tr '\r' '\n' | grep 'per second' | sed "s/^/$1 -P 16: /"
}
bench "unikernel (TCG, tap)" 172.16.0.2 6379
in_ns redis-server --port 6390 --save '' --appendonly no --daemonize yes --pidfile "$RPIDF" \
    --logfile /dev/null
sleep 0.3
bench "redis-server (same netns, loopback)" 127.0.0.1 6390

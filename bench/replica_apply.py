#!/usr/bin/env python3
"""What a replica's CPU does with its primary's stream, side by side: a redis-server 7.0.15
replica and a kayvee-server replica of the same redis-server primary, in one run.

The primary (CPU 0, with the load's client) holds KEYS keys of 100 bytes (`key:%012d`) and
takes a SET -P 16 rewrite load (redis-benchmark -r KEYS -d 100 -c 50); each replica in turn
(CPU 1, alone) syncs, then for WINDOW seconds we measure: the stream's rate (the primary's
master_repl_offset), the rate the replica applied it (its slave_repl_offset), the replica's
CPU (utime + stime from /proc), and so the stream bytes applied per CPU-second of the replica:
how much of a core following a primary costs. The lag at the end says whether it kept up.
Standard library only.
Usage: python3 bench/replica_apply.py [--keys N] [--window S] [--kayvee-bin PATH] [--json F]
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

from compare import CLIENT_CPU, PORT_BASE, SERVER_CPU, Server, default_kayvee_bin, log
from snapshot import info_field, load

CLK_TCK = os.sysconf("SC_CLK_TCK")
SYNC_TIMEOUT_S = 300


def offset(port, field):
    return int(info_field(port, "replication", field))


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def measure(primary, kind, binary, keys, window):
    """The figures for one replica of `primary`."""
    with tempfile.TemporaryDirectory() as tmp:
        replica = Server(kind, binary, PORT_BASE + 3000,
                         extra=["--dir", tmp, "--replicaof", "127.0.0.1", str(primary.port)],
                         pin=False)
        try:
            subprocess.run(["taskset", "-a", "-p", "-c", CLIENT_CPU, str(replica.proc.pid)],
                           stdout=subprocess.DEVNULL, check=True)
            t0 = time.monotonic()
            while not (info_field(replica.port, "replication", "master_link_status") == "up"
                       and info_field(replica.port, "replication",
                                      "master_sync_in_progress") == "0"):
                if time.monotonic() - t0 > SYNC_TIMEOUT_S:
                    raise RuntimeError(f"{kind}: no sync in {SYNC_TIMEOUT_S} s")
                time.sleep(0.05)
            time.sleep(2.0)
            o0, a0 = offset(primary.port, "master_repl_offset"), offset(replica.port,
                                                                        "slave_repl_offset")
            c0, t0 = cpu_s(replica.proc.pid), time.monotonic()
            time.sleep(window)
            o1, a1 = offset(primary.port, "master_repl_offset"), offset(replica.port,
                                                                        "slave_repl_offset")
            c1, t1 = cpu_s(replica.proc.pid), time.monotonic()
            secs, cpu = t1 - t0, max(c1 - c0, 1e-9)
            log(f"{kind}: applied {(a1 - a0) / secs / 1e6:.1f} MB/s on {cpu / secs:.2f} cores")
            return {
                "stream_mb_per_s": (o1 - o0) / secs / 1e6,
                "applied_mb_per_s": (a1 - a0) / secs / 1e6,
                "replica_cores": cpu / secs,
                "applied_mb_per_cpu_s": (a1 - a0) / 1e6 / cpu,
                "lag_mb_at_end": (o1 - a1) / 1e6,
            }
        finally:
            replica.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--keys", type=int, default=200_000)
    p.add_argument("--window", type=float, default=8.0)
    p.add_argument("--kayvee-bin", help="kayvee-server binary (default: release build)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    args = p.parse_args()
    os.sched_setaffinity(0, {int(SERVER_CPU)})
    with tempfile.TemporaryDirectory() as tmp:
        primary = Server("redis", "redis-server", PORT_BASE, extra=["--dir", tmp])
        bench = None
        try:
            log(f"primary: loading {args.keys} keys")
            load(primary.port, args.keys)
            bench = subprocess.Popen(
                ["taskset", "-c", SERVER_CPU, "redis-benchmark", "-p", str(primary.port),
                 "-t", "set", "-r", str(args.keys), "-d", "100", "-c", "50", "-P", "16",
                 "-n", "2000000000", "-q"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            results = {kind: measure(primary, kind, binary, args.keys, args.window)
                       for kind, binary in [("redis", "redis-server"),
                                            ("kayvee", args.kayvee_bin or default_kayvee_bin())]}
        finally:
            if bench:
                bench.kill()
                bench.wait()
            primary.stop()
    print(f"A replica following a redis-server primary under a SET -P 16 rewrite load "
          f"({args.keys} keys of 100 bytes; primary and load on CPU {SERVER_CPU}, the replica "
          f"alone on CPU {CLIENT_CPU}; {args.window:.0f} s)")
    rows = [("stream from the primary (MB/s)", "stream_mb_per_s", "{:.1f}"),
            ("applied by the replica (MB/s)", "applied_mb_per_s", "{:.1f}"),
            ("replica CPU (cores)", "replica_cores", "{:.2f}"),
            ("applied per replica CPU-second (MB)", "applied_mb_per_cpu_s", "{:.1f}"),
            ("lag at the end (MB)", "lag_mb_at_end", "{:.1f}")]
    print(f"{'':<38}{'redis replica':>16}{'kayvee replica':>16}{'ratio':>8}")
    for name, key, fmt in rows:
        r, k = results["redis"][key], results["kayvee"][key]
        ratio = f"{k / r:.2f}" if r else "-"
        print(f"{name:<38}{fmt.format(r):>16}{fmt.format(k):>16}{ratio:>8}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

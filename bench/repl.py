#!/usr/bin/env python3
"""The full-sync benchmark, side by side: a redis-server 7.0.15 replica syncing from a
redis-server 7.0.15 primary (which forks for the sync) and from a kayvee-server primary (which
streams a persistent snapshot from its loop, no fork).

For each primary: load KEYS keys of 100 bytes (`key:%012d`, redis-benchmark's `-r` names), start
a rewrite load (redis-benchmark SET -r KEYS -d 100, -c 50 -P 16), measure the primary's write
rate for WINDOW seconds, then start a redis-server replica of it and measure until the replica
reports the link up and no sync in progress:
  - the time the full sync takes (REPLICAOF to link up and loaded),
  - the primary's extra memory during the sync: peak PSS of the primary and its children (Redis's
    forked child) minus the PSS under the same load just before, as a share of the dataset; and
    the same less the growth of the replication buffers (INFO's mem_total_replication_buffers:
    the write stream held for the replica until its snapshot is loaded, which both primaries keep
    alike), which leaves what the snapshot itself costs (Redis's copy-on-write, Kayvee's old
    versions still shared with the snapshot),
  - the primary's write rate during the sync against the rate before it (no replica) and
    against the rate after it with the replica online (on two CPUs the replica applying the
    stream takes the load's core from its client, so a primary with a replica runs below the
    rate before whatever the sync costs; both rates are taken under the same sampling as the
    sync's), and its writes per
    CPU-second of the primary (its children included) against the same before it: on two CPUs
    the replica's loading competes with the load's client or with the primary, so the rate alone
    says little of what the sync costs the primary,
  - the replica's slowest answer while it syncs: the longest of the polls above (two INFOs each,
    every 20 ms); a replica that loads its payload without serving its clients shows it here,
  - after the sync, with the load still running: the replication lag, the primary's
    master_repl_offset minus the replica's, sampled LAG_SAMPLES times (bytes, and as time at the
    stream's rate),
  - after the load stops and the replica caught up: DBSIZE on both sides and LAG_CHECK random keys
    compared value by value.
Both primaries sync diskless with no delay (`repl-diskless-sync-delay 0`) and with no output
limit on the replica's connection (`client-output-buffer-limit replica 0 0 0`): under this load
the stream held during a sync of millions of keys outgrows Redis's default 256 MB limit, the
primary drops the replica and the sync starts over, forever. The primary is pinned
to CPU 0; the replica and the load to CPU 1 (on two CPUs the replica's loading competes with the
load's client, for both primaries alike). Standard library only.
`--replica kayvee` makes kayvee-server the replica of both primaries instead of redis-server.
`--disk-sync` makes both primaries sync through a background save's RDB file
(`repl-diskless-sync no`): Redis's forked child writes it, Kayvee's save thread does; then the
primary sends the file.
Usage: python3 bench/repl.py [--keys N] [--window S] [--kayvee-bin PATH] [--replica redis|kayvee]
  [--sync-share PERCENT] [--sample-every S] [--disk-sync] [--json F]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

from compare import CLIENT_CPU, PORT_BASE, Server, command, default_kayvee_bin, log
from snapshot import SAMPLE_INTERVAL_S, VALUE_SIZE, family, info_field, load, memory_kib

CLK_TCK = os.sysconf("SC_CLK_TCK")

# How often the primary's PSS and buffers are sampled (`--sample-every`): reading a process's
# PSS walks its page tables, which with a primary of a gigabyte takes milliseconds of the load's
# core and holds the primary's memory map meanwhile, so a fast sampler weighs on what it measures.
SAMPLE_EVERY_S = SAMPLE_INTERVAL_S

LAG_SAMPLES = 20
LAG_CHECK = 1000
SYNC_TIMEOUT_S = 600


def repl_buffers_kib(port):
    return int(info_field(port, "memory", "mem_total_replication_buffers")) // 1024


class ReplSampler(threading.Thread):
    """Samples the primary's PSS (its children included) and its replication buffers every
    SAMPLE_EVERY_S until stopped; keeps the peak PSS and the peak of PSS less the buffers'
    growth over `buffers_before`."""

    def __init__(self, pid, port, buffers_before):
        super().__init__(daemon=True)
        self.pid, self.port, self.buffers_before = pid, port, buffers_before
        self.peak_pss, self.peak_pss_less_buffers, self.peak_buffers = 0, 0, 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            pss, _ = memory_kib(self.pid)
            grown = max(repl_buffers_kib(self.port) - self.buffers_before, 0)
            self.peak_pss = max(self.peak_pss, pss)
            self.peak_buffers = max(self.peak_buffers, grown)
            self.peak_pss_less_buffers = max(self.peak_pss_less_buffers, pss - grown)
            time.sleep(SAMPLE_EVERY_S)


def commands_processed(port):
    return int(info_field(port, "stats", "total_commands_processed"))


def repl_offset(port):
    return int(info_field(port, "replication", "master_repl_offset"))


def rewrite_load(port, keys):
    """The rewrite load, running until killed."""
    cmd = ["taskset", "-c", CLIENT_CPU, "redis-benchmark", "-p", str(port), "-c", "50", "-P", "16",
           "-n", "2000000000", "-r", str(keys), "-d", str(VALUE_SIZE), "-q", "-t", "set"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_s(pid):
    """CPU seconds of the process, its reaped children and its live ones (Redis's sync child)."""
    def ticks(p, fields):
        try:
            with open(f"/proc/{p}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0
        return sum(int(parts[i]) for i in fields)
    total = ticks(pid, (11, 12, 13, 14))
    total += sum(ticks(c, (11, 12)) for c in family(pid)[1:])
    return total / CLK_TCK


def rate(port, pid, seconds):
    """(commands per second, commands per CPU-second) of the primary over `seconds`."""
    t0, c0, u0 = time.monotonic(), commands_processed(port), cpu_s(pid)
    time.sleep(seconds)
    c1, u1 = commands_processed(port), cpu_s(pid)
    return (c1 - c0) / (time.monotonic() - t0), (c1 - c0) / max(u1 - u0, 1e-9)


def synced(port):
    """Whether the replica at `port` has its link up and no sync in progress."""
    return (info_field(port, "replication", "master_link_status") == "up"
            and info_field(port, "replication", "master_sync_in_progress") == "0")


def compare_keys(primary, replica, keys):
    """DBSIZE on both sides, and LAG_CHECK random keys' values: the number that differ."""
    sizes = [int(command(p, "DBSIZE")[1:].split(b"\r\n")[0]) for p in (primary, replica)]
    differ = 0
    for i in random.sample(range(keys), min(LAG_CHECK, keys)):
        key = f"key:{i:012d}"
        if command(primary, "GET", key) != command(replica, "GET", key):
            differ += 1
    return sizes, differ


def measure(kind, binary, keys, window, replica_cpu, replica_bin, sync_share=None,
            disk_sync=False):
    """All figures for one primary."""
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as rtmp:
        # No wait for more replicas before a diskless sync starts (Redis's default waits 5 s).
        primary = Server(kind, binary, PORT_BASE,
                         extra=["--dir", tmp, "--repl-diskless-sync-delay", "0",
                                "--client-output-buffer-limit", "replica 0 0 0"]
                         + (["--repl-sync-share", str(sync_share)]
                            if sync_share and kind == "kayvee" else [])
                         + (["--repl-diskless-sync", "no"] if disk_sync else []))
        replica = None
        bench = None
        try:
            empty_pss, _ = memory_kib(primary.proc.pid)
            log(f"{kind}: loading {keys} keys")
            load(primary.port, keys)
            dataset = memory_kib(primary.proc.pid)[0] - empty_pss
            bench = rewrite_load(primary.port, keys)
            time.sleep(1.0)
            # The rate before is measured under the same sampling as the sync (its PSS walks
            # and INFO calls take CPU from the load's core and the primary), so that the two
            # rates differ by the sync alone.
            observer = ReplSampler(primary.proc.pid, primary.port, repl_buffers_kib(primary.port))
            observer.start()
            before_rps, before_per_cpu = rate(primary.port, primary.proc.pid, window)
            observer.done.set()
            observer.join()
            before_pss, _ = memory_kib(primary.proc.pid)
            sampler = ReplSampler(primary.proc.pid, primary.port, repl_buffers_kib(primary.port))
            sampler.start()
            log(f"{kind}: {before_rps:.0f} writes/s; starting a replica")
            t0, c0 = time.monotonic(), commands_processed(primary.port)
            u0 = cpu_s(primary.proc.pid)
            replica = Server("replica", replica_bin, PORT_BASE + 3000,
                             extra=["--dir", rtmp, "--replicaof", "127.0.0.1", str(primary.port)],
                             pin=False)
            subprocess.run(["taskset", "-a", "-p", "-c", replica_cpu, str(replica.proc.pid)],
                           stdout=subprocess.DEVNULL, check=True)
            slowest_poll = 0.0
            while True:
                p0 = time.monotonic()
                up = synced(replica.port)
                slowest_poll = max(slowest_poll, time.monotonic() - p0)
                if up:
                    break
                if time.monotonic() - t0 > SYNC_TIMEOUT_S:
                    raise RuntimeError(f"{kind}: the replica did not sync in {SYNC_TIMEOUT_S} s")
                time.sleep(0.02)
            t1, c1 = time.monotonic(), commands_processed(primary.port)
            u1 = cpu_s(primary.proc.pid)
            sampler.done.set()
            sampler.join()
            during_rps = (c1 - c0) / (t1 - t0)
            # The sync's own CPU (Redis's child, Kayvee's loop) counts: writes per CPU-second
            # of the primary over the sync, against the same figure before it.
            during_per_cpu = (c1 - c0) / max(u1 - u0, 1e-9)
            log(f"{kind}: synced in {t1 - t0:.2f} s, {during_rps:.0f} writes/s meanwhile")
            time.sleep(1.0)
            # The rate with the replica online (the stream it applies on the load's core, the
            # primary's feed), observed as the rate before: "normal" for a primary that has
            # a replica, against which the sync's own cost shows.
            observer = ReplSampler(primary.proc.pid, primary.port, repl_buffers_kib(primary.port))
            observer.start()
            online_rps, _ = rate(primary.port, primary.proc.pid, window)
            observer.done.set()
            observer.join()
            lags, o0, s0 = [], repl_offset(primary.port), time.monotonic()
            for _ in range(LAG_SAMPLES):
                lags.append(repl_offset(primary.port) - repl_offset(replica.port))
                time.sleep(0.1)
            stream_rate = (repl_offset(primary.port) - o0) / (time.monotonic() - s0)
            bench.kill()
            bench.wait()
            bench = None
            deadline = time.monotonic() + 60
            while repl_offset(primary.port) != repl_offset(replica.port):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{kind}: the replica did not catch up")
                time.sleep(0.05)
            sizes, differ = compare_keys(primary.port, replica.port, keys)
            lags.sort()
            lag = lags[len(lags) // 2]
            return {
                "keys": keys, "dataset_kib": dataset, "sync_s": t1 - t0,
                "before_rps": before_rps, "during_rps": during_rps,
                "throughput_pct": 100.0 * during_rps / before_rps,
                "online_rps": online_rps, "of_online_pct": 100.0 * during_rps / online_rps,
                "before_per_cpu_s": before_per_cpu, "during_per_cpu_s": during_per_cpu,
                "per_cpu_pct": 100.0 * during_per_cpu / before_per_cpu,
                # The primary's CPU over the sync less what its writes cost at the rate before.
                "sync_cpu_s": (u1 - u0) - (c1 - c0) / before_per_cpu,
                "before_pss_kib": before_pss, "peak_pss_kib": sampler.peak_pss,
                "extra_pct": 100.0 * (sampler.peak_pss - before_pss) / dataset,
                "extra_less_buffers_pct":
                    100.0 * (sampler.peak_pss_less_buffers - before_pss) / dataset,
                "buffers_peak_pct": 100.0 * sampler.peak_buffers / dataset,
                "lag_bytes_median": lag, "lag_bytes_max": lags[-1],
                "stream_bytes_per_s": stream_rate,
                "lag_ms_median": 1000.0 * lag / stream_rate if stream_rate else 0.0,
                "replica_slowest_poll_ms": 1000.0 * slowest_poll,
                "dbsize": sizes, "keys_differing": differ, "replica_cpu": replica_cpu,
                "replica": os.path.basename(replica_bin),
            }
        finally:
            if bench:
                bench.kill()
                bench.wait()
            if replica:
                replica.stop()
            primary.stop()


def report(results):
    print(f"Full sync of a {results['redis']['replica']} replica under a SET -P 16 rewrite load "
          f"({results['redis']['keys']} keys of {VALUE_SIZE} bytes; primary on CPU 0, load on "
          f"CPU {CLIENT_CPU}, replica on CPU {results['redis']['replica_cpu']})")
    rows = [
        ("dataset (PSS, MiB)", lambda r: f"{r['dataset_kib'] / 1024:.0f}"),
        ("full sync time (s)", lambda r: f"{r['sync_s']:.2f}"),
        ("primary extra memory during sync", lambda r: f"{r['extra_pct']:.1f}%"),
        ("  of it, replication buffers (peak)", lambda r: f"{r['buffers_peak_pct']:.1f}%"),
        ("  less the buffers (the snapshot)", lambda r: f"{r['extra_less_buffers_pct']:.1f}%"),
        ("writes/s before the sync", lambda r: f"{r['before_rps']:.0f}"),
        ("writes/s during the sync", lambda r: f"{r['during_rps']:.0f}"),
        ("  share of before", lambda r: f"{r['throughput_pct']:.0f}%"),
        ("writes/s after it, the replica online", lambda r: f"{r['online_rps']:.0f}"),
        ("  during the sync, share of that", lambda r: f"{r['of_online_pct']:.0f}%"),
        ("writes per primary CPU-s before", lambda r: f"{r['before_per_cpu_s']:.0f}"),
        ("writes per primary CPU-s during", lambda r: f"{r['during_per_cpu_s']:.0f}"),
        ("  share of before", lambda r: f"{r['per_cpu_pct']:.0f}%"),
        ("primary CPU spent on the sync (s)", lambda r: f"{r['sync_cpu_s']:.2f}"),
        ("replica's slowest poll in sync (ms)", lambda r: f"{r['replica_slowest_poll_ms']:.0f}"),
        ("replication lag, median (bytes)", lambda r: f"{r['lag_bytes_median']}"),
        ("replication lag, max (bytes)", lambda r: f"{r['lag_bytes_max']}"),
        ("  as time at the stream's rate (ms)", lambda r: f"{r['lag_ms_median']:.2f}"),
        ("DBSIZE primary / replica", lambda r: "/".join(map(str, r["dbsize"]))),
        (f"of {LAG_CHECK} random keys, differing", lambda r: f"{r['keys_differing']}"),
    ]
    print(f"{'':<38}{'redis primary':>16}{'kayvee primary':>16}")
    for name, fmt in rows:
        print(f"{name:<38}{fmt(results['redis']):>16}{fmt(results['kayvee']):>16}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--keys", type=int, default=2_000_000)
    p.add_argument("--window", type=float, default=3.0,
                   help="seconds of the write rate measured before the sync")
    p.add_argument("--kayvee-bin", help="kayvee-server binary (default: release build)")
    p.add_argument("--replica-cpu", default=CLIENT_CPU,
                   help="CPU the replica runs on (default: the load's; 0 is the primary's)")
    p.add_argument("--replica", choices=["redis", "kayvee"], default="redis",
                   help="the replica of both primaries: redis-server (default) or kayvee-server")
    p.add_argument("--sample-every", type=float, default=SAMPLE_INTERVAL_S,
                   help="seconds between samples of the primary's memory (default 0.02)")
    p.add_argument("--sync-share", type=int,
                   help="the Kayvee primary's repl-sync-share (percent; default: its own)")
    p.add_argument("--disk-sync", action="store_true",
                   help="both primaries sync through a background save's file "
                        "(repl-diskless-sync no)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    args = p.parse_args()
    os.sched_setaffinity(0, {int(CLIENT_CPU)})
    global SAMPLE_EVERY_S
    SAMPLE_EVERY_S = args.sample_every
    binaries = {"redis": "redis-server", "kayvee": args.kayvee_bin or default_kayvee_bin()}
    started = time.time()
    replica_bin = binaries[args.replica]
    results = {kind: measure(kind, binary, args.keys, args.window, args.replica_cpu, replica_bin,
                             args.sync_share, args.disk_sync)
               for kind, binary in binaries.items()}
    report(results)
    print(f"\n({time.time() - started:.0f} s; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    for kind, r in results.items():
        if r["dbsize"][0] != r["dbsize"][1] or r["keys_differing"]:
            sys.exit(f"{kind}: the replica differs from its primary")


if __name__ == "__main__":
    main()

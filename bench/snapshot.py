#!/usr/bin/env python3
"""The snapshot benchmark, side by side: redis-server 7.0.15 (BGSAVE forks) and
kayvee-server (BGSAVE serializes a persistent snapshot on a thread, no fork).

For each server: load KEYS keys of 100 bytes (`key:%012d`, the names redis-benchmark's
`-r` uses), then
  1. a write load alone: redis-benchmark SET -r KEYS -d 100, -c 50 -P 16, about 3 x KEYS requests
     (so ~95% of the keys are rewritten), plus a probe connection timing one SET every 2 ms;
  2. the same write load with a BGSAVE issued 0.3 s into it.
Reported per server: dataset size (PSS after the load minus PSS empty), peak memory during the save
as PSS summed over the server and its children (the forked child for Redis: PSS counts a shared
page once, where summing RSS would count it twice; RSS sums are printed too), the extra memory as a
share of the dataset, write throughput inside the save window vs the same load without a save, the
probe's p99 latency inside the save window vs without, and the time the save takes.

Both servers are pinned to CPU 0 (Kayvee's save thread and Redis's child alike), the load to CPU 1;
with --no-pin the servers may use every CPU (the save thread or the child can run beside the loop).
Standard library only.
With --stream the dataset is one stream of KEYS entries (three short fields each) and the write
load is `XADD mystream * ...`.
Usage: python3 bench/snapshot.py [--keys N] [--stream] [--no-pin] [--kayvee-bin PATH] [--json F]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

from compare import CLIENT_CPU, Server, command, default_kayvee_bin, log

VALUE_SIZE = 100
PROBE_INTERVAL_S = 0.002
SAMPLE_INTERVAL_S = 0.02


def proc_kib(pid, name, path="status"):
    """A `Name: N kB` field of /proc/PID/status or smaps_rollup, or 0 if the process is gone."""
    try:
        with open(f"/proc/{pid}/{path}") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def family(pid):
    """The pid and its children (Redis's BGSAVE child)."""
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return pids


def memory_kib(pid):
    """(PSS, RSS) in KiB summed over the process and its children."""
    pids = family(pid)
    pss = sum(proc_kib(p, "Pss", "smaps_rollup") for p in pids)
    rss = sum(proc_kib(p, "VmRSS") for p in pids)
    return pss, rss


def info_field(port, section, field):
    """One INFO field as a string."""
    reply = command(port, "INFO", section).decode(errors="replace")
    for line in reply.split("\r\n"):
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    raise RuntimeError(f"no INFO field {field}")


# --stream: the dataset is one stream of KEYS entries of three short fields and the write load
# appends to it (XADD mystream * ...), instead of SETs of 100-byte values.
STREAM = False
STREAM_FIELDS = ["f1", "v1", "f2", "v2", "f3", "v3"]


def resp(*args):
    return "".join([f"*{len(args)}\r\n"] + [f"${len(a)}\r\n{a}\r\n" for a in args])


def load(port, keys):
    """SET key:%012d <100 bytes> for every key (with --stream: XADD mystream <n>-1 and three
    fields for each entry) through one pipelined redis-cli --pipe."""
    if STREAM:
        load_stream(port, keys)
        return
    value = "v" * VALUE_SIZE
    proc = subprocess.Popen(["taskset", "-c", CLIENT_CPU, "redis-cli", "-p", str(port), "--pipe"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    chunk = []
    for i in range(keys):
        key = f"key:{i:012d}"
        chunk.append(f"*3\r\n$3\r\nSET\r\n${len(key)}\r\n{key}\r\n${VALUE_SIZE}\r\n{value}\r\n")
        if len(chunk) == 10000:
            proc.stdin.write("".join(chunk).encode())
            chunk = []
    proc.stdin.write("".join(chunk).encode())
    out, err = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"redis-cli --pipe failed: {out!r} {err!r}")


def load_stream(port, entries):
    """XADD mystream <n>-1 f1 v1 f2 v2 f3 v3 for n in 1..=entries."""
    proc = subprocess.Popen(["taskset", "-c", CLIENT_CPU, "redis-cli", "-p", str(port), "--pipe"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    chunk = []
    for i in range(1, entries + 1):
        chunk.append(resp("XADD", "mystream", f"{i}-1", *STREAM_FIELDS))
        if len(chunk) == 10000:
            proc.stdin.write("".join(chunk).encode())
            chunk = []
    proc.stdin.write("".join(chunk).encode())
    out, err = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"redis-cli --pipe failed: {out!r} {err!r}")


class Sampler(threading.Thread):
    """Samples memory every SAMPLE_INTERVAL_S until stopped; keeps the peaks."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak_pss, self.peak_rss = pid, 0, 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            pss, rss = memory_kib(self.pid)
            self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)
            time.sleep(SAMPLE_INTERVAL_S)


class Probe(threading.Thread):
    """One connection sending a SET every PROBE_INTERVAL_S; records (start time, latency)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.samples = port, []
        self.done = threading.Event()

    def run(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            req = b"*3\r\n$3\r\nSET\r\n$5\r\nprobe\r\n$1\r\nx\r\n"
            while not self.done.is_set():
                t0 = time.monotonic()
                s.sendall(req)
                got = b""
                while not got.endswith(b"\r\n"):
                    got += s.recv(64)
                self.samples.append((t0, time.monotonic() - t0))
                time.sleep(PROBE_INTERVAL_S)

    def p99_ms(self, start=None, end=None):
        lat = sorted(d for t, d in self.samples
                     if (start is None or t >= start) and (end is None or t <= end))
        return lat[int(len(lat) * 0.99)] * 1000 if lat else float("nan")


def write_load(port, keys):
    """Starts the rewrite load; returns the redis-benchmark process."""
    cmd = ["taskset", "-c", CLIENT_CPU, "redis-benchmark", "-p", str(port), "-c", "50", "-P", "16",
           "-n", str(3 * keys), "-r", str(keys), "-d", str(VALUE_SIZE), "--csv"]
    cmd += ["XADD", "mystream", "*"] + STREAM_FIELDS if STREAM else ["-t", "set"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def commands_processed(port):
    return int(info_field(port, "stats", "total_commands_processed"))


def run_phase(server, keys, with_save):
    """One write-load run; with_save issues BGSAVE 0.3 s in and measures inside its window."""
    sampler, probe = Sampler(server.proc.pid), Probe(server.port)
    sampler.start()
    probe.start()
    t_start, c_start = time.monotonic(), commands_processed(server.port)
    bench = write_load(server.port, keys)
    time.sleep(0.3)
    result = {}
    if with_save:
        w0, c0 = time.monotonic(), commands_processed(server.port)
        reply = command(server.port, "BGSAVE")
        if not reply.startswith(b"+"):
            raise RuntimeError(f"BGSAVE: {reply!r}")
        time.sleep(0.05)
        while info_field(server.port, "persistence", "rdb_bgsave_in_progress") != "0":
            time.sleep(0.01)
        w1, c1 = time.monotonic(), commands_processed(server.port)
        status = info_field(server.port, "persistence", "rdb_last_bgsave_status")
        if status != "ok":
            raise RuntimeError(f"BGSAVE failed: {status}")
        result.update(save_s=w1 - w0, window_rps=(c1 - c0) / (w1 - w0),
                      window_p99_ms=probe.p99_ms(w0, w1), saved_while_bench=bench.poll() is None)
    else:
        # The same window length as a save takes on this server, from the load's start + 0.3 s.
        w0, c0 = time.monotonic(), commands_processed(server.port)
        time.sleep(server.save_window)
        w1, c1 = time.monotonic(), commands_processed(server.port)
        result.update(window_rps=(c1 - c0) / (w1 - w0), window_p99_ms=probe.p99_ms(w0, w1))
    out, err = bench.communicate(timeout=900)
    t_end, c_end = time.monotonic(), commands_processed(server.port)
    probe.done.set()
    sampler.done.set()
    probe.join()
    sampler.join()
    if bench.returncode != 0:
        raise RuntimeError(f"redis-benchmark failed: {err}")
    result.update(run_rps=(c_end - c_start) / (t_end - t_start), peak_pss_kib=sampler.peak_pss,
                  peak_rss_kib=sampler.peak_rss)
    return result


def measure(kind, binary, keys, port_base, pin):
    """All figures for one server."""
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(kind, binary, port_base, extra=["--dir", tmp, "--save", ""], pin=pin)
        try:
            empty_pss, _ = memory_kib(server.proc.pid)
            log(f"{kind}: loading {keys} keys")
            load(server.port, keys)
            loaded = int(info_field(server.port, "keyspace", "db0").split(",")[0].split("=")[1])
            if STREAM:
                reply = command(server.port, "XLEN", "mystream")
                loaded = int(reply[1:].split(b"\r\n")[0])
            if loaded != keys:
                raise RuntimeError(f"{kind}: {loaded} keys loaded, wanted {keys}")
            base_pss, base_rss = memory_kib(server.proc.pid)
            # An idle save first: how long one takes, so the no-save run measures a window as long.
            t0 = time.monotonic()
            command(server.port, "BGSAVE")
            time.sleep(0.05)
            while info_field(server.port, "persistence", "rdb_bgsave_in_progress") != "0":
                time.sleep(0.01)
            idle_save_s = time.monotonic() - t0
            server.save_window = max(idle_save_s, 0.5)
            log(f"{kind}: idle BGSAVE {idle_save_s:.2f}s; write load without a save")
            plain = run_phase(server, keys, with_save=False)
            before_pss, before_rss = memory_kib(server.proc.pid)
            log(f"{kind}: write load with a BGSAVE")
            saving = run_phase(server, keys, with_save=True)
            dataset = base_pss - empty_pss
            return {
                "keys": keys, "dataset_kib": dataset, "base_pss_kib": base_pss,
                "base_rss_kib": base_rss, "before_save_pss_kib": before_pss,
                "before_save_rss_kib": before_rss, "idle_save_s": idle_save_s,
                "plain": plain, "saving": saving,
                "extra_pct": 100.0 * (saving["peak_pss_kib"] - before_pss) / dataset,
                "extra_rss_pct": 100.0 * (saving["peak_rss_kib"] - before_rss) / dataset,
                "window_throughput_pct": 100.0 * saving["window_rps"] / plain["window_rps"],
            }
        finally:
            server.stop()


def report(results):
    log("")
    head = f"{'':34}{'redis':>14}{'kayvee':>14}"
    print(head)
    rows = [
        ("dataset (PSS, MiB)", lambda r: r["dataset_kib"] / 1024, "{:.1f}"),
        ("save time idle (s)", lambda r: r["idle_save_s"], "{:.2f}"),
        ("save time under load (s)", lambda r: r["saving"]["save_s"], "{:.2f}"),
        ("peak PSS during save (MiB)", lambda r: r["saving"]["peak_pss_kib"] / 1024, "{:.1f}"),
        ("extra memory, PSS (% dataset)", lambda r: r["extra_pct"], "{:.1f}"),
        ("extra memory, RSS sum (% dataset)", lambda r: r["extra_rss_pct"], "{:.1f}"),
        ("writes/s, no save", lambda r: r["plain"]["window_rps"], "{:.0f}"),
        ("writes/s, during save", lambda r: r["saving"]["window_rps"], "{:.0f}"),
        ("throughput during save (%)", lambda r: r["window_throughput_pct"], "{:.1f}"),
        ("probe p99 ms, no save", lambda r: r["plain"]["window_p99_ms"], "{:.2f}"),
        ("probe p99 ms, during save", lambda r: r["saving"]["window_p99_ms"], "{:.2f}"),
    ]
    for name, get, fmt in rows:
        print(f"{name:34}{fmt.format(get(results['redis'])):>14}"
              f"{fmt.format(get(results['kayvee'])):>14}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--keys", type=int, default=2_000_000)
    p.add_argument("--kayvee-bin", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--no-pin", action="store_true", help="let the servers use every CPU")
    p.add_argument("--stream", action="store_true",
                   help="one stream of KEYS entries, the write load XADD to it")
    args = p.parse_args()
    global STREAM
    STREAM = args.stream
    kayvee = args.kayvee_bin or default_kayvee_bin()
    pin = not args.no_pin
    results = {"redis": measure("redis", "redis-server", args.keys, 29500, pin),
               "kayvee": measure("kayvee", kayvee, args.keys, 29700, pin)}
    report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())

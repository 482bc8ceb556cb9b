#!/usr/bin/env python3
"""Side-by-side benchmark: redis-server 7.0.15 and kayvee-server, started the same way, pinned to
CPU 0, driven by redis-benchmark pinned to CPU 1. Prints requests/s and requests per server-CPU-second
for both with Kayvee/Redis ratios, then the resident memory per key after loading N keys.

Standard library only. See bench/README.md. Usage:
    python3 bench/compare.py [--quick] [--kayvee-bin PATH] [--seconds S] [--keys N] [--json FILE]
With KAYVEE_TARGET=redis (or --kayvee-bin redis-server) the "kayvee" side is a second redis-server:
a check of the harness itself, whose ratios should all be close to 1.
"""

import argparse
import csv
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (redis-benchmark -t name, the name its CSV output uses)
TESTS = [
    ("ping_inline", "PING_INLINE"),
    ("ping_mbulk", "PING_MBULK"),
    ("set", "SET"),
    ("get", "GET"),
    ("incr", "INCR"),
    ("mset", "MSET (10 keys)"),
]
PIPELINES = [1, 16]
CLIENTS = 50
SERVER_CPU = "0"
CLIENT_CPU = "1"
START_WAIT_S = 15
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port(start):
    """The first port from `start` that nothing listens on."""
    for port in range(start, start + 2000):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port")


def ping(port):
    """True when the server answers PING with +PONG."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64) == b"+PONG\r\n"
    except OSError:
        return False


class Server:
    """A server process pinned to SERVER_CPU on a free port; `kind` is "redis" or "kayvee"."""

    def __init__(self, kind, binary, port_base):
        self.kind = kind
        self.port = free_port(port_base)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        if os.path.basename(binary) == "redis-server":
            args += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(["taskset", "-c", SERVER_CPU] + args, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log)
        deadline = time.time() + START_WAIT_S
        while not ping(self.port):
            if self.proc.poll() is not None or time.time() > deadline:
                self.log.seek(0)
                tail = self.log.read()[-2000:].decode(errors="replace")
                self.stop()
                raise RuntimeError(f"{kind} ({binary}) did not answer PING on {self.port}:\n{tail}")
            time.sleep(0.05)

    def cpu_seconds(self):
        """utime + stime of the server process, from /proc/PID/stat."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_kib(self):
        """VmRSS of the server process in KiB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def benchmark(port, test, pipeline, requests):
    """Runs one redis-benchmark test; returns requests per second from its CSV output."""
    cmd = ["taskset", "-c", CLIENT_CPU, "redis-benchmark", "-p", str(port), "-c", str(CLIENTS),
           "-n", str(requests), "-P", str(pipeline), "-t", test, "--csv"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr}")
    rows = list(csv.reader(io.StringIO(out.stdout)))
    for row in rows[1:]:
        if row and row[0] != "test":
            return float(row[1])
    raise RuntimeError(f"no CSV row in redis-benchmark output: {out.stdout!r}")


def measure(server, test, pipeline, requests):
    """rps and requests per server-CPU-second for one test against one server."""
    cpu_before = server.cpu_seconds()
    rps = benchmark(server.port, test, pipeline, requests)
    cpu = server.cpu_seconds() - cpu_before
    return {"rps": rps, "cpu_s": cpu, "per_cpu_s": requests / cpu if cpu > 0 else float("inf")}


def calibrate(server, test, pipeline, seconds):
    """A request count that makes the test last about `seconds` against `server`."""
    rps = benchmark(server.port, test, pipeline, 20000 * pipeline)
    return max(20000, int(rps * seconds))


def run_throughput(servers, quick, seconds):
    """Every test at every pipeline depth on both servers; returns result rows."""
    rows = []
    for test, label in TESTS:
        for pipeline in PIPELINES:
            if quick:
                requests = 30000 * (4 if pipeline > 1 else 1)
            else:
                requests = calibrate(servers["redis"], test, pipeline, seconds)
            row = {"test": label, "pipeline": pipeline, "requests": requests}
            for kind, server in servers.items():
                row[kind] = measure(server, test, pipeline, requests)
            log(f"  {label} -P {pipeline}: redis {row['redis']['rps']:.0f}/s "
                f"kayvee {row['kayvee']['rps']:.0f}/s")
            rows.append(row)
    return rows


def ratio(a, b):
    return a / b if b else float("nan")


def print_throughput(rows):
    head = (f"{'test':<16}{'P':>3} {'redis req/s':>13}{'kayvee req/s':>14}{'ratio':>7}"
            f" {'redis req/cpu-s':>16}{'kayvee req/cpu-s':>17}{'ratio':>7}")
    print(head)
    print("-" * len(head))
    for r in rows:
        red, kay = r["redis"], r["kayvee"]
        print(f"{r['test']:<16}{r['pipeline']:>3} {red['rps']:>13.0f}{kay['rps']:>14.0f}"
              f"{ratio(kay['rps'], red['rps']):>7.2f} {red['per_cpu_s']:>16.0f}"
              f"{kay['per_cpu_s']:>17.0f}{ratio(kay['per_cpu_s'], red['per_cpu_s']):>7.2f}")


def mass_insert_file(keys):
    """A temporary file of `keys` RESP `SET key:N <16-byte value>` commands."""
    f = tempfile.NamedTemporaryFile(prefix="kayvee-bench-", suffix=".resp", delete=False)
    chunk = []
    for i in range(keys):
        k = f"key:{i}"
        chunk.append(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n$16\r\n{i:016d}\r\n")
        if len(chunk) == 100000:
            f.write("".join(chunk).encode())
            chunk = []
    f.write("".join(chunk).encode())
    f.close()
    return f.name


def dbsize(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "DBSIZE"], capture_output=True, text=True)
    return int(out.stdout.strip())


def run_memory(binaries, keys):
    """Loads `keys` keys into a fresh server of each kind; returns RSS figures."""
    path = mass_insert_file(keys)
    results = {}
    try:
        for kind, binary in binaries.items():
            server = Server(kind, binary, 31000)
            try:
                time.sleep(0.2)
                empty = server.rss_kib()
                with open(path, "rb") as f:
                    out = subprocess.run(["taskset", "-c", CLIENT_CPU, "redis-cli", "-p",
                                          str(server.port), "--pipe"], stdin=f,
                                         capture_output=True, text=True, timeout=900)
                if f"errors: 0, replies: {keys}" not in out.stdout:
                    raise RuntimeError(f"{kind}: redis-cli --pipe said {out.stdout!r}")
                count = dbsize(server.port)
                if count != keys:
                    raise RuntimeError(f"{kind}: DBSIZE {count}, expected {keys}")
                loaded = server.rss_kib()
                results[kind] = {"empty_kib": empty, "loaded_kib": loaded,
                                 "bytes_per_key": (loaded - empty) * 1024 / keys}
            finally:
                server.stop()
    finally:
        os.unlink(path)
    return results


def print_memory(mem, keys):
    print(f"\nMemory after loading {keys} keys (key:N, 16-byte values), VmRSS:")
    print(f"{'server':<8}{'empty KiB':>11}{'loaded KiB':>12}{'bytes/key':>11}")
    for kind, m in mem.items():
        print(f"{kind:<8}{m['empty_kib']:>11}{m['loaded_kib']:>12}{m['bytes_per_key']:>11.1f}")
    print(f"kayvee/redis bytes per key: "
          f"{ratio(mem['kayvee']['bytes_per_key'], mem['redis']['bytes_per_key']):.2f}")


def default_kayvee_bin():
    """KAYVEE_TARGET=redis -> redis-server; else the release build (built here if missing)."""
    if os.environ.get("KAYVEE_TARGET") == "redis":
        return "redis-server"
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    binary = os.path.join(target, "release", "kayvee-server")
    subprocess.run(["cargo", "build", "--release", "-p", "kayvee-server"], cwd=ROOT, check=True)
    return binary


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: fixed small -n, 100k keys")
    p.add_argument("--kayvee-bin", help="kayvee-server binary (default: release build)")
    p.add_argument("--seconds", type=float, default=6.0, help="target duration per test")
    p.add_argument("--keys", type=int, help="keys for the memory test (default 1000000)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    p.add_argument("--no-memory", action="store_true", help="skip the memory test")
    args = p.parse_args()
    keys = args.keys or (100_000 if args.quick else 1_000_000)
    binaries = {"redis": "redis-server", "kayvee": args.kayvee_bin or default_kayvee_bin()}
    log(f"redis: {binaries['redis']}  kayvee: {binaries['kayvee']}  (servers on CPU {SERVER_CPU},"
        f" redis-benchmark on CPU {CLIENT_CPU}, -c {CLIENTS})")
    servers = {}
    try:
        servers["redis"] = Server("redis", binaries["redis"], 31000)
        servers["kayvee"] = Server("kayvee", binaries["kayvee"], 32000)
        rows = run_throughput(servers, args.quick, args.seconds)
    finally:
        for s in servers.values():
            s.stop()
    print_throughput(rows)
    result = {"throughput": rows, "quick": args.quick}
    if not args.no_memory:
        result["memory"] = run_memory(binaries, keys)
        result["keys"] = keys
        print_memory(result["memory"], keys)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

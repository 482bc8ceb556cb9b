#!/usr/bin/env python3
"""Side-by-side benchmark: redis-server 7.0.15 and kayvee-server, started the same way, pinned to
CPU 0, driven by redis-benchmark (and this script's raw-socket load) pinned to CPU 1. Prints
requests/s and requests per server-CPU-second for both with Kayvee/Redis ratios, then resident memory
per string key and per small and big collection of each type.

Groups (--only, comma-separated; default all): strings (PING SET GET INCR MSET), types (list, set,
hash and zset tests), single (SET and GET with one client, -P 1), newtypes (streams, HyperLogLog,
geo and BITFIELD: XADD, XRANGE of 100, XREADGROUP, XACK, PFADD, PFCOUNT, GEOADD, GEOSEARCH,
BITFIELD INCRBY), scripting (EVALSHA and FCALL of one GET and of ten INCRs), pubsub (PUBLISH to 1, 10, 100
subscribers), multi (MULTI + 10 commands + EXEC),
aof (SET with appendonly yes, appendfsync always and everysec), memory (RSS per string key, and per small
and big hash, sorted set, integer set, string set and list; small hashes twice, with the fields and
values sharing prefixes and without).

Standard library only. See bench/README.md. Usage:
    python3 bench/compare.py [--quick] [--only GROUPS] [--kayvee-bin PATH] [--before-bin PATH]
                             [--seconds S]
                             [--keys N] [--json FILE] [--rounds R]
With KAYVEE_TARGET=redis (or --kayvee-bin redis-server) the "kayvee" side is a second redis-server:
a check of the harness itself, whose ratios should all be close to 1.
"""

import argparse
import csv
import hashlib
import io
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

import rawload

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUPS = ["strings", "types", "single", "newtypes", "scripting", "pubsub", "multi", "aof",
          "memory"]
# The aof group: SET with the AOF on, per appendfsync policy.
AOF_POLICIES = ["always", "everysec"]
# (name shown, redis-benchmark arguments: ["-t", test] or a custom command, the CSV label it prints)
STRING_TESTS = [
    ("PING_INLINE", ["-t", "ping_inline"], "PING_INLINE"),
    ("PING_MBULK", ["-t", "ping_mbulk"], "PING_MBULK"),
    ("SET", ["-t", "set"], "SET"),
    ("GET", ["-t", "get"], "GET"),
    ("INCR", ["-t", "incr"], "INCR"),
    ("MSET", ["-t", "mset"], "MSET (10 keys)"),
]
# Run in this order on a flushed server, so the pops find what the pushes left. LRANGE_N is
# redis-benchmark's `LRANGE mylist 0 N-1` given as a custom command on a list this script prefilled:
# `-t lrange_N` would first run N LPUSHes inside the same measurement of server CPU time.
TYPE_TESTS = [(t.upper(), ["-t", t], t.upper())
              for t in ["lpush", "rpush", "lpop", "rpop", "sadd", "spop", "hset", "zadd", "zpopmin"]]
TYPE_TESTS += [(f"LRANGE_{n}", ["LRANGE", "mylist", "0", str(n - 1)], f"LRANGE mylist 0 {n - 1}")
               for n in [100, 300, 500, 600]]
LRANGE_FILL = 1000
# The newtypes group, in this order on a flushed server (XREADGROUP and XACK read what XADD and the
# prefill left). `__rand_int__` is redis-benchmark's random 12-digit number (with -r).
NEWTYPE_TESTS = [
    ("XADD", ["XADD", "mystream", "*", "f1", "v1", "f2", "v2", "f3", "v3"],
     "XADD mystream * f1 v1 f2 v2 f3 v3"),
    ("XRANGE_100", ["XRANGE", "xfill", "-", "+", "COUNT", "100"], "XRANGE xfill - + COUNT 100"),
    ("XREADGROUP", ["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "mystream", ">"],
     "XREADGROUP GROUP g c COUNT 1 STREAMS mystream >"),
    # Acks the entries XREADGROUP delivered (the prefill's IDs 1-1, 2-1, ...; an ID acked before
    # answers 0, as on Redis).
    ("XACK", ["-r", "100000", "XACK", "xfill", "g", "__rand_int__-1"],
     "XACK xfill g __rand_int__-1"),
    ("PFADD", ["-r", "1000000", "PFADD", "hll", "e:__rand_int__"], "PFADD hll e:__rand_int__"),
    ("PFCOUNT", ["PFCOUNT", "hllfill"], "PFCOUNT hllfill"),
    ("GEOADD", ["-r", "100000", "GEOADD", "geo", "13.361389", "38.115556", "m:__rand_int__"],
     "GEOADD geo 13.361389 38.115556 m:__rand_int__"),
    ("GEOSEARCH", ["GEOSEARCH", "geofill", "FROMLONLAT", "15", "37", "BYRADIUS", "100", "km",
                   "ASC", "COUNT", "10"],
     "GEOSEARCH geofill FROMLONLAT 15 37 BYRADIUS 100 km ASC COUNT 10"),
    ("BITFIELD", ["BITFIELD", "bf", "INCRBY", "u32", "#3", "1"], "BITFIELD bf INCRBY u32 #3 1"),
]
# The scripting group: EVALSHA of a script doing one GET and of one doing ten INCRs, and FCALL of
# the same as functions (loaded by `prepare`; the SHA1s are the scripts' own).
SCRIPT_GET = "return redis.call('GET', KEYS[1])"
SCRIPT_INCR10 = "for i = 1, 10 do redis.call('INCR', KEYS[1]) end return 10"
SCRIPT_LIB = ("#!lua name=benchlib\n"
              "redis.register_function('get1', function(keys, args) "
              "return redis.call('GET', keys[1]) end)\n"
              "redis.register_function('incr10', function(keys, args) "
              "for i = 1, 10 do redis.call('INCR', keys[1]) end return 10 end)\n")
SHA_GET = hashlib.sha1(SCRIPT_GET.encode()).hexdigest()
SHA_INCR10 = hashlib.sha1(SCRIPT_INCR10.encode()).hexdigest()
SCRIPT_TESTS = [
    ("EVALSHA_GET", ["EVALSHA", SHA_GET, "1", "skey"], f"EVALSHA {SHA_GET} 1 skey"),
    ("EVALSHA_INCR10", ["EVALSHA", SHA_INCR10, "1", "ckey"], f"EVALSHA {SHA_INCR10} 1 ckey"),
    ("FCALL_GET", ["FCALL", "get1", "1", "skey"], "FCALL get1 1 skey"),
    ("FCALL_INCR10", ["FCALL", "incr10", "1", "ckey"], "FCALL incr10 1 ckey"),
]
# Entries of the prefilled stream (XRANGE, XACK), elements of the prefilled HyperLogLog, and
# members of the prefilled geo set (on a 0.05-degree grid around 15,37).
XFILL, HLLFILL, GEOFILL = 100000, 20000, 2500
# The single group: one client, no pipelining (every request a round trip).
SINGLE_TESTS = [("SET_c1", ["-t", "set"], "SET"), ("GET_c1", ["-t", "get"], "GET")]
# --quick request counts at -P 1 (times 4 at -P 16), per test; the default is QUICK_REQUESTS.
QUICK_REQUESTS = 15000
QUICK_SMALL = {"LRANGE_100": 4000, "LRANGE_300": 2000, "LRANGE_500": 1500, "LRANGE_600": 1500}
SUBSCRIBERS = [1, 10, 100]
QUICK_PUBLISH = {1: 15000, 10: 5000, 100: 1500}
CHANNEL, PAYLOAD = "chan", "payload"
TXN_COMMANDS = 10
PIPELINES = [1, 16]
CLIENTS = 50
SERVER_CPU = "0"
CLIENT_CPU = "1"
START_WAIT_S = 15
CLK_TCK = os.sysconf("SC_CLK_TCK")
# First port tried for the servers (Kayvee's from PORT_BASE + 1000); KAYVEE_BENCH_PORT moves
# them, so parallel runs on one machine stay apart.
PORT_BASE = int(os.environ.get("KAYVEE_BENCH_PORT", "31000"))


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

    def __init__(self, kind, binary, port_base, extra=(), pin=True):
        self.kind = kind
        self.port = free_port(port_base)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", ""]
        if os.path.basename(binary) == "redis-server":
            args += ["--appendonly", "no", "--daemonize", "no"]
        args += list(extra)
        self.log = tempfile.TemporaryFile()
        pinning = ["taskset", "-c", SERVER_CPU] if pin else []
        self.proc = subprocess.Popen(pinning + args, stdin=subprocess.DEVNULL,
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


def command(port, *args):
    """Sends one command over a fresh connection; returns the first reply bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(rawload.resp(*args))
        return s.recv(4096)


def benchmark(port, bench_args, label, pipeline, requests, clients=CLIENTS):
    """Runs one redis-benchmark test; returns (requests per second from its CSV row `label`,
    the share of its CPU that redis-benchmark used: user + system seconds over wall seconds)."""
    cmd = ["taskset", "-c", CLIENT_CPU, "redis-benchmark", "-p", str(port), "-c", str(clients),
           "-n", str(requests), "-P", str(pipeline), "--csv"] + bench_args
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall_before = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - wall_before
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_cpu = (usage.ru_utime - usage_before.ru_utime) + (usage.ru_stime - usage_before.ru_stime)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr}")
    for row in csv.reader(io.StringIO(out.stdout)):
        if row and row[0] == label:
            return float(row[1]), client_cpu / wall if wall > 0 else 0.0
    raise RuntimeError(f"no CSV row {label!r} in redis-benchmark output: {out.stdout!r}")


def cpu_result(requests, rps, cpu):
    """A measurement: requests/s and requests per server-CPU-second."""
    return {"rps": rps, "cpu_s": cpu, "per_cpu_s": requests / cpu if cpu > 0 else float("inf")}


def measure(server, test, pipeline, requests, clients=CLIENTS):
    """rps and requests per server-CPU-second for one test against one server."""
    _, bench_args, label = test
    cpu_before = server.cpu_seconds()
    rps, client_load = benchmark(server.port, bench_args, label, pipeline, requests, clients)
    result = cpu_result(requests, rps, server.cpu_seconds() - cpu_before)
    result["client_load"] = client_load
    return result


def calibrate(server, test, pipeline, seconds, clients=CLIENTS):
    """A request count that makes the test last about `seconds` against `server`."""
    _, bench_args, label = test
    rps, _ = benchmark(server.port, bench_args, label, pipeline, 10000 * pipeline, clients)
    return max(10000, int(rps * seconds))


def request_counts(redis, tests, pipeline, quick, seconds, clients=CLIENTS):
    """Requests per test: fixed with --quick, else calibrated on redis-server (then flushed)."""
    counts = {}
    for test in tests:
        name = test[0]
        if quick:
            counts[name] = QUICK_SMALL.get(name, QUICK_REQUESTS) * (4 if pipeline > 1 else 1)
        else:
            prepare(redis, name)
            counts[name] = calibrate(redis, test, pipeline, seconds, clients)
    command(redis.port, "FLUSHALL")
    # A pop must not outnumber what the pushes before it left, or it measures empty-list replies.
    pushed = counts.get("LPUSH", 0) + counts.get("RPUSH", 0)
    for pop in ("LPOP", "RPOP"):
        if pop in counts:
            counts[pop] = min(counts[pop], pushed // 2)
    # Nor may XREADGROUP read more entries than XADD added.
    if "XREADGROUP" in counts:
        counts["XREADGROUP"] = min(counts["XREADGROUP"], counts["XADD"])
    return counts


def prepare(server, name):
    """Puts the data a test reads in place: the LRANGE tests' list of LRANGE_FILL elements; the
    newtypes group's stream (with a consumer group whose pending list XACK empties), HyperLogLog
    and geo set."""
    if name == "LRANGE_100":
        command(server.port, "DEL", "mylist")
        command(server.port, "RPUSH", "mylist", *(["xxx"] * LRANGE_FILL))
    elif name == "XADD":
        pipe(server.port, [("DEL", "mystream", "xfill", "hllfill", "geofill")]
             + [("XADD", "xfill", f"{i}-1", "f1", "v1", "f2", "v2", "f3", "v3")
                for i in range(1, XFILL + 1)]
             + [("XGROUP", "CREATE", "xfill", "g", "0"),
                ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "xfill", ">")]
             + [("PFADD", "hllfill", *[f"e:{j}" for j in range(i, i + 100)])
                for i in range(0, HLLFILL, 100)]
             + [("GEOADD", "geofill", *[a for j in range(50) for a in (
                 f"{13.5 + 0.05 * (i % 50):.2f}", f"{36 + 0.05 * j:.2f}", f"m:{i}:{j}")])
                for i in range(GEOFILL // 50)])
    elif name == "EVALSHA_GET":
        command(server.port, "SCRIPT", "LOAD", SCRIPT_GET)
        command(server.port, "SCRIPT", "LOAD", SCRIPT_INCR10)
        command(server.port, "FUNCTION", "LOAD", "REPLACE", SCRIPT_LIB)
        command(server.port, "SET", "skey", "x" * 16)
    elif name == "XREADGROUP":
        command(server.port, "XGROUP", "CREATE", "mystream", "g", "0", "MKSTREAM")


def pipe(port, commands):
    """Sends commands over one connection and reads every reply (prefills); raises on an error
    reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(b"".join(rawload.resp(*c) for c in commands))
        data, pos, seen = b"", 0, 0
        while seen < len(commands):
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("server closed the connection during a prefill")
            data = data[pos:] + chunk
            pos = 0
            while seen < len(commands):
                end = reply_end(data, pos)
                if end is None:
                    break
                if data[pos:pos + 1] == b"-":
                    raise RuntimeError(f"prefill command {commands[seen][:3]} failed: "
                                       f"{data[pos:end]!r}")
                pos, seen = end, seen + 1


def reply_end(data, i):
    """The index after the RESP2 reply at `i`, or None when it is incomplete."""
    eol = data.find(b"\r\n", i)
    if eol < 0:
        return None
    kind, head = data[i:i + 1], data[i + 1:eol]
    if kind == b"$":
        size = int(head)
        end = eol + 2 + (size + 2 if size >= 0 else 0)
        return end if end <= len(data) else None
    if kind == b"*":
        i = eol + 2
        for _ in range(max(int(head), 0)):
            i = reply_end(data, i)
            if i is None:
                return None
        return i
    return eol + 2


def log_row(row):
    log(f"  {row['test']} -P {row['pipeline']}: redis {row['redis']['rps']:.0f}/s "
        f"kayvee {row['kayvee']['rps']:.0f}/s")


def run_benchmark_tests(servers, tests, quick, seconds, rounds, pipelines=PIPELINES,
                        clients=CLIENTS):
    """Every test at every pipeline depth on every server, `rounds` times. In a round the
    servers are flushed, then each test runs on one server and at once on the other(s) (the
    order rotates from test to test and round to round), so the runs of a test see the same
    moment of a noisy host. Returns one row per test and depth: the median over rounds of each
    figure, and of the per-round Kayvee/Redis ratios (with their range); with a `before` server
    (an earlier build), also the per-round Kayvee/before ratios."""
    rows = []
    for pipeline in pipelines:
        counts = request_counts(servers["redis"], tests, pipeline, quick, seconds, clients)
        results = {}
        for rnd in range(rounds):
            for server in servers.values():
                command(server.port, "FLUSHALL")
            for i, test in enumerate(tests):
                order = list(servers.items())
                turn = (i + rnd) % len(order)
                order = order[turn:] + order[:turn]
                for kind, server in order:
                    prepare(server, test[0])
                    results.setdefault((kind, test[0]), []).append(
                        measure(server, test, pipeline, counts[test[0]], clients))
        for name, _, _ in tests:
            row = {"test": name, "pipeline": pipeline, "requests": counts[name], "rounds": rounds}
            for kind in servers:
                row[kind] = median_result(results[kind, name])
            for key in ("rps", "per_cpu_s"):
                pairs = [ratio(k[key], r[key])
                         for k, r in zip(results["kayvee", name], results["redis", name])]
                row[f"ratio_{key}"] = {"median": median(pairs), "min": min(pairs),
                                       "max": max(pairs)}
                if "before" in servers:
                    pairs = [ratio(k[key], b[key])
                             for k, b in zip(results["kayvee", name], results["before", name])]
                    row[f"vs_before_{key}"] = {"median": median(pairs), "min": min(pairs),
                                               "max": max(pairs)}
            log_row(row)
            rows.append(row)
    rows.sort(key=lambda r: [t[0] for t in tests].index(r["test"]))
    return rows


def median(values):
    """The median of a non-empty list of numbers."""
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def median_result(results):
    """One measurement whose every figure is the median of that figure over `results`."""
    return {key: median([r[key] for r in results]) for key in results[0]}


def measure_publish(server, subscribers, pipeline, requests):
    """PUBLISH chan payload via redis-benchmark with `subscribers` raw-socket subscribers; server
    CPU is counted until every subscriber has received every message."""
    subs = rawload.Subscribers(server.port, CHANNEL, subscribers)
    try:
        cpu_before = server.cpu_seconds()
        rps, _ = benchmark(server.port, ["PUBLISH", CHANNEL, PAYLOAD],
                           f"PUBLISH {CHANNEL} {PAYLOAD}", pipeline, requests)
        size = len(rawload.published_message(CHANNEL, PAYLOAD))
        got = subs.wait_for(requests * size, CLIENTS * pipeline * size)
        return cpu_result(got // size, rps, server.cpu_seconds() - cpu_before)
    finally:
        subs.close()


def run_pubsub(servers, quick, seconds):
    """PUBLISH with 1, 10 and 100 subscribers at every pipeline depth on both servers."""
    rows = []
    for subscribers in SUBSCRIBERS:
        for pipeline in PIPELINES:
            requests = QUICK_PUBLISH[subscribers] * (4 if pipeline > 1 else 1)
            if not quick:
                rps = measure_publish(servers["redis"], subscribers, pipeline, 10000 * pipeline)
                requests = max(10000, int(rps["rps"] * seconds))
            row = {"test": f"PUBLISH {subscribers} sub", "pipeline": pipeline,
                   "requests": requests}
            for kind, server in servers.items():
                row[kind] = measure_publish(server, subscribers, pipeline, requests)
            log_row(row)
            rows.append(row)
    return rows


def measure_multi(server, pipeline, seconds):
    """Time-bounded MULTI + TXN_COMMANDS + EXEC load; rates count transactions."""
    cpu_before = server.cpu_seconds()
    done, elapsed = rawload.multi_exec_load(server.port, CLIENTS, pipeline, TXN_COMMANDS, seconds)
    result = cpu_result(done, done / elapsed, server.cpu_seconds() - cpu_before)
    result["transactions"] = done
    return result


def run_multi(servers, quick, seconds):
    """MULTI/EXEC transactions of TXN_COMMANDS commands at every pipeline depth on both servers."""
    rows = []
    for pipeline in PIPELINES:
        row = {"test": f"MULTI/EXEC {TXN_COMMANDS}", "pipeline": pipeline}
        for kind, server in servers.items():
            command(server.port, "FLUSHALL")
            row[kind] = measure_multi(server, pipeline, 1.0 if quick else seconds)
        log_row(row)
        rows.append(row)
    return rows


def run_aof(binaries, args):
    """SET throughput with the AOF on (each server in its own empty directory), per
    appendfsync policy; rows named SET_AOF_<policy>."""
    rows = []
    test = ("SET", ["-t", "set"], "SET")
    for policy in AOF_POLICIES:
        servers = {}
        dirs = []
        try:
            for kind, base in (("redis", 33000), ("kayvee", 34000)):
                d = tempfile.TemporaryDirectory(prefix=f"aofbench-{kind}-")
                dirs.append(d)
                extra = ["--dir", d.name, "--appendonly", "yes", "--appendfsync", policy,
                         "--save", ""]
                servers[kind] = Server(kind, binaries[kind], base, extra)
            for pipeline in PIPELINES:
                if args.quick:
                    n = QUICK_REQUESTS * (4 if pipeline > 1 else 1)
                else:
                    n = calibrate(servers["redis"], test, pipeline, args.seconds)
                row = {"test": f"SET_AOF_{policy}", "pipeline": pipeline, "requests": n}
                for kind, server in servers.items():
                    row[kind] = measure(server, test, pipeline, n)
                log_row(row)
                rows.append(row)
        finally:
            for s in servers.values():
                s.stop()
            for d in dirs:
                d.cleanup()
    return rows


def ratio(a, b):
    return a / b if b else float("nan")


def print_throughput(rows):
    head = (f"{'test':<18}{'P':>3} {'redis req/s':>13}{'kayvee req/s':>14}{'ratio':>7}"
            f" {'redis req/cpu-s':>16}{'kayvee req/cpu-s':>17}{'ratio':>7}"
            f" {'ratio range':>11} {'client':>6}")
    print(head)
    print("-" * len(head))
    for r in rows:
        red, kay = r["redis"], r["kayvee"]
        rps_ratio = r.get("ratio_rps", {}).get("median", ratio(kay["rps"], red["rps"]))
        cpu_ratio = r.get("ratio_per_cpu_s", {}).get(
            "median", ratio(kay["per_cpu_s"], red["per_cpu_s"]))
        spread = (f"{r['ratio_rps']['min']:.2f}-{r['ratio_rps']['max']:.2f}"
                  if r.get("rounds", 1) > 1 else "")
        client = max(red.get("client_load", 0.0), kay.get("client_load", 0.0))
        client = f"{100 * client:.0f}%" if client else ""
        print(f"{r['test']:<18}{r['pipeline']:>3} {red['rps']:>13.0f}{kay['rps']:>14.0f}"
              f"{rps_ratio:>7.2f} {red['per_cpu_s']:>16.0f}"
              f"{kay['per_cpu_s']:>17.0f}{cpu_ratio:>7.2f} {spread:>11} {client:>6}")
    if any(r.get("rounds", 1) > 1 for r in rows):
        print("(strings and types rows: medians over rounds; a ratio is the median of the"
              " per-round Kayvee/Redis ratios, `ratio range` their min-max)")
    if any(r["test"].startswith("MULTI") for r in rows):
        print(f"(MULTI/EXEC rows count transactions of {TXN_COMMANDS + 2} commands, not commands;"
              f" -P is transactions per write)")
    print("(client: the larger share of its CPU that redis-benchmark used in the row; near 100%"
          " the client, not the server, sets the pace)")
    before = [r for r in rows if "before" in r]
    if before:
        print_before(before)


def print_before(rows):
    """Kayvee against an earlier build (`--before-bin`), measured in the same rounds."""
    head = (f"\n{'test':<18}{'P':>3} {'before req/s':>13}{'kayvee req/s':>14}{'ratio':>7}"
            f" {'before/redis cpu':>17}{'kayvee/redis cpu':>17} {'ratio range':>11}")
    print(head)
    print("-" * len(head))
    for r in rows:
        bef, kay, red = r["before"], r["kayvee"], r["redis"]
        spread = f"{r['vs_before_rps']['min']:.2f}-{r['vs_before_rps']['max']:.2f}"
        print(f"{r['test']:<18}{r['pipeline']:>3} {bef['rps']:>13.0f}{kay['rps']:>14.0f}"
              f"{r['vs_before_rps']['median']:>7.2f}"
              f" {ratio(bef['per_cpu_s'], red['per_cpu_s']):>17.2f}"
              f"{r['ratio_per_cpu_s']['median']:>17.2f} {spread:>11}")
    print("(Kayvee against the earlier build in the same rounds: req/s ratio median and range;"
          " requests per server-CPU-second of each relative to Redis's)")


def string_commands(i):
    """`SET key:N <16-byte value>`."""
    return [("SET", f"key:{i}", f"{i:016d}")]


def hash_commands(i, n=10):
    """`HSET hash:N field:0 <16-byte value> ... field:<n-1> <16-byte value>`: n fields."""
    args = ["HSET", f"hash:{i}"]
    for j in range(n):
        args += [f"field:{j}", f"{i:014d}:{j}"[-16:]]
    return [tuple(args)]


def unshared_hash_commands(i, n=10):
    """`HSET uhash:N afield0 <16 hex digits> ... jfield9 <16 hex digits>`: n fields of the
    hashes row's sizes whose fields (and, but for chance, values) share no prefix, the case
    where a flat hash's shared prefixes save nothing."""
    args = ["HSET", f"uhash:{i}"]
    for j in range(n):
        value = hashlib.sha1(f"{i}:{j}".encode()).hexdigest()[:16]
        args += [f"{chr(ord('a') + j % 26)}field{j % 10}", value]
    return [tuple(args)]


def zset_commands(i, n=10):
    """`ZADD zset:N 0.5 member:0 ... <n-1>.5 member:<n-1>`: n members."""
    args = ["ZADD", f"zset:{i}"]
    for j in range(n):
        args += [f"{j}.5", f"member:{j}"]
    return [tuple(args)]


def intset_commands(i, n=10):
    """`SADD iset:N <n small integers>`: distinct members below 32768 (Redis's 16-bit intset
    while n <= 512)."""
    return [("SADD", f"iset:{i}", *[str((i + j * 97) % 32768) for j in range(n)])]


def strset_commands(i, n=10):
    """`SADD sset:N member:0 ... member:<n-1>`: n short strings."""
    return [("SADD", f"sset:{i}", *[f"member:{j}" for j in range(n)])]


def list_commands(i, n=10):
    """`RPUSH list:N element:0 ... element:<n-1>`: n short elements."""
    return [("RPUSH", f"list:{i}", *[f"element:{j}" for j in range(n)])]


def stream_commands(i):
    """`XADD stream <i+1>-1 f1 v1 f2 v2 f3 v3`: one entry of three short fields (every entry of
    the dataset goes to one stream)."""
    return [("XADD", "stream", f"{i + 1}-1", "f1", f"v{i % 1000}", "f2", "v2", "f3", "v3")]


def script_commands(i):
    """`SCRIPT LOAD` of a distinct small script (the memory 10,000 cached scripts take)."""
    return [("SCRIPT", "LOAD", f"return redis.call('GET', KEYS[1]) or {i}")]


def big(generate):
    """The same command shape with 1,000 elements (Redis's big encodings: hashtable, skiplist,
    quicklist of several nodes)."""
    return lambda i: generate(i, 1000)


# (dataset, what one item is, how many in a full / quick run (None: --keys), its commands, shape)
DATASETS = [
    ("strings", "key", None, string_commands, "SET key:N, 16-byte value"),
    ("hashes", "hash", (100_000, 20_000), hash_commands, "HSET hash:N, 10 fields of 16 B"),
    ("unshared hashes", "hash", (100_000, 20_000), unshared_hash_commands,
     "HSET uhash:N, no shared prefix"),
    ("zsets", "zset", (100_000, 20_000), zset_commands, "ZADD zset:N, 10 members"),
    ("intsets", "set", (100_000, 20_000), intset_commands, "SADD iset:N, 10 small integers"),
    ("strsets", "set", (100_000, 20_000), strset_commands, "SADD sset:N, 10 short strings"),
    ("lists", "list", (100_000, 20_000), list_commands, "RPUSH list:N, 10 short elements"),
    ("big hashes", "hash", (10_000, 2_000), big(hash_commands), "HSET, 1000 fields of 16 B"),
    ("big zsets", "zset", (10_000, 2_000), big(zset_commands), "ZADD, 1000 members"),
    ("big intsets", "set", (10_000, 2_000), big(intset_commands), "SADD, 1000 integers"),
    ("big strsets", "set", (10_000, 2_000), big(strset_commands), "SADD, 1000 short strings"),
    ("big lists", "list", (10_000, 2_000), big(list_commands), "RPUSH, 1000 short elements"),
    ("stream entries", "entry", (1_000_000, 100_000), stream_commands,
     "XADD to one stream, 3 short fields"),
    ("scripts", "script", (10_000, 2_000), script_commands, "SCRIPT LOAD, distinct scripts"),
]
# Datasets whose items all go to one key, and those that make no key.
ONE_KEY = {"stream entries"}
NO_KEY = {"scripts"}


def mass_insert_file(count, generate):
    """A temporary file of the RESP commands `generate(i)` for i in 0..count."""
    f = tempfile.NamedTemporaryFile(prefix="kayvee-bench-", suffix=".resp", delete=False)
    chunk = []
    for i in range(count):
        chunk += [rawload.resp(*c) for c in generate(i)]
        if len(chunk) >= 100000:
            f.write(b"".join(chunk))
            chunk = []
    f.write(b"".join(chunk))
    f.close()
    return f.name


def dbsize(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "DBSIZE"], capture_output=True, text=True)
    return int(out.stdout.strip())


def load_and_measure(kind, binary, path, count, keys_expected=None):
    """A fresh server loaded from `path` by redis-cli --pipe; its RSS before and after."""
    server = Server(kind, binary, PORT_BASE)
    try:
        time.sleep(0.2)
        empty = server.rss_kib()
        with open(path, "rb") as f:
            out = subprocess.run(["taskset", "-c", CLIENT_CPU, "redis-cli", "-p",
                                  str(server.port), "--pipe"], stdin=f,
                                 capture_output=True, text=True, timeout=900)
        if f"errors: 0, replies: {count}" not in out.stdout:
            raise RuntimeError(f"{kind}: redis-cli --pipe said {out.stdout!r} {out.stderr[-500:]!r}")
        keys = dbsize(server.port)
        if keys != (count if keys_expected is None else keys_expected):
            raise RuntimeError(f"{kind}: DBSIZE {keys}, expected {count if keys_expected is None else keys_expected}")
        loaded = server.rss_kib()
        return {"empty_kib": empty, "loaded_kib": loaded, "count": count,
                "bytes_per_item": (loaded - empty) * 1024 / count}
    finally:
        server.stop()


def run_memory(binaries, keys, quick, only=None):
    """Loads each dataset (those named in `only`, default all) into a fresh server of each kind;
    returns RSS figures per dataset."""
    results = {}
    for name, _, counts, generate, _ in DATASETS:
        if only and name not in only:
            continue
        count = keys if counts is None else counts[1 if quick else 0]
        path = mass_insert_file(count, generate)
        try:
            expect = 1 if name in ONE_KEY else 0 if name in NO_KEY else None
            results[name] = {kind: load_and_measure(kind, binary, path, count, expect)
                             for kind, binary in binaries.items() if binary}
        finally:
            os.unlink(path)
        log(f"  memory {name}: " + " ".join(f"{k} {m['bytes_per_item']:.1f} B"
                                            for k, m in results[name].items()))
    return results


def print_memory(mem):
    print("\nMemory, VmRSS above the empty server's, per item (redis-cli --pipe load):")
    print(f"{'dataset':<36}{'server':<8}{'empty KiB':>11}{'loaded KiB':>12}{'bytes/item':>12}")
    for name, item, _, _, shape in DATASETS:
        if name not in mem:
            continue
        what = f"{mem[name]['redis']['count']} {name}"
        for kind, m in mem[name].items():
            print(f"{what:<36}{kind:<8}{m['empty_kib']:>11}{m['loaded_kib']:>12}"
                  f"{m['bytes_per_item']:>12.1f}")
            what = f"  ({shape})"
        print(f"{'':<36}kayvee/redis bytes per {item}: "
              f"{ratio(mem[name]['kayvee']['bytes_per_item'], mem[name]['redis']['bytes_per_item']):.2f}")


def default_kayvee_bin():
    """KAYVEE_TARGET=redis -> redis-server; else the release build (built here if missing)."""
    if os.environ.get("KAYVEE_TARGET") == "redis":
        return "redis-server"
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    binary = os.path.join(target, "release", "kayvee-server")
    subprocess.run(["cargo", "build", "--release", "-p", "kayvee-server"], cwd=ROOT, check=True)
    return binary


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke run: fixed small -n, 100k keys, 20k hashes and zsets")
    p.add_argument("--only", default=",".join(GROUPS),
                   help=f"comma-separated groups to run, of: {' '.join(GROUPS)}")
    p.add_argument("--kayvee-bin", help="kayvee-server binary (default: release build)")
    p.add_argument("--before-bin",
                   help="an earlier kayvee-server build, run in the same rounds of the strings,"
                        " types and single groups (a before/after table)")
    p.add_argument("--seconds", type=float, default=4.0, help="target duration per test")
    p.add_argument("--keys", type=int, help="string keys for the memory test (default 1000000)")
    p.add_argument("--datasets",
                   help="comma-separated memory datasets to load (default all): "
                        + ", ".join(d[0] for d in DATASETS))
    p.add_argument("--json", help="also write the results as JSON to this file")
    p.add_argument("--rounds", type=int,
                   help="rounds of the strings and types tests, reported as medians"
                        " (default 3; 1 with --quick)")
    p.add_argument("--no-memory", action="store_true", help="skip the memory group")
    p.add_argument("--tests",
                   help="comma-separated test names (e.g. LRANGE_100,HSET): run only these rows of"
                        " the chosen groups (SET and GET also pick the single group's SET_c1, GET_c1; keep the pushes a pop reads: LPUSH with LPOP, SADD with SPOP)")
    args = p.parse_args()
    args.only = [g.strip() for g in args.only.split(",") if g.strip()]
    unknown = [g for g in args.only if g not in GROUPS]
    if unknown:
        p.error(f"unknown group(s) {unknown}; groups are {GROUPS}")
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.no_memory and "memory" in args.only:
        args.only.remove("memory")
    args.tests = {t.strip().upper() for t in args.tests.split(",")} if args.tests else None
    return args


def chosen(tests, names):
    """The rows of `tests` named in `names` (all when `names` is None); SET names the single
    group's SET_c1 too."""
    if names is None:
        return tests
    return [t for t in tests if t[0].upper() in names or t[0].upper().removesuffix("_C1") in names]


def run_throughput(binaries, args):
    """The throughput groups in `args.only`, with one server of each kind; returns rows."""
    groups = {
        "strings": lambda sv: run_benchmark_tests(sv, chosen(STRING_TESTS, args.tests), args.quick, args.seconds,
                                                  args.rounds),
        "types": lambda sv: run_benchmark_tests(sv, chosen(TYPE_TESTS, args.tests), args.quick, args.seconds,
                                                args.rounds),
        "single": lambda sv: run_benchmark_tests(sv, chosen(SINGLE_TESTS, args.tests), args.quick, args.seconds,
                                                 args.rounds, pipelines=[1], clients=1),
        "newtypes": lambda sv: run_benchmark_tests(sv, chosen(NEWTYPE_TESTS, args.tests), args.quick, args.seconds,
                                                   args.rounds),
        "scripting": lambda sv: run_benchmark_tests(sv, chosen(SCRIPT_TESTS, args.tests), args.quick, args.seconds,
                                                    args.rounds),
        "pubsub": lambda sv: run_pubsub(sv, args.quick, args.seconds),
        "multi": lambda sv: run_multi(sv, args.quick, args.seconds),
    }
    rows = []
    servers = {}
    try:
        servers["redis"] = Server("redis", binaries["redis"], PORT_BASE)
        servers["kayvee"] = Server("kayvee", binaries["kayvee"], PORT_BASE + 1000)
        if binaries.get("before"):
            servers["before"] = Server("before", binaries["before"], PORT_BASE + 2000)
        for group, run in groups.items():
            if group in args.only:
                log(f"{group}:")
                # The pub/sub and MULTI groups compare two servers only.
                two = {k: v for k, v in servers.items() if k != "before"}
                rows += run(servers if group in ("strings", "types", "single", "newtypes") else two)
    finally:
        for s in servers.values():
            s.stop()
    return rows


def main():
    args = parse_args()
    keys = args.keys or (100_000 if args.quick else 1_000_000)
    binaries = {"redis": "redis-server", "kayvee": args.kayvee_bin or default_kayvee_bin(),
                "before": args.before_bin}
    # This script's own load (subscribers, MULTI/EXEC) runs on the client CPU, like redis-benchmark.
    os.sched_setaffinity(0, {int(CLIENT_CPU)})
    log(f"redis: {binaries['redis']}  kayvee: {binaries['kayvee']}  (servers on CPU {SERVER_CPU},"
        f" clients on CPU {CLIENT_CPU}, -c {CLIENTS}); load average {os.getloadavg()}")
    started = time.time()
    result = {"quick": args.quick, "groups": args.only}
    rows = run_throughput(binaries, args)
    if "aof" in args.only:
        log("aof:")
        rows += run_aof(binaries, args)
    if rows:
        print_throughput(rows)
        result["throughput"] = rows
    if "memory" in args.only:
        log("memory:")
        only = [d.strip() for d in args.datasets.split(",")] if args.datasets else None
        result["memory"] = run_memory(binaries, keys, args.quick, only)
        print_memory(result["memory"])
    print(f"\n({time.time() - started:.0f} s; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

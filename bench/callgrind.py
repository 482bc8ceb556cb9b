#!/usr/bin/env python3
"""User-space instructions per request of kayvee-server for redis-benchmark's own tests (the
strings and types rows of bench/compare.py), counted by valgrind's callgrind: instruction counts
do not depend on the machine's load, so this runs on a busy machine where req/s figures would
not. The set-ups differ from compare.py's where that would measure nothing: LPOP pops from 60
lists of 1,000 elements, SPOP from a 60,000-member set (compare.py's SPOP mostly finds its set
empty), LRANGE_100 reads a 100-element list. The rows HGET, HGETALL and HSET_10 read and
overwrite a field of a hash of 10 fields shaped as compare.py's memory dataset (`field:0`.. and
16-byte values), small enough to stay flat; ZADD_10, ZSCORE_10 and ZRANGE_10 work on a 10-member
sorted set in its small form. These rows send a command of their own (with `-r 10`), not a
redis-benchmark test.

For each binary and row: the server runs under callgrind with collection on; the rows'
set-up is loaded, counters are zeroed (`callgrind_control --zero`), redis-benchmark sends N
requests (-c 50, -P 1 or -P 16), and a dump (`callgrind_control --dump`) gives the total.
The figure is that total divided by N. Repeated runs of one binary differ by up to a few
per cent (how many commands each read brings), most at -P 1.

    python3 bench/callgrind.py                      # the release build
    python3 bench/callgrind.py --bin A --bin B      # side by side, ratios against the first
    python3 bench/callgrind.py --rows SET,GET --pipelines 16
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import socket
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    """A port nothing listens on now (several runs of this script may share the machine)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

# A hash of 10 fields shaped as compare.py's memory dataset: `field:J` -> `00000000000042:J`.
SMALL_HASH = [["HSET", "hsmall"] + [x for j in range(10) for x in (f"field:{j}", f"{42:014d}:{j}")]]

# A sorted set of 10 members sharing the prefix `member:00000000000` (what `__rand_int__` becomes
# at -r 10), scores 0.5..9.5: the small (listpack-sized) set the ZSET rows read and update.
ZSET10 = [["ZADD", "zs"] + [w for i in range(10) for w in (f"{i}.5", f"member:{i:012d}")]]

# name: (redis-benchmark -t test, or a command's words sent with -r 10, set-up commands)
ROWS = {
    "PING_MBULK": ("ping_mbulk", []),
    "SET": ("set", []),
    "GET": ("get", [["SET", "key:__rand_int__", "xxx"]]),
    "LPUSH": ("lpush", []),
    "LPOP": ("lpop", [["RPUSH", "mylist"] + ["xxx"] * 1000] * 60),
    "SADD": ("sadd", []),
    "SPOP": ("spop", [["SADD", "myset"] + [f"m{i}" for i in range(60000)]]),
    "HSET": ("hset", []),
    "INCR": ("incr", []),
    "MSET": ("mset", []),
    "LRANGE_100": ("lrange_100", [["RPUSH", "mylist"] + ["xxx"] * 100]),
    "HGET": (["HGET", "hsmall", "field:7"], SMALL_HASH),
    "HGETALL": (["HGETALL", "hsmall"], SMALL_HASH),
    "HSET_10": (["HSET", "hsmall", "field:7", f"{42:014d}:9"], SMALL_HASH),
    # A new score for one of the 10 members (the entry moves), ZSCORE of one, the whole set.
    "ZADD_10": (["ZADD", "zs", "__rand_int__", "member:__rand_int__"], ZSET10),
    "ZSCORE_10": (["ZSCORE", "zs", "member:000000000007"], ZSET10),
    "ZRANGE_10": (["ZRANGE", "zs", "0", "-1"], ZSET10),
}


def bench_args(test):
    """redis-benchmark's arguments for a row's test: a built-in test, or a command's words."""
    if isinstance(test, list):
        return ["-r", "10", *test]
    return ["-t", test]


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                          text=True, timeout=120).stdout.strip()


def wait_pong(port, proc, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited")
        if cli(port, "PING") == "PONG":
            return
        time.sleep(0.2)
    raise RuntimeError("no PONG")


def measure(binary, row, pipeline, n, workdir):
    test, setup = ROWS[row]
    port = free_port()
    out = os.path.join(workdir, "cg.out")
    for f in glob.glob(out + "*"):
        os.remove(f)
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
         "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "server.log"), "w"), cwd=workdir)
    try:
        wait_pong(port, proc)
        for cmd in setup:
            cli(port, *cmd)
        # A warm-up: the first requests allocate the clients' buffers and grow tables.
        subprocess.run(["redis-benchmark", "-p", str(port), "-c", "50", "-P", str(pipeline),
                        "-n", str(max(n // 10, 500)), "-q", *bench_args(test)], capture_output=True)
        subprocess.run(["callgrind_control", "--zero", str(proc.pid)], capture_output=True,
                       check=True)
        subprocess.run(["redis-benchmark", "-p", str(port), "-c", "50", "-P", str(pipeline),
                        "-n", str(n), "-q", *bench_args(test)], capture_output=True, check=True)
        subprocess.run(["callgrind_control", "--dump", str(proc.pid)], capture_output=True,
                       check=True)
        time.sleep(0.5)
        dumps = sorted(glob.glob(out + ".*"), key=os.path.getmtime)
        if not dumps:
            raise RuntimeError("no callgrind dump")
        with open(dumps[-1]) as f:
            text = f.read()
        m = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
        return int(m.group(1)) / n
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", action="append", help="kayvee-server binary (repeatable)")
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows")
    p.add_argument("--pipelines", default="1,16", help="comma-separated -P values")
    p.add_argument("--n", type=int, default=20000, help="requests at -P 16 (a quarter at -P 1)")
    args = p.parse_args()
    for tool in ("valgrind", "callgrind_control", "redis-benchmark", "redis-cli"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed")
    bins = [os.path.abspath(b) for b in args.bin or [os.path.join(ROOT, "target", "release", "kayvee-server")]]
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    pipes = [int(x) for x in args.pipelines.split(",")]
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for row in rows:
            for pipe in pipes:
                n = args.n if pipe > 1 else args.n // 4
                if row == "LRANGE_100":
                    n //= 4
                for b in bins:
                    results[(row, pipe, b)] = measure(b, row, pipe, n, work)
                    print(f"{row} -P {pipe} {b}: {results[(row, pipe, b)]:,.0f} Ir/request",
                          file=sys.stderr, flush=True)
    head = f"{'row':<18}" + "".join(f"{os.path.basename(b)[-14:]:>16}" for b in bins)
    if len(bins) > 1:
        head += "".join(f"{'ratio ' + str(i + 1):>10}" for i in range(1, len(bins)))
    print("Ir per request (callgrind, -c 50)")
    print(head)
    for row in rows:
        for pipe in pipes:
            vals = [results[(row, pipe, b)] for b in bins]
            line = f"{row + ' -P ' + str(pipe):<18}" + "".join(f"{v:>16,.0f}" for v in vals)
            line += "".join(f"{v / vals[0]:>10.2f}" for v in vals[1:])
            print(line)


if __name__ == "__main__":
    main()

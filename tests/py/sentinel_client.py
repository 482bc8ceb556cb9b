"""A redis-py (Debian's 4.3.4) client that finds its primary through Sentinel and keeps writing
across a failover: each write is `SET k<i> <i>` then `WAIT 1 2000`; a write is acknowledged
when WAIT counts at least one replica. Connection errors (the primary killed, a demoted
primary's -READONLY, which redis-py's Sentinel pool turns into a reconnection) are retried
after a short sleep, as an application would.

Run: python3 tests/py/sentinel_client.py <sentinel ports, comma separated> <stop file>
<progress file>. Until the stop file exists it writes; the progress file holds the number of
acknowledged writes (rewritten every 20). Then it asks Sentinel for the primary, checks that
every acknowledged key is there with its value, prints a JSON summary and exits non-zero when
one is missing. tests/tests/sentinel.rs runs it (the same script passes against redis-server
7.0.15 primaries and replicas, which is how it was written).
"""

import json
import os
import sys
import time

import redis
from redis.exceptions import ConnectionError, ReadOnlyError, ResponseError, TimeoutError
from redis.sentinel import Sentinel

SENTINELS = [("127.0.0.1", int(p)) for p in sys.argv[1].split(",")]
STOP_FILE = sys.argv[2]
PROGRESS_FILE = sys.argv[3]


def write_progress(n):
    tmp = PROGRESS_FILE + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(n))
    os.replace(tmp, PROGRESS_FILE)


def main():
    sentinel = Sentinel(SENTINELS, socket_timeout=1.0)
    primary = sentinel.master_for(
        "mymaster", socket_timeout=3.0, socket_connect_timeout=1.0
    )
    acked = []
    by_primary = {}
    errors = {}
    unacked = 0
    i = 0
    while not os.path.exists(STOP_FILE):
        i += 1
        key = "k%d" % i
        try:
            primary.set(key, i)
            n = primary.execute_command("WAIT", 1, 2000)
        except (ConnectionError, TimeoutError, ReadOnlyError, ResponseError) as e:
            name = type(e).__name__
            errors[name] = errors.get(name, 0) + 1
            if isinstance(e, ResponseError) and not isinstance(e, ReadOnlyError):
                errors.setdefault("texts", []).append(str(e)[:80])
            time.sleep(0.05)
            continue
        if n >= 1:
            acked.append(key)
            addr = primary.connection_pool.master_address
            where = "%s:%s" % addr if addr else "?"
            by_primary[where] = by_primary.get(where, 0) + 1
            if len(acked) % 20 == 0:
                write_progress(len(acked))
        else:
            unacked += 1
    write_progress(len(acked))
    host, port = sentinel.discover_master("mymaster")
    r = redis.Redis(host=host, port=port, socket_timeout=5)
    missing = []
    for start in range(0, len(acked), 500):
        chunk = acked[start : start + 500]
        for key, value in zip(chunk, r.mget(chunk)):
            if value is None or value != key[1:].encode():
                missing.append(key)
    summary = {
        "primary": "%s:%s" % (host, port),
        "writes": i,
        "acked": len(acked),
        "unacked": unacked,
        "acked_by_primary": by_primary,
        "errors": errors,
        "missing": missing[:20],
        "missing_count": len(missing),
    }
    print(json.dumps(summary))
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()

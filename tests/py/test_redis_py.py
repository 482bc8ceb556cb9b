"""redis-py (Debian's 4.3.4) against a server on 127.0.0.1:<port>: transactions, WATCH retry
loops, the PubSub object, ACL denial paths, CLIENT LIST, INFO, CONFIG GET/SET, Lock and
Script (Lua scripts).

Run: python3 tests/py/test_redis_py.py <port>. Plain asserts; exits non-zero on the first
failure. tests/tests/redis_py.rs runs it against kayvee-server (and the same script passes
against redis-server 7.0.15, which is how it was written). The server must be fresh: the
script flushes it and leaves users it created deleted.
"""

import sys
import threading
import time

import redis
from redis.exceptions import (
    AuthenticationError,
    ExecAbortError,
    NoPermissionError,
    ResponseError,
    WatchError,
)

PORT = int(sys.argv[1])


def client(**kw):
    """A client with a short socket timeout so a hang fails instead of blocking CI."""
    return redis.Redis(host="127.0.0.1", port=PORT, socket_timeout=5, **kw)


def test_pipeline_transaction(r):
    """MULTI/EXEC through a transactional pipeline: replies in order, typed by redis-py."""
    r.delete("a", "s")
    pipe = r.pipeline(transaction=True)
    pipe.set("a", 1).incr("a").get("a").lpush("l", "x").llen("l")
    assert pipe.execute() == [True, 2, b"2", 1, 1]
    # A run-time error is one element of the reply; the rest still ran.
    pipe = r.pipeline(transaction=True)
    pipe.set("s", "x").incr("s").get("s")
    res = pipe.execute(raise_on_error=False)
    assert res[0] is True and res[2] == b"x", res
    assert isinstance(res[1], ResponseError), res
    # A queue-time error aborts the whole transaction (EXECABORT).
    pipe = r.pipeline(transaction=True)
    pipe.set("a", 10).execute_command("NOSUCHCOMMAND")
    try:
        pipe.execute()
        raise AssertionError("EXECABORT expected")
    except (ExecAbortError, ResponseError) as e:
        assert "unknown command" in str(e) or "EXECABORT" in str(e), e
    assert r.get("a") == b"2"


def test_watch_retry_loop(r):
    """The transaction() helper retries when a WATCHed key changes under it."""
    other = client()
    r.set("counter", 0)
    attempts = []

    def incr(pipe):
        value = int(pipe.get("counter"))
        attempts.append(value)
        if len(attempts) == 1:
            other.incr("counter")  # a concurrent writer invalidates the WATCH
        pipe.multi()
        pipe.set("counter", value + 1)

    r.transaction(incr, "counter")
    assert attempts == [0, 1], attempts
    assert r.get("counter") == b"2"
    # Without the helper: WatchError surfaces.
    with r.pipeline() as pipe:
        pipe.watch("counter")
        other.set("counter", 100)
        pipe.multi()
        pipe.incr("counter")
        try:
            pipe.execute()
            raise AssertionError("WatchError expected")
        except WatchError:
            pass
    assert r.get("counter") == b"100"
    other.close()


def wait_message(p, timeout=2.0):
    """The next non-None message from a PubSub object, or None after `timeout`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = p.get_message(timeout=0.1)
        if m is not None:
            return m
    return None


def test_pubsub(r):
    """subscribe/psubscribe, get_message, listen, run_in_thread."""
    p = r.pubsub()
    p.subscribe("ch")
    assert wait_message(p) == {"type": "subscribe", "pattern": None, "channel": b"ch", "data": 1}
    p.psubscribe("p*")
    assert wait_message(p)["type"] == "psubscribe"
    assert r.publish("ch", "hello") == 1
    m = wait_message(p)
    assert m == {"type": "message", "pattern": None, "channel": b"ch", "data": b"hello"}, m
    assert r.publish("p1", "world") == 1
    m = wait_message(p)
    assert m == {"type": "pmessage", "pattern": b"p*", "channel": b"p1", "data": b"world"}, m
    assert r.pubsub_numsub("ch") == [(b"ch", 1)]
    assert r.pubsub_numpat() == 1
    r.publish("ch", "via-listen")
    for m in p.listen():
        if m["type"] == "message":
            assert m["data"] == b"via-listen"
            break
    p.unsubscribe("ch")
    p.punsubscribe("p*")
    p.close()

    got = []
    t = r.pubsub(ignore_subscribe_messages=True)
    t.subscribe(**{"th": lambda m: got.append(m["data"])})
    worker = t.run_in_thread(sleep_time=0.05, daemon=True)
    deadline = time.time() + 3
    while r.pubsub_numsub("th")[0][1] == 0 and time.time() < deadline:
        time.sleep(0.02)
    r.publish("th", "a")
    r.publish("th", "b")
    while len(got) < 2 and time.time() < deadline:
        time.sleep(0.02)
    worker.stop()
    worker.join(timeout=3)
    t.close()
    assert got == [b"a", b"b"], got


def test_resp3_support():
    """redis-py 4.3.4 has no RESP3 (`protocol=3` arrived in 5.0): nothing to test there."""
    try:
        redis.Redis(host="127.0.0.1", port=PORT, protocol=3)
        has_resp3 = True
    except TypeError:
        has_resp3 = False
    assert has_resp3 == (int(redis.__version__.split(".")[0]) >= 5)
    print("note: redis-py %s RESP3 support: %s" % (redis.__version__, has_resp3))


def test_acl(r):
    """ACL SETUSER through redis-py, then the denial paths as redis-py types them."""
    r.acl_deluser("alice")
    assert r.acl_setuser(
        "alice",
        enabled=True,
        passwords=["+pw"],
        commands=["+get", "+set", "+acl|whoami", "+publish"],
        keys=["k*"],
        channels=["news*"],
        reset=True,
    )
    u = r.acl_getuser("alice")
    assert "on" in u["flags"], u
    # redis-py splits the rules string into categories and commands.
    assert u["categories"] == ["-@all"], u
    assert sorted(u["commands"]) == ["+acl|whoami", "+get", "+publish", "+set"], u
    assert u["keys"] == ["~k*"] and u["channels"] == ["&news*"], u
    assert "alice" in r.acl_users()
    assert any(line.startswith("user alice on ") for line in r.acl_list())
    assert "keyspace" in r.acl_cat()
    assert len(r.acl_genpass()) == 64

    alice = client(username="alice", password="pw")
    assert alice.acl_whoami() == "alice"
    assert alice.set("k1", "v") is True
    assert alice.get("k1") == b"v"
    for denied in (lambda: alice.get("other"), lambda: alice.delete("k1"),
                   lambda: alice.publish("sports", "x")):
        try:
            denied()
            raise AssertionError("NOPERM expected")
        except NoPermissionError as e:
            assert "no permissions" in str(e), e
    # redis-py 4.3.4 maps NOAUTH to AuthenticationError but WRONGPASS to a plain ResponseError.
    try:
        client(username="alice", password="wrong").ping()
        raise AssertionError("WRONGPASS expected")
    except ResponseError as e:
        assert str(e).startswith("WRONGPASS invalid username-password pair"), e
    entries = r.acl_log()
    reasons = {e["reason"] for e in entries}
    assert {"key", "command", "channel", "auth"} <= reasons, entries
    assert all("age-seconds" in e and "client-info" in e for e in entries), entries
    assert r.acl_log_reset()
    assert r.acl_log() == []

    # A required password: commands before AUTH are refused.
    r.config_set("requirepass", "sekret")
    try:
        try:
            client().ping()
            raise AssertionError("NOAUTH expected")
        except AuthenticationError:
            pass
        assert client(password="sekret").ping()
    finally:
        client(password="sekret").config_set("requirepass", "")
    assert client().ping()

    # Deleting the user disconnects its clients.
    assert r.acl_deluser("alice") == 1
    # The pool finds its connection closed and reconnects: the user is gone, so AUTH fails.
    try:
        alice.get("k1")
        raise AssertionError("the deleted user's connection should be closed")
    except redis.ConnectionError:
        pass
    except ResponseError as e:
        assert str(e).startswith("WRONGPASS"), e


def test_introspection(r):
    """CLIENT LIST, INFO, CONFIG GET/SET as redis-py parses them."""
    r.client_setname("pytest")
    me = [c for c in r.client_list() if c["name"] == "pytest"]
    assert len(me) == 1 and me[0]["user"] == "default", me
    assert me[0]["cmd"] in ("client|list", "client"), me
    info = r.info()
    assert info["redis_version"] == "7.0.15", info.get("redis_version")
    assert info["loading"] == 0 and "connected_clients" in info
    assert "used_memory" in r.info("memory")
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert r.config_set("maxmemory-policy", "allkeys-lru")
    assert r.config_get("maxmemory-policy")["maxmemory-policy"] == "allkeys-lru"
    r.config_set("maxmemory-policy", "noeviction")
    try:
        r.config_set("maxmemory-policy", "bogus")
        raise AssertionError("CONFIG SET error expected")
    except ResponseError:
        pass


def test_lock(r):
    """redis-py's Lock, whose release, extend and reacquire are Lua scripts (EVALSHA after a
    SCRIPT LOAD, EVAL when the cache was flushed)."""
    from redis.exceptions import LockError, LockNotOwnedError

    r.delete("lock:a")
    lock = r.lock("lock:a", timeout=10)
    assert lock.acquire(blocking=False)
    assert lock.locked() and lock.owned()
    other = r.lock("lock:a", timeout=10)
    assert not other.acquire(blocking=False)
    assert lock.extend(5)
    assert 10000 < r.pttl("lock:a") <= 15000
    assert lock.extend(3, replace_ttl=True)
    assert r.pttl("lock:a") <= 3000
    assert lock.reacquire()
    assert 9000 < r.pttl("lock:a") <= 10000
    lock.release()
    assert not lock.locked()
    try:
        lock.release()
        raise AssertionError("releasing an unlocked lock must fail")
    except LockError:
        pass
    # A lock that timed out and was taken by another owner is not ours to release.
    short = r.lock("lock:a", timeout=0.05)
    assert short.acquire(blocking=False)
    time.sleep(0.1)
    assert other.acquire(blocking=False)
    try:
        short.release()
        raise AssertionError("releasing a lock owned by another must fail")
    except LockNotOwnedError:
        pass
    other.release()
    r.script_flush()
    with r.lock("lock:b", timeout=5, blocking_timeout=1):
        assert r.exists("lock:b")
    assert not r.exists("lock:b")


def test_script(r):
    """The Script object: EVALSHA, falling back to EVAL (NOSCRIPT) after SCRIPT FLUSH."""
    incr_by = r.register_script(
        "local v = redis.call('incrby', KEYS[1], ARGV[1]) return {v, 'ok', {err = 'e'} ~= nil}"
    )
    r.delete("counter")
    assert incr_by(keys=["counter"], args=[5]) == [5, b"ok", 1]
    r.script_flush()
    assert incr_by(keys=["counter"], args=[2]) == [7, b"ok", 1]
    assert r.script_exists(incr_by.sha) == [True]
    fails = r.register_script("return redis.call('incr', KEYS[1])")
    r.set("text", "x")
    try:
        fails(keys=["text"])
        raise AssertionError("a failing redis.call must raise")
    except ResponseError as e:
        assert "value is not an integer" in str(e), e
    pipe = r.pipeline()
    incr_by(keys=["counter"], args=[1], client=pipe)
    pipe.get("counter")
    assert pipe.execute() == [[8, b"ok", 1], b"8"]


def main():
    r = client()
    r.flushall()
    tests = [
        lambda: test_pipeline_transaction(r),
        lambda: test_watch_retry_loop(r),
        lambda: test_pubsub(r),
        test_resp3_support,
        lambda: test_acl(r),
        lambda: test_introspection(client()),
        lambda: test_lock(r),
        lambda: test_script(r),
    ]
    for t in tests:
        t()
    print("redis-py %s: all tests passed" % redis.__version__)


if __name__ == "__main__":
    assert threading is not None
    main()

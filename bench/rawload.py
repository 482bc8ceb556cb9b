"""Raw-socket load for the cases redis-benchmark 7.0 cannot drive: pub/sub subscribers that keep
reading (and count what they got) and a time-bounded MULTI/EXEC load generator. Standard library
only; used by compare.py, which pins this process to the client CPU.
"""

import selectors
import socket
import threading
import time

RECV_BYTES = 1 << 20


def resp(*args):
    """One command as a RESP array of bulk strings."""
    parts = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(parts)


def read_exactly(sock, n):
    """Reads exactly `n` bytes from `sock` (blocking)."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("server closed the connection")
        buf += chunk
    return bytes(buf)


class Subscribers:
    """`count` connections SUBSCRIBEd to `channel`, drained by one thread that counts the bytes each
    received, so a server never throttles or drops them for a full output buffer."""

    def __init__(self, port, channel, count):
        self.socks = []
        self.received = {}
        self.closed = []
        confirm = resp("subscribe", channel).replace(b"*2", b"*3", 1) + b":1\r\n"
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(resp("SUBSCRIBE", channel))
            got = read_exactly(s, len(confirm))
            if got != confirm:
                raise RuntimeError(f"SUBSCRIBE replied {got!r}")
            s.setblocking(False)
            self.socks.append(s)
            self.received[s.fileno()] = 0
        self.stop_flag = False
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        """Reads every socket until stopped; records EOFs (a server that dropped a subscriber)."""
        sel = selectors.DefaultSelector()
        for s in self.socks:
            sel.register(s, selectors.EVENT_READ)
        buf = bytearray(RECV_BYTES)
        while not self.stop_flag:
            for key, _ in sel.select(timeout=0.1):
                try:
                    n = key.fileobj.recv_into(buf)
                except BlockingIOError:
                    continue
                if n == 0:
                    sel.unregister(key.fileobj)
                    self.closed.append(key.fileobj.fileno())
                self.received[key.fileobj.fileno()] += n
        sel.close()

    def wait_for(self, total_bytes, slack_bytes, timeout_s=60):
        """Waits until every subscriber has `total_bytes` and no more arrive; returns the bytes
        each got. All must get the same, at most `slack_bytes` more (redis-benchmark with -P can
        send a few requests beyond -n); raises if one was dropped or is short."""
        deadline = time.time() + timeout_s
        last, stable_since = None, time.time()
        while True:
            counts = sorted(self.received.values())
            if self.closed:
                raise RuntimeError(f"{len(self.closed)} subscriber(s) disconnected by the server")
            if counts != last:
                last, stable_since = counts, time.time()
            elif counts[0] >= total_bytes and time.time() - stable_since > 0.2:
                break
            if time.time() > deadline:
                raise RuntimeError(f"subscribers got {counts[0]} of {total_bytes} bytes")
            time.sleep(0.01)
        if counts[0] != counts[-1] or counts[-1] > total_bytes + slack_bytes:
            raise RuntimeError(f"subscribers got {counts[0]}..{counts[-1]} bytes, expected "
                               f"{total_bytes} (+ at most {slack_bytes})")
        return counts[0]

    def close(self):
        self.stop_flag = True
        self.thread.join()
        for s in self.socks:
            s.close()


def published_message(channel, payload):
    """The bytes a RESP2 subscriber receives for one PUBLISH."""
    return resp("message", channel, payload)


def multi_block(conn_id, commands):
    """One MULTI, `commands` SET/GET pairs on this connection's keys, EXEC; and its exact reply."""
    req = [resp("MULTI")]
    reply = [b"+OK\r\n"]
    body = []
    for j in range(commands // 2):
        key = f"txn:{conn_id}:{j}"
        req += [resp("SET", key, "xxx"), resp("GET", key)]
        body += [b"+OK\r\n", b"$3\r\nxxx\r\n"]
    req.append(resp("EXEC"))
    reply += [b"+QUEUED\r\n"] * (2 * (commands // 2))
    reply += [b"*%d\r\n" % len(body)] + body
    return b"".join(req), b"".join(reply)


class _TxnConn:
    """One connection's state: a batch of `depth` transactions in flight, bytes still awaited."""

    def __init__(self, port, conn_id, depth, commands):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req, reply = multi_block(conn_id, commands)
        self.request, self.reply = req * depth, reply * depth
        self.depth = depth
        self.got = bytearray()

    def send(self):
        self.got.clear()
        self.sock.setblocking(True)
        self.sock.sendall(self.request)
        self.sock.setblocking(False)

    def on_readable(self):
        """Reads what is there; returns True when the whole batch reply is in (and checks it)."""
        try:
            chunk = self.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return False
        if not chunk:
            raise RuntimeError("server closed a MULTI/EXEC connection")
        self.got += chunk
        if len(self.got) < len(self.reply):
            return False
        if self.got != self.reply:
            raise RuntimeError(f"unexpected MULTI/EXEC reply: {bytes(self.got[:200])!r}")
        return True


def multi_exec_load(port, clients, depth, commands, seconds):
    """Runs MULTI/`commands` commands/EXEC transactions over `clients` connections with `depth`
    transactions per write, for about `seconds`; returns (transactions done, elapsed seconds)."""
    conns = [_TxnConn(port, i, depth, commands) for i in range(clients)]
    sel = selectors.DefaultSelector()
    done = 0
    try:
        start = time.perf_counter()
        deadline = start + seconds
        for c in conns:
            sel.register(c.sock, selectors.EVENT_READ, c)
            c.send()
        in_flight = len(conns)
        while in_flight:
            events = sel.select(timeout=10)
            if not events:
                raise RuntimeError("MULTI/EXEC: no reply for 10 s")
            for key, _ in events:
                c = key.data
                if not c.on_readable():
                    continue
                done += c.depth
                if time.perf_counter() < deadline:
                    c.send()
                else:
                    in_flight -= 1
        return done, time.perf_counter() - start
    finally:
        sel.close()
        for c in conns:
            c.sock.close()

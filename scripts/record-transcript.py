#!/usr/bin/env python3
"""Records an engine transcript (crates/kayvee-engine/tests/transcripts/) from a real
redis-server 7.0.15: reads a script (`> CMD`, `@client`, `@advance`, `@cron`, comments; the
`<` and `@woken` lines of an existing transcript are skipped, so a transcript re-records
itself) and prints it with the server's replies (`<` lines) and the messages other clients got
(`@woken`). RESP2 and RESP3 replies; a HELLO reply's `id` becomes `<* :*`.

The server must run with `--enable-debug-command yes`: active expiry is switched off while
recording (so `@advance MS` sleeps and keys expire lazily, as in the engine without `@cron`) and
on for the 350 ms of an `@cron`. A command that blocks shows no reply line; its reply appears
later under `@woken`. A client's own pub/sub messages would be read as its reply: let a
subscriber only subscribe.

Usage: scripts/record-transcript.py SCRIPT [PORT] > crates/kayvee-engine/tests/transcripts/X.txt
"""
import socket, sys, time, select

PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 21000

def split_args(s):
    out, i, n = [], 0, len(s)
    while i < n:
        while i < n and s[i] == ' ': i += 1
        if i >= n: break
        if s[i] == '"':
            i += 1; b = bytearray()
            while s[i] != '"':
                if s[i] == '\\':
                    c = s[i+1]
                    if c == 'x': b.append(int(s[i+2:i+4], 16)); i += 4; continue
                    b += {'n': b'\n', 'r': b'\r', 't': b'\t'}.get(c, c.encode()); i += 2; continue
                b += s[i].encode(); i += 1
            i += 1; out.append(bytes(b))
        else:
            j = i
            while j < n and s[j] != ' ': j += 1
            out.append(s[i:j].encode()); i = j
    return out

class Conn:
    def __init__(self):
        self.s = socket.create_connection(('127.0.0.1', PORT)); self.buf = b''
    def send(self, args):
        m = b'*%d\r\n' % len(args) + b''.join(b'$%d\r\n%s\r\n' % (len(a), a) for a in args)
        self.s.sendall(m)
    def fill(self, timeout=None):
        if timeout is not None:
            r, _, _ = select.select([self.s], [], [], timeout)
            if not r: return False
        d = self.s.recv(65536)
        if not d: raise EOFError
        self.buf += d; return True
    def line(self):
        while b'\r\n' not in self.buf: self.fill()
        l, self.buf = self.buf.split(b'\r\n', 1); return l
    def read(self, out):
        l = self.line(); t, rest = l[:1], l[1:]
        if t in b'+-:': out.append(t.decode() + esc(rest)); return
        if t == b'$':
            n = int(rest)
            if n < 0: out.append('(nil)'); return
            while len(self.buf) < n + 2: self.fill()
            v, self.buf = self.buf[:n], self.buf[n+2:]; out.append('$' + esc(v)); return
        if t in b'*>~%':
            n = int(rest)
            if n < 0: out.append('(nil-array)'); return
            out.append(t.decode() + '%d' % n)
            for _ in range(n * (2 if t == b'%' else 1)): self.read(out)
            return
        if t == b'_': out.append('(nil)'); return
        if t in b',#(': out.append(t.decode() + esc(rest)); return
        raise ValueError(l)
    def pending(self):
        out = []
        while self.fill(0.03) if not self.buf else True:
            if not self.buf: break
            self.read(out)
        return out

def esc(b):
    s = ''
    for c in b:
        if c == 0x5c: s += '\\\\'
        elif 0x20 <= c < 0x7f: s += chr(c)
        else: s += '\\x%02x' % c
    return s

conns = {'default': Conn()}; cur = 'default'
admin = Conn(); admin.send([b'debug', b'set-active-expire', b'0']); admin.read([])
admin.send([b'flushall']); admin.read([])
admin.send([b'config', b'set', b'notify-keyspace-events', b'']); admin.read([])
def drain_others():
    time.sleep(0.02)
    for name, c in conns.items():
        msgs = c.pending()
        if msgs:
            print('@woken ' + name)
            for m in msgs: print('< ' + m)

for raw in open(sys.argv[1]):
    line = raw.rstrip('\n')
    if line.startswith(('< ', '<* ', '@woken ')):
        continue
    if line.startswith('> '):
        print(line)
        c = conns[cur]; c.send(split_args(line[2:]))
        if line[2:].split()[0].lower() in ('blpop','brpop','blmove','brpoplpush','blmpop','bzpopmin','bzpopmax','bzmpop','xread','xreadgroup') and not c.fill(0.1):
            drain_others(); continue
        out = []; c.read(out)
        prev = ''
        for o in out:
            print(('<* :*' if prev == '$id' else '< ' + o)); prev = o
        drain_others()
    elif line.startswith('@client '):
        cur = line.split()[1]
        if cur not in conns: conns[cur] = Conn()
        print(line)
    elif line == '@cron':
        admin.send([b'debug', b'set-active-expire', b'1']); admin.read([])
        time.sleep(0.35)
        admin.send([b'debug', b'set-active-expire', b'0']); admin.read([])
        print(line); drain_others()
    elif line.startswith('@advance '):
        time.sleep(int(line.split()[1]) / 1000 + 0.02); print(line)
    else:
        print(line)
admin.send([b'debug', b'set-active-expire', b'1']); admin.read([])

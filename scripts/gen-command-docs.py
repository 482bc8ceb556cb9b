#!/usr/bin/env python3
"""Writes crates/kayvee-engine/src/command_docs.rs: COMMAND DOCS's fields (summary, since,
group, complexity, doc_flags, deprecated_since, replaced_by, history, arguments) for every
command, as redis-server 7.0.15 answers them in RESP3, read from a running server over its
socket (a black-box reading of the reference's documented interface, as the rest of the command
table). Usage: python3 scripts/gen-command-docs.py [PORT]   (a redis-server 7.0.15 on PORT)
"""

import os
import socket
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "crates", "kayvee-engine", "src", "command_docs.rs")
# The nested subcommands are written from their own rows.
KNOWN = {"subcommands"}


class Reader:
    def __init__(self, sock):
        self.f = sock.makefile("rb")

    def line(self):
        return self.f.readline()[:-2]

    def read(self):
        line = self.line()
        t, rest = chr(line[0]), line[1:]
        if t in "+":
            return ("simple", rest.decode())
        if t == "-":
            raise RuntimeError(rest.decode())
        if t == ":":
            return ("int", int(rest))
        if t in "$=":
            n = int(rest)
            data = self.f.read(n + 2)[:-2]
            return ("bulk", data.decode() if t == "$" else data.decode()[4:])
        if t in "*~":
            return ("array" if t == "*" else "set", [self.read() for _ in range(int(rest))])
        if t == "%":
            return ("map", [(self.read(), self.read()) for _ in range(int(rest))])
        raise RuntimeError(f"unexpected reply type {t!r}")


def command(sock, reader, *args):
    sock.sendall(b"".join([f"*{len(args)}\r\n".encode()]
                          + [f"${len(a)}\r\n{a}\r\n".encode() for a in args]))
    return reader.read()


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def rust(value):
    kind, v = value
    if kind == "bulk":
        return f"B({rust_str(v)})"
    if kind == "simple":
        return f"S({rust_str(v)})"
    if kind == "int":
        return f"I({v})"
    if kind in ("array", "set"):
        tag = "A" if kind == "array" else "Set"
        return f"{tag}(&[" + ", ".join(rust(x) for x in v) + "])"
    if kind == "map":
        return "M(&[" + ", ".join(f"({rust_str(k[1])}, {rust(x)})" for k, x in v) + "])"
    raise RuntimeError(kind)


def rows(name, doc, out):
    """(full name, extra fields) for a command and its subcommands."""
    kind, fields = doc
    assert kind == "map"
    extra = [(k[1], v) for k, v in fields if k[1] not in KNOWN]
    if extra:
        out.append((name, extra))
    for k, v in fields:
        if k[1] == "subcommands":
            for sk, sv in v[1]:
                rows(sk[1], sv, out)


# The value type and lookup, written at the head of the generated file (which then depends on
# nothing but the reply sink).
DOC_VALUE = "/// A value of COMMAND DOCS's generated fields (`command_docs.rs`): what redis-server 7.0.15\n/// answers in RESP3 (sets and maps become arrays in RESP2, as the reply sink writes them).\n#[derive(Debug)]\npub enum DocValue {\n    /// A bulk string.\n    B(&'static str),\n    /// A simple string.\n    S(&'static str),\n    /// An integer.\n    I(i64),\n    /// An array.\n    A(&'static [DocValue]),\n    /// A set.\n    Set(&'static [DocValue]),\n    /// A map.\n    M(&'static [(&'static str, DocValue)]),\n}\n\nimpl DocValue {\n    /// Writes the value.\n    pub fn write(&self, out: &mut dyn crate::reply::ReplySink) {\n        match self {\n            DocValue::B(s) => out.bulk_str(s),\n            DocValue::S(s) => out.simple(s),\n            DocValue::I(v) => out.int(*v),\n            DocValue::A(items) => {\n                out.array(items.len());\n                items.iter().for_each(|v| v.write(out));\n            }\n            DocValue::Set(items) => {\n                out.set(items.len());\n                items.iter().for_each(|v| v.write(out));\n            }\n            DocValue::M(fields) => {\n                out.map(fields.len());\n                for (k, v) in fields.iter() {\n                    out.bulk_str(k);\n                    v.write(out);\n                }\n            }\n        }\n    }\n}\n\n/// COMMAND DOCS's fields of command `full_name` but its subcommands (summary, since, group,\n/// complexity, doc_flags, deprecated_since, replaced_by, history, arguments), as Redis 7.0\n/// gives them; empty for a command Redis 7.0 does not have.\npub fn doc_fields(full_name: &str) -> &'static [(&'static str, DocValue)] {\n    let docs = DOCS;\n    docs.binary_search_by(|(name, _)| (*name).cmp(full_name))\n        .map_or(&[], |i| docs[i].1)\n}\n\n"


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 6379
    with socket.create_connection(("127.0.0.1", port)) as sock:
        reader = Reader(sock)
        command(sock, reader, "HELLO", "3")
        version = command(sock, reader, "INFO", "server")[1]
        if "redis_version:7.0.15" not in version:
            sys.exit("not redis-server 7.0.15")
        kind, docs = command(sock, reader, "COMMAND", "DOCS")
    out = []
    for k, v in docs:
        rows(k[1], v, out)
    out.sort(key=lambda r: r[0])
    with open(OUT, "w") as f:
        f.write("//! Generated by `scripts/gen-command-docs.py` from redis-server 7.0.15's RESP3\n"
                "//! `COMMAND DOCS`: per command (full name, sorted), its doc fields but the\n"
                "//! subcommands, in Redis's order. Do not edit.\n\n"
                + DOC_VALUE +
                "\nuse DocValue::{A, B, I, M, S, Set};\n\n"
                "#[rustfmt::skip]\n"
                "pub(crate) static DOCS: &[(&str, &[(&str, DocValue)])] = &[\n")
        for name, extra in out:
            fields = ", ".join(f"({rust_str(k)}, {rust(v)})" for k, v in extra)
            f.write(f"    ({rust_str(name)}, &[{fields}]),\n")
        f.write("];\n")
    print(f"{len(out)} commands written to {OUT}")


if __name__ == "__main__":
    main()

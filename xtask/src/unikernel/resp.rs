//! A minimal RESP client for xtask's tests and benchmarks of the image: one connection,
//! replies as text.

use std::time::Duration;

/// A RESP command.
pub(super) fn resp_command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// A minimal RESP client (replies as text; arrays flattened to lines).
pub(super) struct Resp {
    reader: std::io::BufReader<std::net::TcpStream>,
    writer: std::net::TcpStream,
}

impl Resp {
    pub(super) fn open(port: u16) -> Result<Resp, String> {
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .and_then(|()| s.set_nodelay(true))
            .map_err(|e| e.to_string())?;
        let writer = s.try_clone().map_err(|e| e.to_string())?;
        Ok(Resp {
            reader: std::io::BufReader::new(s),
            writer,
        })
    }

    /// How long a reply may take.
    pub(super) fn set_timeout(&mut self, t: Duration) -> Result<(), String> {
        self.writer
            .set_read_timeout(Some(t))
            .map_err(|e| e.to_string())
    }

    pub(super) fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        use std::io::Write;
        self.writer.write_all(bytes).map_err(|e| e.to_string())
    }

    /// One reply: a simple string, error (with its `-`), integer or bulk as text; nil as
    /// `(nil)`; an array's elements joined by newlines.
    pub(super) fn reply(&mut self) -> Result<String, String> {
        use std::io::{BufRead, Read};
        let mut line = String::new();
        if self
            .reader
            .read_line(&mut line)
            .map_err(|e| e.to_string())?
            == 0
        {
            return Err("connection closed".into());
        }
        let line = line.trim_end();
        let (kind, rest) = line.split_at(1.min(line.len()));
        match kind {
            "+" | ":" => Ok(rest.to_string()),
            "-" => Ok(line.to_string()),
            "$" if rest == "-1" => Ok("(nil)".into()),
            "$" => {
                let n: usize = rest.parse().map_err(|_| format!("bad reply {line}"))?;
                let mut buf = vec![0u8; n + 2];
                self.reader
                    .read_exact(&mut buf)
                    .map_err(|e| e.to_string())?;
                buf.truncate(n);
                Ok(String::from_utf8_lossy(&buf).into_owned())
            }
            "*" => {
                let n: i64 = rest.parse().map_err(|_| format!("bad reply {line}"))?;
                let items: Result<Vec<String>, String> = (0..n).map(|_| self.reply()).collect();
                Ok(items?.join("\n"))
            }
            _ => Err(format!("bad reply {line:?}")),
        }
    }

    pub(super) fn call(&mut self, args: &[&str]) -> Result<String, String> {
        self.send(&resp_command(args))?;
        self.reply()
    }

    pub(super) fn expect(&mut self, args: &[&str], want: &str) -> Result<(), String> {
        match self.call(args)? {
            got if got == want => Ok(()),
            got => Err(format!("{}: {got}, want {want}", args.join(" "))),
        }
    }
}

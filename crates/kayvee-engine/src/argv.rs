//! `Argv`: a command's arguments as byte spans into one buffer, so the codec can hand the engine
//! the arguments where they already lie in the connection's read buffer (no copy, no allocation).

use alloc::vec::Vec;
use core::ops::Range;

/// One argument: a byte range in the buffer.
pub type Span = Range<usize>;

/// A command's arguments (`argv[0]` is the command name).
#[derive(Clone, Copy, Debug)]
pub struct Argv<'a> {
    buf: &'a [u8],
    spans: &'a [Span],
}

impl<'a> Argv<'a> {
    /// Arguments lying at `spans` in `buf`. Every span must lie inside `buf`.
    pub fn new(buf: &'a [u8], spans: &'a [Span]) -> Self {
        debug_assert!(spans.iter().all(|s| s.start <= s.end && s.end <= buf.len()));
        Argv { buf, spans }
    }

    /// Number of arguments, the command name included.
    #[inline]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there is no argument at all.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Argument `i`. Panics when out of range (the command table's arity check comes first).
    #[inline]
    pub fn get(&self, i: usize) -> &'a [u8] {
        &self.buf[self.spans[i].clone()]
    }

    /// Argument `i`, or `None` past the end.
    #[inline]
    pub fn try_get(&self, i: usize) -> Option<&'a [u8]> {
        self.spans.get(i).map(|s| &self.buf[s.clone()])
    }

    /// All arguments.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        let buf = self.buf;
        self.spans.iter().map(move |s| &buf[s.clone()])
    }

    /// The arguments from `i` on (empty when `i >= len`).
    pub fn slice_from(&self, i: usize) -> Argv<'a> {
        Argv {
            buf: self.buf,
            spans: &self.spans[i.min(self.spans.len())..],
        }
    }
}

impl<'a> core::ops::Index<usize> for Argv<'a> {
    type Output = [u8];
    fn index(&self, i: usize) -> &[u8] {
        self.get(i)
    }
}

/// Owned arguments, for tests, transcripts and shells that build commands themselves.
#[derive(Clone, Debug, Default)]
pub struct ArgvBuf {
    buf: Vec<u8>,
    spans: Vec<Span>,
}

impl ArgvBuf {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// From a list of arguments.
    pub fn from_args<I, A>(args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        let mut a = Self::new();
        for x in args {
            a.push(x.as_ref());
        }
        a
    }

    /// Splits a line on ASCII whitespace (no quoting), for tests.
    pub fn from_line(line: &str) -> Self {
        Self::from_args(line.split_ascii_whitespace())
    }

    /// Appends an argument.
    pub fn push(&mut self, arg: &[u8]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(arg);
        self.spans.push(start..self.buf.len());
    }

    /// Removes every argument, keeping the allocations.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
    }

    /// The view the engine takes.
    pub fn argv(&self) -> Argv<'_> {
        Argv::new(&self.buf, &self.spans)
    }
}

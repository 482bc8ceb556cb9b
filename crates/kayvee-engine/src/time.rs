//! Time as the engine sees it: the `Now` every call carries (the engine reads no clock).

/// The current time, passed into every engine call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Now {
    /// Unix time in microseconds.
    pub unix_us: u64,
}

impl Now {
    /// From unix milliseconds.
    pub fn from_ms(ms: u64) -> Self {
        Now { unix_us: ms * 1000 }
    }
    /// Unix time in milliseconds.
    #[inline]
    pub fn ms(self) -> u64 {
        self.unix_us / 1000
    }
}

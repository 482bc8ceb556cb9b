//! How a key's accesses are stamped for the eviction policies: the LRU access time and the
//! LFU logarithmic counter with its decay (Redis 7.0's `evict.c`, learnt by experiment). Each
//! database stamps the keys its lookups touch ([`Touch`]); which keys go when memory runs out
//! is [`crate::evict`]'s.

use crate::value::Meta;

pub use crate::value::{minutes, LFU_INIT_VAL};

/// How a database's lookups record an access: the LRU time, or the LFU counter under an LFU
/// policy (one clock, [`Meta`]). Each [`crate::Db`] holds a copy, refreshed by [`crate::evict::sync`] on
/// configuration changes.
#[derive(Clone, Copy, Debug)]
pub struct Touch {
    /// An LFU policy is selected: lookups update the counter.
    pub lfu: bool,
    /// `lfu-log-factor`.
    pub log_factor: u32,
    /// `lfu-decay-time` (minutes per decrement; 0 = never decay).
    pub decay_min: u32,
    /// State of the draw behind the probabilistic increment (xorshift64).
    rng: u64,
}

impl Default for Touch {
    fn default() -> Self {
        Touch {
            lfu: false,
            log_factor: 10,
            decay_min: 1,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

impl Touch {
    /// The access rules: the LFU counter counts (`lfu`, an LFU policy) with `lfu-log-factor`
    /// and `lfu-decay-time`; `seed` starts the draws.
    pub fn new(lfu: bool, log_factor: u32, decay_min: u32, seed: u64) -> Touch {
        Touch {
            lfu,
            log_factor,
            decay_min,
            rng: seed | 1,
        }
    }

    /// A uniform draw in `[0, 1)`.
    pub fn draw(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The metadata after one access at `now_ms` with draw `r`: the counter decays by the
    /// periods elapsed, then grows logarithmically, and the decay clock restarts.
    pub fn accessed(&self, meta: Meta, now_ms: u64, r: f64) -> Meta {
        let now_min = minutes(now_ms);
        let counter = lfu_decayed(&meta, now_min, self.decay_min);
        let mut meta = meta;
        meta.set_lfu(lfu_log_incr(counter, r, self.log_factor), now_min);
        meta
    }

    /// A new key's metadata under these rules (see [`Meta::fresh`]).
    #[inline]
    pub fn fresh(&self, now_ms: u64) -> Meta {
        Meta::fresh(self.lfu, now_ms)
    }
}

/// Minutes from `ldt` to `now` on the 16-bit clock (wrapping once, as Redis counts).
pub fn lfu_elapsed(ldt: u16, now: u16) -> u64 {
    if now >= ldt {
        u64::from(now - ldt)
    } else {
        65535 - u64::from(ldt) + u64::from(now)
    }
}

/// The counter decremented by one per `decay_min` minutes since the last access (what OBJECT
/// FREQ reports and what eviction ranks by), without storing it.
pub fn lfu_decayed(meta: &Meta, now_min: u16, decay_min: u32) -> u8 {
    let periods = match decay_min {
        0 => 0,
        d => lfu_elapsed(meta.ldt_min(), now_min) / u64::from(d),
    };
    u64::from(meta.freq()).saturating_sub(periods) as u8
}

/// The logarithmic increment: with draw `r` in `[0, 1)`, the counter grows with probability
/// `1 / ((counter - LFU_INIT_VAL) * factor + 1)`, saturating at 255.
pub fn lfu_log_incr(counter: u8, r: f64, factor: u32) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = f64::from(counter.saturating_sub(LFU_INIT_VAL));
    let p = 1.0 / (base * f64::from(factor) + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_increment_slows_as_the_counter_grows() {
        let mut t = Touch::default();
        let mut hits = |start: u8, factor: u32| {
            (0..10_000)
                .filter(|_| lfu_log_incr(start, t.draw(), factor) > start)
                .count()
        };
        // p = 1 at or below LFU_INIT_VAL, 1/11 one step above, 1/101 at +10 (factor 10).
        assert_eq!(hits(3, 10), 10_000);
        let one = hits(6, 10);
        assert!((700..1200).contains(&one), "{one}");
        let ten = hits(15, 10);
        assert!((50..160).contains(&ten), "{ten}");
        assert_eq!(hits(40, 0), 10_000, "factor 0 always increments");
        assert_eq!(lfu_log_incr(255, 0.0, 0), 255);
    }

    #[test]
    fn counter_reaches_redis_figures() {
        // Redis 7.0.15: 200 reads of a fresh key (counter 5) under factor 10 ended at 11, 11,
        // 12, 12, 13, 13, 14 in seven runs.
        let mut t = Touch::default();
        let mut sum = 0u32;
        for _ in 0..50 {
            let mut m = Meta::fresh(true, 0);
            for _ in 0..200 {
                let r = t.draw();
                m = t.accessed(m, 0, r);
            }
            assert!((8..=17).contains(&m.freq()), "{}", m.freq());
            sum += u32::from(m.freq());
        }
        assert!((550..=650).contains(&sum), "mean {}", sum as f64 / 50.0);
    }

    #[test]
    fn decay_counts_periods_on_a_wrapping_clock() {
        let mut m = Meta::default();
        m.set_lfu(10, 65530);
        assert_eq!(lfu_elapsed(65530, 4), 9);
        assert_eq!(lfu_decayed(&m, 65533, 1), 7);
        assert_eq!(lfu_decayed(&m, 4, 1), 1);
        assert_eq!(lfu_decayed(&m, 4, 3), 7);
        assert_eq!(lfu_decayed(&m, 100, 0), 10, "decay time 0 never decays");
        assert_eq!(lfu_decayed(&m, 200, 1), 0);
    }
}

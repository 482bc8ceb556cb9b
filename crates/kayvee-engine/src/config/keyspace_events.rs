//! The `notify-keyspace-events` setting's value: the event classes of keyspace notifications
//! as bits, their letters, and the canonical form `CONFIG GET` shows (Redis 7.0's, read back
//! from redis-server 7.0.15). What is published for each class is [`crate::notify`]'s.

use alloc::string::String;

/// The event classes (bits of `Config::notify_keyspace_events`).
pub mod class {
    /// `K`: publish to `__keyspace@<db>__:<key>`.
    pub const KEYSPACE: u32 = 1 << 0;
    /// `E`: publish to `__keyevent@<db>__:<event>`.
    pub const KEYEVENT: u32 = 1 << 1;
    /// `g`: generic commands (DEL, EXPIRE, RENAME...).
    pub const GENERIC: u32 = 1 << 2;
    /// `$`: string commands.
    pub const STRING: u32 = 1 << 3;
    /// `l`: list commands.
    pub const LIST: u32 = 1 << 4;
    /// `s`: set commands.
    pub const SET: u32 = 1 << 5;
    /// `h`: hash commands.
    pub const HASH: u32 = 1 << 6;
    /// `z`: sorted set commands.
    pub const ZSET: u32 = 1 << 7;
    /// `x`: expired events (a key deleted because its TTL passed).
    pub const EXPIRED: u32 = 1 << 8;
    /// `e`: evicted events (a key deleted for `maxmemory`).
    pub const EVICTED: u32 = 1 << 9;
    /// `t`: stream commands (Kayvee has none; accepted and shown as Redis does).
    pub const STREAM: u32 = 1 << 10;
    /// `m`: key-miss events (not part of `A`).
    pub const KEY_MISS: u32 = 1 << 11;
    /// `d`: module key type events (accepted and shown; Kayvee has no modules).
    pub const MODULE: u32 = 1 << 12;
    /// `n`: a new key was created (not part of `A`).
    pub const NEW: u32 = 1 << 13;
    /// `A`: alias for `g$lshzxetd`.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// The class letters, in the order `CONFIG GET` writes them (after `A` or its members).
const LETTERS: [(u8, u32); 11] = [
    (b'g', class::GENERIC),
    (b'$', class::STRING),
    (b'l', class::LIST),
    (b's', class::SET),
    (b'h', class::HASH),
    (b'z', class::ZSET),
    (b'x', class::EXPIRED),
    (b'e', class::EVICTED),
    (b't', class::STREAM),
    (b'd', class::MODULE),
    (b'n', class::NEW),
];

/// The reason text Redis gives for a bad `notify-keyspace-events` value.
pub const BAD_CLASS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Parses a `notify-keyspace-events` value (letters in any order, repeats allowed, case
/// sensitive); `None` for any other byte.
pub fn parse_flags(s: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in s {
        flags |= match c {
            b'A' => class::ALL,
            b'K' => class::KEYSPACE,
            b'E' => class::KEYEVENT,
            b'm' => class::KEY_MISS,
            _ => LETTERS.iter().find(|(l, _)| *l == c)?.1,
        };
    }
    Some(flags)
}

/// The canonical form `CONFIG GET` shows: `A` (or the class letters), then `K`, `E`, `m`. As in
/// Redis 7.0, `n` is shown only when `A` is not (`KEAn` reads back as `AKE`).
pub fn render_flags(flags: u32) -> String {
    let mut s = String::new();
    if flags & class::ALL == class::ALL {
        s.push('A');
    } else {
        LETTERS
            .iter()
            .filter(|(_, f)| flags & f != 0)
            .for_each(|(l, _)| s.push(char::from(*l)));
    }
    for (l, f) in [
        ('K', class::KEYSPACE),
        ('E', class::KEYEVENT),
        ('m', class::KEY_MISS),
    ] {
        if flags & f != 0 {
            s.push(l);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(s: &str) -> String {
        render_flags(parse_flags(s.as_bytes()).expect("valid"))
    }

    #[test]
    fn canonical_forms_match_redis() {
        // Each pair was read back from redis-server 7.0.15 with CONFIG GET.
        let cases = [
            ("KEA", "AKE"),
            ("Ex", "xE"),
            ("", ""),
            ("KEAmn", "AKEm"),
            ("Kn", "nK"),
            ("gmn", "gnm"),
            ("KEg$lshzxet", "g$lshzxetKE"),
            ("KEg$lshzxetd", "AKE"),
            ("dt", "td"),
            ("zhslx", "lshzx"),
            ("KEd", "dKE"),
        ];
        for (input, shown) in cases {
            assert_eq!(roundtrip(input), shown, "{input}");
        }
    }

    #[test]
    fn bad_letters_are_refused() {
        assert_eq!(parse_flags(b"kea"), None);
        assert_eq!(parse_flags(b"K E"), None);
        assert_eq!(parse_flags(b"ghj"), None);
        assert_eq!(parse_flags(b"AA"), Some(class::ALL));
    }

    #[test]
    fn config_file_and_rewrite_use_the_letters() {
        let mut c = crate::Config::default();
        let err = c.apply_file("notify-keyspace-events bogus\n").unwrap_err();
        assert!(err.0.contains(BAD_CLASS), "{}", err.0);
        c.apply_file("notify-keyspace-events Ex\n").unwrap();
        assert_eq!(c.notify_keyspace_events, class::KEYEVENT | class::EXPIRED);
        // As redis-server 7.0.15 rewrites it: the canonical form, quoted.
        let text = c.rewrite("notify-keyspace-events Ex");
        assert_eq!(text, "notify-keyspace-events \"xE\"\n");
    }
}

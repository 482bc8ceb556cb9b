//! Property tests of the command-line parser: it never panics on any line, the value syntaxes
//! round-trip, and quoting gives back the words it was built from.

use core::net::Ipv4Addr;
use kayvee_bootargs::{parse, parse_cidr, parse_mmio_device, parse_time_us, words, Cidr};
use proptest::prelude::*;

/// Lines of the characters the parser cares about: blanks, quotes, `=`, `.`, and value bytes.
fn cmdline_ish() -> impl Strategy<Value = String> {
    "[a-z0-9=\" .:@/\t_K-]{0,80}"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_any_string(line in any::<String>()) {
        let _ = parse(&line);
    }

    #[test]
    fn parse_never_panics_on_cmdline_like_ascii(line in cmdline_ish()) {
        let _ = parse(&line);
    }

    /// Quotes toggle: the line is unbalanced exactly when it holds an odd number of them.
    #[test]
    fn an_odd_number_of_quotes_is_the_quote_error(line in cmdline_ish()) {
        let odd = line.bytes().filter(|&b| b == b'"').count() % 2 == 1;
        let quote_err = parse(&line).err().as_deref()
            == Some("unbalanced double quote in the command line");
        prop_assert_eq!(odd, quote_err);
    }

    #[test]
    fn any_cidr_round_trips(a: u8, b: u8, c: u8, d: u8, p in 0u8..=32) {
        let v = format!("{a}.{b}.{c}.{d}/{p}");
        let want = Cidr { address: Ipv4Addr::new(a, b, c, d), prefix_len: p };
        prop_assert_eq!(parse_cidr(&v), Some(want));
        prop_assert_eq!(parse(&format!("ip={v}")).unwrap().ip, Some(want));
    }

    #[test]
    fn an_octet_above_255_or_a_prefix_above_32_is_refused(
        octets in prop::array::uniform4(0u16..=999),
        p in 0u8..=99,
    ) {
        let [a, b, c, d] = octets;
        let ok = octets.iter().all(|&o| o <= 255) && p <= 32;
        prop_assert_eq!(parse_cidr(&format!("{a}.{b}.{c}.{d}/{p}")).is_some(), ok);
    }

    #[test]
    fn times_round_trip(secs in 0u64..=u64::MAX / 1_000_000, us in 0u64..1_000_000) {
        let want = secs.checked_mul(1_000_000).and_then(|s| s.checked_add(us));
        prop_assert_eq!(parse_time_us(&format!("{secs}.{us:06}")), want);
        // Trailing zeros of the fraction may be left out.
        let short = format!("{us:06}");
        let short = short.trim_end_matches('0');
        prop_assert_eq!(parse_time_us(&format!("{secs}.{short}")), want);
    }

    #[test]
    fn mmio_devices_round_trip(
        size in 0x100u64..=u64::from(u32::MAX),
        base in (0u64..=u64::MAX / 4).prop_map(|b| b * 4),
        irq: u32,
        id in proptest::option::of(0u32..100),
    ) {
        let id = id.map_or(String::new(), |i| format!(":{i}"));
        let dev = parse_mmio_device(&format!("{size}@{base:#x}:{irq}{id}")).unwrap();
        prop_assert_eq!((dev.size, dev.base, dev.irq), (size, base, irq));
    }

    /// Words of any characters but the quote, each quoted and joined by blanks, come back.
    #[test]
    fn quoted_words_come_back(
        ws in prop::collection::vec("[^\"]{0,12}", 0..8),
        sep in "[ \t\n]{1,3}",
    ) {
        let line: Vec<String> = ws.iter().map(|w| format!("\"{w}\"")).collect();
        prop_assert_eq!(words(&line.join(&sep)).unwrap(), ws);
    }

    /// A directive's value comes through as written, in order, whatever it holds once quoted.
    #[test]
    fn directives_come_through_quoted(
        pairs in prop::collection::vec(("[a-z][a-z-]{0,15}", "[^\"]{0,20}"), 0..6),
    ) {
        let pairs: Vec<(String, String)> = pairs
            .into_iter()
            .filter(|(k, _)| !kayvee_bootargs::IMAGE_KEYS.contains(&k.as_str()))
            .filter(|(k, _)| !kayvee_bootargs::LINUX_PARAMS.contains(&k.as_str()))
            .collect();
        let line: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        prop_assert_eq!(parse(&line.join(" ")).unwrap().config, pairs);
    }
}

/// Every key of `IMAGE_KEYS` is the image's own: never passed on as a Redis directive.
#[test]
fn image_keys_are_never_directives() {
    for key in kayvee_bootargs::IMAGE_KEYS {
        if let Ok(args) = parse(&format!("{key}=x")) {
            assert!(
                args.config.iter().all(|(k, _)| k != key),
                "{key} came through as a directive"
            );
        }
    }
}

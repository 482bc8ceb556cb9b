//! DEBUG PROTOCOL type: a sample reply of each RESP type, as Redis 7.0 sends it (for testing
//! clients): string, integer, double, bignum, null, array, set, map, attrib, push, verbatim,
//! true, false. In RESP2 each degrades as the codec degrades it; an attribute is left out, and
//! a push is refused.

use crate::argv::Argv;
use crate::error::{CmdResult, Error};
use crate::reply::{Protocol, ReplySink};

pub(super) fn protocol(args: &Argv<'_>, out: &mut dyn ReplySink) -> CmdResult {
    let resp3 = out.protocol() == Protocol::Resp3;
    match args.get(2).to_ascii_lowercase().as_slice() {
        b"string" => out.bulk(b"Hello World"),
        b"integer" => out.int(12345),
        // Redis's sample value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => out.double(3.141),
        b"bignum" => out.big_number("1234567999999999999999999999999999999"),
        b"null" => out.null(),
        b"array" => {
            out.array(3);
            (0..3).for_each(|i| out.int(i));
        }
        b"set" => {
            out.set(3);
            (0..3).for_each(|i| out.int(i));
        }
        b"map" => {
            out.map(3);
            for i in 0..3 {
                out.int(i);
                out.boolean(i == 1);
            }
        }
        b"attrib" => {
            if resp3 {
                out.attribute(1);
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        b"push" => {
            if !resp3 {
                return Err(Error::msg("ERR RESP2 is not supported by this command"));
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        b"true" => out.boolean(true),
        b"false" => out.boolean(false),
        b"verbatim" => out.verbatim("txt", b"This is a verbatim\nstring"),
        _ => {
            return Err(Error::msg(
                "ERR Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

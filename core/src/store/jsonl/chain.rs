//! The checksum chain of format version 2 (core/FORMAT.md#checksums-version-2): how a record
//! ends, what its CRC-32C covers, and how one record's checksum continues the last.
//!
//! A version 2 line is its version 1 object with the closing `}` replaced by
//! `,"synced":N` (event lines only) and then `,"crc32c":"hhhhhhhh"}`. The checksum
//! covers every byte of the line before `,"crc32c":`, and continues the previous
//! line's: the value on line n is the CRC-32C of the covered bytes of lines 1..n, one
//! after the other. So a reader that trusts line n − 1's value checks line n alone,
//! and a changed, dropped, duplicated or reordered line breaks the chain where it is.
//! Pure: no I/O.

/// What comes before the checksum's 8 hex digits.
const CRC_KEY: &[u8] = b",\"crc32c\":\"";

/// What comes before the `synced` digits of an event line.
const SYNCED_KEY: &[u8] = b",\"synced\":";

/// The checksum's digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The two lowercase hex digits of every byte value, `00` to `ff`, one after the other.
const BYTE_HEX_DIGITS: [u8; 512] = {
    let mut digits = [0u8; 512];
    let mut i = 0;
    while i < 256 {
        digits[2 * i] = HEX[i >> 4];
        digits[2 * i + 1] = HEX[i & 0xf];
        i += 1;
    }
    digits
};

/// [`BYTE_HEX_DIGITS`] as text (checked once, when compiled).
const BYTE_HEX: &str = match std::str::from_utf8(&BYTE_HEX_DIGITS) {
    Ok(text) => text,
    Err(_) => panic!("hex digits are ASCII"),
};

/// Bytes from `,"crc32c":` to the end of the line.
const CRC_END: usize = CRC_KEY.len() + 8 + 2;

/// The most a version 2 line adds to its version 1 object: `,"synced":` with 20 digits
/// and the checksum. The record limit bounds the object (the event as ARCHITECTURE.md#events
/// spells it), so a reader takes lines up to [`line_limit`].
pub(crate) const OVERHEAD: usize = SYNCED_KEY.len() + 20 + CRC_END;

/// The longest line a reader with the record limit `limit` reads.
pub(crate) fn line_limit(limit: usize) -> usize {
    limit.saturating_add(OVERHEAD)
}

/// The checksum chain before the header: line 1's value is the plain CRC-32C of its bytes.
pub(crate) const START: u32 = 0;

/// The chain value after a line whose covered bytes are `covered`, continuing `prev`.
pub(crate) fn link(prev: u32, covered: &[u8]) -> u32 {
    crc32c::crc32c_append(prev, covered)
}

/// A version 2 line taken apart (not yet checked against the chain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Framed<'a> {
    /// The version 1 object without its closing `}`: the header's or event's own keys.
    pub body: &'a str,
    /// The `synced` value (0 for the header, which has none).
    pub synced: u64,
    /// The checksum the line carries.
    pub stored: u32,
    /// The bytes the checksum covers (`body` and, for an event, `,"synced":N`).
    pub covered: &'a [u8],
}

impl Framed<'_> {
    /// Whether the line's checksum continues the chain value `prev`.
    pub(crate) fn continues(&self, prev: u32) -> bool {
        link(prev, self.covered) == self.stored
    }

    /// The version 1 text of the object (`body` + `}`), for the general parser.
    pub(crate) fn object(&self) -> String {
        let mut s = String::with_capacity(self.body.len() + 1);
        s.push_str(self.body);
        s.push('}');
        s
    }
}

/// Why a line is not a well-formed version 2 line.
pub(crate) const MALFORMED: &str =
    "record does not end with a checksum (,\"crc32c\":\"<8 lowercase hex digits>\"})";

/// Takes `line` apart: an event line when `event` (it has `synced`), else the header.
/// `None` when it does not end the way version 2 lines end.
pub(crate) fn split(line: &str, event: bool) -> Option<Framed<'_>> {
    let b = line.as_bytes();
    let covered_len = b.len().checked_sub(CRC_END)?;
    let tail = &b[covered_len..];
    if !tail.starts_with(CRC_KEY) || !tail.ends_with(b"\"}") {
        return None;
    }
    let stored = parse_hex(&tail[CRC_KEY.len()..CRC_KEY.len() + 8])?;
    let covered = &b[..covered_len];
    let (body_len, synced) = if event {
        let digits = covered
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let start = covered_len - digits;
        let text = &covered[start..];
        // No sign, no leading zero, at most 19 digits (never overflows a u64).
        if digits == 0 || digits > 19 || (digits > 1 && text[0] == b'0') {
            return None;
        }
        let synced = text.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        let body_len = start.checked_sub(SYNCED_KEY.len())?;
        if &covered[body_len..start] != SYNCED_KEY {
            return None;
        }
        (body_len, synced)
    } else {
        (covered_len, 0)
    };
    // Every cut is just before an ASCII byte, so it is a char boundary.
    Some(Framed {
        body: &line[..body_len],
        synced,
        stored,
        covered,
    })
}

/// The check every line read gets, in one pass: `Some((body length, checksum))` when
/// `line` is a well-formed version 2 line (an event line when `event`) whose checksum
/// continues `prev`, `None` otherwise. Exactly `split(line, event)` followed by
/// [`Framed::continues`], without taking the line apart: the checksum the bytes give is
/// written as hex and compared with the stored digits (one comparison, where reading
/// them would be eight lookups), and `synced` is checked but not read.
pub(crate) fn intact(line: &str, event: bool, prev: u32) -> Option<(usize, u32)> {
    let b = line.as_bytes();
    let covered_len = b.len().checked_sub(CRC_END)?;
    let (covered, tail) = b.split_at(covered_len);
    let tail: &[u8; CRC_END] = tail.try_into().ok()?;
    let (key, rest) = tail.split_at(CRC_KEY.len());
    let (digits, end) = rest.split_at(8);
    let digits: [u8; 8] = digits.try_into().ok()?;
    if key != CRC_KEY || end != b"\"}" {
        return None;
    }
    let body_len = if event {
        synced_start(covered)?
    } else {
        covered_len
    };
    let value = link(prev, covered);
    (hex8(value) == digits).then_some((body_len, value))
}

/// Where `,"synced":N` starts at the end of an event line's covered bytes, when `N` is
/// spelled as [`split`] takes it: 1 to 19 digits, no sign, no leading zero.
fn synced_start(covered: &[u8]) -> Option<usize> {
    let mut start = covered.len();
    while start > 0 && covered[start - 1].is_ascii_digit() {
        start -= 1;
    }
    let digits = covered.len() - start;
    if digits == 0 || digits > 19 || (digits > 1 && covered[start] == b'0') {
        return None;
    }
    let body_len = start.checked_sub(SYNCED_KEY.len())?;
    (&covered[body_len..start] == SYNCED_KEY).then_some(body_len)
}

/// The 8 lowercase hex digits of `value`, most significant first, computed in one
/// 64-bit word (no table, no loop).
fn hex8(value: u32) -> [u8; 8] {
    // Spread the nibbles one a byte, the most significant nibble in the lowest byte.
    let mut x = u64::from(value.swap_bytes());
    x = (x | x << 16) & 0x0000_ffff_0000_ffff;
    x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
    // Each byte holds two nibbles (high, low); the high one goes first.
    x = ((x >> 4) & 0x000f_000f_000f_000f) | ((x & 0x000f_000f_000f_000f) << 8);
    // A nibble of 10 or more sets bit 4 once 6 is added: those get `a` - `0` - 10 more.
    let letters = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    (x + 0x3030_3030_3030_3030 + letters * 39).to_le_bytes()
}

/// What can still be read of a line that is not a well-formed version 2 line, or whose
/// checksum does not match: the bytes its checksum would cover and the value it
/// carries, each when the line is long enough (and the value hex). A reader looking for
/// a later line that continues a damaged one tries both (see `recovery::Damage`).
pub(crate) fn loose(line: &str) -> (Option<&[u8]>, Option<u32>) {
    let b = line.as_bytes();
    let covered = b.len().checked_sub(CRC_END).map(|n| &b[..n]);
    let stored = b
        .len()
        .checked_sub(10)
        .and_then(|n| parse_hex(&b[n..n + 8]));
    (covered, stored)
}

/// Each byte's value as a lowercase hex digit, [`NOT_HEX`] for every other byte.
const HEX_VALUE: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut i = 0;
    while i < 16 {
        table[HEX[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// A byte that is not a lowercase hex digit, in [`HEX_VALUE`].
const NOT_HEX: u8 = 0xff;

/// The value of 8 lowercase hex digits (a table lookup a digit: this runs on every line
/// read).
fn parse_hex(digits: &[u8]) -> Option<u32> {
    let digits: &[u8; 8] = digits.try_into().ok()?;
    let mut n = 0u32;
    let mut bad = 0u8;
    for &d in digits {
        let v = HEX_VALUE[usize::from(d)];
        bad |= v;
        n = n << 4 | u32::from(v & 0xf);
    }
    // NOT_HEX has every bit set, a digit's value only the low four.
    (bad & 0xf0 == 0).then_some(n)
}

/// Ends the object at `buf[start..]` (a version 1 record, `}` last) as a version 2
/// line: `synced` (for an event line) and the checksum continuing `prev`. Returns the
/// line's chain value.
pub(crate) fn seal(buf: &mut String, start: usize, prev: u32, synced: Option<u64>) -> u32 {
    debug_assert!(buf.ends_with('}'));
    buf.pop();
    if let Some(synced) = synced {
        buf.push_str(",\"synced\":");
        buf.push_str(itoa::Buffer::new().format(synced));
    }
    let value = link(prev, &buf.as_bytes()[start..]);
    buf.push_str(",\"crc32c\":\"");
    // Two digits a byte, from a table: no UTF-8 check of a scratch buffer on every append.
    for byte in value.to_be_bytes() {
        let at = 2 * usize::from(byte);
        buf.push_str(&BYTE_HEX[at..at + 2]);
    }
    buf.push_str("\"}");
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_line_splits_back_and_continues_its_chain() {
        let mut buf = String::from("x{\"format\":\"inboxlog\"}");
        let h = seal(&mut buf, 1, START, None);
        let header = &buf[1..];
        assert_eq!(
            header,
            format!("{{\"format\":\"inboxlog\",\"crc32c\":\"{h:08x}\"}}")
        );
        let f = split(header, false).unwrap();
        assert_eq!(
            (f.body, f.synced, f.stored),
            ("{\"format\":\"inboxlog\"", 0, h)
        );
        assert!(f.continues(START));
        assert_eq!(h, crc32c::crc32c(br#"{"format":"inboxlog""#));

        let mut line = String::from("{\"seq\":0}");
        let e = seal(&mut line, 0, h, Some(120));
        let f = split(&line, true).unwrap();
        assert_eq!((f.body, f.synced, f.stored), ("{\"seq\":0", 120, e));
        assert_eq!(f.object(), "{\"seq\":0}");
        assert!(f.continues(h) && !f.continues(START));
        // The chain is the CRC-32C of everything covered so far.
        let all = "{\"format\":\"inboxlog\"{\"seq\":0,\"synced\":120";
        assert_eq!(e, crc32c::crc32c(all.as_bytes()));
    }

    #[test]
    fn hex8_writes_what_parse_hex_reads() {
        for value in [
            0,
            1,
            9,
            10,
            15,
            16,
            0xdead_beef,
            0x0123_4567,
            0x89ab_cdef,
            u32::MAX,
        ] {
            let digits = hex8(value);
            assert_eq!(digits, *format!("{value:08x}").as_bytes(), "{value:#x}");
            assert_eq!(parse_hex(&digits), Some(value));
        }
        let mut x = 0x9e37_79b9u32;
        for _ in 0..10_000 {
            x = x.wrapping_mul(0x2c1b_3c6d).wrapping_add(0x297a_2d39);
            assert_eq!(hex8(x), *format!("{x:08x}").as_bytes(), "{x:#x}");
        }
    }

    /// `intact` as `split` then `continues` spell it.
    fn intact_by_split(line: &str, event: bool, prev: u32) -> Option<(usize, u32)> {
        split(line, event)
            .filter(|f| f.continues(prev))
            .map(|f| (f.body.len(), f.stored))
    }

    #[test]
    fn intact_is_split_then_continues_for_every_change_of_a_line() {
        let mut header = String::from("{\"format\":\"inboxlog\"}");
        let h = seal(&mut header, 0, START, None);
        let mut lines = vec![(header, false, START)];
        for synced in [0, 7, 10, 1234, u64::from(u32::MAX), u64::MAX / 10] {
            let mut line = String::from("{\"seq\":0,\"data\":\"é\"}");
            seal(&mut line, 0, h, Some(synced));
            lines.push((line, true, h));
        }
        for (line, event, prev) in &lines {
            assert!(intact(line, *event, *prev).is_some(), "{line}");
            for at in 0..line.len() {
                for byte in [
                    b'0', b'7', b'9', b'a', b'f', b'A', b'g', b'"', b'}', b',', b'-', 0,
                ] {
                    let mut bytes = line.clone().into_bytes();
                    bytes[at] = byte;
                    let Ok(changed) = String::from_utf8(bytes) else {
                        continue;
                    };
                    for (e, p) in [(*event, *prev), (!*event, *prev), (*event, prev ^ 1)] {
                        assert_eq!(
                            intact(&changed, e, p),
                            intact_by_split(&changed, e, p),
                            "{changed} {e} {p}"
                        );
                    }
                }
                if let Some(cut) = line.get(..at) {
                    assert_eq!(
                        intact(cut, *event, *prev),
                        intact_by_split(cut, *event, *prev)
                    );
                }
            }
        }
        for odd in [
            "",
            "}",
            ",\"crc32c\":\"00000000\"}",
            ",\"synced\":0,\"crc32c\":\"00000000\"}",
        ] {
            for e in [false, true] {
                assert_eq!(
                    intact(odd, e, START),
                    intact_by_split(odd, e, START),
                    "{odd}"
                );
            }
        }
    }

    #[test]
    fn hex_digits_parse_and_every_other_byte_is_refused() {
        assert_eq!(parse_hex(b"0123abcd"), Some(0x0123_abcd));
        assert_eq!(parse_hex(b"ffffffff"), Some(u32::MAX));
        assert_eq!(parse_hex(b"00000000"), Some(0));
        assert_eq!(parse_hex(b"0123abc"), None);
        for byte in 0..=u8::MAX {
            let ok = byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte);
            for at in 0..8 {
                let mut digits = *b"89abcdef";
                digits[at] = byte;
                assert_eq!(parse_hex(&digits).is_some(), ok, "{byte:#x} at {at}");
            }
        }
    }

    #[test]
    fn lines_that_do_not_end_as_sealed_ones_are_refused() {
        let mut ok = String::from("{\"seq\":0}");
        seal(&mut ok, 0, START, Some(7));
        assert!(split(&ok, true).is_some());
        assert!(split(&ok, false).is_some_and(|f| f.body.ends_with("\"synced\":7")));
        assert_eq!(split("{\"seq\":0}", true), None);
        assert_eq!(split("", true), None);
        let upper = ok.replace(
            |c: char| c.is_ascii_lowercase() && c.is_ascii_hexdigit(),
            "A",
        );
        if upper != ok {
            assert_eq!(split(&upper, true), None);
        }
        for bad in [
            ok.replace("\"synced\":7", "\"synced\":07"),
            ok.replace("\"synced\":7", "\"synced\":"),
            ok.replace("\"synced\":7", "\"synced\":-7"),
            ok.replace("\"synced\":7", "\"synced\":99999999999999999999"),
            ok.replace("\"synced\"", "\"sinced\""),
            ok.replace("\"crc32c\"", "\"crc32C\""),
            ok.replace("\"}", "\" }"),
            ok[..ok.len() - 1].to_owned(),
        ] {
            assert_eq!(split(&bad, true), None, "{bad}");
        }
    }
}

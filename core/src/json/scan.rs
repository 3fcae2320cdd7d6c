//! The scan of a JSON string's text for its next quote or backslash: one home for the
//! loop every string read goes through (the [`Reader`](super::Reader)'s lexer and
//! [`plain::string_end`](super::plain::string_end)).
//!
//! Between two escapes a string is a *run* of bytes that stand for themselves; a raw
//! control character (below 0x20) may not be in it. Most strings of a log are short
//! (keys, types, ids, a few words), so the first [`WORD_SCAN_BYTES`] bytes are looked
//! at eight at a time, quote, backslash and control characters in one test per word,
//! with no call. A longer run is handed to `memchr` for the quote or backslash, then
//! checked for control characters by one loop the compiler vectorises.

/// Bytes looked at a word at a time before the scan hands over to `memchr`.
const WORD_SCAN_BYTES: usize = 32;

/// Each byte of a word set to 0x01.
const ONES: u64 = 0x0101_0101_0101_0101;

/// Each byte of a word set to 0x80.
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The offset of the first quote or backslash at or after `from` in `b`, the run before
/// it free of control characters; else `Err` with the offset of the first byte no
/// string may hold there: a raw control character, or `b.len()` when neither quote nor
/// backslash comes.
#[inline(always)]
pub(crate) fn to_quote_or_backslash(b: &[u8], from: usize) -> Result<usize, usize> {
    let mut i = from;
    while i < from + WORD_SCAN_BYTES {
        let Some(word) = b.get(i..).and_then(<[u8]>::first_chunk::<8>) else {
            // Fewer than eight bytes left: the end of the text is near.
            break;
        };
        let stops = stops(u64::from_le_bytes(*word));
        if stops != 0 {
            // The lowest flagged byte is exact (see `stops`).
            let at = i + (stops.trailing_zeros() / 8) as usize;
            return if b[at] < 0x20 { Err(at) } else { Ok(at) };
        }
        i += 8;
    }
    long_run(b, i)
}

/// The bytes of `word` (little-endian) that end a run: a quote, a backslash or a byte
/// below 0x20 has its top bit set. `x - 0x0101…` sets a byte's top bit where the byte is
/// zero (or where a borrow from a lower flagged byte reaches it), `!x` keeps it only
/// where the byte is below 0x80; so the lowest flagged byte is always a true stop, and
/// only bytes above it may be flagged wrongly.
#[inline(always)]
fn stops(word: u64) -> u64 {
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let quote = zero(word ^ (ONES * u64::from(b'"')));
    let backslash = zero(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    quote | backslash | control
}

/// [`to_quote_or_backslash`] beyond its first words, or near the end of the text.
#[inline(never)]
fn long_run(b: &[u8], from: usize) -> Result<usize, usize> {
    let rest = b.get(from..).unwrap_or_default();
    let Some(run) = memchr::memchr2(b'"', b'\\', rest) else {
        return Err(from + first_control(rest).unwrap_or(rest.len()));
    };
    // The minimum of the run, vectorised; the byte loop only runs on an error.
    if rest[..run]
        .iter()
        .copied()
        .min()
        .is_some_and(|low| low < 0x20)
    {
        return Err(from + first_control(rest).unwrap_or(run));
    }
    Ok(from + run)
}

/// The offset of the first byte below 0x20 in `run`.
fn first_control(run: &[u8]) -> Option<usize> {
    run.iter().position(|&c| c < 0x20)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the scan must answer, a byte at a time.
    fn naive(b: &[u8], from: usize) -> Result<usize, usize> {
        for (at, &c) in b.iter().enumerate().skip(from) {
            match c {
                b'"' | b'\\' => return Ok(at),
                0..0x20 => return Err(at),
                _ => {}
            }
        }
        Err(b.len())
    }

    #[test]
    fn every_byte_in_every_lane_stops_or_not() {
        // Past the word scan and into the long run, from offsets that change the lanes.
        for len in 0..WORD_SCAN_BYTES + 12 {
            for at in 0..len {
                for byte in 0..=255u8 {
                    let mut text = vec![b'a'; len];
                    text[at] = byte;
                    for from in [0, 1, 3].into_iter().filter(|&f| f <= len) {
                        assert_eq!(
                            to_quote_or_backslash(&text, from),
                            naive(&text, from),
                            "{len} {at} {byte} {from}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_first_stop_wins_over_later_ones() {
        // A stop flagged wrongly by a borrow sits above a true one: the true one is the
        // answer, whichever kinds the two are.
        let kinds = [b'"', b'\\', 0x00, 0x1f, 0x01, 0x21, 0x5d, 0xa2, 0xdc];
        for len in 2..WORD_SCAN_BYTES + 12 {
            for first in 0..len {
                for second in first + 1..len {
                    for &a in &kinds {
                        for &c in &kinds {
                            let mut text = vec![b'x'; len];
                            text[first] = a;
                            text[second] = c;
                            assert_eq!(
                                to_quote_or_backslash(&text, 0),
                                naive(&text, 0),
                                "{len} {first} {second} {a} {c}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn multibyte_text_passes_and_the_end_is_an_error() {
        let text = "é✓𝄞 und so weiter, noch länger als zweiunddreißig Bytes\"".as_bytes();
        assert_eq!(to_quote_or_backslash(text, 0), Ok(text.len() - 1));
        assert_eq!(to_quote_or_backslash(b"abc", 0), Err(3));
        assert_eq!(to_quote_or_backslash(b"abc", 3), Err(3));
        assert_eq!(to_quote_or_backslash(b"", 0), Err(0));
        // A control character before the end is the error, in either part of the scan.
        let long = format!("{}\u{1}", "y".repeat(40));
        assert_eq!(to_quote_or_backslash(long.as_bytes(), 0), Err(40));
    }
}

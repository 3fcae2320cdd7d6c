//! Splitting a log's bytes into complete lines and a torn tail (ARCHITECTURE.md#opening-a-stored-log).
//!
//! A line is complete when its `\n` is stored; the bytes after the last `\n` are the
//! torn tail a crash can leave (a partial record, a run of NULs). Memory stays bounded
//! by the record limit whatever the input: an over-long line is counted, not kept.
//! Pure: reads any [`BufRead`], tested on byte slices.

use std::io::{self, BufRead};
use std::str::Utf8Error;

/// One complete line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    /// 1-based line number (the header is line 1).
    pub number: u64,
    /// Byte offset of the line's first byte in the file.
    pub offset: u64,
    /// The line without its `\n`; `Err(len)` when it is longer than the limit.
    pub bytes: Result<&'a [u8], u64>,
}

/// Why a complete line has no text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Longer than the limit: its length in bytes.
    TooLong(u64),
    /// Not UTF-8.
    NotUtf8(Utf8Error),
}

/// A complete line's text, checked: within the limit and UTF-8.
pub(crate) type Checked<'a> = Result<&'a str, Fault>;

impl<'a> Line<'a> {
    /// The line's text, or why it has none.
    pub(crate) fn checked(&self) -> Checked<'a> {
        let bytes = self.bytes.map_err(Fault::TooLong)?;
        // SIMD on every line read; the standard check only to say where a bad one breaks.
        simdutf8::basic::from_utf8(bytes)
            .or_else(|_| std::str::from_utf8(bytes))
            .map_err(Fault::NotUtf8)
    }
}

/// An iterator-like reader of complete lines.
pub(crate) struct Lines<R> {
    reader: R,
    /// A line that spans several reader buffers, assembled here.
    buf: Vec<u8>,
    /// Longest line kept, in bytes (without the `\n`).
    limit: usize,
    /// Bytes of the reader's buffer lent out by the last `next`, consumed on the next call.
    pending: usize,
    /// Offset just after the last complete line.
    end: u64,
    /// Number of the last line returned.
    number: u64,
    /// Bytes after the last `\n`, known once `next` returned `None`.
    torn: u64,
}

impl<R: BufRead> Lines<R> {
    /// Lines of `reader`, which starts at the beginning of the file.
    pub(crate) fn new(reader: R, limit: usize) -> Lines<R> {
        Lines::resume(reader, limit, 0, 0)
    }

    /// Lines of `reader`, which starts at byte `offset`, just after line `number`.
    pub(crate) fn resume(reader: R, limit: usize, offset: u64, number: u64) -> Lines<R> {
        Lines {
            reader,
            buf: Vec::new(),
            limit,
            pending: 0,
            end: offset,
            number,
            torn: 0,
        }
    }

    /// Offset just after the last complete line returned (where a torn tail starts).
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Bytes after the last `\n`; meaningful once [`Lines::next`] returned `None`.
    pub(crate) fn torn(&self) -> u64 {
        self.torn
    }

    /// The next complete line, or `None` when only a torn tail (maybe empty) is left.
    pub(crate) fn next(&mut self) -> io::Result<Option<Line<'_>>> {
        self.reader.consume(std::mem::take(&mut self.pending));
        self.buf.clear();
        let limit = self.limit as u64;
        let offset = self.end;
        // Bytes of this line seen so far; once over the limit they are counted, not kept.
        let mut len = 0u64;
        let mut over = false;
        let borrowed = loop {
            let avail = self.reader.fill_buf()?;
            if avail.is_empty() {
                self.torn = len;
                return Ok(None);
            }
            match memchr::memchr(b'\n', avail) {
                Some(i) => {
                    let starts_here = len == 0;
                    len += i as u64;
                    over |= len > limit;
                    if starts_here && !over {
                        // The whole line is in the reader's buffer: lend it, no copy.
                        self.pending = i + 1;
                        break Some(i);
                    }
                    if !over {
                        self.buf.extend_from_slice(&avail[..i]);
                    }
                    self.reader.consume(i + 1);
                    break None;
                }
                None => {
                    let n = avail.len();
                    len += n as u64;
                    over |= len > limit;
                    if over {
                        self.buf = Vec::new();
                    } else {
                        self.buf.extend_from_slice(avail);
                    }
                    self.reader.consume(n);
                }
            }
        };
        self.end = offset + len + 1;
        self.number += 1;
        let bytes = match borrowed {
            // `fill_buf` returns the same, unconsumed buffer without reading.
            Some(i) => Ok(&self.reader.fill_buf()?[..i]),
            None if over => Err(len),
            None => Ok(&self.buf[..]),
        };
        Ok(Some(Line {
            number: self.number,
            offset,
            bytes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    /// A line as (number, offset, bytes or length).
    type Owned = (u64, u64, Result<Vec<u8>, u64>);

    /// (lines, torn, end) of `input`, read through a reader buffer of `cap` bytes.
    fn split(input: &[u8], cap: usize, limit: usize) -> (Vec<Owned>, u64, u64) {
        let mut lines = Lines::new(BufReader::with_capacity(cap, input), limit);
        let mut out = Vec::new();
        while let Some(l) = lines.next().unwrap() {
            out.push((l.number, l.offset, l.bytes.map(<[u8]>::to_vec)));
        }
        (out, lines.torn(), lines.end())
    }

    #[test]
    fn complete_lines_and_the_torn_tail() {
        for cap in [1, 2, 3, 7, 64, 8192] {
            let (lines, torn, end) = split(b"ab\n\ncde\nfg", cap, 100);
            assert_eq!(
                lines,
                vec![
                    (1, 0, Ok(b"ab".to_vec())),
                    (2, 3, Ok(vec![])),
                    (3, 4, Ok(b"cde".to_vec()))
                ],
                "cap {cap}"
            );
            assert_eq!((torn, end), (2, 8), "cap {cap}");
        }
        assert_eq!(split(b"", 8, 100), (vec![], 0, 0));
        assert_eq!(split(b"\0\0\0", 8, 100), (vec![], 3, 0));
        assert_eq!(
            split(b"x\n", 8, 100),
            (vec![(1, 0, Ok(b"x".to_vec()))], 0, 2)
        );
    }

    #[test]
    fn a_nul_run_before_a_newline_is_a_complete_line() {
        let (lines, torn, _) = split(b"a\n\0\0\nb\n", 4, 100);
        assert_eq!(lines[1], (2, 2, Ok(vec![0, 0])));
        assert_eq!(torn, 0);
    }

    #[test]
    fn over_long_lines_are_counted_not_kept() {
        for cap in [1, 3, 5, 64] {
            let (lines, torn, end) = split(b"abcd\nabcdef\nab\nabcdefgh", cap, 4);
            assert_eq!(
                lines,
                vec![
                    (1, 0, Ok(b"abcd".to_vec())),
                    (2, 5, Err(6)),
                    (3, 12, Ok(b"ab".to_vec()))
                ],
                "cap {cap}"
            );
            assert_eq!((torn, end), (8, 15), "cap {cap}");
        }
    }

    #[test]
    fn a_line_that_is_not_utf8_says_where_it_breaks() {
        let mut bytes = "é".repeat(40).into_bytes();
        bytes.extend_from_slice(b"ok\xffok");
        bytes.push(b'\n');
        bytes.extend_from_slice("ascii and é ✓ 𝄞\n".as_bytes());
        let mut lines = Lines::new(&bytes[..], 1000);
        match lines.next().unwrap().unwrap().checked() {
            Err(Fault::NotUtf8(e)) => assert_eq!(e.valid_up_to(), 82),
            other => panic!("{other:?}"),
        }
        let good = lines.next().unwrap().unwrap();
        assert_eq!(good.checked(), Ok("ascii and é ✓ 𝄞"));
    }

    #[test]
    fn resume_numbers_from_the_given_line() {
        let mut lines = Lines::resume(&b"x\ny\n"[..], 10, 100, 7);
        let l = lines.next().unwrap().unwrap();
        assert_eq!((l.number, l.offset), (8, 100));
        let l = lines.next().unwrap().unwrap();
        assert_eq!((l.number, l.offset, l.bytes), (9, 102, Ok(&b"y"[..])));
        assert!(lines.next().unwrap().is_none());
        assert_eq!(lines.end(), 104);
    }
}

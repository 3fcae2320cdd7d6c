//! Reading a log's complete lines from the end backward, in blocks, for the reads that
//! cost what they return (ARCHITECTURE.md#checkpoints-and-reading-without-owning).
//!
//! Every byte goes through [`ReadAt`], positional reads of a file whose length was
//! taken once: bytes a writer appends meanwhile are not seen, and a test counts the
//! bytes read. A line longer than the limit is measured, not kept, so memory stays
//! bounded by the limit and the block whatever the file holds. Pure but for
//! [`ReadAt`]: tested on byte slices.

use std::fs::File;
use std::io::{self, Read};

use super::lines::Line;

/// Bytes read from the file at a time, backward.
pub(crate) const BLOCK: usize = 64 << 10;

/// Positional reads of one file.
pub(crate) trait ReadAt {
    /// Reads from byte `offset` into `buf`: how many bytes were read, fewer than
    /// `buf.len()` only at the end of the file.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;

    /// Fills `buf` from byte `offset`: an `UnexpectedEof` error when the file ends
    /// first (it was cut while it was read).
    fn read_exact_at(&self, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(offset, buf) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the file ended at byte {offset} while it was read"),
                    ));
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl ReadAt for File {
    #[cfg(unix)]
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }

    #[cfg(windows)]
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(self, buf, offset)
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let from = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.len());
        let n = buf.len().min(self.len() - from);
        buf[..n].copy_from_slice(&self[from..from + n]);
        Ok(n)
    }
}

/// The bytes `[pos, end)` of a file as a forward reader.
pub(crate) struct Window<'f, R: ?Sized> {
    file: &'f R,
    pos: u64,
    end: u64,
}

impl<'f, R: ReadAt + ?Sized> Window<'f, R> {
    /// The bytes of `file` from `pos` to `end`.
    pub(crate) fn new(file: &'f R, pos: u64, end: u64) -> Window<'f, R> {
        Window { file, pos, end }
    }
}

impl<R: ReadAt + ?Sized> Read for Window<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = usize::try_from(self.end.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(self.pos, &mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the file ended at byte {} while it was read", self.pos),
            ));
        }
        self.pos += n as u64;
        Ok(n)
    }
}

/// The complete lines of `[start, len)` of a file, last first.
pub(crate) struct Backward<'f, R: ?Sized> {
    file: &'f R,
    /// Where the first line it may return starts (just after the header line).
    start: u64,
    /// Just after the `\n` of the next line to return; `start` when none is left.
    cut: u64,
    /// Bytes `[at, at + buf.len())` of the file, read and not yet returned; always
    /// ending at or before `cut`.
    buf: Vec<u8>,
    at: u64,
    block: usize,
    /// The longest line kept, in bytes (without its `\n`).
    limit: usize,
}

impl<'f, R: ReadAt + ?Sized> Backward<'f, R> {
    /// The lines of `file` between `start` (a line's start) and its length `len`,
    /// read `block` bytes at a time (more for a line longer than the block); lines
    /// over `limit` bytes are measured, not kept. The bytes after the last `\n` (a torn
    /// tail) are skipped: [`Backward::end`] says where they start.
    pub(crate) fn new(
        file: &'f R,
        start: u64,
        len: u64,
        block: usize,
        limit: usize,
    ) -> io::Result<Backward<'f, R>> {
        let mut back = Backward {
            file,
            start,
            cut: len.max(start),
            buf: Vec::new(),
            at: len.max(start),
            block: block.max(1),
            limit,
        };
        let (end, _) = back.line_start(back.cut)?;
        back.cut = end;
        back.buf
            .truncate(usize::try_from(end - back.at).unwrap_or(usize::MAX));
        Ok(back)
    }

    /// Just after the last complete line: where the torn tail starts.
    pub(crate) fn end(&self) -> u64 {
        self.cut
    }

    /// The line before the last one returned (the last line first), or `None` once
    /// the line at `start` was returned. Its number is 0: a reader from the end does
    /// not know it.
    pub(crate) fn prev(&mut self) -> io::Result<Option<Line<'_>>> {
        if self.cut <= self.start {
            return Ok(None);
        }
        let end = self.cut - 1;
        let (offset, kept) = self.line_start(end)?;
        self.cut = offset;
        let len = end - offset;
        let bytes = if kept && len <= self.limit as u64 {
            let from = (offset - self.at) as usize;
            let bytes = &self.buf[from..from + len as usize];
            Ok(bytes)
        } else {
            Err(len)
        };
        // What is left of the buffer ends where this line starts; the line itself is
        // cut off on the next call (it is lent out until then).
        let line = Line {
            number: 0,
            offset,
            bytes,
        };
        Ok(Some(line))
    }

    /// Where the line ending just before `end` starts (after the last `\n` before
    /// `end`, or `start`), and whether its bytes are in the buffer. Reads backward as
    /// far as needed; a line over the limit is scanned, not kept.
    fn line_start(&mut self, end: u64) -> io::Result<(u64, bool)> {
        // Nothing from `end` on is needed again.
        if self.at < end {
            self.buf
                .truncate(usize::try_from(end - self.at).unwrap_or(usize::MAX));
        } else {
            self.buf.clear();
            self.at = end;
        }
        loop {
            if let Some(i) = memchr::memrchr(b'\n', &self.buf) {
                return Ok((self.at + i as u64 + 1, true));
            }
            if self.at <= self.start {
                return Ok((self.start, true));
            }
            if (end - self.at) as usize > self.limit {
                return self.scan(end).map(|offset| (offset, false));
            }
            // Doubling what is read for a long line keeps the copying linear.
            let n = self.block.max(self.buf.len()) as u64;
            let n = n.min(self.at - self.start) as usize;
            let mut grown = vec![0u8; n + self.buf.len()];
            self.file
                .read_exact_at(self.at - n as u64, &mut grown[..n])?;
            grown[n..].copy_from_slice(&self.buf);
            self.buf = grown;
            self.at -= n as u64;
        }
    }

    /// [`Backward::line_start`] for a line over the limit: blocks are searched for the
    /// `\n` before it and dropped; the bytes before that `\n` in the last block are
    /// kept for the lines before.
    fn scan(&mut self, end: u64) -> io::Result<u64> {
        debug_assert!(end >= self.at);
        self.buf.clear();
        let mut block = vec![0u8; self.block];
        while self.at > self.start {
            let n = (self.block as u64).min(self.at - self.start) as usize;
            let from = self.at - n as u64;
            self.file.read_exact_at(from, &mut block[..n])?;
            self.at = from;
            if let Some(i) = memchr::memrchr(b'\n', &block[..n]) {
                self.buf.extend_from_slice(&block[..=i]);
                return Ok(from + i as u64 + 1);
            }
        }
        Ok(self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A slice that counts the bytes read from it.
    struct Counted<'a> {
        bytes: &'a [u8],
        read: Cell<u64>,
    }

    impl ReadAt for Counted<'_> {
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.bytes.read_at(offset, buf)?;
            self.read.set(self.read.get() + n as u64);
            Ok(n)
        }
    }

    /// A line as (offset, bytes or length).
    type Owned = (u64, Result<Vec<u8>, u64>);

    /// Every line, last first, and where the torn tail starts.
    fn back(input: &[u8], start: u64, block: usize, limit: usize) -> (Vec<Owned>, u64) {
        let mut b = Backward::new(input, start, input.len() as u64, block, limit).unwrap();
        let end = b.end();
        let mut out = Vec::new();
        while let Some(l) = b.prev().unwrap() {
            out.push((l.offset, l.bytes.map(<[u8]>::to_vec)));
        }
        (out, end)
    }

    #[test]
    fn lines_come_last_first_and_the_torn_tail_is_skipped() {
        for block in [1, 2, 3, 7, 64, 8192] {
            let (lines, end) = back(b"h\nab\n\ncde\nfg", 2, block, 100);
            assert_eq!(
                lines,
                vec![
                    (6, Ok(b"cde".to_vec())),
                    (5, Ok(vec![])),
                    (2, Ok(b"ab".to_vec()))
                ],
                "block {block}"
            );
            assert_eq!(end, 10, "block {block}");
        }
        assert_eq!(back(b"h\n", 2, 4, 100), (vec![], 2));
        assert_eq!(back(b"h\nxyz", 2, 4, 100), (vec![], 2));
        assert_eq!(
            back(b"h\n\0\0\n", 2, 4, 100),
            (vec![(2, Ok(vec![0, 0]))], 5)
        );
    }

    #[test]
    fn lines_longer_than_the_block_or_the_limit() {
        let long = "x".repeat(100);
        let input = format!("h\n{long}\nab\n{long}y\ncd\nef");
        for block in [1, 3, 16, 1000] {
            let (lines, _) = back(input.as_bytes(), 2, block, 100);
            assert_eq!(
                lines,
                vec![
                    (208, Ok(b"cd".to_vec())),
                    (106, Err(101)),
                    (103, Ok(b"ab".to_vec())),
                    (2, Ok(long.clone().into_bytes())),
                ],
                "block {block}"
            );
        }
    }

    #[test]
    fn the_last_lines_cost_their_bytes_not_the_file() {
        let mut input = b"header\n".to_vec();
        for i in 0..100_000 {
            input.extend_from_slice(format!("line {i:06}\n").as_bytes());
        }
        let counted = Counted {
            bytes: &input,
            read: Cell::new(0),
        };
        let mut b = Backward::new(&counted, 7, input.len() as u64, 256, 1000).unwrap();
        for i in (99_980..100_000).rev() {
            let l = b.prev().unwrap().unwrap();
            assert_eq!(l.bytes, Ok(format!("line {i:06}").as_bytes()));
        }
        // 20 lines of 12 bytes: two blocks.
        assert!(
            counted.read.get() <= 512,
            "{} bytes read",
            counted.read.get()
        );
    }

    #[test]
    fn a_window_reads_its_range_only() {
        let mut s = String::new();
        Window::new(&b"0123456789"[..], 3, 7)
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "3456");
        let mut buf = Vec::new();
        let err = Window::new(&b"0123"[..], 2, 9)
            .read_to_end(&mut buf)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}

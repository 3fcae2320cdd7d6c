//! The four file operations an open log needs, behind a trait so that tests can
//! inject failures and crashes between them (the `fault` module, built with the
//! `testing` feature, implements it too; this module knows nothing of it).

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};

/// Writes, fdatasyncs, truncates and measures one log file; shared by its writer and the
/// group-commit flusher, so every method takes `&self`.
pub(crate) trait LogFile: Send + Sync {
    /// Writes all of `buf` at the end of the file (the file is opened in append mode).
    fn write_all(&self, buf: &[u8]) -> io::Result<()>;
    /// fdatasync: the written bytes and the file length reach stable storage.
    fn sync_data(&self) -> io::Result<()>;
    /// Truncates the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's current length: one `lseek(SEEK_END)` of the open handle. Not an
    /// fstat: asking for the timestamps makes the kernel give the next write a
    /// fine-grained mtime, i.e. an inode update per append (the handle is in append
    /// mode, so moving its position changes nothing).
    fn len(&self) -> io::Result<u64>;
    /// Runs one step of writing this log's checkpoint beside it (`checkpoint.rs`):
    /// `torn`, when given, is the file whose unsynced bytes the step wrote. A plain file
    /// just runs it; the fault plan's can fail it or crash around it.
    fn checkpoint_step(
        &self,
        torn: Option<&std::path::Path>,
        step: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<()> {
        let _ = torn;
        step()
    }
}

impl LogFile for File {
    fn write_all(&self, buf: &[u8]) -> io::Result<()> {
        (&mut &*self).write_all(buf)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    fn len(&self) -> io::Result<u64> {
        (&mut &*self).seek(SeekFrom::End(0))
    }
}

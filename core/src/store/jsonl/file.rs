//! The four file operations an open log needs, behind a trait so that tests can
//! inject failures and crashes between them (the `fault` module, built with the
//! `testing` feature, implements it too; this module knows nothing of it).

use std::fs::File;
use std::io::{self, Write};

/// Writes, fdatasyncs, truncates and measures one log file; shared by its writer and the
/// group-commit flusher, so every method takes `&self`.
pub(crate) trait LogFile: Send + Sync {
    /// Writes all of `buf` at the end of the file (the file is opened in append mode).
    fn write_all(&self, buf: &[u8]) -> io::Result<()>;
    /// fdatasync: the written bytes and the file length reach stable storage.
    fn sync_data(&self) -> io::Result<()>;
    /// Truncates the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's current length (one fstat of the open handle).
    fn len(&self) -> io::Result<u64>;
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
        Ok(self.metadata()?.len())
    }
}

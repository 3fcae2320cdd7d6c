//! The four file operations an open log needs, behind a trait so that tests can
//! inject failures and crashes between them (see [`super::fault`]).

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use super::fault::{FaultPlan, FaultyFile};

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

/// The log file as the store uses it: plain, or wrapped by a test's fault plan.
/// The wrapped [`File`] keeps the writer's OS lock until the last reference drops.
pub(crate) fn wrap(file: File, faults: Option<&FaultPlan>) -> Arc<dyn LogFile> {
    match faults {
        None => Arc::new(file),
        Some(plan) => Arc::new(FaultyFile::new(file, plan.clone())),
    }
}

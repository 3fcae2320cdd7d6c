//! What the store asks of the file system beyond reading and writing a log: whether
//! an open file still has its name, whether a directory entry is a log file, and the
//! directory fsync that makes a created or removed entry durable.

use std::fs::{self, File};
use std::path::Path;

use crate::error::{Error, Result};

/// Whether the open `file` has no name left (it was unlinked since it was opened).
#[cfg(unix)]
pub(super) fn unlinked(file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    // A failing fstat is left to the reads that follow, which report it.
    file.metadata().is_ok_and(|m| m.nlink() == 0)
}

/// Whether the open `file` has no name left (elsewhere an open file cannot be unlinked).
#[cfg(not(unix))]
pub(super) fn unlinked(_file: &File) -> bool {
    false
}

/// Whether `path` still names the open `file` (the same inode).
#[cfg(unix)]
pub(super) fn names(path: &Path, file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(path), file.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Whether `path` still names the open `file`.
#[cfg(not(unix))]
pub(super) fn names(path: &Path, _file: &File) -> bool {
    path.is_file()
}

/// Whether a directory entry is a regular file, following a symbolic link: a link to a
/// regular file is a session like any other (opening follows it too); a dangling link or
/// one to a directory is not. An entry that vanished meanwhile is not either.
pub(super) fn is_regular(entry: &fs::DirEntry) -> bool {
    match entry.file_type() {
        Ok(t) if t.is_symlink() => fs::metadata(entry.path()).is_ok_and(|m| m.is_file()),
        Ok(t) => t.is_file(),
        Err(_) => false,
    }
}

/// fsyncs a directory, making the creation of its entries durable.
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format_args!("cannot fsync directory {}", dir.display()), e))
}

//! Rewriting a version 1 log as version 2 (core/FORMAT.md#upgrading-a-version-1-log):
//! under the writer lock, into a hidden temporary file beside it, fdatasynced, renamed
//! over the log, and the directory fsynced. A crash at any point leaves the old log or
//! the new one under the name, never a mix; a stale temporary file is removed by the
//! next upgrade.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;

use super::os::sync_dir;
use super::{JsonlStore, Locking, chain, deleted_meanwhile, read_log};
use crate::error::{Error, ErrorKind, Result};
use crate::header::FORMAT_VERSION;
use crate::json;
use crate::store::Upgraded;

/// [`Store::upgrade`](crate::store::Store::upgrade) of the JSONL store.
pub(super) fn upgrade(store: &JsonlStore, id: &str) -> Result<Upgraded> {
    let path = store.path(id)?;
    let file = store.open_file(id, &path, false)?;
    match store.lock_now(&file, &path)? {
        Locking::Held => {}
        Locking::Busy => {
            return Err(Error::new(
                ErrorKind::Locked,
                format!(
                    "session {} is locked by a writer and cannot be upgraded ({})",
                    json::quote(id),
                    path.display()
                ),
            ));
        }
        Locking::Unlinked => return Err(deleted_meanwhile(id, &path)),
    }
    let version = {
        let mut events = 0;
        let replayed = read_log(&file, &path, id, store.limit, &mut |_, _| {
            events += 1;
            Ok(())
        })?;
        if replayed.header.version >= FORMAT_VERSION {
            return Ok(Upgraded {
                from: replayed.header.version,
                events,
                torn_bytes: 0,
            });
        }
        replayed.header.version
    };
    let temp = store.root.join(format!(".{id}.jsonl.upgrade"));
    let written = rewrite(store, id, (&file, &path), &temp);
    let upgraded = written.and_then(|upgraded| {
        fs::rename(&temp, &path).map_err(|e| {
            Error::io(
                format_args!("cannot rename {} to {}", temp.display(), path.display()),
                e,
            )
        })?;
        sync_dir(&store.root)?;
        Ok(Upgraded {
            from: version,
            ..upgraded
        })
    });
    if upgraded.is_err() {
        let _ = fs::remove_file(&temp);
    }
    // The lock on the old file goes only now: an opener that opened it before the
    // rename finds it unlinked once it gets the lock, and opens again.
    drop(file);
    upgraded
}

/// Writes the version 1 log in `file` to `temp` as version 2 and fdatasyncs it.
fn rewrite(
    store: &JsonlStore,
    id: &str,
    (file, path): (&File, &Path),
    temp: &Path,
) -> Result<Upgraded> {
    // Left by an upgrade that crashed: nobody else writes it (the log's lock is held).
    let _ = fs::remove_file(temp);
    let out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|e| Error::io(format_args!("cannot create {}", temp.display()), e))?;
    let fail = |e| Error::io(format_args!("cannot write {}", temp.display()), e);
    // The check before read the file through the same handle.
    (&mut &*file)
        .seek(SeekFrom::Start(0))
        .map_err(|e| Error::io(format_args!("cannot read {}", path.display()), e))?;
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let (mut line, mut offset, mut chain, mut events) = (String::new(), 0u64, None, 0u64);
    let mut write_err = None;
    let replayed = read_log(file, path, id, store.limit, &mut |header, event| {
        let prev = match chain {
            Some(prev) => prev,
            None => {
                let mut head = header.clone();
                head.version = FORMAT_VERSION;
                line.clear();
                line.push_str(&head.to_json());
                let value = chain::seal(&mut line, 0, chain::START, None);
                line.push('\n');
                offset = line.len() as u64;
                if let Err(e) = out.write_all(line.as_bytes()) {
                    write_err.get_or_insert(e);
                }
                value
            }
        };
        line.clear();
        event.write_json(&mut line);
        // Every byte before a line is durable before the log holds it (the rename
        // comes after the fdatasync): its own offset.
        let value = chain::seal(&mut line, 0, prev, Some(offset));
        line.push('\n');
        offset += line.len() as u64;
        chain = Some(value);
        events += 1;
        if let Err(e) = out.write_all(line.as_bytes()) {
            write_err.get_or_insert(e);
        }
        Ok(())
    })?;
    if chain.is_none() {
        // No events: the header alone.
        let mut head = replayed.header.clone();
        head.version = FORMAT_VERSION;
        line.clear();
        line.push_str(&head.to_json());
        chain::seal(&mut line, 0, chain::START, None);
        line.push('\n');
        out.write_all(line.as_bytes()).map_err(fail)?;
    }
    if let Some(e) = write_err {
        return Err(fail(e));
    }
    let out = out.into_inner().map_err(|e| fail(e.into_error()))?;
    out.sync_data()
        .map_err(|e| Error::io(format_args!("cannot fsync {}", temp.display()), e))?;
    Ok(Upgraded {
        from: replayed.header.version,
        events,
        torn_bytes: replayed.torn,
    })
}

//! A log's checkpoint file (core/FORMAT.md#checkpoints): `<root>/<id>.checkpoint`, one
//! line holding the object `crate::checkpoint` writes, bound to the log's bytes before
//! the line of its seq. Written to `<id>.checkpoint.tmp`, fdatasynced and renamed over
//! the old one, so that after any crash the old or the new checkpoint is there whole; a
//! temporary file left behind is never read.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::chain;
use super::file::LogFile;
use super::index::Mark;
use super::lines::Lines;
use super::os::sync_dir;
use super::read_log;
use super::recovery::{Replayed, header, incomplete_header, read_error, replay_resumed};
use crate::checkpoint::{Binding, Checkpoint, Replay, corrupt};
use crate::error::{Error, Result};
use crate::header::Header;

/// The most a checkpoint file is read (a checkpoint holds an inbox, each message
/// within the record limit): four times the limit, and at least 64 MiB.
fn read_limit(limit: usize) -> u64 {
    (limit as u64).saturating_mul(4).max(64 << 20)
}

/// The checkpoint file beside the log at `log` (`<id>.jsonl` → `<id>.checkpoint`).
pub(crate) fn path(log: &Path) -> PathBuf {
    log.with_extension("checkpoint")
}

/// The temporary file a checkpoint is written to before it is renamed.
pub(crate) fn temp(log: &Path) -> PathBuf {
    log.with_extension("checkpoint.tmp")
}

/// The checkpoint kept beside the log at `log`, if any: `corrupt`, naming the file,
/// when it cannot be read back whole (no line end, a checksum that does not match).
pub(crate) fn read(log: &Path, limit: usize) -> Result<Option<(Checkpoint, Binding)>> {
    let path = path(log);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format_args!("cannot read {}", path.display()), e)),
    };
    let mut text = String::new();
    let name = path.display().to_string();
    file.take(read_limit(limit))
        .read_to_string(&mut text)
        .map_err(|e| match e.kind() {
            io::ErrorKind::InvalidData => corrupt(&name, "it is not UTF-8"),
            _ => Error::io(format_args!("cannot read {name}"), e),
        })?;
    let Some(line) = text.strip_suffix('\n') else {
        return Err(corrupt(&name, "it does not end with a line end").with_path(&path));
    };
    Checkpoint::parse(line, &name).map_err(|e| e.with_path(&path))
}

/// Checks that the log in `file` (at `log`, `complete` bytes of complete lines) holds
/// the bytes `binding` names: the line of the checkpoint's seq starts at
/// `binding.offset`, within the complete lines, just after a line ending with the
/// checksum `binding.chain`. `corrupt`, naming both files, when not.
pub(crate) fn check_binding(
    file: &File,
    log: &Path,
    complete: u64,
    (seq, binding): (u64, &Binding),
) -> Result<()> {
    let name = path(log).display().to_string();
    let refuse = |why: String| {
        corrupt(
            &name,
            format_args!("it is not a checkpoint of {} ({why})", log.display()),
        )
        .with_path(log)
        .with_seq(seq)
    };
    let tail = format!(",\"crc32c\":\"{:08x}\"}}\n", binding.chain);
    if binding.offset > complete || binding.offset < tail.len() as u64 {
        return Err(refuse(format!(
            "it names the line of seq {seq} at byte {}, but the log's complete lines end at byte {complete}",
            binding.offset
        )));
    }
    let mut found = vec![0; tail.len()];
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(binding.offset - tail.len() as u64))
        .and_then(|_| reader.read_exact(&mut found))
        .map_err(|e| Error::io(format_args!("cannot read {}", log.display()), e))?;
    if found != tail.as_bytes() {
        return Err(refuse(format!(
            "the line before byte {} does not end with the checksum {:08x} it names",
            binding.offset, binding.chain
        )));
    }
    Ok(())
}

/// Writes `text` as the checkpoint of the log at `log` (whose open file is `file`): to
/// the temporary file, fdatasynced, renamed over the old checkpoint, the directory
/// fsynced, each step through `file` (where tests inject faults).
pub(crate) fn write(log: &Path, file: &dyn LogFile, text: &str) -> Result<()> {
    let temp = temp(log);
    let to = path(log);
    let io = |what: &str, at: &Path, e: io::Error| {
        Error::io(format_args!("cannot {what} {}", at.display()), e)
    };
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .map_err(|e| io("create", &temp, e))?;
    file.checkpoint_step(Some(&temp), &mut || {
        Write::write_all(&mut out, text.as_bytes()).and_then(|()| Write::write_all(&mut out, b"\n"))
    })
    .map_err(|e| io("write", &temp, e))?;
    file.checkpoint_step(None, &mut || out.sync_data())
        .map_err(|e| io("fsync", &temp, e))?;
    drop(out);
    file.checkpoint_step(None, &mut || fs::rename(&temp, &to))
        .map_err(|e| io("rename the checkpoint to", &to, e))?;
    let dir = dir(log);
    file.checkpoint_step(None, &mut || File::open(dir).and_then(|d| d.sync_all()))
        .map_err(|e| io("fsync directory", dir, e))
}

/// The directory holding the log at `log`.
fn dir(log: &Path) -> &Path {
    log.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Removes the checkpoint of the log at `log` and a temporary file left beside it, if
/// any (before the log itself is deleted, or when a new log takes the id).
pub(crate) fn remove(log: &Path) -> Result<()> {
    let mut removed = false;
    for file in [temp(log), path(log)] {
        match fs::remove_file(&file) {
            Ok(()) => removed = true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::io(
                    format_args!("cannot delete {}", file.display()),
                    e,
                ));
            }
        }
    }
    if removed {
        sync_dir(dir(log))?;
    }
    Ok(())
}

/// Where a log's checkpoint is: its seq and the offset of the line of that seq.
pub(crate) type Taken = Option<(u64, u64)>;

/// Reads the log in `file` (at `path`, session `id`) for `replay`, as
/// [`crate::store::Store::open`] (`verifying` false) or [`crate::store::Store::verify`]
/// do: from its checkpoint when `replay` resumes and the log has one, else from seq 0,
/// handing the checkpoint over first when verifying. Either way a checkpoint must be
/// bound to the log's bytes, and the offset it says was durable proves every broken
/// line before it corruption (core/FORMAT.md#checkpoints). Returns where the
/// checkpoint is, for the writer.
pub(crate) fn replay_log(
    file: &File,
    (path, id, limit): (&Path, &str, usize),
    replay: &mut dyn Replay,
    verifying: bool,
) -> Result<(Replayed, Taken)> {
    let Some((cp, binding)) = read(path, limit).map_err(|e| e.with_session(id))? else {
        let replayed = read_log(file, path, id, limit, &mut |h, e| replay.visit(h, e))?;
        return Ok((replayed, None));
    };
    let seq = cp.seq();
    let taken = Some((seq, binding.offset));
    let name = path_name(path);
    let length = file
        .metadata()
        .map_err(|e| Error::io(format_args!("cannot read {}", path.display()), e))?
        .len();
    check_binding(file, path, length, (seq, &binding)).map_err(|e| e.with_session(id))?;
    let mut replayed = if replay.resumes() && !verifying {
        let (header, first) = read_first_line(file, path, id, limit)?;
        replay.checkpoint(cp)?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        reader
            .seek(SeekFrom::Start(binding.offset))
            .map_err(|e| Error::io(format_args!("cannot read {}", path.display()), e))?;
        let mark = Mark {
            offset: binding.offset,
            chain: binding.chain,
        };
        replay_resumed(
            reader,
            (path, id, limit),
            (header, first),
            (seq, mark),
            &mut |h, e| replay.visit(h, e),
        )
        .map_err(|e| e.with_session(id).with_path(path))?
    } else {
        if verifying {
            replay.checkpoint(cp)?;
        }
        rewind(file, path)?;
        let mut replayed = read_log(file, path, id, limit, &mut |h, e| replay.visit(h, e))?;
        // The damage the checkpoint proves first: it names the broken line.
        proven(&mut replayed, &binding, &name)?;
        let start = line_start(file, (path, limit), &replayed, seq)?;
        if start != Some(binding.offset) {
            let found = match start {
                Some(at) => format!("the line of seq {seq} starts at byte {at}"),
                None => format!("the log holds {} events", replayed.next_seq),
            };
            return Err(corrupt(
                &name,
                format_args!(
                    "it is not a checkpoint of {} (it names the line of seq {seq} at byte {}, but {found})",
                    path.display(),
                    binding.offset
                ),
            )
            .with_session(id)
            .with_path(path)
            .with_seq(seq));
        }
        replayed
    };
    proven(&mut replayed, &binding, &name)?;
    Ok((replayed, taken))
}

/// Refuses the broken line a replay took for the start of a torn tail when it lies
/// before the offset the checkpoint says was durable when it was written.
fn proven(replayed: &mut Replayed, binding: &Binding, name: &str) -> Result<()> {
    if replayed.end < binding.synced
        && let Some(broken) = replayed.broken.take()
    {
        return Err(refused(broken, binding.synced, name));
    }
    Ok(())
}

/// `broken` (the refusal naming the first broken line, before `synced`) as corruption
/// the checkpoint `name` proves.
pub(crate) fn refused(broken: Error, synced: u64, name: &str) -> Error {
    broken.context_after(format_args!(
        "; the checkpoint {name} says the log was durable up to byte {synced} when it was written, so this is not a torn tail left by a crash"
    ))
}

/// The checkpoint beside the log at `log` (in `file`, `len` bytes), checked to be
/// bound to its bytes: what a reader that does not start from it still owes it (its
/// durable offset proves damage before it). `None` without one.
pub(crate) fn bound(file: &File, log: &Path, len: u64, limit: usize) -> Result<Option<Binding>> {
    let Some((cp, binding)) = read(log, limit)? else {
        return Ok(None);
    };
    check_binding(file, log, len, (cp.seq(), &binding))?;
    Ok(Some(binding))
}

fn path_name(log: &Path) -> String {
    path(log).display().to_string()
}

/// Puts the shared cursor of `file` back at its start.
fn rewind(mut file: &File, path: &Path) -> Result<()> {
    file.seek(SeekFrom::Start(0))
        .map(|_| ())
        .map_err(|e| Error::io(format_args!("cannot read {}", path.display()), e))
}

/// Reads line 1 of `file`: the header, and the mark of seq 0 (where line 1 ends, the
/// chain value after it).
/// The header line of the log in `file`, checked, and where the line after it starts
/// with the chain value after it.
pub(crate) fn read_first_line(
    file: &File,
    path: &Path,
    id: &str,
    limit: usize,
) -> Result<(Header, Mark)> {
    rewind(file, path)?;
    let mut lines = Lines::new(
        BufReader::with_capacity(64 << 10, file),
        chain::line_limit(limit),
    );
    let read = lines.next().map_err(|e| read_error(path, e))?;
    let Some(line) = read else {
        return Err(incomplete_header(path, lines.torn()));
    };
    let (header, chain) =
        header(line.checked(), path, id, limit).map_err(|e| e.with_session(id).with_path(path))?;
    Ok((
        header,
        Mark {
            offset: lines.end(),
            chain,
        },
    ))
}

/// Where the line of `seq` starts in the log `replayed` read from `file`: the end of
/// its complete lines when `seq` is the next seq, `None` past that.
fn line_start(
    file: &File,
    (path, limit): (&Path, usize),
    replayed: &Replayed,
    seq: u64,
) -> Result<Option<u64>> {
    if seq > replayed.next_seq {
        return Ok(None);
    }
    if seq == replayed.next_seq {
        return Ok(Some(replayed.end));
    }
    let Some((first, mark)) = replayed.index.seek(seq) else {
        return Ok(None);
    };
    let mut reader = BufReader::with_capacity(64 << 10, file);
    reader
        .seek(SeekFrom::Start(mark.offset))
        .map_err(|e| read_error(path, e))?;
    let mut lines = Lines::resume(reader, chain::line_limit(limit), mark.offset, first + 1);
    for _ in first..seq {
        lines.next().map_err(|e| read_error(path, e))?;
    }
    Ok(lines
        .next()
        .map_err(|e| read_error(path, e))?
        .map(|line| line.offset))
}

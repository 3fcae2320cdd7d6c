//! Posting to a JSONL session (ARCHITECTURE.md#posting): a spool directory per session,
//! `<root>/<id>.posts/`, one file per post (`list` ignores it: it is no `.jsonl` file).
//!
//! A post is written to a hidden temp name, fsynced, renamed to `<post id>.json` and the
//! directory fsynced; only then is it acknowledged. A poster killed before the rename
//! leaves a temp file, never delivered (the owner removes temp files older than
//! [`STALE_TEMP`]). Post ids are `<time ns:020>-<poster>-<counter:012>`: they sort in
//! post order per poster (the time never goes back within a poster, whatever the
//! clock does), `<poster>` is unique per store handle and process.
//!
//! Each post also names the poster's previous acknowledged post to the same session
//! (`prev`). A directory listing taken while posts arrive may miss an entry and still
//! show a later one (POSIX leaves it unspecified); the owner follows `prev` by name, so
//! a poster's posts are delivered in order however the listing came out. The
//! exactly-once argument is in `core/FORMAT.md` ("Posts").

use std::collections::{HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::value::RawValue;

#[cfg(feature = "testing")]
use super::fault::FaultPlan;
use super::os::sync_dir;
use crate::error::{Error, ErrorKind, Result, invalid};
use crate::json;
use crate::store::{Mailbox, Post, Posted};

/// Temp files older than this are left by a poster that died mid-post: the owner
/// removes them. A live poster that stalls longer has its rename fail, unacknowledged.
pub(super) const STALE_TEMP: Duration = Duration::from_secs(600);

/// The spool directory of session `id`.
pub(super) fn dir(root: &Path, id: &str) -> PathBuf {
    root.join(format!("{id}.posts"))
}

/// Removes the spool of a deleted session (what is left of it is unreachable anyway).
pub(super) fn remove(root: &Path, id: &str) {
    let _ = fs::remove_dir_all(dir(root, id));
}

/// This store handle as a poster: its tag and, per session, where its posts stand.
#[derive(Debug)]
pub(super) struct Poster {
    tag: String,
    sessions: Mutex<HashMap<String, Arc<Mutex<Chain>>>>,
}

/// One poster's posts to one session: the last id and time, for order.
#[derive(Debug, Default)]
struct Chain {
    last_ns: u128,
    counter: u64,
    /// The last acknowledged post.
    prev: Option<String>,
}

static HANDLES: AtomicU64 = AtomicU64::new(0);

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

impl Default for Poster {
    fn default() -> Poster {
        // The process id tells live processes apart, the handle number the handles of
        // one process, and the start time a process that reuses a dead one's id.
        let tag = format!(
            "{:x}.{:x}.{:x}",
            std::process::id(),
            HANDLES.fetch_add(1, Ordering::Relaxed),
            now_ns() % (1 << 40)
        );
        Poster {
            tag,
            sessions: Mutex::new(HashMap::new()),
        }
    }
}

/// What one spool file holds.
#[derive(Deserialize)]
struct Wire<'a> {
    target: String,
    prev: Option<String>,
    #[serde(borrow)]
    message: &'a RawValue,
}

impl Poster {
    /// Posts `message` to session `id`, whose log is `log` and spool `dir`; returns the
    /// post id once the post is durable under its final name. Posts of this handle to
    /// one session run one at a time (their order is the chain's).
    pub(super) fn post(
        &self,
        (id, log, dir): (&str, &Path, &Path),
        post: &Post,
        limit: usize,
    ) -> Result<String> {
        if !log.is_file() {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "no session {} ({} does not exist)",
                    json::quote(id),
                    log.display()
                ),
            ));
        }
        let chain = self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id.to_owned())
            .or_default()
            .clone();
        let mut chain = chain.lock().unwrap_or_else(PoisonError::into_inner);
        let ns = now_ns().max(chain.last_ns + 1);
        let name = format!("{ns:020}-{}-{:012}", self.tag, chain.counter);
        let prev = chain.prev.as_deref().map_or("null".to_owned(), json::quote);
        let body = format!(
            r#"{{"post":{},"target":"{}","prev":{prev},"message":{}}}"#,
            json::quote(&name),
            post.kind(),
            post.body()
        );
        // The splice that takes it in must fit the log's record limit too.
        if body.len() + 64 > limit {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "the post to session {} is {} bytes, larger than the record limit of {limit} bytes",
                    json::quote(id),
                    body.len()
                ),
            ));
        }
        (chain.last_ns, chain.counter) = (ns, chain.counter + 1);
        write(dir, &name, body.as_bytes())?;
        chain.prev = Some(name.clone());
        Ok(name)
    }
}

/// Writes `bytes` as `<dir>/<post>.json`: temp file, fsync, rename, directory fsync.
fn write(dir: &Path, post: &str, bytes: &[u8]) -> Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => sync_dir(dir.parent().unwrap_or(Path::new(".")))?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(Error::io(
                format_args!("cannot create the spool {}", dir.display()),
                e,
            ));
        }
    }
    let temp = dir.join(format!(".{post}.tmp"));
    let done = dir.join(format!("{post}.json"));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_data()
        })
        .map_err(|e| Error::io(format_args!("cannot write {}", temp.display()), e))
        .and_then(|()| {
            fs::rename(&temp, &done).map_err(|e| {
                Error::io(
                    format_args!("cannot rename {} into place", temp.display()),
                    e,
                )
            })
        });
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    // Renamed but not yet durable: an error now leaves a post that may or may not be
    // delivered (unacknowledged either way).
    sync_dir(dir)
}

/// The spool of one session, as its owner reads it.
pub(super) struct Spool {
    dir: PathBuf,
    #[cfg(feature = "testing")]
    pub(super) faults: Option<FaultPlan>,
}

impl Spool {
    pub(super) fn new(dir: PathBuf) -> Spool {
        Spool {
            dir,
            #[cfg(feature = "testing")]
            faults: None,
        }
    }

    /// Reads post `name`; `None` when it is gone. Returns its `prev` too.
    fn read(&self, name: &str) -> Result<Option<(Posted, Option<String>)>> {
        let path = self.dir.join(format!("{name}.json"));
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format_args!("cannot read {}", path.display()), e)),
        };
        let unreadable = |message: String, error: Error| Posted::Invalid {
            post: name.to_owned(),
            message,
            error: error.context(format_args!("post file {}", path.display())),
        };
        let Ok(text) = std::str::from_utf8(&bytes) else {
            let lossy = json::quote(&String::from_utf8_lossy(&bytes));
            return Ok(Some((unreadable(lossy, invalid("not UTF-8")), None)));
        };
        let wire: Wire<'_> = match json::from_str(text) {
            Ok(w) => w,
            Err(e) => {
                let error = invalid(format!("not a post: {e}"));
                return Ok(Some((unreadable(json::quote(text), error), None)));
            }
        };
        let posted = match Posted::parse(name.to_owned(), &wire.target, wire.message.get()) {
            Posted::Invalid { message, error, .. } => unreadable(message, error),
            readable => readable,
        };
        Ok(Some((posted, wire.prev)))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        #[cfg(feature = "testing")]
        if let Some(plan) = &self.faults {
            return plan.remove_settled(path);
        }
        fs::remove_file(path)
    }
}

impl Spool {
    /// The spool's entries; `None` when it has none (no post was ever made).
    fn list(&self) -> Result<Option<impl Iterator<Item = Result<fs::DirEntry>> + '_>> {
        let listing = |e| Error::io(format_args!("cannot list {}", self.dir.display()), e);
        match fs::read_dir(&self.dir) {
            Ok(entries) => Ok(Some(entries.map(move |e| e.map_err(listing)))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(listing(e)),
        }
    }
}

impl Mailbox for Spool {
    fn pending(&mut self) -> Result<Vec<Posted>> {
        let Some(entries) = self.list()? else {
            return Ok(Vec::new());
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.starts_with('.') {
                if name.ends_with(".tmp") && stale(&entry) {
                    let _ = fs::remove_file(entry.path());
                }
            } else if let Some(stem) = name.strip_suffix(".json") {
                names.push(stem.to_owned());
            }
        }
        names.sort_unstable();
        let mut out = Vec::with_capacity(names.len());
        let mut emitted = HashSet::with_capacity(names.len());
        for name in names {
            // The post and its not yet delivered predecessors, newest first.
            let mut chain = Vec::new();
            let mut next = Some(name);
            while let Some(name) = next.take() {
                if emitted.contains(&name) || chain.iter().any(|(n, _)| *n == name) {
                    break;
                }
                if let Some((posted, prev)) = self.read(&name)? {
                    chain.push((name, posted));
                    next = prev;
                }
            }
            for (name, posted) in chain.into_iter().rev() {
                emitted.insert(name);
                out.push(posted);
            }
        }
        Ok(out)
    }

    /// One listing of the spool, no post read: whether it names a post.
    fn may_hold(&mut self) -> Result<bool> {
        let Some(entries) = self.list()? else {
            return Ok(false);
        };
        for entry in entries {
            let name = entry?.file_name();
            let name = name.as_encoded_bytes();
            if !name.starts_with(b".") && name.ends_with(b".json") {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn settle(&mut self, posts: &[String]) -> Result<()> {
        // No directory fsync: a removal lost to a power cut brings back a post the log
        // already holds, which the next take-in settles again without writing it.
        for post in posts {
            let path = self.dir.join(format!("{post}.json"));
            match self.remove(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Error::io(
                        format_args!("cannot remove {}", path.display()),
                        e,
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Whether a temp file was left long enough ago to be a dead poster's.
fn stale(entry: &fs::DirEntry) -> bool {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > STALE_TEMP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::splice::Target;

    fn post(dir: &Path, name: &str, prev: Option<&str>, id: &str) {
        let prev = prev.map_or("null".to_owned(), json::quote);
        let body = format!(
            r#"{{"post":"{name}","target":"next-turn","prev":{prev},"message":{{"id":"{id}"}}}}"#
        );
        fs::write(dir.join(format!("{name}.json")), body).unwrap();
    }

    fn ids(posted: &[Posted]) -> Vec<&str> {
        posted
            .iter()
            .map(|p| match p {
                Posted::Message { message, .. } => message.id(),
                Posted::Edit { edit, .. } => edit.id(),
                Posted::Decision { id, .. } => id,
                Posted::Move { m, .. } => &m.id,
                Posted::Invalid { .. } => "?",
            })
            .collect()
    }

    /// A listing may show a poster's later post and miss an earlier one: the owner
    /// follows `prev` by name, so the earlier goes first whatever the listing order.
    #[test]
    fn a_posters_order_follows_prev_not_the_listing() {
        let dir = tempfile::tempdir().unwrap();
        // "b" sorts before "z", but "b" was posted after "z".
        post(dir.path(), "z", None, "first");
        post(dir.path(), "b", Some("z"), "second");
        post(dir.path(), "c", Some("b"), "third");
        // A predecessor already delivered and settled is simply gone.
        post(dir.path(), "a", Some("gone"), "other");
        let mut spool = Spool::new(dir.path().to_owned());
        let pending = spool.pending().unwrap();
        assert_eq!(ids(&pending), ["other", "first", "second", "third"]);
        spool.settle(&["z".to_owned(), "b".to_owned()]).unwrap();
        assert_eq!(ids(&spool.pending().unwrap()), ["other", "third"]);
        // A missing spool is an empty one.
        let mut none = Spool::new(dir.path().join("missing"));
        assert!(none.pending().unwrap().is_empty());
    }

    #[test]
    fn a_posters_time_never_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("s.jsonl");
        fs::write(&log, "").unwrap();
        let spool = dir.path().join("s.posts");
        let poster = Poster::default();
        let post = Post::Message {
            target: Target::NextTurn,
            message: Message::from_json(r#"{"id":"m"}"#).unwrap(),
        };
        let mut last = String::new();
        for _ in 0..20 {
            let id = poster.post(("s", &log, &spool), &post, 1 << 20).unwrap();
            assert!(id > last, "{id} after {last}");
            last = id;
        }
    }
}

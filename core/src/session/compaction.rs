//! Compaction (ARCHITECTURE.md#compaction, SPEC §16): replacing a stretch of the surface
//! with a summary the host wrote, one compaction at a time, and pruning a long tool
//! result; nothing is deleted from the log and the inbox is never touched.

use std::ops::Deref;

use crate::conversation::{check_summary, text_blocks};
use crate::error::{Error, Result, invalid};
use crate::event::Event;
use crate::json;
use crate::txn::{Begun, Compacted};

use super::Session;

/// A compaction's summary (SPEC §16): text, stored as one text block, or blocks (a
/// JSON array of blocks, each an object with a string `type`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Summary {
    /// Text, stored as `[{"type":"text","text":…}]`.
    Text(String),
    /// A JSON array of blocks, as text.
    Blocks(String),
}

impl Summary {
    /// The blocks, checked, as compact JSON text.
    fn blocks(&self) -> Result<String> {
        match self {
            Summary::Text(text) => Ok(text_blocks(text)),
            Summary::Blocks(text) => {
                let raw = json::raw_value(text, "summary")?;
                check_summary(raw.get())
                    .map_err(|why| invalid(format!("a compaction's summary: {why}")))?;
                Ok(raw.get().to_owned())
            }
        }
    }
}

/// A compaction running (SPEC §16), from its `compaction/start` until [`Compaction::commit`]
/// or [`Compaction::abort`] writes its `compaction/end`; a handle dropped before either
/// ends it with `"error":"abandoned"` (as best it can: a session closed meanwhile leaves
/// it to the repair of the next open, `"interrupted"`).
///
/// `S` is how the handle holds its session: `&Session` ([`Session::begin_compaction`]) or
/// an owning pointer such as `Arc<Session>` ([`Compaction::begin`]).
pub struct Compaction<S: Deref<Target = Session>> {
    session: S,
    begun: Option<Begun>,
}

impl<S: Deref<Target = Session>> std::fmt::Debug for Compaction<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compaction")
            .field("session", &self.session.id())
            .field("begun", &self.begun)
            .finish()
    }
}

/// What `compaction/end` says of a handle dropped before it was committed or aborted.
const ABANDONED: &str = "abandoned";

impl<S: Deref<Target = Session>> Compaction<S> {
    /// Starts a compaction of the surface from seq `start` through seq `end` (see
    /// [`Session::begin_compaction`]), the handle holding `session`.
    pub fn begin(session: S, start: u64, end: u64) -> Result<Compaction<S>> {
        let begun = session.transact(|txn| txn.begin_compaction(start, end))?;
        Ok(Compaction {
            session,
            begun: Some(begun),
        })
    }

    fn begun(&self) -> &Begun {
        self.begun.as_ref().expect("running until commit or abort")
    }

    /// Its `compactionId`.
    pub fn id(&self) -> &str {
        &self.begun().id
    }

    /// The turn that owns it, `None` for a manual one.
    pub fn turn(&self) -> Option<u64> {
        self.begun().turn
    }

    /// The seq of its `compaction/start`.
    pub fn start_seq(&self) -> u64 {
        self.begun().seq
    }

    /// The range it replaces: the seqs of its first and last surface node.
    pub fn range(&self) -> (u64, u64) {
        let s = &self.begun().shadowed;
        (s.start, s.end)
    }

    /// The seqs of the surface nodes it replaces, in order.
    pub fn shadowed_seqs(&self) -> &[u64] {
        &self.begun().shadowed.seqs
    }

    /// The messages it replaces (what the host summarizes), as JSON text, in order.
    pub fn shadowed_messages(&self) -> &[String] {
        &self.begun().messages
    }

    /// The reference's token estimate of those messages (`shadowedTokenCount`).
    pub fn shadowed_token_count(&self) -> u64 {
        self.begun().shadowed.tokens
    }

    /// Commits the compaction with `summary`, summarized by `provider`'s `model` with
    /// `usage` (JSON text of an object, optional): writes `compaction/summary`, one
    /// `user/message` replacing the range on the surface (source `{"kind":"plugin",
    /// "plugin":"compact","compactionId"}`, `sourceEventSeqs` `[start, summary,
    /// shadowed…]`) and `compaction/end`, in one append. Any failure writes exactly one
    /// `compaction/end` with the error instead: `conflict` when the surface changed
    /// inside the range since the start; `invalid_input` for a bad summary or usage.
    /// `protocol` when it is not running any more (a `cancel` or `fail` ended it),
    /// with nothing written.
    pub fn commit(
        mut self,
        summary: &Summary,
        provider: &str,
        model: &str,
        usage: Option<&str>,
    ) -> Result<Compacted> {
        let begun = self.begun.take().expect("running until commit or abort");
        let session = &*self.session;
        let checked = summary.blocks().and_then(|blocks| {
            let usage = match usage {
                None => None,
                Some(text) => {
                    let raw = json::raw_value(text, "usage")?;
                    if !raw.get().starts_with('{') {
                        return Err(invalid("a compaction's usage must be a JSON object"));
                    }
                    Some(raw)
                }
            };
            Ok((blocks, usage))
        });
        let (blocks, usage) = match checked {
            Ok(checked) => checked,
            Err(e) => return Err(end_with(session, &begun, e)),
        };
        let committed = session.transact(|txn| {
            txn.commit_compaction(&begun, &blocks, provider, model, usage.as_deref())
        });
        match committed {
            Ok(Ok(compacted)) => Ok(compacted),
            Ok(Err(conflict)) => Err(conflict.with_session(session.id())),
            Err(e) => Err(end_with(session, &begun, e)),
        }
    }

    /// Ends the compaction with `error`: writes `compaction/end {…,"error"}`. `protocol`
    /// when it is not running any more.
    pub fn abort(mut self, error: &str) -> Result<()> {
        let begun = self.begun.take().expect("running until commit or abort");
        self.session
            .transact(|txn| txn.abort_compaction(&begun, error))
    }
}

/// Ends `begun` with `e`'s kind as its error (as best it can: when it is not running
/// any more, or the write fails, `e` stands alone), and returns `e`.
fn end_with(session: &Session, begun: &Begun, e: Error) -> Error {
    let _ = session.transact(|txn| txn.abort_compaction(begun, e.kind().name()));
    e
}

impl<S: Deref<Target = Session>> Drop for Compaction<S> {
    fn drop(&mut self) {
        if let Some(begun) = self.begun.take() {
            let _ = self
                .session
                .transact(|txn| txn.abort_compaction(&begun, ABANDONED));
        }
    }
}

impl Session {
    /// Starts a compaction of the surface from seq `start` through seq `end`
    /// (ARCHITECTURE.md#compaction): writes `compaction/start {"compactionId","turn"}`,
    /// owned by the open turn between its steps or, with no turn open, by none (a
    /// manual compaction: no turn starts while it runs). The handle holds the messages
    /// to summarize; [`Compaction::commit`] or [`Compaction::abort`] ends it. While it
    /// runs another start, `park`, and any `turn/start` or `turn/end` are refused
    /// (`busy`), except that `cancel` and `fail` end it first (`"error":"cancelled"`,
    /// `"failed"`); other appends, posts and steps go on as usual.
    ///
    /// Refused with nothing written: `busy` while one runs; `protocol` while parked,
    /// with a step open or a proposal pending; `invalid_input` when `start` and `end`
    /// are not on the surface, `start` after `end`, or the range splits a tool call
    /// from its result (a call in it whose result is not, such as one still waiting
    /// for an approval, or a result in it whose call is outside).
    pub fn begin_compaction(&self, start: u64, end: u64) -> Result<Compaction<&Session>> {
        Compaction::begin(self, start, end)
    }

    /// A whole compaction (ARCHITECTURE.md#compaction): [`Session::begin_compaction`],
    /// then `summarize` with the shadowed messages (JSON text), then
    /// [`Compaction::commit`] of what it returns by `provider`'s `model`. When
    /// `summarize` fails the compaction ends with its error's text and that error is
    /// returned.
    pub fn compact(
        &self,
        start: u64,
        end: u64,
        summarize: impl FnOnce(&[String]) -> Result<Summary>,
        provider: &str,
        model: &str,
    ) -> Result<Compacted> {
        let compaction = self.begin_compaction(start, end)?;
        match summarize(compaction.shadowed_messages()) {
            Ok(summary) => compaction.commit(&summary, provider, model, None),
            Err(e) => {
                compaction.abort(&e.to_string())?;
                Err(e)
            }
        }
    }

    /// Prunes the `tool/result` at `seq` on the surface (ARCHITECTURE.md#compaction):
    /// when its text is longer than 8,192 code points, writes `compaction/prune` and a
    /// `tool/result` replacing it whose text keeps the first 4,096 and the last 1,024
    /// around a marker, and returns that `tool/result`; `None`, with nothing written,
    /// when it is not that long. `invalid_input` when `seq` is not a `tool/result` on
    /// the surface; `protocol` while parked.
    pub fn prune(&self, seq: u64) -> Result<Option<Event>> {
        self.transact(|txn| txn.prune(seq))
    }

    /// The `compactionId` of the compaction running, if one is.
    pub fn running_compaction(&self) -> Result<Option<String>> {
        let st = self.state()?;
        Ok(st
            .ledger
            .conversation
            .compaction
            .as_ref()
            .map(|r| r.id.clone()))
    }
}

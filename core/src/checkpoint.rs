//! Checkpoints (ARCHITECTURE.md#checkpoints-and-reading-without-owning): the replay
//! state after the event at `seq - 1`, so that opening a log reads only what follows
//! it. One module serializes it, as one compact JSON object ending with a CRC-32C of
//! its bytes (core/FORMAT.md#checkpoints); the store keeps it beside the log with a
//! binding to the log's bytes, never in the log.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::conversation::{
    ApprovalOutcome, Approvals, Asked, Calls, Conversation, Parked, Pending, Running, Surface,
};
use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::header::Header;
use crate::inbox::Inbox;
use crate::json;
use crate::log::LogState;
use crate::message::Message;
use crate::splice::Target;

/// A checkpoint is due at the end of a transaction once this many bytes of records
/// were written since the last one (JSONL).
pub const EVERY_BYTES: u64 = 4 << 20;

/// A checkpoint is due at the end of a transaction once this many events were written
/// since the last one.
pub const EVERY_EVENTS: u64 = 10_000;

/// The version of the checkpoints written now: 2 holds the conversation (the surface and
/// the pending tool calls), 3 its approvals too, 4 the compaction running. A checkpoint
/// of version 1, 2 or 3 is of an earlier release: it is not used (the log is replayed
/// from seq 0) and the next close replaces it.
const VERSION: u64 = 4;

/// What the checksum of a checkpoint follows.
const CRC_KEY: &str = ",\"crc32c\":\"";

/// How a checkpoint is tied to the log it was taken of, so that a checkpoint of other
/// bytes is refused: JSONL records the byte offset of the line of `seq`, the checksum
/// chain's value before that line (the stored `crc32c` of the line of `seq - 1`) and
/// the offset fdatasynced when it was written; PostgreSQL records the stored `crc` of
/// the event at `seq - 1` as `chain` (offsets 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    /// The byte offset of the line of `seq` (JSONL; 0 elsewhere).
    pub offset: u64,
    /// The checksum of the record of `seq - 1`.
    pub chain: u32,
    /// The offset known durable when the checkpoint was written (JSONL; 0 elsewhere).
    pub synced: u64,
}

/// The replay state of a log after its event `seq - 1` (ARCHITECTURE.md#log-invariants,
/// ARCHITECTURE.md#replay, ARCHITECTURE.md#posting), with where it was read from.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    pub(crate) log: LogState,
    pub(crate) inbox: Inbox,
    /// The ids of the posts the log holds (ARCHITECTURE.md#posting).
    pub(crate) posts: HashSet<String>,
    /// The surface and the pending tool calls (ARCHITECTURE.md#the-conversation).
    pub(crate) conversation: Conversation,
    /// Where it was read from, for errors (a file, a table row); empty when built.
    name: String,
}

/// The object as parsed back (the checksum was checked on the text first).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Stored<'a> {
    #[allow(dead_code)]
    checkpoint: u64,
    seq: u64,
    offset: u64,
    chain: &'a str,
    synced: u64,
    time: u64,
    last_turn: u64,
    open_turn: Option<u64>,
    steps: u64,
    open_step: Option<u64>,
    #[serde(borrow)]
    next_turn: Vec<&'a RawValue>,
    #[serde(borrow)]
    next_step: Vec<&'a RawValue>,
    posts: Vec<String>,
    #[serde(borrow)]
    surface: Vec<&'a RawValue>,
    calls: Vec<StoredCall>,
    dispatched: Vec<(String, u64)>,
    #[serde(borrow)]
    approvals: StoredApprovals<'a>,
    compaction: Option<StoredCompaction>,
    crc32c: &'a str,
}

/// The compaction running as a checkpoint stores it: `{"id","turn","seq"}` or `null`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredCompaction {
    id: String,
    turn: Option<u64>,
    seq: u64,
}

/// The approvals as a checkpoint stores them: the pending ones as `[seq, asked data]`,
/// the decided ones as `[id, outcome]`, the `turn/parked` data or `null`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredApprovals<'a> {
    #[serde(borrow)]
    pending: Vec<(u64, &'a RawValue)>,
    decided: Vec<(String, String)>,
    #[serde(borrow)]
    parked: Option<&'a RawValue>,
}

/// Only the version of a checkpoint, read before the rest.
#[derive(Deserialize)]
struct Version {
    checkpoint: u64,
}

/// A pending tool call as a checkpoint stores it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredCall {
    id: String,
    turn: u64,
    step: u64,
    dispatched: Option<u64>,
}

impl Checkpoint {
    /// The state as a writer holds it after its last committed event.
    pub(crate) fn of(
        log: &LogState,
        inbox: &Inbox,
        posts: &HashSet<String>,
        conversation: &Conversation,
    ) -> Checkpoint {
        Checkpoint {
            log: log.clone(),
            inbox: inbox.clone(),
            posts: posts.clone(),
            conversation: conversation.clone(),
            name: String::new(),
        }
    }

    /// The seq of the first event after it (how many events it covers).
    pub fn seq(&self) -> u64 {
        self.log.next_seq
    }

    /// Where it was read from, as [`Checkpoint::parse`] was told (empty when built).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The checkpoint as one compact JSON object bound by `binding`, without a line
    /// end: `{"checkpoint":2,"seq":…,"offset":…,"chain":"hhhhhhhh","synced":…,"time":…,
    /// "lastTurn":…,"openTurn":…,"steps":…,"openStep":…,"nextTurn":[…],"nextStep":[…],
    /// "posts":[…],"surface":[event…],"calls":[{"id","turn","step","dispatched"}…],
    /// "dispatched":[[id,seq]…],"approvals":{"pending":[[seq,asked]…],"decided":[[id,
    /// outcome]…],"parked":data|null},"compaction":{"id","turn","seq"}|null,
    /// "crc32c":"hhhhhhhh"}` (core/FORMAT.md#checkpoints).
    pub fn to_json(&self, binding: &Binding) -> String {
        let log = &self.log;
        let opt = |v: Option<u64>| v.map_or("null".to_owned(), |v| v.to_string());
        let mut out = format!(
            "{{\"checkpoint\":{VERSION},\"seq\":{},\"offset\":{},\"chain\":\"{:08x}\",\"synced\":{},\"time\":{},\"lastTurn\":{},\"openTurn\":{},\"steps\":{},\"openStep\":{}",
            log.next_seq,
            binding.offset,
            binding.chain,
            binding.synced,
            log.last_time,
            log.last_turn,
            opt(log.open_turn),
            log.steps,
            opt(log.open_step)
        );
        for (key, target) in [
            ("nextTurn", Target::NextTurn),
            ("nextStep", Target::NextStep),
        ] {
            out.push_str(&format!(",\"{key}\":["));
            for (i, m) in self.inbox.iter(target).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(m.json());
            }
            out.push(']');
        }
        out.push_str(",\"posts\":[");
        for (i, post) in sorted(&self.posts).into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json::write_string(&mut out, post);
        }
        out.push_str("],\"surface\":[");
        for (i, event) in self.conversation.surface.events().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&event.to_json());
        }
        out.push_str("],\"calls\":[");
        for (i, call) in self.conversation.calls.pending().iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"id\":");
            json::write_string(&mut out, &call.id);
            out.push_str(&format!(
                ",\"turn\":{},\"step\":{},\"dispatched\":{}}}",
                call.turn,
                call.step,
                opt(call.dispatched)
            ));
        }
        out.push_str("],\"dispatched\":[");
        for (i, (id, seq)) in self.conversation.calls.dispatched().iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('[');
            json::write_string(&mut out, id);
            out.push_str(&format!(",{seq}]"));
        }
        out.push(']');
        write_approvals(&mut out, &self.conversation.approvals);
        out.push_str(",\"compaction\":");
        match &self.conversation.compaction {
            None => out.push_str("null"),
            Some(r) => {
                out.push_str("{\"id\":");
                json::write_string(&mut out, &r.id);
                out.push_str(&format!(",\"turn\":{},\"seq\":{}}}", opt(r.turn), r.seq));
            }
        }
        let crc = crc32c::crc32c(out.as_bytes());
        out.push_str(&format!("{CRC_KEY}{crc:08x}\"}}"));
        out
    }

    /// Reads back what [`Checkpoint::to_json`] wrote; `name` says where `text` came from
    /// (it names the checkpoint in every error). A checksum that does not match, a
    /// missing or unknown key, an inbox that is not two lists of valid messages with
    /// unique ids, a surface that is not events: `corrupt`, naming it. `None` for a
    /// checkpoint of version 1, which holds no conversation: the log is read from seq 0.
    pub fn parse(text: &str, name: &str) -> Result<Option<(Checkpoint, Binding)>> {
        let bad = |why: String| corrupt(name, why);
        let covered = text
            .rfind(CRC_KEY)
            .filter(|&at| text.len() == at + CRC_KEY.len() + 10 && text.ends_with("\"}"))
            .ok_or_else(|| bad("it does not end with its checksum".into()))?;
        let stored = u32::from_str_radix(&text[covered + CRC_KEY.len()..text.len() - 2], 16)
            .map_err(|_| bad("its checksum is not 8 hex digits".into()))?;
        let computed = crc32c::crc32c(&text.as_bytes()[..covered]);
        if stored != computed {
            return Err(bad(format!(
                "checksum {stored:08x} does not match its bytes (expected {computed:08x}): a changed checkpoint"
            )));
        }
        let version = json::from_str::<Version>(text).map(|v| v.checkpoint);
        match version {
            Ok(1..=3) => return Ok(None),
            Ok(VERSION) => {}
            Ok(v) => return Err(bad(format!("unknown checkpoint version {v}"))),
            Err(e) => return Err(bad(format!("{e}"))),
        }
        let s: Stored<'_> = json::from_str(text).map_err(|e| bad(format!("{e}")))?;
        let chain = u32::from_str_radix(s.chain, 16)
            .ok()
            .filter(|_| s.chain.len() == 8)
            .ok_or_else(|| bad("its chain is not 8 hex digits".into()))?;
        let _ = s.crc32c;
        let log = LogState {
            next_seq: s.seq,
            last_time: s.time,
            last_turn: s.last_turn,
            open_turn: s.open_turn,
            steps: s.steps,
            open_step: s.open_step,
        };
        let messages = |list: Vec<&RawValue>| {
            list.into_iter()
                .map(|raw| Message::from_json(raw.get()))
                .collect::<Result<Vec<_>>>()
        };
        let inbox = messages(s.next_turn)
            .and_then(|turn| Ok((turn, messages(s.next_step)?)))
            .and_then(|(turn, step)| Inbox::from_lists(turn, step))
            .map_err(|e| bad(format!("its inbox: {}", e.message())))?;
        let posts = s.posts.into_iter().collect();
        let surface = s
            .surface
            .into_iter()
            .map(|raw| Event::from_json(raw.get()))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| bad(format!("its surface: {}", e.message())))?;
        let pending = s
            .calls
            .into_iter()
            .map(|c| Pending {
                id: c.id,
                turn: c.turn,
                step: c.step,
                dispatched: c.dispatched,
            })
            .collect();
        let approvals =
            read_approvals(s.approvals).map_err(|why| bad(format!("its approvals: {why}")))?;
        let conversation = Conversation {
            surface: Surface::from_events(surface),
            calls: Calls::from_parts(pending, s.dispatched),
            approvals,
            compaction: s.compaction.map(|c| Running {
                id: c.id,
                turn: c.turn,
                seq: c.seq,
            }),
        };
        let checkpoint = Checkpoint {
            log,
            inbox,
            posts,
            conversation,
            name: name.to_owned(),
        };
        let binding = Binding {
            offset: s.offset,
            chain,
            synced: s.synced,
        };
        Ok(Some((checkpoint, binding)))
    }

    /// Checks that `replayed` (the replay of the log from seq 0 up to this checkpoint's
    /// seq) is exactly this state: `corrupt`, naming the checkpoint and the first part
    /// that differs, when not.
    pub(crate) fn check_equals(&self, replayed: &Checkpoint) -> Result<()> {
        let differs = if self.log != replayed.log {
            Some(format!(
                "its log state {:?} is not the replay's {:?}",
                self.log, replayed.log
            ))
        } else if !same_inbox(&self.inbox, &replayed.inbox) {
            Some("its inbox is not the replay's".to_owned())
        } else if self.posts != replayed.posts {
            Some("its post ids are not the replay's".to_owned())
        } else if !self.conversation.same(&replayed.conversation) {
            Some("its surface, pending tool calls, approvals or running compaction are not the replay's".to_owned())
        } else {
            None
        };
        match differs {
            None => Ok(()),
            Some(why) => Err(corrupt(
                &self.name,
                format!(
                    "it does not match the log replayed up to seq {}: {why}",
                    self.seq()
                ),
            )
            .with_seq(self.seq())),
        }
    }
}

/// `,"approvals":{…}` (see [`Checkpoint::to_json`]).
fn write_approvals(out: &mut String, approvals: &Approvals) {
    out.push_str(",\"approvals\":{\"pending\":[");
    for (i, asked) in approvals.pending().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("[{},{}]", asked.seq, asked.data));
    }
    out.push_str("],\"decided\":[");
    for (i, (id, outcome)) in approvals.decided().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        json::write_string(out, id);
        out.push_str(&format!(",\"{outcome}\"]"));
    }
    out.push_str("],\"parked\":");
    match approvals.parked() {
        Some(parked) => out.push_str(&parked.data),
        None => out.push_str("null"),
    }
    out.push('}');
}

/// Reads back what [`write_approvals`] wrote.
fn read_approvals(stored: StoredApprovals<'_>) -> std::result::Result<Approvals, String> {
    let pending = stored
        .pending
        .into_iter()
        .map(|(seq, data)| {
            Asked::parse(seq, data.get())
                .ok_or_else(|| format!("asked data {} has no id", data.get()))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let decided = stored
        .decided
        .into_iter()
        .map(|(id, outcome)| {
            Ok((
                id,
                ApprovalOutcome::parse(&outcome).map_err(|e| e.message().to_owned())?,
            ))
        })
        .collect::<std::result::Result<_, String>>()?;
    let parked = match stored.parked {
        None => None,
        Some(data) => Some(
            Parked::parse(data.get())
                .ok_or_else(|| format!("parked data {} is not a turn/parked's", data.get()))?,
        ),
    };
    Ok(Approvals::from_parts(pending, decided, parked))
}

/// The post ids in order (how a checkpoint writes them).
fn sorted(posts: &HashSet<String>) -> Vec<&str> {
    let mut ids: Vec<&str> = posts.iter().map(String::as_str).collect();
    ids.sort_unstable();
    ids
}

/// Whether two inboxes hold the same messages (as stored) in the same order.
fn same_inbox(a: &Inbox, b: &Inbox) -> bool {
    [Target::NextTurn, Target::NextStep].into_iter().all(|t| {
        a.len(t) == b.len(t) && a.iter(t).zip(b.iter(t)).all(|(x, y)| x.json() == y.json())
    })
}

/// `corrupt checkpoint <name>: <why>`.
pub(crate) fn corrupt(name: &str, why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        format!("corrupt checkpoint {name}: {why}"),
    )
}

/// What a store feeds the events of a log to ([`crate::store::Store::open`],
/// [`crate::store::Store::verify`]): every event from seq 0, or a checkpoint and the
/// events after it.
pub trait Replay {
    /// Whether this replay starts from the log's checkpoint when there is one: the
    /// store then passes it to [`Replay::checkpoint`] and only the events after it to
    /// [`Replay::visit`]. `false` (the default): every event from seq 0.
    fn resumes(&self) -> bool {
        false
    }

    /// The log's checkpoint, before any event. A replay that [`resumes`](Replay::resumes)
    /// starts from it; [`crate::store::Store::verify`] also hands it to one that does
    /// not, which then compares it with the state its events reach at its seq. The
    /// default ignores it.
    fn checkpoint(&mut self, checkpoint: Checkpoint) -> Result<()> {
        let _ = checkpoint;
        Ok(())
    }

    /// Checks and applies one stored event (`header` is the log's).
    fn visit(&mut self, header: &Header, event: &Event) -> Result<()>;
}

/// A replay of every event from seq 0 by a closure (see [`events`]).
pub struct Events<F>(F);

/// The replay that passes every event from seq 0 to `visit`, and ignores checkpoints.
pub fn events<F: FnMut(&Header, &Event) -> Result<()>>(visit: F) -> Events<F> {
    Events(visit)
}

impl<F: FnMut(&Header, &Event) -> Result<()>> Replay for Events<F> {
    fn visit(&mut self, header: &Header, event: &Event) -> Result<()> {
        (self.0)(header, event)
    }
}

//! What reading a stored log reports: opening's repairs ([`OpenReport`]), a read-only
//! check ([`VerifyReport`]) and the state read without owning it ([`Peek`]).

use crate::header::Header;
use crate::projection::Baseline;

/// What opening a stored log found and fixed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Bytes of a torn tail dropped by the store.
    pub torn_bytes: u64,
    /// The turn closed as interrupted (`turn/end {"kind":"interrupted"}`) because the
    /// previous writer left it open; `None` when no turn was open.
    pub repaired_turn: Option<u64>,
    /// The `compactionId` of the compaction ended as interrupted
    /// (`compaction/end {"error":"interrupted"}`) because the previous writer left it
    /// running (ARCHITECTURE.md#compaction); `None` when none was.
    pub repaired_compaction: Option<String>,
}

/// What a read-only check of a stored log found ([`Session::verify`]): the log passes
/// every check [`Session::open`] runs, and these are the repairs opening it for writing
/// would make (none is an error).
///
/// [`Session::verify`]: super::Session::verify
/// [`Session::open`]: super::Session::open
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// The log's header.
    pub header: Header,
    /// Stored complete events.
    pub events: u64,
    /// Bytes of a torn tail that opening would drop.
    pub torn_bytes: u64,
    /// The turn left open, which opening would close as `interrupted` unless it is
    /// parked on approvals ([`VerifyReport::parked`]).
    pub open_turn: Option<u64>,
    /// Whether the open turn is parked on approvals (ARCHITECTURE.md#approvals):
    /// opening leaves it open.
    pub parked: bool,
    /// The step left open in that turn, which opening would end first.
    pub open_step: Option<u64>,
    /// Messages pending in `next-turn` after replay.
    pub next_turn: usize,
    /// Messages pending in `next-step` after replay.
    pub next_step: usize,
    /// Tool calls of the open turn left without a result, which opening would answer
    /// (ARCHITECTURE.md#tool-calls-across-a-crash).
    pub pending_tool_calls: usize,
    /// The `compactionId` of a compaction left running, which opening would end as
    /// interrupted (ARCHITECTURE.md#compaction).
    pub compaction: Option<String>,
    /// Events whose surface ops break the surface rules, kept off the surface: their
    /// seq and the rule (the first 100).
    pub off_surface: Vec<(u64, String)>,
    /// Conversation events of an older shape than an append accepts now: their seq and
    /// what differs (the first 100). They keep their place on the surface.
    pub older_shapes: Vec<(u64, String)>,
}

impl VerifyReport {
    /// Whether opening for writing would change the file (drop a torn tail, end an
    /// interrupted compaction or close an interrupted turn).
    pub fn needs_repair(&self) -> bool {
        self.torn_bytes > 0
            || self.compaction.is_some()
            || (self.open_turn.is_some() && !self.parked)
    }
}

/// What a stored log holds now, read without owning it ([`Session::peek`]): where it
/// ends, the turn and step it left open, and its inbox.
///
/// [`Session::peek`]: super::Session::peek
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Peek {
    /// The log's header.
    pub header: Header,
    /// Stored complete events (the seq the next one gets).
    pub events: u64,
    /// Bytes of a torn tail (ignored by the read, dropped by the next open).
    pub torn_bytes: u64,
    /// The turn left open, if any.
    pub open_turn: Option<u64>,
    /// The step left open in that turn, if any.
    pub open_step: Option<u64>,
    /// The inbox as of the last event (ARCHITECTURE.md#queue-projection).
    pub baseline: Baseline,
    /// The approvals waiting for a decision, each its `approval/asked` data (JSON
    /// text), in order (ARCHITECTURE.md#approvals).
    pub approvals: Vec<String>,
    /// The open turn, when it is parked on approvals.
    pub parked: Option<super::ParkedTurn>,
}

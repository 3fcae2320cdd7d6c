//! inboxlog: append-only session logs for AI agents, each with a durable two-queue
//! inbox replayed from the log when a session opens.
//!
//! The log is the only truth. A [`Session`] owns one log through a [`store::LogWriter`],
//! keeps the [`Inbox`] (a projection of the log's `agent/inbox/spliced` events) and runs
//! the step-boundary protocol that turns pending input into turns and steps. Everything
//! here is pure Rust; the C ABI and the Python module are sibling crates.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// Every type a public function returns can be named by users.
#![deny(unnameable_types)]

pub mod checkpoint;
mod conversation;
mod edit;
mod error;
mod error_fields;
mod event;
mod extra;
mod fleet;
mod fold;
mod header;
mod id;
mod import;
mod inbox;
pub mod json;
mod log;
mod message;
mod observer;
mod projection;
mod protocol;
mod queue;
mod reason;
mod session;
mod splice;
pub mod store;
mod txn;
pub mod wire;

pub use conversation::{ApprovalOutcome, SurfaceView};
pub use edit::{Edit, Move};
pub use error::{Error, ErrorKind, Result};
pub use event::{
    APPROVAL_ASKED, APPROVAL_DECIDED, ASSISTANT_MESSAGE, COMPACTION_END, COMPACTION_PRUNE,
    COMPACTION_START, COMPACTION_SUMMARY, END_SEED, Envelope, Event, INBOX_REJECTED, INBOX_SPLICED,
    REPLAYED, STEP_END, STEP_START, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_PARKED, TURN_RESUMED,
    TURN_START, USER_MESSAGE, is_reserved,
};
pub use extra::{Extra, LIBRARY_KEYS};
pub use fleet::Follower;
pub use fold::{ConsumedWork, fold_consumed_work};
pub use header::{FORMAT_NAME, FORMAT_VERSION, Header, OLDEST_FORMAT_VERSION, SessionMeta};
pub use id::{MAX_ID_LEN, validate_session_id};
#[cfg(feature = "testing")]
pub use import::between_import_passes;
pub use import::{ImportLimits, import_reference, import_reference_with, reference_session_id};
pub use inbox::Inbox;
pub use json::{Json, JsonError, JsonErrorKind, MAX_DEPTH, MAX_SAFE_INTEGER};
pub use message::Message;
pub use observer::{InboxNotice, ObserverFailures};
pub use projection::{Baseline, QueueProjection};
pub use protocol::{Decided, Decision, Proposal, TurnClaim};
pub use reason::{CancelCause, StepOutcome, TurnEndReason, TurnError};
pub use session::{
    Compaction, InboxOps, OpenReport, ParkedTurn, Peek, Session, StepBoundary, Summary, TryAppend,
    VerifyReport,
};
pub use splice::{SpliceRecord, Target, normalize};
pub use txn::{Compacted, Resumed};
pub use wire::{FromJson, ToJson};

//! The C ABI of inboxlog (ARCHITECTURE.md#c-abi): a thin `extern "C"` layer over the `inboxlog`
//! core crate; the header `include/inboxlog.h` is generated from it by cbindgen.
//!
//! The conventions every exported function follows are written once, for C readers,
//! at the top of the header (`ffi/cbindgen.toml`, `header`): statuses, the optional
//! error JSON, outputs written only on success, NULL (`_free(NULL)` is a no-op, every
//! other required NULL is `NULL_ARGUMENT`), `bool` flags, `INBOXLOG_ABSENT` for an
//! absent number, no clamping, threads, panics.
//!
//! One module per C object, in the order the header declares them (cbindgen keeps
//! source order: `sort_by = "None"`), each importing only modules above it:
//!
//! - `status`: the status enum, its names, the version (imports nothing here)
//! - `boundary`: the panic boundary and the error JSON (imports `status`)
//! - `strings`: arguments in, results out, `inboxlog_string_free`, helpers shared by
//!   several objects (imports `boundary`, `status`)
//! - `store`, then `session` (lifecycle, reads, append; imports `store`), then
//!   `inbox`, `protocol`, `projection` and `notifications`, which each import
//!   `session` and nothing else of the objects.

// C names: inboxlog_session, inboxlog_status, …
#![allow(non_camel_case_types)]
// Each exported `unsafe fn` states its contract in C terms, because cbindgen copies the
// doc comment into the header: the pointer rules are written once in the header's
// overview ("Safety": NULL or live handles, NUL-terminated strings, writable
// out-parameters), and each function names its optional arguments. A Rust `# Safety`
// heading would only repeat that overview in every function of the header.
#![allow(clippy::missing_safety_doc)]
// The doc comments are the header's C text, which cbindgen copies verbatim: "<id>.jsonl"
// there is a placeholder, not an HTML tag, and a backtick would not be C.
#![allow(rustdoc::invalid_html_tags)]

// The header declares the modules' functions in this order (cbindgen keeps source
// order), so each module is its own group here: rustfmt sorts only within a group.

// Status and errors.
mod status;

// The panic boundary; with the testing feature, the test hook (not in the header).
mod boundary;

// Strings: arguments in, results out, inboxlog_string_free.
mod strings;

// Store: new, open, list, inspect, verify, delete, free.
mod store;

// Session lifecycle, then append and reading events.
mod session;

// Inbox.
mod inbox;

// Step-boundary protocol.
mod protocol;

// Projections: the consumed-work fold, baselines, the queue projection.
mod projection;

// The conversation: the model-visible surface.
mod conversation;

// Approvals: a person in the loop.
mod approvals;

// Compaction: a range of the surface replaced by a summary.
mod compaction;

// Notifications.
mod notifications;

// Fleet: posting, taking posts in, following.
mod fleet;

// The fuzz targets' C ABI call-sequence driver (not in the header).
#[cfg(feature = "testing")]
pub mod fuzzing;

pub use approvals::*;
#[cfg(feature = "testing")]
pub use boundary::inboxlog_test_panic;
pub use compaction::*;
pub use conversation::*;
pub use fleet::*;
pub use inbox::*;
pub use notifications::*;
pub use projection::*;
pub use protocol::*;
pub use session::*;
pub use status::{inboxlog_status, inboxlog_status_name, inboxlog_version};
pub use store::*;
pub use strings::{INBOXLOG_ABSENT, inboxlog_string_free};

// Handles are shared across threads by C callers.
const _: fn() = || {
    fn thread_safe<T: Send + Sync>() {}
    thread_safe::<inboxlog_store>();
    thread_safe::<inboxlog_session>();
    thread_safe::<inboxlog_projection>();
    thread_safe::<inboxlog_follower>();
};

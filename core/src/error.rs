//! The one error model shared by every layer (ARCHITECTURE.md#errors).

use std::fmt;
use std::path::{Path, PathBuf};

/// Declares [`ErrorKind`] from the one list of kinds: each variant with its number,
/// its stable name and its doc; [`ErrorKind::ALL`] and [`ErrorKind::name`] come from
/// the same list, so none can be missed or misspelled. Every other list of kinds
/// (the C status enum and header, the Python exception classes and stubs, the table
/// of ARCHITECTURE.md#errors) is checked against [`ErrorKind::ALL`] by a test.
macro_rules! error_kinds {
    ($($(#[doc = $doc:literal])+ $kind:ident = $code:literal => $name:literal,)+) => {
        /// What went wrong, as a stable number shared by the C and Python layers.
        ///
        /// Numbers are never reused; new kinds get new numbers.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $($(#[doc = $doc])+ $kind = $code,)+
        }

        impl ErrorKind {
            /// Every kind, in code order.
            pub const ALL: [ErrorKind; [$($code),+].len()] = [$(ErrorKind::$kind),+];

            /// The stable snake_case name of this kind (`"invalid_splice"`).
            pub fn name(self) -> &'static str {
                match self {
                    $(ErrorKind::$kind => $name,)+
                }
            }
        }
    };
}

error_kinds! {
    /// The OS refused a read, write, fsync or lock.
    Io = 1 => "io",
    /// A stored log fails validation (names file, line, offset, seq).
    Corrupt = 2 => "corrupt",
    /// Another writer holds the session.
    Locked = 3 => "locked",
    /// A write or fsync failed earlier; reopen the session to continue.
    Poisoned = 4 => "poisoned",
    /// No such session.
    NotFound = 5 => "not_found",
    /// A session with that id already exists.
    AlreadyExists = 6 => "already_exists",
    /// Splice coordinates out of range (ARCHITECTURE.md#inbox-validation).
    InvalidSplice = 7 => "invalid_splice",
    /// A message id already pending (ARCHITECTURE.md#inbox-validation).
    DuplicateMessage = 8 => "duplicate_message",
    /// A step-boundary call out of order (ARCHITECTURE.md#protocol).
    Protocol = 9 => "protocol",
    /// A bad message, event, id, reason or argument value.
    InvalidInput = 10 => "invalid_input",
    /// A log written in another on-disk format version (ARCHITECTURE.md#header).
    FormatUnsupported = 11 => "format_unsupported",
    /// A record or a JSON nesting over the limits (ARCHITECTURE.md#limits).
    TooLarge = 12 => "too_large",
    /// Use of a session after `close` (stores have no close).
    Closed = 13 => "closed",
    /// A mutation from inside an observer (ARCHITECTURE.md#observers).
    Reentrant = 14 => "reentrant",
    /// This writer lost ownership of its session: another writer took it over (ARCHITECTURE.md#postgresql).
    /// Nothing of the refused call was written.
    Fenced = 15 => "fenced",
    /// The store's server cannot be reached or went away mid-call (ARCHITECTURE.md#postgresql); the message
    /// says whether the call committed, or that its outcome is unknown.
    Unavailable = 16 => "unavailable",
    /// A compaction is running (SPEC §16); nothing was written.
    Busy = 17 => "busy",
    /// The surface changed under a compaction (SPEC §16); its `compaction/end` with the
    /// error was written.
    Conflict = 18 => "conflict",
    /// Approvals of the turn are still pending (ARCHITECTURE.md#approvals): a resume,
    /// `end_step` or `close_turn`; nothing was written.
    ApprovalsPending = 19 => "approvals_pending",
    /// A decision for an approval already decided (ARCHITECTURE.md#approvals), recorded
    /// as rejected.
    AlreadyDecided = 20 => "already_decided",
}

impl ErrorKind {
    /// The stable number of this kind.
    pub fn code(self) -> u32 {
        self as u32
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An inboxlog error: a kind, a message that names what and where, and that context
/// as data (ARCHITECTURE.md#errors): the session, file, line, byte offset and seq, each where known.
#[derive(Debug)]
#[non_exhaustive]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<std::io::Error>,
    /// Boxed: most errors carry none, and `Result<T, Error>` stays small.
    at: Option<Box<Location>>,
}

/// Where an error happened; every part optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Location {
    session: Option<String>,
    path: Option<PathBuf>,
    line: Option<u64>,
    offset: Option<u64>,
    seq: Option<u64>,
}

impl Error {
    /// An error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            source: None,
            at: None,
        }
    }

    /// An `io` error: `context` says what was being done to which file.
    pub fn io(context: impl fmt::Display, source: std::io::Error) -> Self {
        Error {
            kind: ErrorKind::Io,
            message: format!("{context}: {source}"),
            source: Some(source),
            at: None,
        }
    }

    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The session the error concerns, where known.
    pub fn session(&self) -> Option<&str> {
        self.at.as_ref()?.session.as_deref()
    }

    /// The file the error concerns (a JSONL log), where known.
    pub fn path(&self) -> Option<&Path> {
        self.at.as_ref()?.path.as_deref()
    }

    /// The 1-based line of a stored log the error was found on (line 1 is the header).
    pub fn line(&self) -> Option<u64> {
        self.at.as_ref()?.line
    }

    /// The byte offset in the file of the line the error was found on.
    pub fn offset(&self) -> Option<u64> {
        self.at.as_ref()?.offset
    }

    /// The seq of the event the error concerns.
    pub fn seq(&self) -> Option<u64> {
        self.at.as_ref()?.seq
    }

    fn at(&mut self) -> &mut Location {
        self.at.get_or_insert_default()
    }

    /// The same error naming session `id` (only when it names none yet: the innermost
    /// context is the most precise).
    #[must_use]
    pub fn with_session(mut self, id: &str) -> Self {
        let at = self.at();
        if at.session.is_none() {
            at.session = Some(id.to_owned());
        }
        self
    }

    /// The same error naming file `path` (only when it names none yet).
    #[must_use]
    pub fn with_path(mut self, path: &Path) -> Self {
        let at = self.at();
        if at.path.is_none() {
            at.path = Some(path.to_owned());
        }
        self
    }

    /// The same error placed on line `line`, at byte `offset`, of a stored log.
    #[must_use]
    pub fn with_line(mut self, line: u64, offset: u64) -> Self {
        let at = self.at();
        at.line = Some(line);
        at.offset = Some(offset);
        self
    }

    /// The same error naming the event at `seq`.
    #[must_use]
    pub fn with_seq(mut self, seq: u64) -> Self {
        self.at().seq = Some(seq);
        self
    }

    /// The same error with `context` put in front of the message.
    #[must_use]
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// The same error with `more` put after the message.
    #[must_use]
    pub(crate) fn context_after(mut self, more: impl fmt::Display) -> Self {
        self.message = format!("{}{more}", self.message);
        self
    }

    /// The same error with another kind (e.g. a validation failure found while loading
    /// becomes `corrupt`).
    #[must_use]
    pub fn with_kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

/// Result with the inboxlog [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Shorthand for an `invalid_input` error.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidInput, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_unique() {
        let codes: Vec<u32> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes, (1..=20).collect::<Vec<_>>());
        assert_eq!(ErrorKind::ApprovalsPending.name(), "approvals_pending");
        assert_eq!(ErrorKind::AlreadyDecided.code(), 20);
        assert_eq!(ErrorKind::InvalidSplice.name(), "invalid_splice");
        assert_eq!(ErrorKind::Reentrant.to_string(), "reentrant");
        assert_eq!(ErrorKind::Fenced.code(), 15);
        assert_eq!(ErrorKind::Fenced.name(), "fenced");
        assert_eq!(ErrorKind::Unavailable.code(), 16);
        assert_eq!(ErrorKind::Unavailable.name(), "unavailable");
        let mut names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::ALL.len(), "names are unique");
    }

    #[test]
    fn context_prefixes_the_message() {
        let e = invalid("bad id").context("session \"x\"");
        assert_eq!(e.to_string(), "session \"x\": bad id");
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(e.with_kind(ErrorKind::Corrupt).kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn location_is_data_and_survives_context_and_kind() {
        let e = invalid("bad");
        assert_eq!(
            (e.session(), e.path(), e.line(), e.offset(), e.seq()),
            (None, None, None, None, None)
        );
        let e = e
            .with_seq(3)
            .with_session("inner")
            .with_line(5, 120)
            .with_path(Path::new("/r/s.jsonl"))
            .context("outer")
            .with_kind(ErrorKind::Corrupt)
            .with_session("outer")
            .with_path(Path::new("/elsewhere"));
        assert_eq!(e.session(), Some("inner"));
        assert_eq!(e.path(), Some(Path::new("/r/s.jsonl")));
        assert_eq!(
            (e.line(), e.offset(), e.seq()),
            (Some(5), Some(120), Some(3))
        );
        assert_eq!(e.to_string(), "outer: bad");
    }
}

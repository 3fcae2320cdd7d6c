//! The one error model shared by every layer (SPEC §8).

use std::fmt;

/// What went wrong, as a stable number shared by the C and Python layers.
///
/// Numbers are never reused; new kinds get new numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The OS refused a read, write, fsync or lock.
    Io = 1,
    /// A stored log fails validation (names file, line, offset, seq).
    Corrupt = 2,
    /// Another writer holds the session.
    Locked = 3,
    /// A write or fsync failed earlier; reopen the session to continue.
    Poisoned = 4,
    /// No such session.
    NotFound = 5,
    /// A session with that id already exists.
    AlreadyExists = 6,
    /// Splice coordinates out of range (§3.4).
    InvalidSplice = 7,
    /// A message id already pending (§3.4).
    DuplicateMessage = 8,
    /// A step-boundary call out of order (§4).
    Protocol = 9,
    /// A bad message, event, id, reason or argument value.
    InvalidInput = 10,
    /// A log written in another on-disk format version (§1.4).
    FormatUnsupported = 11,
    /// A record or a JSON nesting over the limits (§7.5).
    TooLarge = 12,
    /// Use of a session after `close` (stores have no close).
    Closed = 13,
    /// A mutation from inside an observer (§1.5).
    Reentrant = 14,
}

impl ErrorKind {
    /// Every kind, in code order.
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::Io,
        ErrorKind::Corrupt,
        ErrorKind::Locked,
        ErrorKind::Poisoned,
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::InvalidSplice,
        ErrorKind::DuplicateMessage,
        ErrorKind::Protocol,
        ErrorKind::InvalidInput,
        ErrorKind::FormatUnsupported,
        ErrorKind::TooLarge,
        ErrorKind::Closed,
        ErrorKind::Reentrant,
    ];

    /// The stable number of this kind.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The stable snake_case name of this kind (`"invalid_splice"`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Io => "io",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Locked => "locked",
            ErrorKind::Poisoned => "poisoned",
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::InvalidSplice => "invalid_splice",
            ErrorKind::DuplicateMessage => "duplicate_message",
            ErrorKind::Protocol => "protocol",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::FormatUnsupported => "format_unsupported",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Closed => "closed",
            ErrorKind::Reentrant => "reentrant",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An inboxlog error: a kind and a message that names what and where.
#[derive(Debug)]
#[non_exhaustive]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<std::io::Error>,
}

impl Error {
    /// An error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// An `io` error: `context` says what was being done to which file.
    pub fn io(context: impl fmt::Display, source: std::io::Error) -> Self {
        Error {
            kind: ErrorKind::Io,
            message: format!("{context}: {source}"),
            source: Some(source),
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

    /// The same error with `context` put in front of the message.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// The same error with another kind (e.g. a validation failure found while loading
    /// becomes `corrupt`).
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
        assert_eq!(codes, (1..=14).collect::<Vec<_>>());
        assert_eq!(ErrorKind::InvalidSplice.name(), "invalid_splice");
        assert_eq!(ErrorKind::Reentrant.to_string(), "reentrant");
    }

    #[test]
    fn context_prefixes_the_message() {
        let e = invalid("bad id").context("session \"x\"");
        assert_eq!(e.to_string(), "session \"x\": bad id");
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(e.with_kind(ErrorKind::Corrupt).kind(), ErrorKind::Corrupt);
    }
}

//! The error object of ARCHITECTURE.md#errors, as every face reports it: the C ABI's
//! error JSON, the Python exception's attributes, and the reason of an
//! `agent/inbox/rejected` event. It sits below the wire layer (which prints it for the
//! bindings) because the fleet writes it into the log.

use std::borrow::Cow;

use crate::error::Error;
use crate::json;

/// An error as every face reports it (ARCHITECTURE.md#errors): `code`, `kind`, `message`, then the
/// location keys `session`, `path`, `line`, `offset`, `seq` where known. The C ABI
/// prints it as its error JSON; the Python exception carries the same fields as
/// attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorFields<'a> {
    /// The stable number of the kind (or of a binding's own status).
    pub code: u32,
    /// The kind's stable name, e.g. `invalid_input`.
    pub kind: &'a str,
    /// The message, naming what and where.
    pub message: &'a str,
    /// The session the error concerns.
    pub session: Option<&'a str>,
    /// The file, written lossily when it is not UTF-8 (as the message names it).
    pub path: Option<Cow<'a, str>>,
    /// The 1-based line of a stored log.
    pub line: Option<u64>,
    /// The byte offset of that line.
    pub offset: Option<u64>,
    /// The seq of the event concerned.
    pub seq: Option<u64>,
}

impl<'a> ErrorFields<'a> {
    /// An error a binding raises itself (a NULL argument, bad UTF-8): no location.
    pub fn new(code: u32, kind: &'a str, message: &'a str) -> ErrorFields<'a> {
        ErrorFields {
            code,
            kind,
            message,
            session: None,
            path: None,
            line: None,
            offset: None,
            seq: None,
        }
    }

    /// The fields of a core error.
    pub fn of(e: &'a Error) -> ErrorFields<'a> {
        let kind = e.kind();
        ErrorFields {
            session: e.session(),
            path: e.path().map(|p| p.to_string_lossy()),
            line: e.line(),
            offset: e.offset(),
            seq: e.seq(),
            ..ErrorFields::new(kind.code(), kind.name(), e.message())
        }
    }
}

impl ErrorFields<'_> {
    /// Appends `{"code":N,"kind":"…","message":"…"}` plus the known location keys.
    pub fn write_json(&self, out: &mut String) {
        let mut digits = itoa::Buffer::new();
        out.push_str("{\"code\":");
        out.push_str(digits.format(self.code));
        out.push_str(",\"kind\":");
        json::write_string(out, self.kind);
        out.push_str(",\"message\":");
        json::write_string(out, self.message);
        if let Some(session) = self.session {
            out.push_str(",\"session\":");
            json::write_string(out, session);
        }
        if let Some(path) = &self.path {
            out.push_str(",\"path\":");
            json::write_string(out, path);
        }
        for (key, value) in [
            (",\"line\":", self.line),
            (",\"offset\":", self.offset),
            (",\"seq\":", self.seq),
        ] {
            if let Some(n) = value {
                out.push_str(key);
                out.push_str(digits.format(n));
            }
        }
        out.push('}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::wire::ToJson;

    #[test]
    fn errors_print_their_fields_with_escaping() {
        let e = ErrorFields::new(100, "null_argument", "argument \"id\" is NULL");
        assert_eq!(
            e.to_json(),
            r#"{"code":100,"kind":"null_argument","message":"argument \"id\" is NULL"}"#
        );
        let core = Error::new(ErrorKind::Locked, "held");
        assert_eq!(
            ErrorFields::of(&core).to_json(),
            r#"{"code":3,"kind":"locked","message":"held"}"#
        );
        let located = Error::new(ErrorKind::Corrupt, "bad")
            .with_session("s")
            .with_path(std::path::Path::new("/r/\"s\".jsonl"))
            .with_line(2, 57)
            .with_seq(0);
        assert_eq!(
            ErrorFields::of(&located).to_json(),
            r#"{"code":2,"kind":"corrupt","message":"bad","session":"s","path":"/r/\"s\".jsonl","line":2,"offset":57,"seq":0}"#
        );
    }
}

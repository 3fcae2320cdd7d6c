//! Session ids: they name files, so they are checked before reaching the file system.

use crate::error::{Result, invalid};
use crate::json;
use crate::message::excerpt;

/// Longest session id accepted.
pub const MAX_ID_LEN: usize = 128;

/// Checks a session id: 1–128 characters of `[A-Za-z0-9._-]`, not starting with `.`.
pub fn validate_session_id(id: &str) -> Result<()> {
    let problem = if id.is_empty() {
        "is empty"
    } else if id.len() > MAX_ID_LEN {
        "is longer than 128 characters"
    } else if id.starts_with('.') {
        "starts with '.'"
    } else if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        "may only contain A-Z, a-z, 0-9, '.', '_' and '-'"
    } else {
        return Ok(());
    };
    Err(invalid(format!(
        "session id {} {problem}",
        json::quote(&excerpt(id))
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_file_safe_ids_only() {
        for ok in ["a", "s-1.2_x", "A9", &"x".repeat(128)] {
            validate_session_id(ok).unwrap();
        }
        for (bad, needle) in [
            ("", "is empty"),
            ("../x", "starts with '.'"),
            ("a/b", "may only contain"),
            (".hidden", "starts with '.'"),
            ("a\0b", "may only contain"),
            ("é", "may only contain"),
            (&"x".repeat(129), "longer than 128"),
        ] {
            let err = validate_session_id(bad).unwrap_err();
            assert!(err.to_string().contains(needle), "{bad:?}: {err}");
        }
    }
}

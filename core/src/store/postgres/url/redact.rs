//! Redaction: the byte ranges of a URL's text that may hold a password under any
//! reading of it, how a part of the URL is shown in a message, and the URL with those
//! ranges hidden.

use std::ops::Range;

use super::SCHEMES;
use super::grammar::hex;
use super::vocabulary::{HONOURED, SECRET, UNSUPPORTED};
use crate::json;

/// Shown in a message in place of a part of the URL that may hold a password.
const HIDDEN: &str = "(not shown: it may hold a password)";

/// `url` with every part that may hold a password replaced by `***`: safe to show
/// whatever its shape. Text with another scheme (or none) keeps only its scheme part
/// (`mysql://***`, or `***`), as nothing tells where its password would be.
pub fn redact_url(url: &str) -> String {
    if SCHEMES.iter().any(|s| url.starts_with(s)) {
        return Secrets::of(url).redacted();
    }
    if url.is_empty() {
        return String::new();
    }
    format!("{}***", scheme_part(url))
}

/// The scheme-like start of `text`: letters, digits, `+`, `-`, `.`, then the `:` and
/// `/` after them (`postgres//`, `mysql:`); empty when no `:` or `/` follows, as the
/// text then has no scheme at all.
pub(super) fn scheme_part(text: &str) -> &str {
    let name = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
        .unwrap_or(text.len());
    let seps = text[name..]
        .find(|c: char| c != ':' && c != '/')
        .map_or(text.len(), |i| name + i);
    if seps == name { "" } else { &text[..seps] }
}

/// The byte ranges of a URL's text that may hold a password under any reading of it.
pub(super) struct Secrets<'a> {
    url: &'a str,
    /// Sorted, disjoint, not adjacent.
    ranges: Vec<Range<usize>>,
    /// The ranges that hold a password under libpq's reading or next to it: those but
    /// the port-like text of a URL with no `@` at all, which is most likely a port.
    strict: Vec<Range<usize>>,
}

impl<'a> Secrets<'a> {
    pub(super) fn of(url: &'a str) -> Secrets<'a> {
        let start = SCHEMES
            .iter()
            .find(|s| url.starts_with(*s))
            .map_or(0, |s| s.len());
        let mut ranges = Vec::new();
        let mut port_like = None;
        // Whatever ends the user name, a password starts after a `:` and ends at an `@`;
        // with no `@` at all, what follows the first `:` (a port, to libpq) may still be
        // one whose `@host` was forgotten.
        if let Some(colon) = url[start..].find(':').map(|i| start + i + 1) {
            match url.rfind('@') {
                Some(at) if colon <= at => ranges.push(colon..at),
                Some(_) => {}
                None => {
                    let end = url[colon..]
                        .find(['/', '?'])
                        .map_or(url.len(), |i| colon + i);
                    port_like = Some(colon..end);
                }
            }
        }
        // `?`/`&`-separated parts: a secret parameter's value, and the parts after it up
        // to the next that names a key word (a raw `&` or `?` in the value).
        let mut in_secret = false;
        let mut pos = start;
        for part in url[start..].split(['?', '&']) {
            let (key, has_value) = match part.split_once('=') {
                Some((key, _)) => (lenient_decode(key), true),
                None => (lenient_decode(part), false),
            };
            let key = key.to_ascii_lowercase();
            let known = has_value
                && (HONOURED.contains(&key.as_str()) || UNSUPPORTED.contains(&key.as_str()));
            if SECRET.contains(&key.as_str()) && has_value {
                in_secret = true;
                let value = pos + key_len(part) + 1;
                ranges.push(value..pos + part.len());
            } else if known {
                in_secret = false;
            } else if in_secret {
                ranges.push(pos..pos + part.len());
            }
            pos += part.len() + 1;
        }
        let strict = merge(ranges.clone());
        ranges.extend(port_like);
        Secrets {
            url,
            ranges: merge(ranges),
            strict,
        }
    }

    /// Where `part` lies in the URL, if it is a slice of it.
    fn span(&self, part: &str) -> Option<Range<usize>> {
        let base = self.url.as_ptr() as usize;
        let at = (part.as_ptr() as usize).checked_sub(base)?;
        (at + part.len() <= self.url.len()).then_some(at..at + part.len())
    }

    /// Whether `part` (a slice of the URL) overlaps or touches a range that may hold a
    /// password; anything else than a slice of the URL counts as hidden.
    pub(super) fn hides(&self, part: &str) -> bool {
        self.span(part).is_none_or(|p| touches(&self.ranges, &p))
    }

    /// Whether `part`, about to be shown as a user, host, port or database name, may
    /// hold a password: then the URL is refused.
    pub(super) fn holds_password(&self, part: &str) -> bool {
        self.span(part).is_some_and(|p| touches(&self.strict, &p))
    }

    /// `text` (decoded from `raw`, a slice of the URL) quoted for a message, or a note
    /// that it is not shown.
    pub(super) fn show(&self, raw: &str, text: &str) -> String {
        if self.hides(raw) {
            HIDDEN.to_owned()
        } else {
            json::quote(text)
        }
    }

    /// The URL with each range replaced by `***`.
    pub(super) fn redacted(&self) -> String {
        let mut out = String::with_capacity(self.url.len());
        let mut from = 0;
        for r in &self.ranges {
            out.push_str(&self.url[from..r.start]);
            out.push_str("***");
            from = r.end;
        }
        out.push_str(&self.url[from..]);
        out
    }
}

/// `ranges` sorted, overlapping or adjacent ones merged.
fn merge(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end + 1 => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// Whether `part` overlaps or touches one of `ranges`.
fn touches(ranges: &[Range<usize>], part: &Range<usize>) -> bool {
    ranges
        .iter()
        .any(|r| part.start <= r.end && r.start <= part.end)
}

/// The length of the key of a `key=value` part.
fn key_len(part: &str) -> usize {
    part.find('=').unwrap_or(part.len())
}

/// `text` with each valid `%XX` decoded and the rest kept (to recognize a key word that
/// is spelled with escapes, whatever else is wrong).
fn lenient_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1..i + 3)) {
            (b'%', Some(&[h, l])) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => {
                out.push((hex(h) << 4) | hex(l));
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets_of(url: &str) -> Vec<&str> {
        let s = Secrets::of(url);
        s.ranges.iter().map(|r| &url[r.clone()]).collect()
    }

    #[test]
    fn the_ranges_that_may_hold_a_password() {
        assert_eq!(secrets_of("postgresql://u:pw@h:1/db"), ["pw"]);
        assert_eq!(secrets_of("postgresql://u@h:1/db"), Vec::<&str>::new());
        assert_eq!(secrets_of("postgresql://u:pw/db"), ["pw"]);
        assert_eq!(secrets_of("postgresql://h:1,h2:2?x=1"), ["1,h2:2"]);
        // A raw "/" or "?" in the password: still from the first ":" to the last "@".
        assert_eq!(secrets_of("postgresql://u:p/a?s@h/db"), ["p/a?s"]);
        assert_eq!(
            secrets_of("postgresql://h/d?password=x&sslmode=disable"),
            ["x"]
        );
        // A raw "&" in a query password: the parts up to the next key word go with it.
        assert_eq!(
            secrets_of("postgresql://h/d?pass%77ord=a&b&c=d&port=1"),
            ["a&b&c=d"]
        );
        assert_eq!(secrets_of("postgresql://h/d?sslpassword=k"), ["k"]);
        let s = Secrets::of("postgresql://u:pw@h:9/db");
        assert!(s.hides(&s.url[15..17]) && !s.hides(&s.url[18..19]));
        assert!(s.hides("pw"), "a string that is not a slice of the URL");
    }

    #[test]
    fn scheme_parts() {
        assert_eq!(scheme_part("postgres//u:pw@h"), "postgres//");
        assert_eq!(scheme_part("postgresql:/u:pw@h"), "postgresql:/");
        assert_eq!(scheme_part("mysql://x"), "mysql://");
        assert_eq!(scheme_part("Secret123"), "");
        assert_eq!(scheme_part(""), "");
        assert_eq!(redact_url("mysql://u:pw@h/db"), "mysql://***");
        assert_eq!(redact_url("Secret123@h"), "***");
        assert_eq!(redact_url("nonsense"), "***");
        assert_eq!(redact_url(""), "");
    }
}

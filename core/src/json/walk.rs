//! Walking JSON text that [`super::plain::value_end`] has already checked: no
//! validation, only where each key and value starts and ends. Used to pick the few
//! keys the library reads out of a record without parsing the rest again. Every step
//! answers `None` on anything unexpected, so text that was not checked first is
//! refused, never misread as something else.

/// A position in checked, compact JSON text.
pub(crate) struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `text`.
    pub(crate) fn new(text: &'a str) -> Cursor<'a> {
        Cursor { text, at: 0 }
    }

    /// The byte offset of the cursor.
    pub(crate) fn at(&self) -> usize {
        self.at
    }

    /// The text from `start` to the cursor.
    pub(crate) fn since(&self, start: usize) -> Option<&'a str> {
        self.text.get(start..self.at)
    }

    /// Whether the cursor is at the end of the text.
    pub(crate) fn at_end(&self) -> bool {
        self.at == self.text.len()
    }

    /// Steps over `byte` when it comes next.
    pub(crate) fn eat(&mut self, byte: u8) -> bool {
        let next = self.text.as_bytes().get(self.at) == Some(&byte);
        if next {
            self.at += 1;
        }
        next
    }

    /// A key and its colon: the key's raw text between its quotes (escapes not
    /// decoded).
    pub(crate) fn key(&mut self) -> Option<&'a str> {
        let b = self.text.as_bytes();
        if b.get(self.at) != Some(&b'"') {
            return None;
        }
        let end = string_end(b, self.at)?;
        let key = self.text.get(self.at + 1..end - 1)?;
        self.at = end;
        self.eat(b':').then_some(key)
    }

    /// The value at the cursor, stepped over: its text.
    pub(crate) fn value(&mut self) -> Option<&'a str> {
        let start = self.at;
        self.at = skip_value(self.text.as_bytes(), start)?;
        self.since(start)
    }
}

/// Where the string whose opening quote is at `i` ends (one past its closing quote),
/// in checked text: only quotes and backslashes matter.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut i = i + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        if b[i] == b'"' {
            return Some(i + 1);
        }
        i += 2;
    }
}

/// Where the value starting at `i` ends, in checked plain text.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = i;
            loop {
                match *b.get(i)? {
                    b'"' => {
                        i = string_end(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        // A number or a literal: its bytes, up to whatever follows.
        _ => {
            let len = b[i..]
                .iter()
                .position(|c| !matches!(c, b'0'..=b'9' | b'a'..=b'z' | b'-' | b'+' | b'.' | b'E'))
                .unwrap_or(b.len() - i);
            (len > 0).then_some(i + len)
        }
    }
}

/// Calls `member(key, cursor)` for each member of the object at the cursor, in order;
/// `member` must step over the value. `None` when the text is not an object as expected
/// or `member` answers `None`.
pub(crate) fn object<'a>(
    c: &mut Cursor<'a>,
    mut member: impl FnMut(&'a str, &mut Cursor<'a>) -> Option<()>,
) -> Option<()> {
    if !c.eat(b'{') {
        return None;
    }
    if c.eat(b'}') {
        return Some(());
    }
    loop {
        let key = c.key()?;
        member(key, c)?;
        if c.eat(b'}') {
            return Some(());
        }
        if !c.eat(b',') {
            return None;
        }
    }
}

/// Calls `element(cursor)` for each element of the array at the cursor, in order;
/// `element` must step over the value.
pub(crate) fn array<'a>(
    c: &mut Cursor<'a>,
    mut element: impl FnMut(&mut Cursor<'a>) -> Option<()>,
) -> Option<()> {
    if !c.eat(b'[') {
        return None;
    }
    if c.eat(b']') {
        return Some(());
    }
    loop {
        element(c)?;
        if c.eat(b']') {
            return Some(());
        }
        if !c.eat(b',') {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(text: &str) -> Option<Vec<(&str, &str)>> {
        let mut c = Cursor::new(text);
        let mut out = Vec::new();
        object(&mut c, |key, c| {
            out.push((key, c.value()?));
            Some(())
        })?;
        c.at_end().then_some(out)
    }

    fn elements(text: &str) -> Option<Vec<&str>> {
        let mut c = Cursor::new(text);
        let mut out = Vec::new();
        array(&mut c, |c| {
            out.push(c.value()?);
            Some(())
        })?;
        c.at_end().then_some(out)
    }

    #[test]
    fn members_and_elements_of_checked_text() {
        let text = r#"{"a":1,"b\"c":{"x":[1,"]}"]},"d":"v","e":[],"f":null}"#;
        assert_eq!(
            members(text).unwrap(),
            vec![
                ("a", "1"),
                ("b\\\"c", r#"{"x":[1,"]}"]}"#),
                ("d", "\"v\""),
                ("e", "[]"),
                ("f", "null")
            ]
        );
        assert_eq!(members("{}").unwrap(), vec![]);
        assert!(members("[1]").is_none());
        assert_eq!(
            elements(r#"[{"id":"a"},[2],"s",-1.5]"#).unwrap(),
            vec![r#"{"id":"a"}"#, "[2]", "\"s\"", "-1.5"]
        );
        assert_eq!(elements("[]").unwrap(), Vec::<&str>::new());
    }

    #[test]
    fn unchecked_text_is_refused_not_misread() {
        for bad in [
            r#"{"a" :1}"#,
            r#"{"a":1 }"#,
            r#"{"a":1"#,
            r#"{"a""#,
            "{",
            r#"{"a":1}x"#,
        ] {
            assert!(members(bad).is_none(), "{bad}");
        }
        assert!(elements("[1 ,2]").is_none());
        assert!(elements("[1").is_none());
    }
}

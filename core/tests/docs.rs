//! The project's own documents stay navigable: every relative link in them resolves to
//! a file (and its `#anchor` to a heading there), and every repository path that
//! `docs/ARCHITECTURE.md` names exists. Code comments point at these documents, so a
//! moved file or a renamed heading must fail here rather than leave a dead pointer.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root (the parent of `core/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("core/ has a parent")
        .to_path_buf()
}

/// The Markdown files whose links are checked, relative to the root.
const DOCS: &[&str] = &[
    "README.md",
    "core/FORMAT.md",
    "docs/ARCHITECTURE.md",
    "docs/CONTRIBUTING.md",
    "docs/benchmarks.md",
];

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push(line);
        }
    }
    out
}

/// GitHub's anchor for a heading: lowercase, letters, digits, `-` and `_` kept, spaces
/// become `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of every heading in `text`, with GitHub's `-1`, `-2` … for repeats.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for line in prose(text) {
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        let base = slug(rest.trim_start_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    seen
}

/// The targets of the inline links `[text](target)` in `text`, outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    out
}

/// Why `target`, linked from the document `doc`, does not resolve (None when it does).
fn broken(doc: &str, target: &str) -> Option<String> {
    if target.starts_with("http://") || target.starts_with("https://") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor)),
        None => (target, None),
    };
    let dir = Path::new(doc).parent().expect("a document has a directory");
    let path = if file.is_empty() {
        root().join(doc)
    } else {
        root().join(dir).join(file)
    };
    if !path.is_file() {
        return Some(format!(
            "{doc}: link to {target}: no file {}",
            path.display()
        ));
    }
    // Only a link with an anchor needs the text (a picture has none to read).
    let anchor = anchor?;
    let Ok(text) = fs::read_to_string(&path) else {
        return Some(format!(
            "{doc}: link to {target}: {} is not text",
            path.display()
        ));
    };
    (!anchors(&text).contains(anchor))
        .then(|| format!("{doc}: link to {target}: no heading with that anchor"))
}

#[test]
fn every_link_in_the_docs_resolves() {
    let mut problems = Vec::new();
    for doc in DOCS {
        let text = fs::read_to_string(root().join(doc)).expect(doc);
        for target in links(&text) {
            problems.extend(broken(doc, &target));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_path_the_architecture_names_exists() {
    const TOP: &[&str] = &[
        "core/",
        "ffi/",
        "python/",
        "include/",
        "tests/",
        "examples/",
        "docs/",
    ];
    let text = fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let mut named = 0;
    let mut missing = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        // Odd pieces are inside backticks; globs name kinds of files, not files.
        if i % 2 == 0 || !TOP.iter().any(|t| span.starts_with(t)) || span.contains('*') {
            continue;
        }
        named += 1;
        let (file, anchor) = span.split_once('#').unwrap_or((span, ""));
        let path = root().join(file);
        // A module may be named without its extension (`core/src/session`): either
        // `session.rs` or the directory `session/` serves.
        let exists = path.exists() || path.with_extension("rs").exists();
        let anchored = anchor.is_empty()
            || fs::read_to_string(&path).is_ok_and(|text| anchors(&text).contains(anchor));
        if !exists || !anchored {
            missing.push(span.to_owned());
        }
    }
    assert!(named > 40, "only {named} paths found: is the parser right?");
    assert!(missing.is_empty(), "named but missing: {missing:?}");
}

#[test]
fn the_readme_links_the_architecture_and_its_contract() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        links(&readme).iter().any(|l| l == "docs/ARCHITECTURE.md"),
        "README.md links docs/ARCHITECTURE.md"
    );
    let architecture = fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let found = anchors(&architecture);
    for anchor in ["contract", "inbox-validation", "protocol", "errors"] {
        assert!(found.contains(anchor), "docs/ARCHITECTURE.md#{anchor}");
    }
}

#[test]
fn the_anchor_rules_are_githubs() {
    assert_eq!(
        slug("How a log is read back (recovery rules)"),
        "how-a-log-is-read-back-recovery-rules"
    );
    assert_eq!(slug("Lines 2…: events"), "lines-2-events");
    assert_eq!(
        slug("Importing the reference harness's logs"),
        "importing-the-reference-harnesss-logs"
    );
    let found = anchors("# A\n```\n# not a heading\n```\n## A\n### `B` c\n");
    let want: HashSet<String> = ["a", "a-1", "b-c"].map(String::from).into();
    assert_eq!(found, want);
    assert_eq!(
        links("see [x](a.md#b) and [y](c.md)\n```\n[z](d.md)\n```"),
        ["a.md#b", "c.md"]
    );
}

/// The table of ARCHITECTURE.md#errors lists exactly the kinds of `ErrorKind::ALL`, each
/// with its code and name, in code order: the one list of kinds is the Rust enum, and a
/// kind added there without a row here (or a row left behind) fails.
#[test]
fn the_errors_table_lists_every_kind_of_the_core() {
    let text = fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let section = text
        .split("\n### Errors\n")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a section \"### Errors\"");
    let rows: Vec<(u32, String)> = section
        .lines()
        .skip_while(|line| !line.starts_with("| code |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let code = cells[1]
                .parse()
                .unwrap_or_else(|_| panic!("a code: {line}"));
            (code, cells[2].trim_matches('`').to_owned())
        })
        .collect();
    let kinds: Vec<(u32, String)> = inboxlog::ErrorKind::ALL
        .iter()
        .map(|k| (k.code(), k.name().to_owned()))
        .collect();
    assert_eq!(rows, kinds, "the table of docs/ARCHITECTURE.md#errors");
}

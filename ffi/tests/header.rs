//! `include/inboxlog.h` is generated from `ffi/src` by cbindgen and checked in: the
//! first test fails when the checked-in header is stale, the others when it breaks the
//! conventions ARCHITECTURE.md#c-abi asks of it (C text, a contents list in declaration order,
//! ownership and threads for every function, bool flags, one spelling of absent).
//!
//! Regenerate it with `INBOXLOG_BLESS=1 cargo test -p inboxlog-ffi --test header`.

use std::path::Path;

fn header() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include/inboxlog.h");
    std::fs::read_to_string(path).expect("include/inboxlog.h is readable")
}

/// One declared function: its name, its declaration (to the `;`) and its doc comment.
struct Declared {
    name: String,
    declaration: String,
    doc: String,
}

/// Every function the header declares, in order, with the doc comment before it.
fn functions(header: &str) -> Vec<Declared> {
    let mut out = Vec::new();
    let mut rest = header;
    while let Some(start) = rest.find("/**") {
        let end = start + rest[start..].find("*/").expect("doc comments are closed");
        let doc = &rest[start..end];
        let after = &rest[end + 2..];
        let declaration = after[..after.find(';').unwrap_or(after.len())].trim();
        let head = declaration.split('(').next().unwrap_or("");
        let name = head.rsplit([' ', '*']).next().unwrap_or("");
        let returns = ["int ", "void ", "const char *"];
        if returns.iter().any(|r| declaration.starts_with(r)) && name.starts_with("inboxlog_") {
            let name = name.to_owned();
            out.push(Declared {
                name,
                declaration: declaration.to_owned(),
                doc: doc.to_owned(),
            });
        }
        rest = after;
    }
    out
}

/// The version macros, from the workspace version (Cargo.toml `[workspace.package]`), so
/// the header, the crates, the wheel and `inboxlog_version()` tell one version (SPEC §13).
fn version_macros() -> String {
    format!(
        "\n/* The version of the library this header declares (semantic versioning: within one\n \
         * major version no function is removed and no declaration changes incompatibly).\n \
         * inboxlog_version() returns the version of the library actually loaded. */\n\
         #define INBOXLOG_VERSION_MAJOR {}\n\
         #define INBOXLOG_VERSION_MINOR {}\n\
         #define INBOXLOG_VERSION_PATCH {}\n\
         #define INBOXLOG_VERSION_STRING \"{}\"",
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
        env!("CARGO_PKG_VERSION"),
    )
}

#[test]
fn checked_in_header_is_fresh() {
    let ffi = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut config = cbindgen::Config::from_file(ffi.join("cbindgen.toml"))
        .expect("ffi/cbindgen.toml is readable and valid");
    config.after_includes = Some(version_macros());
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(ffi.join("src/lib.rs"))
        .generate()
        .expect("cbindgen can generate the header from ffi/src");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");
    let path = ffi.join("../include/inboxlog.h");
    if std::env::var_os("INBOXLOG_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("include/inboxlog.h is writable");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != generated {
        let line = checked_in
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || checked_in.lines().count().min(generated.lines().count()) + 1,
                |i| i + 1,
            );
        panic!(
            "include/inboxlog.h is stale (first difference at line {line}); regenerate it with\n    \
             INBOXLOG_BLESS=1 cargo test -p inboxlog-ffi --test header"
        );
    }
}

#[test]
fn header_text_is_c_not_rust() {
    let header = header();
    for (i, line) in header.lines().enumerate() {
        assert!(
            !line.contains('`'),
            "line {}: a backtick in C text: {line}",
            i + 1
        );
        assert!(
            !line.contains("# Safety") && !line.contains("[`"),
            "line {}: Rust doc syntax in C text: {line}",
            i + 1
        );
    }
}

#[test]
fn append_says_user_message_takes_any_object_with_an_optional_id() {
    // SPEC §1.2: a host's user/message carries any JSON object; only inbox messages
    // need an id. The header once said "a valid message" here.
    let header = header();
    let append = functions(&header)
        .into_iter()
        .find(|f| f.name == "inboxlog_session_append")
        .expect("inboxlog_session_append is declared");
    let words = append
        .doc
        .split_whitespace()
        .filter(|w| !w.starts_with("*") && *w != "/**");
    let doc = words.collect::<Vec<_>>().join(" ");
    assert!(!doc.contains("valid message"), "{doc}");
    assert!(
        doc.contains("user/message, whose data may be any JSON object")
            && doc.contains("\"id\" is optional"),
        "{doc}"
    );
}

#[test]
fn no_test_hook_in_the_header() {
    assert!(!header().contains("inboxlog_test"));
}

#[test]
fn every_function_states_ownership_and_threads() {
    let header = header();
    let declared = functions(&header);
    assert!(declared.len() > 40, "found {} functions", declared.len());
    for f in &declared {
        assert!(f.name.starts_with("inboxlog_"), "{}", f.declaration);
        for what in ["Ownership:", "Threads:"] {
            assert!(f.doc.contains(what), "{} does not state {what}", f.name);
        }
    }
}

#[test]
fn the_contents_list_every_function_in_declaration_order() {
    let header = header();
    let contents = &header[header
        .find("CONTENTS")
        .expect("the header opens with CONTENTS")..];
    let contents = &contents[..contents.find("LIFECYCLE").unwrap()];
    let listed: Vec<&str> = contents
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("inboxlog_") && *w != "inboxlog_status")
        .collect();
    let declared: Vec<String> = functions(&header).into_iter().map(|f| f.name).collect();
    assert_eq!(listed, declared);
}

#[test]
fn flags_are_bool_and_absent_numbers_are_int64_absent() {
    let header = header();
    for f in functions(&header) {
        let params = &f.declaration[f.declaration.find('(').unwrap() + 1..];
        for param in params.trim_end_matches(')').split(',').map(str::trim) {
            // The one int parameter is a status code, never a flag.
            if param.starts_with("int ") {
                assert_eq!(
                    (f.name.as_str(), param),
                    ("inboxlog_status_name", "int status"),
                    "a flag must be bool"
                );
            }
            // A number that may be absent is an int64_t, documented as INBOXLOG_ABSENT.
            if param.starts_with("int64_t") {
                assert!(
                    f.doc.contains("INBOXLOG_ABSENT"),
                    "{}: {param} without INBOXLOG_ABSENT",
                    f.name
                );
            }
        }
        assert!(
            !f.doc.contains("-1") || f.doc.contains("INBOXLOG_ABSENT"),
            "{}: absent spelled -1 instead of INBOXLOG_ABSENT",
            f.name
        );
        assert!(
            !f.doc.contains(", or 0 when") && !f.doc.contains("0 (absent)"),
            "{}: absent spelled 0",
            f.name
        );
    }
    assert!(header.contains("#define INBOXLOG_ABSENT -1"));
}

/// The header's status enum holds every kind of the core's one list (`ErrorKind::ALL`)
/// with its number, spelled as the kind's name in upper case, and below 100 nothing
/// else; each constant's name is what `inboxlog_status_name` says of its number.
#[test]
fn the_status_enum_is_the_cores_kinds_plus_the_c_only_statuses() {
    let header = header();
    let statuses: Vec<(String, i32)> = header
        .lines()
        .filter_map(|line| {
            let (name, rest) = line
                .trim()
                .strip_prefix("INBOXLOG_STATUS_")?
                .split_once(" = ")?;
            Some((name.to_owned(), rest.trim_end_matches(',').parse().ok()?))
        })
        .collect();
    let kinds: Vec<(String, i32)> = inboxlog_core::ErrorKind::ALL
        .iter()
        .map(|k| (k.name().to_uppercase(), k.code() as i32))
        .collect();
    let shared: Vec<(String, i32)> = statuses
        .iter()
        .filter(|(_, code)| (1..100).contains(code))
        .cloned()
        .collect();
    assert_eq!(
        shared, kinds,
        "INBOXLOG_STATUS_* from 1 to 99 against ErrorKind::ALL"
    );
    let c_only: Vec<&str> = statuses
        .iter()
        .filter(|(_, code)| !(1..100).contains(code))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        c_only,
        [
            "OK",
            "NULL_ARGUMENT",
            "INVALID_UTF8",
            "INVALID_JSON",
            "PANIC"
        ]
    );
    for (name, code) in &statuses {
        let said = inboxlog::inboxlog_status_name(*code);
        assert!(!said.is_null(), "no name for INBOXLOG_STATUS_{name}");
        // SAFETY: a non-NULL result is a static NUL-terminated string.
        let said = unsafe { std::ffi::CStr::from_ptr(said) }.to_str().unwrap();
        assert_eq!(said.to_uppercase(), *name);
    }
}

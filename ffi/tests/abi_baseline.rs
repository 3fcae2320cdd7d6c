//! The C ABI does not break within a major version (SPEC §13): `include/inboxlog.abi`,
//! checked in beside the header, lists every exported function with its declaration
//! (parameter names dropped) and every constant with its value, as of the version it
//! names. The header must keep each of them unchanged unless its major version
//! (`INBOXLOG_VERSION_MAJOR`) is higher than the baseline's; adding functions is fine
//! (a minor release) once the baseline lists them too.
//!
//! Regenerate the baseline after adding functions, or after a major bump, with
//! `make abi-baseline` (`INBOXLOG_BLESS_ABI=1 cargo test -p inboxlog-ffi --test
//! abi_baseline`); it refuses to record a break that has no major bump behind it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the baseline and the header are compared on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Abi {
    /// major, minor, patch
    version: (u64, u64, u64),
    /// `#define` constants and enum members: name → value.
    constants: BTreeMap<String, String>,
    /// Exported functions: name → normalized declaration.
    functions: BTreeMap<String, String>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The header without its comments, so doc text never reads as a declaration.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out.push_str(&rest[..b]);
                let end = rest[b..].find("*/").expect("comments are closed");
                rest = &rest[b + end + 2..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = &rest[l..];
                rest = &rest[rest.find('\n').unwrap_or(rest.len())..];
            }
            (None, None) => {
                out.push_str(rest);
                return out;
            }
            (Some(_), None) => unreachable!("the first arm takes a block comment alone"),
        }
    }
}

/// A C type spelled one way: single spaces, `*` bound to the type (`char **`).
fn normalize_type(t: &str) -> String {
    let spaced = t.replace('*', " * ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let mut out = String::new();
    for w in words {
        if w == "*" {
            if !out.ends_with('*') {
                out.push(' ');
            }
            out.push('*');
        } else {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(w);
        }
    }
    out
}

/// `int f(const char *name, bool x)` → `int f(const char *, bool)`: parameter names are
/// not part of the ABI.
fn normalize_declaration(decl: &str) -> (String, String) {
    let open = decl.find('(').expect("a declaration has parameters");
    let close = decl
        .rfind(')')
        .expect("a declaration closes its parameters");
    let head = normalize_type(&decl[..open]);
    let (ret, name) = head
        .rsplit_once([' ', '*'])
        .expect("a return type and a name");
    let ret = normalize_type(&head[..=ret.len()]);
    let params = &decl[open + 1..close];
    assert!(
        !params.contains('('),
        "{name}: function pointer parameters are not handled here"
    );
    let params: Vec<String> = params
        .split(',')
        .map(|p| {
            let p = normalize_type(p);
            if p == "void" {
                return p;
            }
            // Drop the trailing identifier: the parameter's name.
            let cut = p
                .rfind([' ', '*'])
                .unwrap_or_else(|| panic!("{name}: parameter {p:?} has no name"));
            normalize_type(&p[..=cut])
        })
        .collect();
    (
        name.to_owned(),
        format!("{ret} {name}({})", params.join(", ")).replace("* ", "*"),
    )
}

/// The ABI a header declares.
fn parse_header(header: &str) -> Abi {
    let text = strip_comments(header);
    let mut constants = BTreeMap::new();
    let mut version = [None; 3];
    for line in text.lines().map(str::trim) {
        let Some(def) = line.strip_prefix("#define ") else {
            continue;
        };
        let mut parts = def.splitn(2, ' ');
        let (name, value) = (parts.next().unwrap(), parts.next().map(str::trim));
        let Some(value) = value else { continue };
        match name {
            "INBOXLOG_VERSION_MAJOR" => version[0] = value.parse().ok(),
            "INBOXLOG_VERSION_MINOR" => version[1] = value.parse().ok(),
            "INBOXLOG_VERSION_PATCH" => version[2] = value.parse().ok(),
            "INBOXLOG_VERSION_STRING" => {}
            _ if name.starts_with("INBOXLOG_") => {
                constants.insert(name.to_owned(), value.to_owned());
            }
            _ => {}
        }
    }
    let mut functions = BTreeMap::new();
    for statement in text.split([';', '{', '}']) {
        let statement = statement.trim();
        // Enum members: `INBOXLOG_STATUS_OK = 0,` inside `typedef enum … { … }`.
        for member in statement.split(',') {
            if let Some((name, value)) = member.split_once('=') {
                let name = name.trim();
                if name.starts_with("INBOXLOG_") && !name.contains(' ') {
                    constants.insert(name.to_owned(), value.trim().to_owned());
                }
            }
        }
        let statement = statement
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join(" ");
        if statement.contains("inboxlog_")
            && statement.contains('(')
            && !statement.contains("typedef")
            && !statement.contains('"')
        {
            let (name, decl) = normalize_declaration(&statement);
            functions.insert(name, decl);
        }
    }
    let [Some(major), Some(minor), Some(patch)] = version else {
        panic!("the header defines INBOXLOG_VERSION_MAJOR, _MINOR and _PATCH");
    };
    Abi {
        version: (major, minor, patch),
        constants,
        functions,
    }
}

/// The baseline file's text for an ABI: one line per item, sorted, with a header.
fn print_baseline(abi: &Abi) -> String {
    let (major, minor, patch) = abi.version;
    let mut out = String::from(
        "# The C ABI of include/inboxlog.h: every exported function (parameter names\n\
         # dropped) and every constant. Within one major version none of these may go or\n\
         # change (ffi/tests/abi_baseline.rs). Regenerate with `make abi-baseline`.\n",
    );
    out.push_str(&format!("version {major}.{minor}.{patch}\n"));
    for (name, value) in &abi.constants {
        out.push_str(&format!("const {name} {value}\n"));
    }
    for decl in abi.functions.values() {
        out.push_str(&format!("fn {decl}\n"));
    }
    out
}

fn parse_baseline(text: &str) -> Abi {
    let mut version = None;
    let mut constants = BTreeMap::new();
    let mut functions = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let where_ = || format!("include/inboxlog.abi line {}: {line:?}", i + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (kind, rest) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("{}", where_()));
        match kind {
            "version" => {
                let parts: Vec<u64> = rest
                    .split('.')
                    .map(|p| p.parse().unwrap_or_else(|_| panic!("{}", where_())))
                    .collect();
                let [major, minor, patch] = parts[..] else {
                    panic!("{}", where_())
                };
                version = Some((major, minor, patch));
            }
            "const" => {
                let (name, value) = rest
                    .split_once(' ')
                    .unwrap_or_else(|| panic!("{}", where_()));
                constants.insert(name.to_owned(), value.to_owned());
            }
            "fn" => {
                // Already normalized (no parameter names): only the name is picked out.
                let head = rest.split('(').next().unwrap_or_default();
                let name = head.rsplit([' ', '*']).next().unwrap_or_default();
                assert!(name.starts_with("inboxlog_"), "{}", where_());
                functions.insert(name.to_owned(), rest.to_owned());
            }
            _ => panic!("{}: unknown kind", where_()),
        }
    }
    Abi {
        version: version.expect("include/inboxlog.abi names its version"),
        constants,
        functions,
    }
}

/// What `current` breaks of `baseline` without the major bump that would allow it.
fn breaks(baseline: &Abi, current: &Abi) -> Vec<String> {
    let (was, now) = (baseline.version, current.version);
    if now.0 > baseline.version.0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let v = |v: (u64, u64, u64)| format!("{}.{}.{}", v.0, v.1, v.2);
    if now < was {
        out.push(format!(
            "the header's version {} is older than the baseline's {}",
            v(now),
            v(was)
        ));
    }
    let without = format!(
        "without a major version bump (baseline {}, header {})",
        v(was),
        v(now)
    );
    for (name, decl) in &baseline.functions {
        match current.functions.get(name) {
            None => out.push(format!("function {name} was removed {without}")),
            Some(d) if d != decl => out.push(format!(
                "declaration of {name} changed {without}: was `{decl}`, now `{d}`"
            )),
            Some(_) => {}
        }
    }
    for (name, value) in &baseline.constants {
        match current.constants.get(name) {
            None => out.push(format!("constant {name} was removed {without}")),
            Some(x) if x != value => out.push(format!(
                "constant {name} changed {without}: was {value}, now {x}"
            )),
            Some(_) => {}
        }
    }
    out
}

fn header() -> Abi {
    parse_header(&read("include/inboxlog.h"))
}

fn baseline() -> Abi {
    parse_baseline(&read("include/inboxlog.abi"))
}

#[test]
fn the_header_keeps_every_declaration_of_the_baseline() {
    let current = header();
    if std::env::var_os("INBOXLOG_BLESS_ABI").is_some() {
        // The first baseline is the header's own.
        let baseline = std::fs::read_to_string(root().join("include/inboxlog.abi"))
            .map_or_else(|_| current.clone(), |text| parse_baseline(&text));
        let problems = breaks(&baseline, &current);
        assert!(
            problems.is_empty(),
            "refusing to record an ABI break without a major version bump:\n{}",
            problems.join("\n")
        );
        std::fs::write(
            root().join("include/inboxlog.abi"),
            print_baseline(&current),
        )
        .expect("include/inboxlog.abi is writable");
        return;
    }
    let problems = breaks(&baseline(), &current);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_baseline_lists_every_declaration_of_the_header() {
    if std::env::var_os("INBOXLOG_BLESS_ABI").is_some() {
        return;
    }
    let (baseline, current) = (baseline(), header());
    let missing: Vec<&String> = current
        .functions
        .keys()
        .chain(current.constants.keys())
        .filter(|n| !baseline.functions.contains_key(*n) && !baseline.constants.contains_key(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "include/inboxlog.abi lacks {missing:?}; record them with `make abi-baseline`"
    );
    assert_eq!(
        print_baseline(&baseline),
        read("include/inboxlog.abi"),
        "include/inboxlog.abi is not in the form `make abi-baseline` writes"
    );
    assert_eq!(
        baseline.version.0, current.version.0,
        "after a major version bump, record the new baseline with `make abi-baseline`"
    );
}

#[test]
fn the_header_macros_tell_the_workspace_version() {
    let v = |s: &str| s.parse::<u64>().unwrap();
    let cargo = (
        v(env!("CARGO_PKG_VERSION_MAJOR")),
        v(env!("CARGO_PKG_VERSION_MINOR")),
        v(env!("CARGO_PKG_VERSION_PATCH")),
    );
    assert_eq!(header().version, cargo);
    let text = read("include/inboxlog.h");
    let want = format!(
        "#define INBOXLOG_VERSION_STRING \"{}\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.contains(&want), "the header lacks {want}");
}

#[test]
fn the_baseline_holds_what_the_library_exports() {
    let baseline = baseline();
    for name in [
        "inboxlog_version",
        "inboxlog_string_free",
        "inboxlog_session_open_turn",
    ] {
        assert!(baseline.functions.contains_key(name), "{name}");
    }
    assert_eq!(
        baseline.functions["inboxlog_version"],
        "const char *inboxlog_version(void)"
    );
    assert_eq!(baseline.constants["INBOXLOG_STATUS_OK"], "0");
    assert_eq!(baseline.constants["INBOXLOG_ABSENT"], "-1");
    assert!(
        baseline.functions.len() > 40,
        "{}",
        baseline.functions.len()
    );
}

/// A branch that removes a function, or changes a declaration, fails the check; a major
/// bump lets the same change through. Shown on doctored copies of the header, against
/// the checked-in baseline.
#[test]
fn a_removed_or_changed_function_fails_without_a_major_bump() {
    let text = read("include/inboxlog.h");
    let baseline = baseline();
    assert_eq!(
        breaks(&baseline, &parse_header(&text)),
        Vec::<String>::new()
    );

    // Remove inboxlog_session_flush from the header.
    let decl = "int inboxlog_session_flush(struct inboxlog_session *session, char **error);";
    assert!(text.contains(decl), "the header declares {decl}");
    let removed = text.replace(decl, "");
    let problems = breaks(&baseline, &parse_header(&removed));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("function inboxlog_session_flush was removed without a major"),
        "{}",
        problems[0]
    );

    // Change one parameter's type.
    let changed = text.replace(
        decl,
        "int inboxlog_session_flush(const struct inboxlog_session *session, char **error);",
    );
    let problems = breaks(&baseline, &parse_header(&changed));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("declaration of inboxlog_session_flush changed"),
        "{}",
        problems[0]
    );

    // Renumber a status.
    let renumbered = text.replace("INBOXLOG_STATUS_LOCKED = 3", "INBOXLOG_STATUS_LOCKED = 30");
    let problems = breaks(&baseline, &parse_header(&renumbered));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("constant INBOXLOG_STATUS_LOCKED changed without a major")
            && problems[0].ends_with("was 3, now 30"),
        "{}",
        problems[0]
    );

    // Parameter names are not part of the ABI; a new function is a minor change.
    let renamed = text.replace(
        decl,
        "int inboxlog_session_flush(struct inboxlog_session *s, char **e);",
    );
    let added = format!("{text}\nint inboxlog_session_new_thing(struct inboxlog_session *s);\n");
    assert_eq!(
        breaks(&baseline, &parse_header(&renamed)),
        Vec::<String>::new()
    );
    assert_eq!(
        breaks(&baseline, &parse_header(&added)),
        Vec::<String>::new()
    );

    // With the major version bumped, the removal is allowed.
    let major = baseline.version.0;
    let bumped = removed.replace(
        &format!("#define INBOXLOG_VERSION_MAJOR {major}"),
        &format!("#define INBOXLOG_VERSION_MAJOR {}", major + 1),
    );
    assert_ne!(bumped, removed);
    assert_eq!(
        breaks(&baseline, &parse_header(&bumped)),
        Vec::<String>::new()
    );

    // A doctored baseline naming a function the header lacks fails the same way.
    let mut doctored = baseline.clone();
    doctored.functions.insert(
        "inboxlog_gone".to_owned(),
        "int inboxlog_gone(char **)".to_owned(),
    );
    let doctored = parse_baseline(&print_baseline(&doctored));
    let problems = breaks(&doctored, &parse_header(&text));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("function inboxlog_gone was removed"));
}

#[test]
fn declarations_are_normalized_without_parameter_names() {
    assert_eq!(
        normalize_declaration("const char *inboxlog_status_name(int status)"),
        (
            "inboxlog_status_name".to_owned(),
            "const char *inboxlog_status_name(int)".to_owned()
        )
    );
    assert_eq!(
        normalize_declaration(
            "int  inboxlog_x(const struct inboxlog_store *store,\n    char ** out_json, bool b)"
        )
        .1,
        "int inboxlog_x(const struct inboxlog_store *, char **, bool)"
    );
    assert_eq!(
        normalize_declaration("void inboxlog_y(void)").1,
        "void inboxlog_y(void)"
    );
}

//! The module graph of `core/src` against the layer table of docs/ARCHITECTURE.md
//! ("Layers inside the core"): every `crate::` path a module's code names (its `use`
//! items and paths written inline, tests and comments aside) must point at a module of a
//! lower layer, so no two modules import each other and no arrow runs upward; and the
//! table must name every module, once. A backend (`store::memory`, `store::jsonl`,
//! `store::postgres`) is a node of its own; the rest of `store/` is the contract.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The backends: each is a node of the graph apart from the contract `store`.
const BACKENDS: [&str; 3] = ["memory", "jsonl", "postgres"];

/// The one file that may name the backends from below them: `store/mod.rs` declares
/// them, re-exports their store types and dispatches to them in `store::open` (a new
/// backend is one arm there); nothing else in the contract's layer may.
const DISPATCH: &str = "store/mod.rs";

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The node a file belongs to: its top module, or `store::<backend>`; `None` for the
/// crate root (re-exports only).
fn node_of(relative: &Path) -> Option<String> {
    let parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_str().unwrap().trim_end_matches(".rs").to_owned())
        .collect();
    match parts.as_slice() {
        [root] if root == "lib" => None,
        [store, backend, ..] if store == "store" && BACKENDS.contains(&backend.as_str()) => {
            Some(format!("store::{backend}"))
        }
        [top, ..] => Some(top.clone()),
        [] => None,
    }
}

/// The module path of a file: `store/jsonl/mod.rs` is `store::jsonl`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_str().unwrap().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The node a path after `crate::` names (`store::jsonl::x` is `store::jsonl`).
fn node_of_path(path: &str) -> String {
    let mut parts = path.split("::");
    let top = parts.next().unwrap_or_default();
    match (top, parts.next()) {
        ("store", Some(backend)) if BACKENDS.contains(&backend) => format!("store::{backend}"),
        _ => top.to_owned(),
    }
}

/// The code of a file: without its `#[cfg(test)]` module (at the end of a file, by
/// this crate's style) and without comments.
fn code(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|line| match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path from the crate root that `code`, in module `module`, names: written
/// from `crate::`, `super::` or `self::`, inline (`crate::json::quote`) or as `use` trees
/// (`use crate::{error::Error, store::{Feed, Store}}` names `error::Error`,
/// `store::Feed` and `store::Store`).
fn crate_paths(code: &str, module: &[&str]) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some((i, keyword)) = ["crate::", "super::", "self::"]
        .iter()
        .filter_map(|k| rest.find(k).map(|i| (i, *k)))
        .min()
    {
        let before = rest[..i].chars().last();
        rest = &rest[i + keyword.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // `inboxlog_crate::`, `a::self::`, not a path of ours
        }
        let mut base: Vec<&str> = match keyword {
            "crate::" => Vec::new(),
            "super::" => module[..module.len().saturating_sub(1)].to_vec(),
            _ => module.to_vec(),
        };
        while let Some(more) = rest.strip_prefix("super::") {
            base.pop();
            rest = more;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let head = join(&base.join("::"), rest[..end].trim_end_matches(':'));
        rest = &rest[end..];
        if let Some(tree) = rest.strip_prefix('{') {
            let close = matching_brace(tree);
            expand(&head, &tree[..close], &mut paths);
            rest = &tree[close..];
        } else {
            paths.push(head);
        }
    }
    paths
}

/// The index of the `}` closing a tree whose `{` was just passed.
fn matching_brace(tree: &str) -> usize {
    let mut depth = 1;
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced use tree: {tree}")
}

/// The paths of a `use` tree's items, each prefixed with `prefix`.
fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let mut depth = 0;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&tree[start..]);
    for item in items.into_iter().map(str::trim).filter(|i| !i.is_empty()) {
        if let Some(open) = item.find('{') {
            let head = item[..open].trim_end_matches("::");
            let inner = &item[open + 1..item.rfind('}').unwrap()];
            expand(&join(prefix, head), inner, out);
        } else {
            let path = item.split(" as ").next().unwrap().trim();
            out.push(join(prefix, path));
        }
    }
}

fn join(prefix: &str, path: &str) -> String {
    if path.is_empty() {
        prefix.to_owned()
    } else if prefix.is_empty() {
        path.to_owned()
    } else {
        format!("{prefix}::{path}")
    }
}

/// Every node's arrows: which nodes it names, and in which file.
fn graph() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut graph: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&root).unwrap().to_owned();
        let Some(from) = node_of(&relative) else {
            continue;
        };
        let module = module_of(&relative);
        let module: Vec<&str> = module.iter().map(String::as_str).collect();
        let arrows = graph.entry(from.clone()).or_default();
        for path in crate_paths(&code(&fs::read_to_string(&file).unwrap()), &module) {
            assert!(
                path.starts_with(|c: char| c.is_ascii_lowercase()),
                "{} names crate::{path}: name the module it comes from, not a re-export of \
                 the crate root, so the graph sees the arrow",
                relative.display()
            );
            let to = node_of_path(&path);
            let dispatch = relative == Path::new(DISPATCH) && to.starts_with("store::");
            if to != from && !dispatch {
                arrows
                    .entry(to)
                    .or_default()
                    .insert(relative.display().to_string());
            }
        }
    }
    graph
}

/// The layer table of docs/ARCHITECTURE.md: node → layer number (the first column).
fn layers() -> BTreeMap<String, u32> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ARCHITECTURE.md");
    let doc = fs::read_to_string(doc).unwrap();
    let section = doc
        .split("\n### Layers inside the core\n")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a section \"Layers inside the core\"");
    let mut layers = BTreeMap::new();
    for row in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !row.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Ok(layer) = cells[1].parse::<u32>() else {
            continue; // the heading and its rule
        };
        for module in cells[2].split(',') {
            let module = module.trim().trim_matches('`');
            let before = layers.insert(module.to_owned(), layer);
            assert!(before.is_none(), "{module} is in the layer table twice");
        }
    }
    assert!(!layers.is_empty(), "the layer table has no rows");
    layers
}

#[test]
fn no_arrow_runs_upward_and_the_layer_table_is_the_real_graph() {
    let graph = graph();
    let layers = layers();
    let nodes: BTreeSet<&String> = graph.keys().collect();
    let listed: BTreeSet<&String> = layers.keys().collect();
    assert_eq!(
        nodes, listed,
        "docs/ARCHITECTURE.md's layer table must list exactly the modules of core/src"
    );
    let mut upward = Vec::new();
    for (from, arrows) in &graph {
        for (to, files) in arrows {
            if layers[to] >= layers[from] {
                upward.push(format!(
                    "{from} (layer {}) -> {to} (layer {}) in {files:?}",
                    layers[from], layers[to]
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "arrows that do not point to a lower layer:\n{}",
        upward.join("\n")
    );
}

/// Each layer holds a module that something above it needs, so the table is as fine as
/// the graph (no layer could be merged into the one above without an arrow inside it).
#[test]
fn every_layer_but_the_top_is_needed_by_one_above() {
    let graph = graph();
    let layers = layers();
    let top = *layers.values().max().unwrap();
    for layer in layers.values().copied().collect::<BTreeSet<u32>>() {
        if layer == top {
            continue;
        }
        let needed = graph.iter().any(|(from, arrows)| {
            layers[from] > layer && arrows.keys().any(|to| layers[to] == layer)
        });
        assert!(needed, "nothing above layer {layer} imports it");
    }
}

#[test]
fn the_parser_reads_use_trees_and_inline_paths() {
    let code = code(
        "use crate::error::{Error, Result};\nuse crate::{json, store::{self, Feed as F}};\n\
         // crate::fleet in a comment\nfn f() { crate::id::check(); }\n\
         use super::{Feed, x::Y};\nuse self::z::W;\n\
         #[cfg(test)]\nmod tests { use crate::session::Session; }\n",
    );
    let expected = [
        "error::Error",
        "error::Result",
        "json",
        "store::self",
        "store::Feed",
        "id::check",
        "store::Feed",
        "store::x::Y",
        "store::jsonl::z::W",
    ];
    assert_eq!(crate_paths(&code, &["store", "jsonl"]), expected);
    assert_eq!(
        module_of(Path::new("store/jsonl/mod.rs")),
        ["store", "jsonl"]
    );
    assert_eq!(node_of_path("store::jsonl::JsonlStore"), "store::jsonl");
    assert_eq!(node_of_path("store::Feed"), "store");
    assert_eq!(
        node_of(Path::new("store/postgres/url.rs")).unwrap(),
        "store::postgres"
    );
    assert_eq!(node_of(Path::new("store/backoff.rs")).unwrap(), "store");
    assert_eq!(node_of(Path::new("lib.rs")), None);
}

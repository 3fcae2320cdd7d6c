//! Model-based property test of compaction (ARCHITECTURE.md#compaction, SPEC §16).
//!
//! Random conversations (user messages, model responses calling tools, their results,
//! some long), compactions over random ranges, prunes of random nodes, input arriving in
//! the inbox, crashes with a compaction running (the handle lost, the session closed
//! and opened again) and plain reopens run against a session on the memory store and
//! on a JSONL store, and against a simple model written from the SPEC: the surface as a
//! list of nodes, the range rule by scanning it. After every operation both agree on the
//! surface (seqs in order), on whether the call was refused, and on the number of
//! events written; the inbox is never changed by compaction. At the end the log
//! verifies, needs no repair and reopens to the same surface.

use inboxlog::store::{self, Durability, MemoryStore, Store, StoreOptions};
use inboxlog::{Envelope, ErrorKind, Message, Session, SessionMeta, Summary, Target};
use proptest::prelude::*;
use serde_json::json;

#[derive(Clone, Debug)]
enum Op {
    User,
    /// A model response making this many tool calls.
    Assistant(u8),
    /// The result of the oldest call still waiting, long or not.
    Result(bool),
    /// A compaction over surface positions `(a % len, b % len)`.
    Compact(u8, u8),
    /// A prune of the node at surface position `a % len`.
    Prune(u8),
    Inbox,
    /// A compaction started over `(a % len, b % len)` and lost to a crash.
    Crash(u8, u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::User),
        3 => (0u8..3).prop_map(Op::Assistant),
        4 => any::<bool>().prop_map(Op::Result),
        4 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Compact(a, b)),
        2 => any::<u8>().prop_map(Op::Prune),
        1 => Just(Op::Inbox),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Crash(a, b)),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    User,
    Assistant(Vec<String>),
    Result { call: String, long: bool },
}

#[derive(Default)]
struct Model {
    /// The surface: (seq, what it is).
    surface: Vec<(u64, Kind)>,
    /// Calls made and not answered, oldest first.
    waiting: Vec<String>,
    next_seq: u64,
    calls: u64,
    inbox: usize,
}

impl Model {
    /// Whether the positions `from..=to` split a call from its result.
    fn splits(&self, from: usize, to: usize) -> bool {
        let inside = &self.surface[from..=to];
        let calls: Vec<&String> = inside
            .iter()
            .flat_map(|(_, k)| match k {
                Kind::Assistant(c) => c.iter().collect(),
                _ => Vec::new(),
            })
            .collect();
        let results: Vec<&String> = inside
            .iter()
            .filter_map(|(_, k)| match k {
                Kind::Result { call, .. } => Some(call),
                _ => None,
            })
            .collect();
        let outside_calls: Vec<&String> = self
            .surface
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < from || *i > to)
            .flat_map(|(_, (_, k))| match k {
                Kind::Assistant(c) => c.iter().collect(),
                _ => Vec::new(),
            })
            .collect();
        calls.iter().any(|c| !results.contains(c))
            || results
                .iter()
                .any(|r| outside_calls.contains(r) && !calls.contains(r))
    }

    fn seqs(&self) -> Vec<u64> {
        self.surface.iter().map(|(s, _)| *s).collect()
    }
}

fn assistant(calls: &[String]) -> String {
    let mut content = vec![json!({"type": "text", "text": "thinking"})];
    content.extend(
        calls
            .iter()
            .map(|c| json!({"type": "tool-call", "id": c, "name": "t", "arguments": "{}"})),
    );
    json!({"turn": 1, "step": 1, "message": {"id": "a", "role": "assistant", "content": content,
        "source": {"kind": "model", "provider": "p", "model": "m"}}})
    .to_string()
}

fn result(call: &str, long: bool) -> String {
    let text = if long {
        "ü".repeat(9000)
    } else {
        "ok".to_owned()
    };
    json!({"turn": 1, "step": 1, "message": {"id": format!("r-{call}"), "role": "user",
        "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": text}]}],
        "source": {"kind": "tool", "callId": call}}})
    .to_string()
}

fn count(store: &dyn Store) -> u64 {
    Session::inspect(store, "s").unwrap().1.len() as u64
}

fn run(store: &dyn Store, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut s = Session::create(store, "s", SessionMeta::default()).unwrap();
    let mut m = Model::default();
    for op in ops {
        let before = count(store);
        prop_assert_eq!(before, m.next_seq);
        match op {
            Op::User => {
                s.append(
                    "user/message",
                    r#"{"id":"u","role":"user","content":"hi there"}"#,
                    Envelope::default(),
                )
                .unwrap();
                m.surface.push((m.next_seq, Kind::User));
                m.next_seq += 1;
            }
            Op::Assistant(n) => {
                let calls: Vec<String> = (0..*n)
                    .map(|_| {
                        m.calls += 1;
                        format!("c{}", m.calls)
                    })
                    .collect();
                s.append("assistant/message", &assistant(&calls), Envelope::default())
                    .unwrap();
                m.surface.push((m.next_seq, Kind::Assistant(calls.clone())));
                m.waiting.extend(calls);
                m.next_seq += 1;
            }
            Op::Result(long) => {
                if m.waiting.is_empty() {
                    continue;
                }
                let call = m.waiting.remove(0);
                s.append("tool/result", &result(&call, *long), Envelope::default())
                    .unwrap();
                m.surface
                    .push((m.next_seq, Kind::Result { call, long: *long }));
                m.next_seq += 1;
            }
            Op::Compact(a, b) | Op::Crash(a, b) => {
                if m.surface.is_empty() {
                    continue;
                }
                let len = m.surface.len();
                let (from, to) = (*a as usize % len, *b as usize % len);
                let (start, end) = (m.surface[from].0, m.surface[to].0);
                let began = s.begin_compaction(start, end);
                if from > to || m.splits(from, to) {
                    let err = began.unwrap_err();
                    prop_assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err);
                    continue;
                }
                let c = began.unwrap();
                prop_assert_eq!(c.shadowed_seqs(), &m.seqs()[from..=to]);
                if matches!(op, Op::Crash(..)) {
                    std::mem::forget(c);
                    s.close().unwrap();
                    s = Session::open(store, "s").unwrap();
                    prop_assert!(s.open_report().repaired_compaction.is_some());
                    m.next_seq += 2;
                } else {
                    let done = c
                        .commit(&Summary::Text("summary".into()), "p", "m", None)
                        .unwrap();
                    prop_assert_eq!(done.message.seq(), m.next_seq + 2);
                    m.surface.splice(from..=to, [(m.next_seq + 2, Kind::User)]);
                    m.next_seq += 4;
                }
            }
            Op::Prune(a) => {
                if m.surface.is_empty() {
                    continue;
                }
                let at = *a as usize % m.surface.len();
                let (seq, kind) = m.surface[at].clone();
                let pruned = s.prune(seq);
                match kind {
                    Kind::Result { call, long: true } => {
                        let e = pruned.unwrap().unwrap();
                        prop_assert_eq!(e.seq(), m.next_seq + 1);
                        m.surface[at] = (e.seq(), Kind::Result { call, long: false });
                        m.next_seq += 2;
                    }
                    Kind::Result { long: false, .. } => prop_assert!(pruned.unwrap().is_none()),
                    _ => prop_assert_eq!(pruned.unwrap_err().kind(), ErrorKind::InvalidInput),
                }
            }
            Op::Inbox => {
                let id = format!("m{}", m.next_seq);
                let message = Message::from_json(&format!(r#"{{"id":"{id}"}}"#)).unwrap();
                s.inbox().append(Target::NextTurn, message).unwrap();
                m.inbox += 1;
                m.next_seq += 1;
            }
            Op::Reopen => {
                s.close().unwrap();
                s = Session::open(store, "s").unwrap();
                prop_assert_eq!(s.open_report().repaired_compaction.clone(), None);
            }
        }
        prop_assert_eq!(s.surface().unwrap(), m.seqs(), "after {:?}", op);
        prop_assert_eq!(count(store), m.next_seq, "after {:?}", op);
        prop_assert_eq!(s.with_inbox(|i| i.len(Target::NextTurn)).unwrap(), m.inbox);
        prop_assert_eq!(s.running_compaction().unwrap(), None);
    }
    s.close().unwrap();
    let report = Session::verify(store, "s").unwrap();
    prop_assert!(!report.needs_repair(), "{:?}", report);
    prop_assert!(report.off_surface.is_empty(), "{:?}", report.off_surface);
    prop_assert_eq!(Session::read_surface(store, "s").unwrap().nodes, m.seqs());
    let s = Session::open(store, "s").unwrap();
    prop_assert_eq!(s.surface().unwrap(), m.seqs());
    prop_assert_eq!(s.with_inbox(|i| i.len(Target::NextTurn)).unwrap(), m.inbox);
    s.close().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn compactions_and_prunes_match_the_model_in_memory(ops in prop::collection::vec(op(), 1..60)) {
        run(&MemoryStore::new(), &ops)?;
    }

    #[test]
    fn compactions_and_prunes_match_the_model_on_jsonl(ops in prop::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs");
        let store = store::open(path.to_str().unwrap(), &StoreOptions::durability(Durability::None)).unwrap();
        run(&*store, &ops)?;
    }
}

//! Model-based property test of posting and editing pending input from anywhere
//! (SPEC §11.1, §11.3; ARCHITECTURE.md#posting).
//!
//! Random interleavings of posts, `remove_pending` and `replace_pending` from several
//! posters (each a store handle of its own, as another worker holds), the owner's local
//! `append`/`remove`/`replace`, turns that claim input, `receive` and reopening, run
//! against a session and against a reference model written from the SPEC: two `Vec`
//! lists and a mailbox applied in delivery order at each take-in (a post inserts or is
//! rejected as a duplicate; an edit applies as the local `remove`/`replace`, or is
//! rejected `not_found` / `duplicate_message`; a claim takes what it finds). After
//! every operation the lists agree; at the end the log's `agent/inbox/rejected`
//! events match the model's, in order and with their post ids, every acknowledged post
//! is in the log exactly once (nothing applied twice), and the reopened log replays to
//! the same inbox and takes nothing in again. The posts here are made one at a time,
//! so every store's delivery order is the posting order.

use std::collections::HashSet;

mod pg_common;

use inboxlog::store::{self, Durability, MemoryStore, Store, StoreOptions};
use inboxlog::{Decided, Decision, ErrorKind, Event, Message, Session, SessionMeta, Target};
use proptest::prelude::*;

/// A message from a small pool: `(id index, variant)`, so ids repeat often.
type Pick = (u8, u8);

const IDS: u8 = 5;
const POSTERS: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    Post(usize, Target, Pick),
    RemovePending(usize, u8),
    ReplacePending(usize, u8, Pick),
    Append(Target, Pick),
    Remove(u8),
    Replace(u8, Pick),
    Receive,
    /// One turn: `propose_step` takes posts in and claims, then the step and the turn end.
    Turn,
    /// The owner closes and opens again (taking posts in at open).
    Reopen,
}

fn id_of(i: u8) -> String {
    format!("m{i}")
}

fn msg((i, v): Pick) -> Message {
    Message::from_json(&format!(r#"{{"id":"{}","v":{v}}}"#, id_of(i))).unwrap()
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![Just(Target::NextTurn), Just(Target::NextStep)]
}

fn pick() -> impl Strategy<Value = Pick> {
    (0..IDS, 0..3u8)
}

fn op() -> impl Strategy<Value = Op> {
    let poster = 0..POSTERS;
    prop_oneof![
        4 => (poster.clone(), target(), pick()).prop_map(|(p, t, m)| Op::Post(p, t, m)),
        3 => (poster.clone(), 0..IDS).prop_map(|(p, i)| Op::RemovePending(p, i)),
        3 => (poster, 0..IDS, pick()).prop_map(|(p, i, m)| Op::ReplacePending(p, i, m)),
        1 => (target(), pick()).prop_map(|(t, m)| Op::Append(t, m)),
        1 => (0..IDS).prop_map(Op::Remove),
        1 => (0..IDS, pick()).prop_map(|(i, m)| Op::Replace(i, m)),
        2 => Just(Op::Receive),
        2 => Just(Op::Turn),
        1 => Just(Op::Reopen),
    ]
}

/// What waits in the model's mailbox.
#[derive(Clone, Debug)]
enum Mail {
    Post(Target, Message),
    Remove(String),
    Replace(String, Message),
}

/// A rejection as the log records it: `(what, id, reason kind, post id)`, `what` being
/// `message` for a post, or the edit's op.
type Rejection = (String, String, String, String);

#[derive(Default)]
struct Model {
    next_turn: Vec<Message>,
    next_step: Vec<Message>,
    mailbox: Vec<(String, Mail)>,
    rejected: Vec<Rejection>,
    posts: Vec<String>,
}

impl Model {
    fn list(&mut self, t: Target) -> &mut Vec<Message> {
        match t {
            Target::NextTurn => &mut self.next_turn,
            Target::NextStep => &mut self.next_step,
        }
    }

    /// Where `id` waits: `next-turn` first, then `next-step`.
    fn find(&self, id: &str) -> Option<(Target, usize)> {
        let at = |l: &[Message]| l.iter().position(|m| m.id() == id);
        at(&self.next_turn)
            .map(|i| (Target::NextTurn, i))
            .or_else(|| at(&self.next_step).map(|i| (Target::NextStep, i)))
    }

    /// The local `replace(id, m)` / `remove(id)` (`m` `None`): `Err(kind)` when it
    /// changes nothing.
    fn edit(&mut self, id: &str, m: Option<Message>) -> Result<(), &'static str> {
        let Some((t, i)) = self.find(id) else {
            return Err("not_found");
        };
        if let Some(m) = &m
            && m.id() != id
            && self.find(m.id()).is_some()
        {
            return Err("duplicate_message");
        }
        let list = self.list(t);
        list.remove(i);
        if let Some(m) = m {
            list.insert(i, m);
        }
        Ok(())
    }

    fn take_in(&mut self) {
        for (post, mail) in std::mem::take(&mut self.mailbox) {
            let rejected = match &mail {
                Mail::Post(t, m) => {
                    if self.find(m.id()).is_some() {
                        Some(("message", m.id().to_owned(), "duplicate_message"))
                    } else {
                        self.list(*t).push(m.clone());
                        None
                    }
                }
                Mail::Remove(id) => self.edit(id, None).err().map(|k| ("remove", id.clone(), k)),
                Mail::Replace(id, m) => self
                    .edit(id, Some(m.clone()))
                    .err()
                    .map(|k| ("replace", id.clone(), k)),
            };
            if let Some((what, id, kind)) = rejected {
                self.rejected
                    .push((what.to_owned(), id, kind.to_owned(), post));
            }
        }
    }

    /// `propose_step`'s claim: all of `next-step`, then the first of `next-turn`.
    fn claim(&mut self) -> Vec<Message> {
        let mut claimed: Vec<Message> = self.next_step.drain(..).collect();
        if !self.next_turn.is_empty() {
            claimed.push(self.next_turn.remove(0));
        }
        claimed
    }
}

/// The log's rejections, in order.
fn rejections(events: &[Event]) -> Vec<Rejection> {
    events
        .iter()
        .filter(|e| e.ty() == "agent/inbox/rejected")
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(e.data()).unwrap();
            let s = |x: &serde_json::Value| x.as_str().unwrap().to_owned();
            let (what, id) = if v["edit"].is_null() {
                ("message".to_owned(), s(&v["message"]["id"]))
            } else {
                (s(&v["edit"]["op"]), s(&v["edit"]["id"]))
            };
            (what, id, s(&v["reason"]["kind"]), s(&v["post"]))
        })
        .collect()
}

/// The post ids the log holds, one per event that carries one.
fn posts_held(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.ty() == "agent/inbox/spliced" || e.ty() == "agent/inbox/rejected")
        .filter_map(|e| {
            let v: serde_json::Value = serde_json::from_str(e.data()).unwrap();
            v["post"].as_str().map(str::to_owned)
        })
        .collect()
}

fn check(
    owner: &dyn Store,
    posters: &[Box<dyn Store>],
    ops: &[Op],
) -> std::result::Result<(), TestCaseError> {
    let mut model = Model::default();
    let mut s = Session::create(owner, "s", SessionMeta::default()).unwrap();
    for (n, op) in ops.iter().enumerate() {
        match op {
            Op::Post(p, t, m) => {
                let post = posters[*p].post("s", *t, &msg(*m)).unwrap();
                model.mailbox.push((post.clone(), Mail::Post(*t, msg(*m))));
                model.posts.push(post);
            }
            Op::RemovePending(p, i) => {
                let post = posters[*p].remove_pending("s", &id_of(*i)).unwrap();
                model.mailbox.push((post.clone(), Mail::Remove(id_of(*i))));
                model.posts.push(post);
            }
            Op::ReplacePending(p, i, m) => {
                let post = posters[*p]
                    .replace_pending("s", &id_of(*i), &msg(*m))
                    .unwrap();
                model
                    .mailbox
                    .push((post.clone(), Mail::Replace(id_of(*i), msg(*m))));
                model.posts.push(post);
            }
            Op::Append(t, m) => {
                let got = s.inbox().append(*t, msg(*m));
                if model.find(&id_of(m.0)).is_some() {
                    prop_assert_eq!(got.unwrap_err().kind(), ErrorKind::DuplicateMessage);
                } else {
                    got.unwrap();
                    model.list(*t).push(msg(*m));
                }
            }
            Op::Remove(i) => {
                let got = s.inbox().remove(&id_of(*i)).unwrap();
                prop_assert_eq!(got, model.edit(&id_of(*i), None).is_ok());
            }
            Op::Replace(i, m) => {
                let got = s.inbox().replace(&id_of(*i), msg(*m));
                match model.edit(&id_of(*i), Some(msg(*m))) {
                    Ok(()) => prop_assert!(got.unwrap()),
                    Err("not_found") => prop_assert!(!got.unwrap()),
                    Err(_) => {
                        prop_assert_eq!(got.unwrap_err().kind(), ErrorKind::DuplicateMessage);
                    }
                }
            }
            Op::Receive => {
                let expected = model.mailbox.len();
                model.take_in();
                prop_assert_eq!(s.receive().unwrap(), expected);
            }
            Op::Turn => {
                s.open_turn().unwrap();
                let p = s.propose_step().unwrap();
                model.take_in();
                prop_assert_eq!(&p.messages, &model.claim(), "op {}", n);
                match s.decide(Decision::Enter(p.messages)).unwrap() {
                    Decided::Step { .. } => {
                        prop_assert!(!s.end_step(inboxlog::StepOutcome::Completed).unwrap());
                        s.close_turn().unwrap();
                    }
                    Decided::TurnEnded { .. } => {}
                }
            }
            Op::Reopen => {
                drop(s);
                s = Session::open(owner, "s").unwrap();
                model.take_in();
            }
        }
        prop_assert_eq!(
            &s.inbox().next_turn().unwrap(),
            &model.next_turn,
            "op {}",
            n
        );
        prop_assert_eq!(
            &s.inbox().next_step().unwrap(),
            &model.next_step,
            "op {}",
            n
        );
    }
    s.receive().unwrap();
    model.take_in();
    let events = s.events(0).unwrap();
    prop_assert_eq!(rejections(&events), model.rejected.clone());
    // Every acknowledged post and edit is in the log exactly once.
    let held = posts_held(&events);
    prop_assert_eq!(held.iter().collect::<HashSet<_>>().len(), held.len());
    prop_assert_eq!(
        held.iter().collect::<HashSet<_>>(),
        model.posts.iter().collect::<HashSet<_>>()
    );
    // Replay rebuilds the same inbox and takes nothing in twice.
    drop(s);
    let s = Session::open(owner, "s").unwrap();
    prop_assert_eq!(s.receive().unwrap(), 0);
    prop_assert_eq!(s.events(0).unwrap().len(), events.len());
    prop_assert_eq!(&s.inbox().next_turn().unwrap(), &model.next_turn);
    prop_assert_eq!(&s.inbox().next_step().unwrap(), &model.next_step);
    drop(s);
    owner.delete("s").unwrap();
    Ok(())
}

fn cases(var: &str, default: u32) -> u32 {
    std::env::var(var)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

proptest! {
    // PROPTEST_CASES overrides the count for a longer hunt.
    #![proptest_config(ProptestConfig {
        cases: cases("PROPTEST_CASES", 256),
        max_shrink_iters: 4096,
        ..ProptestConfig::default()
    })]

    #[test]
    fn posts_and_edits_on_memory_match_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let owner = MemoryStore::new();
        let posters: Vec<Box<dyn Store>> =
            (0..POSTERS).map(|_| Box::new(owner.clone()) as Box<dyn Store>).collect();
        check(&owner, &posters, &ops)?;
    }
}

proptest! {
    // Every post is a file written and renamed: fewer cases (INBOXLOG_JSONL_PROPTEST_CASES).
    #![proptest_config(ProptestConfig {
        cases: cases("INBOXLOG_JSONL_PROPTEST_CASES", 32),
        max_shrink_iters: 256,
        ..ProptestConfig::default()
    })]

    #[test]
    fn posts_and_edits_on_jsonl_match_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap();
        let options = StoreOptions::durability(Durability::None);
        let owner = store::open(path, &options).unwrap();
        let posters: Vec<Box<dyn Store>> =
            (0..POSTERS).map(|_| store::open(path, &options).unwrap()).collect();
        check(&*owner, &posters, &ops)?;
    }
}

proptest! {
    // Every call is a round trip to the server (INBOXLOG_PG_PROPTEST_CASES overrides the 12).
    #![proptest_config(ProptestConfig {
        cases: cases("INBOXLOG_PG_PROPTEST_CASES", 12),
        max_shrink_iters: 128,
        ..ProptestConfig::default()
    })]

    #[test]
    fn posts_and_edits_on_postgres_match_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let Some(schema) = pg_common::Schema::new() else {
            eprintln!("SKIPPED: no PostgreSQL server at INBOXLOG_TEST_PG");
            return Ok(());
        };
        let mut options = StoreOptions::durability(Durability::None);
        options.schema = Some(schema.name.clone());
        let url = pg_common::url();
        let owner = store::open(&url, &options).unwrap();
        let posters: Vec<Box<dyn Store>> =
            (0..POSTERS).map(|_| store::open(&url, &options).unwrap()).collect();
        check(&*owner, &posters, &ops)?;
    }
}

//! Reading what a stored log holds without owning it (`Session::peek`,
//! ARCHITECTURE.md#checkpoints-and-reading-without-owning): the same state as the writer
//! holds, while the writer holds it; from the checkpoint, reading only what follows it;
//! a torn tail measured and left; a turn left open reported, not repaired.

mod jsonl_common;

use std::fs::{self, OpenOptions as FileOptions};
use std::io::Write;

use inboxlog::checkpoint::{Checkpoint, Replay};
use inboxlog::store::{Durability, JsonlStore, MemoryStore, Store};
use inboxlog::{
    Baseline, Decision, ErrorKind, Event, Header, Result, Session, SessionMeta, Target,
};
use jsonl_common::{assert_err, msg};

/// A replay that resumes from a checkpoint, counting what it is handed.
#[derive(Default)]
struct Counted {
    checkpoints: u64,
    visits: u64,
}

impl Replay for Counted {
    fn resumes(&self) -> bool {
        true
    }

    fn checkpoint(&mut self, _: Checkpoint) -> Result<()> {
        self.checkpoints += 1;
        Ok(())
    }

    fn visit(&mut self, _: &Header, _: &Event) -> Result<()> {
        self.visits += 1;
        Ok(())
    }
}

/// A session with pending input in both lists and `turns` turns of host events behind.
fn write(store: &dyn Store, id: &str, turns: u64) -> Session {
    let s = Session::create(store, id, SessionMeta::default()).unwrap();
    for turn in 0..turns {
        s.inbox()
            .append(Target::NextTurn, msg(&format!("t{turn}")))
            .unwrap();
        s.open_turn().unwrap();
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        s.end_step(inboxlog::StepOutcome::Completed).unwrap();
        s.close_turn().unwrap();
    }
    s.inbox().append(Target::NextTurn, msg("waiting")).unwrap();
    s.inbox().append(Target::NextStep, msg("steer")).unwrap();
    s
}

fn ids(baseline: &Baseline) -> (Vec<String>, Vec<String>) {
    let ids = |list: &[inboxlog::Message]| list.iter().map(|m| m.id().to_owned()).collect();
    (ids(&baseline.next_turn), ids(&baseline.next_step))
}

fn stores(dir: &std::path::Path) -> Vec<Box<dyn Store>> {
    vec![
        Box::new(MemoryStore::new()),
        Box::new(JsonlStore::open(dir, Durability::Sync).unwrap()),
    ]
}

#[test]
fn a_peek_reads_what_the_writer_holds_while_it_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(dir.path()) {
        let s = write(store.as_ref(), "s", 3);
        s.open_turn().unwrap();
        let seen = Session::peek(store.as_ref(), "s").unwrap();
        assert_eq!(seen.baseline, s.baseline(None).unwrap());
        assert_eq!(
            ids(&seen.baseline),
            (vec!["waiting".to_owned()], vec!["steer".to_owned()])
        );
        assert_eq!(seen.events, s.last_seq().unwrap().unwrap() + 1);
        assert_eq!((seen.open_turn, seen.open_step), (Some(4), None));
        assert_eq!(seen.header, *s.header());
        // The writer was not disturbed: it goes on.
        let p = s.propose_step().unwrap();
        s.decide(Decision::Enter(p.messages)).unwrap();
        s.close().unwrap();
        // Left open by its writer: reported open, nothing repaired.
        let seen = Session::peek(store.as_ref(), "s").unwrap();
        assert_eq!((seen.open_turn, seen.open_step), (Some(4), Some(1)));
        assert_err(
            Session::peek(store.as_ref(), "nope"),
            ErrorKind::NotFound,
            &["nope"],
        );
        assert_err(
            Session::peek(store.as_ref(), "../x"),
            ErrorKind::InvalidInput,
            &[],
        );
    }
}

#[test]
fn a_peek_of_a_closed_jsonl_log_reads_only_what_follows_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::None).unwrap();
    let s = write(&store, "long", 200);
    let end = s.baseline(None).unwrap();
    s.close().unwrap(); // closing writes the checkpoint
    let mut counted = Counted::default();
    store.peek("long", &mut counted).unwrap();
    assert_eq!((counted.checkpoints, counted.visits), (1, 0));
    assert_eq!(Session::peek(&store, "long").unwrap().baseline, end);

    // Events after the checkpoint are read, and only they.
    let s = Session::open(&store, "long").unwrap();
    s.inbox().append(Target::NextStep, msg("late")).unwrap();
    let mut counted = Counted::default();
    store.peek("long", &mut counted).unwrap();
    assert_eq!((counted.checkpoints, counted.visits), (1, 1));
    assert_eq!(
        Session::peek(&store, "long").unwrap().baseline,
        s.baseline(None).unwrap()
    );

    // The default, on a store that keeps no checkpoint, reads every event.
    let memory = MemoryStore::new();
    let m = write(&memory, "long", 200);
    let mut counted = Counted::default();
    memory.peek("long", &mut counted).unwrap();
    assert_eq!(counted.checkpoints, 0);
    assert_eq!(counted.visits, m.last_seq().unwrap().unwrap() + 1);
}

#[test]
fn a_torn_tail_is_measured_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path(), Durability::Sync).unwrap();
    let s = write(&store, "torn", 2);
    let end = s.baseline(None).unwrap();
    s.close().unwrap();
    let path = dir.path().join("torn.jsonl");
    FileOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"{\"type\":\"host/half")
        .unwrap();
    let before = fs::read(&path).unwrap();
    let seen = Session::peek(&store, "torn").unwrap();
    assert_eq!(seen.torn_bytes, 18);
    assert_eq!(seen.baseline, end);
    assert_eq!(fs::read(&path).unwrap(), before);
}

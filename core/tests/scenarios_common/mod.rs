//! Helpers shared by the scenario tests (`scenarios_*.rs`): sessions on the memory
//! store, notification sinks, hand-made logs and a store that serves a fixed log.
#![allow(dead_code)]

use inboxlog::ToJson as _;
use std::sync::{Arc, Mutex};

use inboxlog::store::{
    Feed, LogWriter, Mailbox, MemoryStore, OpenOptions, Opened, Post, Posted, Store, Verified,
};
use inboxlog::{ErrorKind, Event, Header, Message, Session, SessionMeta};

/// A message with `id` and some content.
pub fn m(id: &str) -> Message {
    Message::from_json(&format!(r#"{{"id":"{id}","content":"{id}!"}}"#)).unwrap()
}

/// A new session `id` on the memory store.
pub fn session(store: &MemoryStore, id: &str) -> Session {
    Session::create(store, id, SessionMeta::default()).unwrap()
}

/// `(type, data)` of the events with `seq >= since`.
pub fn written(s: &Session, since: u64) -> Vec<(String, String)> {
    s.events(since)
        .unwrap()
        .iter()
        .map(|e| (e.ty().to_owned(), e.data().to_owned()))
        .collect()
}

/// The seq the next event will get.
pub fn next_seq(s: &Session) -> u64 {
    s.last_seq().unwrap().map_or(0, |q| q + 1)
}

/// The ids of `ms`, in order.
pub fn ids(ms: &[Message]) -> Vec<String> {
    ms.iter().map(|m| m.id().to_owned()).collect()
}

/// The ids in `(next-turn, next-step)`.
pub fn lists(s: &Session) -> (Vec<String>, Vec<String>) {
    (
        ids(&s.inbox().next_turn().unwrap()),
        ids(&s.inbox().next_step().unwrap()),
    )
}

/// An owned `(type, data)` pair.
pub fn pair(ty: &str, data: &str) -> (String, String) {
    (ty.to_owned(), data.to_owned())
}

/// The type of a durable inbox splice.
pub const SPLICED: &str = "agent/inbox/spliced";

/// Notifications recorded as JSON text.
pub type Sink = Arc<Mutex<Vec<String>>>;

/// Registers an inbox observer that records each notification's JSON.
pub fn record_inbox(s: &Session) -> Sink {
    let sink = Sink::default();
    let out = sink.clone();
    s.on_inbox(move |n| {
        out.lock().unwrap().push(n.to_json());
        Ok(())
    });
    sink
}

/// The notifications recorded so far, emptying the sink.
pub fn taken(sink: &Sink) -> Vec<String> {
    std::mem::take(&mut *sink.lock().unwrap())
}

// ---------------------------------------------------------------------------------
// A store serving a hand-made log, and the events of such logs.

/// A store serving a fixed, hand-made log (the memory store only ever holds logs
/// written through a session, which are valid by construction).
pub struct FixedStore {
    header: Header,
    events: Vec<Event>,
}

/// A writer that keeps appended events in memory.
pub struct VecWriter(Vec<Event>);

impl LogWriter for VecWriter {
    fn append(&mut self, events: &[Event]) -> inboxlog::Result<()> {
        self.0.extend_from_slice(events);
        Ok(())
    }

    fn read(&self, since: u64) -> inboxlog::Result<Vec<Event>> {
        Ok(self.0[(since as usize).min(self.0.len())..].to_vec())
    }

    fn flush(&mut self) -> inboxlog::Result<()> {
        Ok(())
    }
}

impl Store for FixedStore {
    fn create(&self, header: &Header, _seed: &[Event]) -> inboxlog::Result<Box<dyn LogWriter>> {
        Err(inboxlog::Error::new(
            ErrorKind::AlreadyExists,
            format!("session \"{}\" already exists", header.id),
        ))
    }

    fn open(
        &self,
        _id: &str,
        _options: &OpenOptions,
        replay: &mut dyn inboxlog::store::Replay,
    ) -> inboxlog::Result<Opened> {
        for event in &self.events {
            replay.visit(&self.header, event)?;
        }
        Ok(Opened {
            header: self.header.clone(),
            writer: Box::new(VecWriter(self.events.clone())),
            torn_bytes: 0,
        })
    }

    fn verify(
        &self,
        _id: &str,
        replay: &mut dyn inboxlog::store::Replay,
    ) -> inboxlog::Result<Verified> {
        for event in &self.events {
            replay.visit(&self.header, event)?;
        }
        Ok(Verified {
            header: self.header.clone(),
            torn_bytes: 0,
        })
    }

    fn inspect(&self, _id: &str) -> inboxlog::Result<(Header, Vec<Event>)> {
        Ok((self.header.clone(), self.events.clone()))
    }

    fn list(&self) -> inboxlog::Result<Vec<Header>> {
        Ok(vec![self.header.clone()])
    }

    fn delete(&self, id: &str) -> inboxlog::Result<()> {
        Err(inboxlog::Error::new(
            ErrorKind::Locked,
            format!("session \"{id}\" is fixed and cannot be deleted"),
        ))
    }

    fn deliver(&self, id: &str, _: &Post) -> inboxlog::Result<String> {
        Err(inboxlog::Error::new(
            ErrorKind::Locked,
            format!("session \"{id}\" is fixed and takes no posts"),
        ))
    }

    fn mailbox(&self, _id: &str) -> inboxlog::Result<Box<dyn Mailbox>> {
        Ok(Box::new(NoPosts))
    }

    fn follow(&self, _id: &str) -> inboxlog::Result<Box<dyn Feed>> {
        Ok(Box::new(FixedFeed(self.events.clone())))
    }
}

/// The empty mailbox of a [`FixedStore`].
struct NoPosts;

impl Mailbox for NoPosts {
    fn pending(&mut self) -> inboxlog::Result<Vec<Posted>> {
        Ok(Vec::new())
    }

    fn settle(&mut self, _posts: &[String]) -> inboxlog::Result<()> {
        Ok(())
    }
}

/// A feed of a [`FixedStore`]'s events, which never grow.
struct FixedFeed(Vec<Event>);

impl Feed for FixedFeed {
    fn poll(&mut self, from: u64, _timeout: std::time::Duration) -> inboxlog::Result<Vec<Event>> {
        Ok(self.0[(from as usize).min(self.0.len())..].to_vec())
    }
}

/// Events from `(type, data)` pairs, seq and time counting from 0.
pub fn log(list: &[(&str, &str)]) -> Vec<Event> {
    list.iter()
        .enumerate()
        .map(|(seq, (ty, data))| {
            Event::from_json(&format!(
                r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}}}"#,
                1_000 + seq
            ))
            .unwrap()
        })
        .collect()
}

/// A store serving `events` as the log of session "fixed".
pub fn fixed(events: Vec<Event>) -> FixedStore {
    FixedStore {
        header: Header::new("fixed", 0, SessionMeta::default()).unwrap(),
        events,
    }
}
/// Splices of a hand-made log: insert "a", claim it, cancel it, replace it by "b".
pub const INSERT_A: (&str, &str) = (
    SPLICED,
    r#"{"target":"next-turn","start":0,"inserted":[{"id":"a"}]}"#,
);
pub const CLAIM: (&str, &str) = (
    SPLICED,
    r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}"#,
);
pub const CANCEL: (&str, &str) = (
    SPLICED,
    r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"}"#,
);
pub const REPLACE: (&str, &str) = (
    SPLICED,
    r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[{"id":"b"}],"outcome":"canceled"}"#,
);

/// `turn/start` of `turn`.
pub fn ts(turn: u64) -> (String, String) {
    pair("turn/start", &format!(r#"{{"turn":{turn}}}"#))
}

/// `step/start` or `step/end` (`ty`) of `turn` and `step`.
pub fn step(ty: &str, turn: u64, step: u64) -> (String, String) {
    pair(ty, &format!(r#"{{"turn":{turn},"step":{step}}}"#))
}

/// `turn/end` of `turn` with `reason` (JSON).
pub fn te(turn: u64, reason: &str) -> (String, String) {
    pair(
        "turn/end",
        &format!(r#"{{"turn":{turn},"reason":{reason}}}"#),
    )
}

/// An owned copy of a borrowed pair.
pub fn own(p: (&str, &str)) -> (String, String) {
    pair(p.0, p.1)
}

/// A stepped turn `n` that claims one message: 5 events.
pub fn stepped_turn(n: u64, reason: &str) -> Vec<(String, String)> {
    vec![
        ts(n),
        own(CLAIM),
        step("step/start", n, 1),
        step("step/end", n, 1),
        te(n, reason),
    ]
}

/// Turn end reasons.
pub const COMPLETED: &str = r#"{"kind":"completed"}"#;
pub const ERROR: &str = r#"{"kind":"error","error":{"message":"x","code":"E"}}"#;
pub const ABORTED: &str = r#"{"kind":"aborted","reason":{"kind":"user"}}"#;

/// Events from owned `(type, data)` pairs, seq and time counting from 0.
pub fn owned_log(list: &[(String, String)]) -> Vec<Event> {
    let borrowed: Vec<(&str, &str)> = list.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    log(&borrowed)
}

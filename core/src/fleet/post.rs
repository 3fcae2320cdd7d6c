//! Taking posts in (ARCHITECTURE.md#posting): what a session's writer does with the posts waiting
//! in its mailbox.
//!
//! Each post becomes one transaction: an ordinary inserting `agent/inbox/spliced`
//! whose data carries `"post":"<id>"`, or, when the message cannot be taken in (not a
//! valid message, its id already pending, too large for the log), one
//! `agent/inbox/rejected` event naming the reason. An edit (SPEC §11.3) becomes the
//! splice of the local `remove`/`replace` (`"outcome":"canceled"`), carrying
//! `"post"` too, or, when its message is no longer pending (a claim came first, it was
//! removed, it never was) or its replacement's id is pending already, one
//! `agent/inbox/rejected` event recording the edit. Posts and edits are taken in in
//! one sequence, so a poster's post and a later edit of it apply in that order. The session keeps the id of every
//! post its log holds ([`Intake::known`], read back on open), so a post still pending
//! after a crash between its write and its settle is settled, never written twice.
//! Posts are settled only after the log is durable (`flush`, the barrier of the
//! `batched` mode).

use std::collections::HashSet;
use std::sync::LazyLock;

use serde::Deserialize;

use crate::edit::{Move, not_pending};
use crate::error::{Error, ErrorKind, Result};
use crate::error_fields::ErrorFields;
use crate::event::{APPROVAL_DECIDED, Event, INBOX_REJECTED, INBOX_SPLICED};
use crate::inbox::Inbox;
use crate::json;
use crate::observer::Notice;
use crate::splice::SpliceRecord;
use crate::store::{LogWriter, Mailbox, Posted};
use crate::txn::{Ledger, Txn};

/// The post id an `agent/inbox/spliced`, `agent/inbox/rejected` or `approval/decided`
/// event carries.
pub(crate) fn post_id(event: &Event) -> Option<String> {
    // Most splices are not posts: skip the parse unless the key may be there.
    static KEY: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new(b"\"post\":"));
    #[derive(Deserialize)]
    struct Carried {
        post: Option<String>,
    }
    let ty = event.ty();
    if ty != INBOX_SPLICED && ty != INBOX_REJECTED && ty != APPROVAL_DECIDED {
        return None;
    }
    let data = event.data();
    KEY.find(data.as_bytes())?;
    json::from_str::<Carried>(data).ok()?.post
}

/// The ids of the posts a log holds.
#[derive(Debug, Default)]
pub(crate) struct PostIds(HashSet<String>);

impl PostIds {
    /// Records the post `event` carries, if any.
    pub fn note(&mut self, event: &Event) {
        if let Some(id) = post_id(event) {
            self.0.insert(id);
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    pub(crate) fn insert(&mut self, id: &str) {
        self.0.insert(id.to_owned());
    }

    /// The ids read back from a checkpoint.
    pub(crate) fn from_set(ids: HashSet<String>) -> PostIds {
        PostIds(ids)
    }

    /// The ids, for a checkpoint.
    pub(crate) fn set(&self) -> &HashSet<String> {
        &self.0
    }
}

/// A session's mailbox and the posts its log already holds.
pub(crate) struct Intake {
    mailbox: Box<dyn Mailbox>,
    known: PostIds,
}

impl Intake {
    pub fn new(mailbox: Box<dyn Mailbox>, known: PostIds) -> Intake {
        Intake { mailbox, known }
    }

    /// The posts the log holds.
    pub fn known(&self) -> &PostIds {
        &self.known
    }

    /// Whether the mailbox may hold a post (one the log already holds included: taking
    /// it in only settles it); `false` only when the store knows it holds none.
    pub fn waiting(&mut self) -> Result<bool> {
        self.mailbox.may_hold()
    }

    /// Takes every pending post in, each as one transaction at `now()`, queuing the
    /// notices in `outbox`; returns how many events it wrote. Posts written are settled
    /// once durable; on an error the posts written before it are settled too, and the
    /// rest stay pending for the next take-in.
    pub fn take_in(
        &mut self,
        writer: &mut dyn LogWriter,
        ledger: &mut Ledger,
        mut outbox: Option<&mut Vec<Notice>>,
        now: impl Fn() -> u64,
    ) -> Result<usize> {
        let pending = self.mailbox.pending()?;
        let mut settled = Vec::with_capacity(pending.len());
        let mut written = 0;
        let mut failed = None;
        for posted in &pending {
            let id = posted.post();
            if !self.known.contains(id) {
                if let Err(e) = write_post(writer, ledger, &mut outbox, now(), posted) {
                    failed = Some(e);
                    break;
                }
                self.known.insert(id);
                written += 1;
            }
            settled.push(id.to_owned());
        }
        if !settled.is_empty() {
            let durable = if written > 0 { writer.flush() } else { Ok(()) };
            if let Err(e) = durable.and_then(|()| self.mailbox.settle(&settled)) {
                failed.get_or_insert(e);
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }
}

/// Writes one post as its own transaction; a post too large for the log is rejected
/// with only its id kept.
fn write_post(
    writer: &mut dyn LogWriter,
    ledger: &mut Ledger,
    outbox: &mut Option<&mut Vec<Notice>>,
    time: u64,
    posted: &Posted,
) -> Result<()> {
    let post = [posted.post().to_owned()];
    let mut writer = Posting {
        writer,
        posts: &post,
    };
    match ledger.transact(&mut writer, time, outbox.as_deref_mut(), |txn| {
        stage(txn, posted)
    }) {
        Err(e) if e.kind() == ErrorKind::TooLarge => {
            let (key, stub) = match posted {
                Posted::Message { message, .. } => (
                    MESSAGE,
                    format!(r#"{{"id":{}}}"#, json::quote(message.id())),
                ),
                Posted::Edit { edit, .. } => (EDIT, edit.stub_json()),
                Posted::Decision { id, outcome, .. } => {
                    ("decision", crate::conversation::decided_data(id, *outcome))
                }
                Posted::Move { m, .. } => (MOVE, m.to_json()),
                Posted::Invalid { .. } => (MESSAGE, "null".to_owned()),
            };
            let data = rejected(key, &stub, &e, posted.post());
            ledger.transact(&mut writer, time, outbox.as_deref_mut(), |txn| {
                txn.reject(data)
            })
        }
        other => other,
    }
}

/// Stages one post: its splice, or its rejection.
fn stage(txn: &mut Txn<'_>, posted: &Posted) -> Result<()> {
    match posted {
        Posted::Message {
            post,
            target,
            message,
        } => {
            let end = txn.inbox().len(*target) as f64;
            match txn
                .inbox()
                .plan(*target, end, 0.0, vec![message.clone()], true)
            {
                Ok(Some(record)) => txn.take_post(record, post),
                Ok(None) => unreachable!("a post inserts one message"),
                Err(e) => txn.reject(rejected(MESSAGE, message.json(), &e, post)),
            }
        }
        Posted::Edit { post, edit } => {
            let planned = match txn.inbox().find(edit.id()) {
                None => Err(not_pending(edit.id())),
                Some((target, pos)) => {
                    txn.inbox()
                        .plan(target, pos as f64, 1.0, edit.inserted(), true)
                }
            };
            match planned {
                Ok(Some(record)) => txn.take_post(record, post),
                Ok(None) => unreachable!("an edit removes one message"),
                Err(e) => txn.reject(rejected(EDIT, &edit.to_json(), &e, post)),
            }
        }
        Posted::Move { post, m } => match plan_move(txn.inbox(), m) {
            Ok((removal, insertion)) => txn.take_move(removal, insertion, post),
            Err(e) => txn.reject(rejected(MOVE, &m.to_json(), &e, post)),
        },
        // A decision not taken in is recorded as rejected by the staging itself; the
        // error it answers is for a local caller, not for a post.
        Posted::Decision { post, id, outcome } => {
            txn.decide_approval(id, *outcome, Some(post)).map(drop)
        }
        Posted::Invalid {
            post,
            message,
            error,
        } => txn.reject(rejected(MESSAGE, message, error, post)),
    }
}

/// The key a rejection records a posted message under.
const MESSAGE: &str = "message";
/// The key a rejection records a posted edit under.
const EDIT: &str = "edit";
/// The key a rejection records a posted move under.
const MOVE: &str = "move";

/// The two splices of move `m` (ARCHITECTURE.md#moving-pending-input): the removal of
/// the message where it waits (`"outcome":"moved"`), then its insertion at the move's
/// index of its target, counted in the list as the removal leaves it (the end when
/// none). `not_found` when the message is not pending; `invalid_splice` for an index
/// past the end.
fn plan_move(inbox: &Inbox, m: &Move) -> Result<(SpliceRecord, SpliceRecord)> {
    let (from, pos) = inbox.find(&m.id).ok_or_else(|| not_pending(&m.id))?;
    let message = inbox.get(from, pos).expect("found").clone();
    let len = inbox.len(m.target) - usize::from(from == m.target);
    let index = m.index.unwrap_or(len as u64);
    if index > len as u64 {
        return Err(crate::splice::invalid_splice(format!(
            "index {index} is past the end of {} (length {len} without the moved message)",
            m.target.as_str()
        )));
    }
    let removal = SpliceRecord {
        target: from,
        start: pos as u64,
        removed_count: 1,
        inserted: Vec::new(),
        canceled: false,
        moved: true,
    };
    let insertion = SpliceRecord {
        target: m.target,
        start: index,
        removed_count: 0,
        inserted: vec![message],
        canceled: false,
        moved: false,
    };
    Ok((removal, insertion))
}

/// `{"<key>":what,"reason":{"code","kind","message"},"post":id}`, `key` being
/// `message` or `edit`: the reason is the error object every face reports
/// (ARCHITECTURE.md#errors), without location keys.
fn rejected(key: &str, what: &str, error: &Error, post: &str) -> String {
    let kind = error.kind();
    let mut out = String::with_capacity(64 + what.len() + error.message().len());
    out.push_str("{\"");
    out.push_str(key);
    out.push_str("\":");
    out.push_str(what);
    out.push_str(",\"reason\":");
    ErrorFields::new(kind.code(), kind.name(), error.message()).write_json(&mut out);
    out.push_str(",\"post\":");
    json::write_string(&mut out, post);
    out.push('}');
    out
}

/// The session's writer, appending through [`LogWriter::append_posted`] so a store may
/// move the post out of its mailbox in the same atomic step.
struct Posting<'a, 'w> {
    writer: &'a mut (dyn LogWriter + 'w),
    posts: &'a [String],
}

impl LogWriter for Posting<'_, '_> {
    fn append(&mut self, events: &[Event]) -> Result<()> {
        self.writer.append_posted(events, self.posts)
    }

    fn read(&self, since: u64) -> Result<Vec<Event>> {
        self.writer.read(since)
    }

    fn flush(&mut self) -> Result<()> {
        self.writer.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::Inbox;
    use crate::log::LogState;
    use crate::message::Message;
    use crate::splice::Target;

    /// Events written, posts named, and a record limit (0: none).
    #[derive(Default)]
    struct Writer(Vec<Event>, Vec<String>, usize);

    impl LogWriter for Writer {
        fn append(&mut self, events: &[Event]) -> Result<()> {
            if self.2 > 0 && events.iter().any(|e| e.to_json().len() > self.2) {
                return Err(Error::new(ErrorKind::TooLarge, "over the limit"));
            }
            self.0.extend_from_slice(events);
            Ok(())
        }
        fn read(&self, since: u64) -> Result<Vec<Event>> {
            Ok(self.0[since as usize..].to_vec())
        }
        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
        fn append_posted(&mut self, events: &[Event], posts: &[String]) -> Result<()> {
            self.1.extend_from_slice(posts);
            self.append(events)
        }
    }

    struct Box_(Vec<Posted>, Vec<String>);

    impl Mailbox for Box_ {
        fn pending(&mut self) -> Result<Vec<Posted>> {
            Ok(std::mem::take(&mut self.0))
        }
        fn settle(&mut self, posts: &[String]) -> Result<()> {
            self.1.extend_from_slice(posts);
            Ok(())
        }
    }

    fn posted(post: &str, id: &str) -> Posted {
        Posted::Message {
            post: post.to_owned(),
            target: Target::NextTurn,
            message: Message::from_json(&format!(r#"{{"id":"{id}"}}"#)).unwrap(),
        }
    }

    #[test]
    fn posts_become_splices_rejections_or_nothing_when_already_held() {
        let invalid = Posted::Invalid {
            post: "p4".to_owned(),
            message: "\"not json {\"".to_owned(),
            error: crate::error::invalid("bad"),
        };
        let mailbox = Box_(
            vec![
                posted("p0", "old"),
                posted("p1", "a"),
                posted("p2", "a"),
                invalid,
            ],
            Vec::new(),
        );
        let mut known = PostIds::default();
        known.insert("p0");
        let mut intake = Intake::new(Box::new(mailbox), known);
        let mut ledger = Ledger::new(
            LogState::default(),
            Inbox::new(),
            crate::conversation::Conversation::default(),
        );
        let mut writer = Writer::default();
        let n = intake
            .take_in(&mut writer, &mut ledger, None, || 5)
            .unwrap();
        assert_eq!(n, 3);
        let lines: Vec<String> = writer.0.iter().map(Event::to_json).collect();
        assert_eq!(
            lines,
            [
                r#"{"type":"agent/inbox/spliced","seq":0,"time":5,"data":{"target":"next-turn","start":0,"inserted":[{"id":"a"}],"post":"p1"}}"#,
                r#"{"type":"agent/inbox/rejected","seq":1,"time":5,"data":{"message":{"id":"a"},"reason":{"code":8,"kind":"duplicate_message","message":"message \"a\" is already pending"},"post":"p2"},"ignorable":true}"#,
                r#"{"type":"agent/inbox/rejected","seq":2,"time":5,"data":{"message":"not json {","reason":{"code":10,"kind":"invalid_input","message":"bad"},"post":"p4"},"ignorable":true}"#,
            ]
        );
        assert_eq!(writer.1, ["p1", "p2", "p4"]);
        for e in &writer.0 {
            assert_eq!(Event::from_json(&e.to_json()).unwrap(), *e);
        }
        assert_eq!(
            writer.0.iter().map(post_id).collect::<Vec<_>>(),
            [Some("p1".into()), Some("p2".into()), Some("p4".into())]
        );
        assert_eq!(ledger.inbox.len(Target::NextTurn), 1);
        // Everything settled; a second take-in finds nothing.
        assert_eq!(
            intake
                .take_in(&mut writer, &mut ledger, None, || 6)
                .unwrap(),
            0
        );
    }

    fn edit(post: &str, edit: crate::Edit) -> Posted {
        Posted::Edit {
            post: post.to_owned(),
            edit,
        }
    }

    #[test]
    fn edits_become_canceling_splices_or_rejections() {
        let m = |id: &str| Message::from_json(&format!(r#"{{"id":"{id}"}}"#)).unwrap();
        let big =
            Message::from_json(&format!(r#"{{"id":"z","x":"{}"}}"#, "y".repeat(400))).unwrap();
        let mailbox = Box_(
            vec![
                posted("p1", "a"),
                posted("p2", "b"),
                edit("p3", crate::Edit::remove("a").unwrap()),
                edit("p4", crate::Edit::remove("a").unwrap()),
                edit("p5", crate::Edit::replace("b", m("a")).unwrap()),
                posted("p6", "c"),
                edit("p7", crate::Edit::replace("a", m("c")).unwrap()),
                edit("p8", crate::Edit::replace("c", big).unwrap()),
            ],
            Vec::new(),
        );
        let mut intake = Intake::new(Box::new(mailbox), PostIds::default());
        let mut ledger = Ledger::new(
            LogState::default(),
            Inbox::new(),
            crate::conversation::Conversation::default(),
        );
        let mut writer = Writer(Vec::new(), Vec::new(), 400);
        let mut notices = Vec::new();
        let n = intake
            .take_in(&mut writer, &mut ledger, Some(&mut notices), || 5)
            .unwrap();
        assert_eq!(n, 8);
        let data: Vec<&str> = writer.0[2..].iter().map(Event::data).collect();
        assert_eq!(
            data,
            [
                r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled","post":"p3"}"#,
                r#"{"edit":{"op":"remove","id":"a"},"reason":{"code":5,"kind":"not_found","message":"message \"a\" is not pending"},"post":"p4"}"#,
                r#"{"target":"next-turn","start":0,"removedCount":1,"inserted":[{"id":"a"}],"outcome":"canceled","post":"p5"}"#,
                r#"{"target":"next-turn","start":1,"inserted":[{"id":"c"}],"post":"p6"}"#,
                r#"{"edit":{"op":"replace","id":"a","message":{"id":"c"}},"reason":{"code":8,"kind":"duplicate_message","message":"message \"c\" is already pending"},"post":"p7"}"#,
                r#"{"edit":{"op":"replace","id":"c","message":{"id":"z"}},"reason":{"code":12,"kind":"too_large","message":"over the limit"},"post":"p8"}"#,
            ]
        );
        assert_eq!(writer.0[3].ty(), INBOX_REJECTED);
        assert_eq!(
            writer.0.iter().filter_map(post_id).collect::<Vec<_>>(),
            ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"]
        );
        let ids: Vec<&str> = ledger
            .inbox
            .iter(Target::NextTurn)
            .map(Message::id)
            .collect();
        assert_eq!(ids, ["a", "c"]);
        let described: Vec<String> = notices
            .iter()
            .filter_map(|n| match n {
                Notice::Inbox(n) => Some(format!("{} {}", n.ty(), n.message().id())),
                Notice::Event(_) => None,
            })
            .collect();
        assert_eq!(
            described,
            [
                "agent/inbox/inserted a",
                "agent/inbox/inserted b",
                "agent/inbox/discarded a",
                "agent/inbox/discarded b",
                "agent/inbox/inserted a",
                "agent/inbox/inserted c",
            ]
        );
    }

    #[test]
    fn only_spliced_and_rejected_events_carry_posts() {
        let host =
            Event::from_json(r#"{"type":"x/y","seq":0,"time":0,"data":{"post":"p"}}"#).unwrap();
        assert_eq!(post_id(&host), None);
        let nested = Event::from_json(
            r#"{"type":"agent/inbox/spliced","seq":0,"time":0,"data":{"target":"next-turn","start":0,"inserted":[{"id":"a","post":"p"}]}}"#,
        )
        .unwrap();
        assert_eq!(post_id(&nested), None);
    }
}

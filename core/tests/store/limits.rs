//! The record limit (ARCHITECTURE.md#limits) in every store that has one (the memory
//! store has none): an event or a post over it is refused as `too_large` before
//! anything of the call is stored, and the writer goes on.

use inboxlog::store::{Durability, StoreOptions};
use inboxlog::{Envelope, ErrorKind, Event, Header, Message, Session, SessionMeta, Target};

use crate::{assert_err, lines, msg, stores_with};

/// A host event of seq `seq` whose line is exactly `len` bytes.
fn sized(seq: u64, len: usize) -> Event {
    let line = |pad: usize| {
        format!(
            r#"{{"type":"host/x","seq":{seq},"time":7,"data":"{}"}}"#,
            "x".repeat(pad)
        )
    };
    let event = Event::from_json(&line(len - line(0).len())).unwrap();
    assert_eq!(event.to_json().len(), len);
    event
}

#[test]
fn events_and_posts_over_the_record_limit_are_refused_with_nothing_stored() {
    let mut options = StoreOptions::durability(Durability::Sync);
    options.record_limit = Some(300);
    for b in stores_with(&options) {
        let (name, store) = (b.name, &*b.store);
        // At the store's writer: a record of the limit is taken, one byte more refuses
        // the whole call.
        let header = Header::new("w", 1, SessionMeta::default()).unwrap();
        let mut w = store.create(&header, &[]).unwrap();
        w.append(&[sized(0, 300)]).unwrap();
        assert_err(
            w.append(&[sized(1, 100), sized(2, 301)]),
            ErrorKind::TooLarge,
            &[
                "event seq 2 of session \"w\" is 301 bytes, larger than the record limit of 300 bytes",
            ],
        );
        assert_eq!(w.read(0).unwrap().len(), 1, "{name}");
        w.append(&[sized(1, 100)]).unwrap();
        drop(w);
        assert_eq!(lines(store, "w").len(), 2, "{name}");

        // Through a session: refused naming the seq it would have had; the next goes on.
        let s = Session::create(store, "s", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("a")).unwrap();
        let err = assert_err(
            s.append(
                "host/big",
                &format!("\"{}\"", "x".repeat(400)),
                Envelope::default(),
            ),
            ErrorKind::TooLarge,
            &["larger than the record limit of 300 bytes"],
        );
        assert_eq!(err.seq(), Some(1), "{name}");
        assert_eq!(lines(store, "s").len(), 1, "{name}");
        assert_eq!(
            s.append("host/small", "{}", Envelope::default())
                .unwrap()
                .seq(),
            1,
            "{name}"
        );

        // A post whose splice would be over the limit is refused; nothing waits.
        let big =
            Message::from_json(&format!(r#"{{"id":"b","x":"{}"}}"#, "y".repeat(300))).unwrap();
        assert_err(
            store.post("s", Target::NextTurn, &big),
            ErrorKind::TooLarge,
            &["larger than the record limit"],
        );
        assert_eq!(s.receive().unwrap(), 0, "{name}");
        assert_eq!(lines(store, "s").len(), 2, "{name}");
    }
}

//! The `batched` and `none` durability modes in every store (ARCHITECTURE.md#durability):
//! an append returns before it is durable, yet the writer's own reads and the store's
//! reads in its process see it at once, in order; `flush` is the barrier after which
//! another handle finds every event stored.

use inboxlog::store::{Durability, StoreOptions};
use inboxlog::{Envelope, Session, SessionMeta};

use crate::stores_with;

#[test]
fn appends_not_yet_durable_are_read_at_once_and_stored_by_flush() {
    for durability in [Durability::Batched, Durability::None] {
        for b in stores_with(&StoreOptions::durability(durability)) {
            let (name, store) = (format!("{} {durability}", b.name), &*b.store);
            let s = Session::create(store, "p", SessionMeta::default()).unwrap();
            for i in 0..1500 {
                s.append("host/n", &i.to_string(), Envelope::default())
                    .unwrap();
            }
            let events = s.events(0).unwrap();
            assert_eq!(events.len(), 1500, "{name}");
            for (i, e) in events.iter().enumerate() {
                assert_eq!((e.seq(), e.data()), (i as u64, &*i.to_string()), "{name}");
            }
            let tail = s.events(1497).unwrap();
            assert_eq!(tail.len(), 3, "{name}");
            assert_eq!(tail[0].seq(), 1497, "{name}");
            // The store's reads in the writer's process: inspect, and fork, which copies
            // through it.
            assert_eq!(Session::inspect(store, "p").unwrap().1, events, "{name}");
            let child = Session::fork(store, "p", "c", SessionMeta::default()).unwrap();
            assert_eq!(child.header().seed_length, Some(1500), "{name}");
            // The writer goes on from there; after flush another handle finds it all.
            s.append("host/n", "1500", Envelope::default()).unwrap();
            s.flush().unwrap();
            let other = b.connect();
            let (_, stored) = Session::inspect(&*other, "p").unwrap();
            assert_eq!(stored.len(), 1501, "{name}");
            assert_eq!(stored[..1500], events[..], "{name}");
            drop(s);
            let s = Session::open(&*other, "p").unwrap();
            assert_eq!(s.events(0).unwrap(), stored, "{name}");
        }
    }
}

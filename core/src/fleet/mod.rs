//! Fleet features (ARCHITECTURE.md#posting), written against the store traits only: posting input to
//! a session from any process ([`post`]: what the owner does with posts when it takes
//! them in) and following a session from elsewhere ([`Follower`]).
//!
//! Each store supplies the pieces that depend on where logs live: a
//! [`Mailbox`](crate::store::Mailbox) per session and a [`Feed`](crate::store::Feed)
//! per follower. The exactly-once argument of each store is in `core/FORMAT.md`
//! (JSONL) and in the store's module documentation.

mod follow;
pub(crate) mod post;

pub use follow::Follower;

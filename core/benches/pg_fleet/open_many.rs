//! Opening many sessions on one handle: `count` closed sessions (created and closed on
//! another handle first), then opened one after another on a fresh `PgStore` and held
//! open together. The time counts the opens only, not the budget check after each.

use std::time::{Duration, Instant};

use inboxlog::Session;
use inboxlog::store::Durability;

use super::monitor::Backends;
use super::writers::{close, sessions, store};

/// Sessions created at a time (then closed) while setting up.
const GROUP: usize = 10;

/// What opening many sessions measured.
pub struct Opened {
    /// Sessions opened (all of them, unless `stopped`).
    pub opened: usize,
    /// Time spent in `Session::open`, all together.
    pub open_time: Duration,
    /// Time closing the opened sessions.
    pub close_time: Duration,
    /// Why the opens stopped before `count`, if they did.
    pub stopped: Option<String>,
}

/// Creates `count` sessions named `open-<i>` (store named `setup_app`), then opens them
/// all on one store named `app`.
pub fn run(
    url: &str,
    setup_app: &str,
    app: &str,
    count: usize,
    backends: &Backends,
) -> Result<Opened, String> {
    {
        let setup = store(url, setup_app, Durability::Sync)?;
        // In small groups, so a store that holds a connection per open session stays
        // within the budget while creating.
        for start in (0..count).step_by(GROUP) {
            let n = GROUP.min(count - start);
            let group = sessions(&setup, &format!("open-{start}"), n, backends)?;
            close(group)?;
        }
    }
    let store = store(url, app, Durability::Sync)?;
    let mut open = Vec::with_capacity(count);
    let mut open_time = Duration::ZERO;
    let mut stopped = None;
    for i in 0..count {
        let id = format!("open-{}-{}", i / GROUP * GROUP, i % GROUP);
        let began = Instant::now();
        let opened = Session::open(&store, &id);
        open_time += began.elapsed();
        match opened {
            Ok(s) => open.push(s),
            Err(e) => {
                stopped = Some(format!("opening session {id} ({} of {count}): {e}", i + 1));
                break;
            }
        }
        if let Err(e) = backends.check(&format!("after {} opens", open.len())) {
            stopped = Some(e);
            break;
        }
    }
    let opened = open.len();
    let began = Instant::now();
    close(open)?;
    Ok(Opened {
        opened,
        open_time,
        close_time: began.elapsed(),
        stopped,
    })
}

//! Checkpoints of JSONL logs (ARCHITECTURE.md#checkpoints-and-reading-without-owning,
//! core/FORMAT.md#checkpoints): opening from one gives exactly the state a replay from
//! seq 0 gives, in every state a crash while writing one can leave; a doctored one is
//! refused, named; opening reads only the events after it.

mod jsonl_common;

use std::fs;
use std::path::Path;

use inboxlog::checkpoint::{EVERY_EVENTS, Replay};
use inboxlog::store::{Durability, JsonlStore, OpenOptions, Store, events};
use inboxlog::{
    Decision, Envelope, ErrorKind, Event, Header, Message, Session, SessionMeta, StepOutcome,
    Target,
};
use jsonl_common::{Rng, assert_err, msg};

/// One random call a host could make; refusals are part of the game (they change
/// nothing) and are ignored.
fn random_op(s: &Session, store: &dyn Store, rng: &mut Rng, n: &mut u64) {
    *n += 1;
    let id = |rng: &mut Rng| format!("m{}", rng.below(12));
    let target = |rng: &mut Rng| {
        if rng.below(2) == 0 {
            Target::NextTurn
        } else {
            Target::NextStep
        }
    };
    let _ = match rng.below(14) {
        0 | 1 => s
            .append("host/x", &format!("{{\"n\":{n}}}"), Envelope::default())
            .map(drop),
        2 | 3 => {
            let t = target(rng);
            s.inbox().append(t, msg(&id(rng)))
        }
        4 => {
            let t = target(rng);
            s.inbox().prepend(t, msg(&id(rng)))
        }
        5 => s.inbox().remove(&id(rng)).map(drop),
        6 => {
            let (old, new) = (id(rng), id(rng));
            s.inbox().replace(&old, msg(&new)).map(drop)
        }
        7 => s.open_turn().map(drop),
        8 | 9 => s.propose_step().and_then(|p| {
            let decision = if rng.below(4) == 0 {
                Decision::Reject
            } else {
                Decision::Enter(p.messages)
            };
            s.decide(decision).map(drop)
        }),
        10 => s
            .end_step(if rng.below(2) == 0 {
                StepOutcome::Continue
            } else {
                StepOutcome::Completed
            })
            .map(drop),
        11 => s.close_turn().map(drop),
        12 => {
            let t = target(rng);
            let m = msg(&format!("p{n}"));
            store
                .post(s.id(), t, &m)
                .and_then(|_| s.receive())
                .map(drop)
        }
        _ => s.inbox().clear(),
    };
}

/// The inbox lists, the open turn, the last seq and the turn opening repaired.
type Snapshot = (
    Vec<String>,
    Vec<String>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
);

/// What a session shows of its state: the inbox (as stored), the open turn, the last
/// seq and what opening repaired.
fn snapshot(s: &Session) -> Snapshot {
    let list = |t| {
        s.with_inbox(|i| {
            i.list(t)
                .iter()
                .map(|m: &Message| m.json().to_owned())
                .collect::<Vec<_>>()
        })
        .unwrap()
    };
    (
        list(Target::NextTurn),
        list(Target::NextStep),
        s.turn_open().unwrap(),
        s.last_seq().unwrap(),
        s.open_report().repaired_turn,
    )
}

/// A copy of the store's directory at `to` (logs and spools) without its checkpoints:
/// its logs open from seq 0.
fn copy_without_checkpoints(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_without_checkpoints(&entry.path(), &to.join(&name));
        } else if kind.is_file() && !name.contains(".checkpoint") {
            fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

/// `data` without the value of its `"post"` key (post ids are each store's own).
fn without_post_id(data: &str) -> String {
    match data.split_once(",\"post\":\"") {
        Some((before, after)) => {
            let rest = after.split_once('"').map_or("", |(_, rest)| rest);
            format!("{before},\"post\":\"…\"{rest}")
        }
        None => data.to_owned(),
    }
}

/// Opens `id` in `store` (from its checkpoint) and in a copy without checkpoints (from
/// seq 0), checks both show the same state and verify, then drives both with the same
/// random calls and checks they write the same events.
fn assert_same_as_full_replay(root: &Path, store: &JsonlStore, id: &str, seed: u64) {
    let copy = root.with_extension("full");
    let _ = fs::remove_dir_all(&copy);
    copy_without_checkpoints(root, &copy);
    let full_store = JsonlStore::open(&copy, Durability::None).unwrap();
    Session::verify(store, id).unwrap();
    let from_cp = Session::open(store, id).unwrap();
    let full = Session::open(&full_store, id).unwrap();
    assert_eq!(snapshot(&from_cp), snapshot(&full), "seed {seed}");
    let before = from_cp.last_seq().unwrap().map_or(0, |s| s + 1);
    let (mut a, mut b) = (Rng(seed ^ 0x5eed), Rng(seed ^ 0x5eed));
    let (mut na, mut nb) = (1_000_000, 1_000_000);
    for _ in 0..40 {
        random_op(&from_cp, store, &mut a, &mut na);
        random_op(&full, &full_store, &mut b, &mut nb);
    }
    let data = |s: &Session| {
        s.events(before)
            .unwrap()
            .iter()
            .map(|e| (e.ty().to_owned(), e.seq(), without_post_id(e.data())))
            .collect::<Vec<_>>()
    };
    assert_eq!(data(&from_cp), data(&full), "seed {seed}");
    assert_eq!(snapshot(&from_cp), snapshot(&full), "seed {seed}");
    from_cp.close().unwrap();
    full.close().unwrap();
    fs::remove_dir_all(&copy).unwrap();
}

#[test]
fn random_logs_open_from_their_checkpoint_as_from_seq_0() {
    for seed in 0..24u64 {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("logs");
        let store = JsonlStore::open(&root, Durability::None).unwrap();
        let mut rng = Rng(seed * 7919 + 1);
        let mut n = 0;
        // A parent, then the session: a fork of it, a seed of part of it with a
        // seedLength, or a new log.
        let parent = Session::create(&store, "p", SessionMeta::default()).unwrap();
        for _ in 0..rng.below(60) {
            random_op(&parent, &store, &mut rng, &mut n);
        }
        parent.close().unwrap();
        let s = match seed % 3 {
            0 => Session::fork(&store, "p", "s", SessionMeta::default()).unwrap(),
            1 => {
                let (_, events) = Session::inspect(&store, "p").unwrap();
                // The seed: whole turns only, up to a random cut.
                let mut cut = 0;
                let mut open = false;
                for (i, e) in events.iter().enumerate() {
                    match e.ty() {
                        "turn/start" => open = true,
                        "turn/end" => open = false,
                        _ => {}
                    }
                    if !open && rng.below(3) == 0 {
                        cut = i + 1;
                    }
                }
                let seed_events: Vec<Event> = events[..cut].to_vec();
                // A seedLength where the splices after it replay (any cut may not).
                let len = rng.below(cut as u64 + 1);
                let seeded = |len| {
                    Session::create_seeded(
                        &store,
                        "s",
                        SessionMeta::default(),
                        seed_events.clone(),
                        Some(len),
                    )
                };
                seeded(len).or_else(|_| seeded(cut as u64)).unwrap()
            }
            _ => Session::create(&store, "s", SessionMeta::default()).unwrap(),
        };
        let mut s = Some(s);
        for round in 0..4 {
            let session = s
                .take()
                .unwrap_or_else(|| Session::open(&store, "s").unwrap());
            for _ in 0..rng.below(80) {
                random_op(&session, &store, &mut rng, &mut n);
            }
            // Closed: a checkpoint at the end; dropped: one behind the end (a crash).
            if round == 3 || rng.below(3) != 0 {
                session.close().unwrap();
            } else {
                drop(session);
            }
            if rng.below(2) == 0 {
                store
                    .post("s", Target::NextTurn, &msg(&format!("closed{round}")))
                    .unwrap();
            }
        }
        assert!(root.join("s.checkpoint").exists(), "seed {seed}");
        assert_same_as_full_replay(&root, &store, "s", seed);
    }
}

/// A replay that starts from the checkpoint and counts the events it is given.
struct Counting {
    resumes: bool,
    checkpoints: u64,
    visits: u64,
}

impl Replay for Counting {
    fn resumes(&self) -> bool {
        self.resumes
    }

    fn checkpoint(&mut self, _: inboxlog::checkpoint::Checkpoint) -> inboxlog::Result<()> {
        self.checkpoints += 1;
        Ok(())
    }

    fn visit(&mut self, _: &Header, _: &Event) -> inboxlog::Result<()> {
        self.visits += 1;
        Ok(())
    }
}

fn count_open(store: &JsonlStore, resumes: bool) -> Counting {
    let mut counting = Counting {
        resumes,
        checkpoints: 0,
        visits: 0,
    };
    drop(
        store
            .open("s", &OpenOptions::default(), &mut counting)
            .unwrap(),
    );
    counting
}

#[test]
fn opening_visits_only_the_events_after_the_checkpoint() {
    let (_dir, store) = jsonl_common::store(Durability::None);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    // Fewer events than make a checkpoint due by count: only `close` writes one.
    let total = EVERY_EVENTS - 1;
    for i in 0..total {
        s.append("host/x", &format!("{{\"i\":{i}}}"), Envelope::default())
            .unwrap();
    }
    drop(s);
    // A log without a checkpoint opens as before, from seq 0, and opening alone
    // writes none.
    let cp = store.root().join("s.checkpoint");
    let c = count_open(&store, true);
    assert_eq!((c.checkpoints, c.visits), (0, total));
    drop(Session::open(&store, "s").unwrap());
    assert!(!cp.exists());
    Session::open(&store, "s").unwrap().close().unwrap();
    assert!(cp.exists());
    // Closed cleanly: nothing after the checkpoint.
    let c = count_open(&store, true);
    assert_eq!((c.checkpoints, c.visits), (1, 0));
    // Seven more, then a crash (no close): seven after it.
    let s = Session::open(&store, "s").unwrap();
    for i in 0..7 {
        s.append("host/x", &format!("{{\"late\":{i}}}"), Envelope::default())
            .unwrap();
    }
    drop(s);
    let c = count_open(&store, true);
    assert_eq!((c.checkpoints, c.visits), (1, 7));
    // A replay that does not resume still gets every event, and no checkpoint.
    let c = count_open(&store, false);
    assert_eq!((c.checkpoints, c.visits), (0, total + 7));
    // Verify reads from seq 0 and hands the checkpoint over.
    let mut all = Counting {
        resumes: true,
        checkpoints: 0,
        visits: 0,
    };
    store.verify("s", &mut all).unwrap();
    assert_eq!((all.checkpoints, all.visits), (1, total + 7));
}

#[test]
fn a_checkpoint_is_due_after_every_events_within_a_session() {
    let (dir, store) = jsonl_common::store(Durability::None);
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let cp = dir.path().join("logs/s.checkpoint");
    for i in 0..EVERY_EVENTS - 1 {
        s.append("host/x", &format!("{{\"i\":{i}}}"), Envelope::default())
            .unwrap();
    }
    assert!(!cp.exists());
    s.append("host/x", "{}", Envelope::default()).unwrap();
    assert!(cp.exists(), "due after {EVERY_EVENTS} events");
    let text = fs::read_to_string(&cp).unwrap();
    assert!(
        text.starts_with(&format!("{{\"checkpoint\":4,\"seq\":{EVERY_EVENTS},")),
        "{text}"
    );
    drop(s);
    let c = count_open(&store, true);
    assert_eq!((c.checkpoints, c.visits), (1, 0));
}

/// A closed session "s" with some turns, inbox messages and a post.
fn closed_session(store: &JsonlStore) {
    let s = Session::create(store, "s", SessionMeta::default()).unwrap();
    let mut rng = Rng(42);
    let mut n = 0;
    for _ in 0..120 {
        random_op(&s, store, &mut rng, &mut n);
    }
    s.inbox().append(Target::NextTurn, msg("kept")).unwrap();
    s.close().unwrap();
}

#[test]
fn every_state_a_crash_while_writing_a_checkpoint_leaves_opens() {
    let (dir, store) = jsonl_common::store(Durability::None);
    let root = dir.path().join("logs");
    closed_session(&store);
    let cp = root.join("s.checkpoint");
    let tmp = root.join("s.checkpoint.tmp");
    let old = fs::read(&cp).unwrap();
    // The next checkpoint's bytes, as the writer would have made them.
    let s = Session::open(&store, "s").unwrap();
    s.inbox().append(Target::NextStep, msg("later")).unwrap();
    s.close().unwrap();
    let new = fs::read(&cp).unwrap();
    assert_ne!(old, new);
    // Crash states: the temporary file cut anywhere (or whole) beside the old
    // checkpoint, beside the new one (renamed, before it was removed… never: rename
    // replaces), or beside none (the first checkpoint never renamed).
    let cuts = [0, 1, new.len() / 2, new.len() - 1, new.len()];
    for cp_state in [Some(&old), Some(&new), None] {
        for &cut in &cuts {
            match cp_state {
                Some(bytes) => fs::write(&cp, bytes).unwrap(),
                None => {
                    let _ = fs::remove_file(&cp);
                }
            }
            fs::write(&tmp, &new[..cut]).unwrap();
            // The old checkpoint is behind the log's end: the events after it are read.
            assert_same_as_full_replay(&root, &store, "s", cut as u64);
        }
    }
    // The temporary file is not a session, nor is the checkpoint.
    let ids: Vec<String> = store.list().unwrap().into_iter().map(|h| h.id).collect();
    assert_eq!(ids, ["s"]);
}

/// The checkpoint's text with `edit` applied and its checksum made right again.
fn resealed(text: &str, edit: impl Fn(&str) -> String) -> String {
    let body = &text[..text.rfind(",\"crc32c\":").unwrap()];
    let body = edit(body);
    format!(
        "{body},\"crc32c\":\"{:08x}\"}}\n",
        crc32c::crc32c(body.as_bytes())
    )
}

#[test]
fn a_doctored_checkpoint_is_refused_by_open_and_verify_named() {
    let (dir, store) = jsonl_common::store(Durability::None);
    let root = dir.path().join("logs");
    closed_session(&store);
    let cp = root.join("s.checkpoint");
    let good = fs::read_to_string(&cp).unwrap();
    let name = cp.display().to_string();
    let refused = |what: &str, needles: &[&str], by_open: bool| {
        let mut all = vec![name.as_str()];
        all.extend_from_slice(needles);
        assert_err(Session::verify(&store, "s"), ErrorKind::Corrupt, &all);
        if by_open {
            assert_err(Session::open(&store, "s"), ErrorKind::Corrupt, &all);
        } else {
            // Trusted by open as written (its checksum and binding hold): see
            // ARCHITECTURE.md#checkpoints-and-reading-without-owning.
            drop(Session::open(&store, "s").unwrap_or_else(|e| panic!("{what}: {e}")));
        }
    };
    // A changed byte: the checksum says so.
    let changed = good.replacen("\"lastTurn\":", "\"lastTurn\":9", 1);
    fs::write(&cp, &changed).unwrap();
    refused(
        "changed byte",
        &["checksum", "does not match its bytes"],
        true,
    );
    // Cut short.
    fs::write(&cp, &good[..good.len() / 2]).unwrap();
    refused("cut", &["line end"], true);
    // A valid checksum over a wrong binding: another offset, another chain.
    let offset: u64 = good
        .split("\"offset\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    fs::write(
        &cp,
        resealed(&good, |b| {
            b.replacen(
                &format!("\"offset\":{offset}"),
                &format!("\"offset\":{}", offset - 1),
                1,
            )
        }),
    )
    .unwrap();
    refused("offset", &["is not a checkpoint of"], true);
    fs::write(
        &cp,
        resealed(&good, |b| {
            let at = b.find("\"chain\":\"").unwrap() + 9;
            let mut s = b.to_owned();
            let c = if &b[at..=at] == "0" { "1" } else { "0" };
            s.replace_range(at..=at, c);
            s
        }),
    )
    .unwrap();
    refused("chain", &["is not a checkpoint of"], true);
    // A valid checksum and binding over a wrong state: verify compares it with the
    // replay; open, which reads only what follows it, trusts it.
    fs::write(
        &cp,
        resealed(&good, |b| {
            b.replacen("\"nextTurn\":[", "\"nextTurn\":[{\"id\":\"forged\"},", 1)
        }),
    )
    .unwrap();
    refused(
        "state",
        &["does not match the log replayed up to seq", "inbox"],
        false,
    );
    // Restored, all is well again.
    fs::write(&cp, &good).unwrap();
    Session::verify(&store, "s").unwrap();
    drop(Session::open(&store, "s").unwrap());
}

#[test]
fn a_log_cut_before_its_checkpoint_is_refused() {
    let (dir, store) = jsonl_common::store(Durability::None);
    let root = dir.path().join("logs");
    closed_session(&store);
    let log = root.join("s.jsonl");
    let bytes = fs::read(&log).unwrap();
    // Whole lines removed from the end: no checksum inside the file can tell, the
    // checkpoint can.
    let last = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap();
    fs::write(&log, &bytes[..=last]).unwrap();
    for result in [
        Session::verify(&store, "s").map(drop),
        Session::open(&store, "s").map(drop),
    ] {
        assert_err(
            result,
            ErrorKind::Corrupt,
            &["s.checkpoint", "is not a checkpoint of"],
        );
    }
}

#[test]
fn delete_create_list_and_version_1_logs_keep_to_their_rules() {
    let (dir, store) = jsonl_common::store(Durability::None);
    let root = dir.path().join("logs");
    closed_session(&store);
    let cp = root.join("s.checkpoint");
    assert!(cp.exists());
    fs::write(root.join("s.checkpoint.tmp"), b"partial").unwrap();
    let ids: Vec<String> = store.list().unwrap().into_iter().map(|h| h.id).collect();
    assert_eq!(ids, ["s"]);
    // Delete takes both with it.
    Session::delete(&store, "s").unwrap();
    assert!(!cp.exists() && !root.join("s.checkpoint.tmp").exists());
    // An orphan checkpoint (its log removed behind the store's back) is cleared by
    // the next create of the id.
    closed_session(&store);
    let orphan = fs::read(&cp).unwrap();
    fs::remove_file(root.join("s.jsonl")).unwrap();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    assert!(!cp.exists());
    s.append("host/x", "{}", Envelope::default()).unwrap();
    drop(s);
    assert!(!cp.exists());
    Session::open(&store, "s").unwrap().close().unwrap();
    assert_ne!(fs::read(&cp).unwrap(), orphan);
    // A version 1 log gets none, and opens as before.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jsonl/v1-basic.jsonl");
    let header = fs::read_to_string(&fixture).unwrap();
    let id = header
        .split("\"id\":\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    fs::copy(&fixture, root.join(format!("{id}.jsonl"))).unwrap();
    let before = Session::verify(&store, &id).unwrap();
    let s = Session::open(&store, &id).unwrap();
    s.append("host/x", "{}", Envelope::default()).unwrap();
    s.close().unwrap();
    assert!(!root.join(format!("{id}.checkpoint")).exists());
    let after = Session::verify(&store, &id).unwrap();
    assert_eq!(
        after.events,
        before.events + 1 + u64::from(before.open_turn.is_some())
    );
    // Replays without a checkpoint read every event, as before.
    let mut n = 0;
    drop(
        store
            .open(
                &id,
                &OpenOptions::default(),
                &mut events(|_, _| {
                    n += 1;
                    Ok(())
                }),
            )
            .unwrap(),
    );
    assert_eq!(n, after.events);
}

#[test]
fn a_fork_gets_its_own_checkpoint_when_it_closes() {
    let (dir, store) = jsonl_common::store(Durability::None);
    let root = dir.path().join("logs");
    closed_session(&store);
    let s = Session::fork(&store, "s", "child", SessionMeta::default()).unwrap();
    // Forks copy events, never checkpoints: the child has its own once it closes.
    assert!(!root.join("child.checkpoint").exists());
    s.close().unwrap();
    assert!(root.join("child.checkpoint").exists());
    Session::verify(&store, "child").unwrap();
}

#[test]
fn a_follower_from_the_checkpoint_on_starts_there_and_reads_nothing_before() {
    let (_d, store) = jsonl_common::store(Durability::Sync);
    closed_session(&store);
    let (_, all) = Session::inspect(&store, "s").unwrap();
    let end = all.len() as u64;
    let no_wait = std::time::Duration::ZERO;
    // From the checkpoint (the end) on: the same events as a reader from seq 0 gets.
    let s = Session::open(&store, "s").unwrap();
    for i in 0..3 {
        s.append("host/late", &format!("{{\"i\":{i}}}"), Envelope::default())
            .unwrap();
    }
    let (_, now) = Session::inspect(&store, "s").unwrap();
    let late: Vec<String> = now[end as usize..].iter().map(Event::to_json).collect();
    let mut feed = store.follow("s").unwrap();
    let got: Vec<String> = feed
        .poll(end, no_wait)
        .unwrap()
        .iter()
        .map(Event::to_json)
        .collect();
    assert_eq!(got, late);
    drop(s);
    // A line before the checkpoint changed: a follower from seq 0 reads it and refuses
    // it; one from the checkpoint on never reads it, as an open does not.
    let path = store.path("s").unwrap();
    let mut b = fs::read(&path).unwrap();
    let third = b
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == b'\n')
        .nth(2)
        .unwrap()
        .0;
    b[third + 10] ^= 0x01;
    fs::write(&path, &b).unwrap();
    let err = store.follow("s").unwrap().poll(0, no_wait).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    let got = store.follow("s").unwrap().poll(end, no_wait).unwrap();
    assert_eq!(got.iter().map(Event::to_json).collect::<Vec<_>>(), late);
}

#[test]
fn an_imported_log_gets_its_checkpoint_and_opens_from_it_as_from_seq_0() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference");
    // A fork with its seed, a turn left open (closed as interrupted), tool calls.
    for (seed, name) in ["fork.jsonl", "interrupted.jsonl", "tool-call-named.jsonl"]
        .into_iter()
        .enumerate()
    {
        let (dir, store) = jsonl_common::store(Durability::None);
        let root = dir.path().join("logs");
        let s = inboxlog::import_reference(&fixtures.join(name), &store, Some("s")).unwrap();
        s.close().unwrap();
        assert!(root.join("s.checkpoint").exists(), "{name}");
        assert_same_as_full_replay(&root, &store, "s", seed as u64);
    }
}

#[test]
fn a_failed_checkpoint_step_fails_the_close_by_name_and_the_log_still_opens() {
    use inboxlog::store::fault::{Action, Errno, FaultPlan, Point};
    let steps = [
        "cannot write",
        "cannot fsync",
        "cannot rename the checkpoint to",
        "cannot fsync directory",
    ];
    for (nth, named) in (1u64..).zip(steps) {
        let (dir, plain) = jsonl_common::store(Durability::None);
        let root = dir.path().join("logs");
        closed_session(&plain);
        let before = fs::read(root.join("s.checkpoint")).unwrap();
        let plan = FaultPlan::new().on(Point::Checkpoint, nth, Action::Fail(Errno::Eio));
        let store = JsonlStore::open(&root, Durability::None)
            .unwrap()
            .with_faults(plan);
        let s = Session::open(&store, "s").unwrap();
        s.append("host/x", r#"{"late":1}"#, Envelope::default())
            .unwrap();
        let err = s.close().unwrap_err();
        assert!(err.to_string().contains(named), "step {nth}: {err}");
        if nth < 3 {
            // Not renamed: the old checkpoint stands, and the line after it is read.
            assert_eq!(fs::read(root.join("s.checkpoint")).unwrap(), before);
        }
        let again = Session::open(&plain, "s").unwrap();
        assert_eq!(
            again.events(0).unwrap().last().unwrap().data(),
            r#"{"late":1}"#
        );
        again.close().unwrap();
        Session::verify(&plain, "s").unwrap();
    }
}

//! Compaction on every store (ARCHITECTURE.md#compaction, SPEC §16): a range of the
//! surface replaced by its summary in one surface replace between `compaction/start`
//! and `compaction/end`, one at a time, owned by the open turn or by none; ranges that
//! would split a tool call from its result refused with nothing written; a surface
//! changed under it refused as `conflict` with exactly one `end {error}`; a start left
//! by a crash ended by the next open; a long tool result pruned; the inbox never
//! touched.

use inboxlog::store::Store;
use inboxlog::{
    Envelope, ErrorKind, Session, SessionMeta, StepOutcome, Summary, Target, TurnClaim, TurnError,
};
use serde_json::{Value, json};

use crate::{assert_err, each_store, msg};

/// The events of `id` from seq `from`, as (type, data).
fn since(store: &dyn Store, id: &str, from: u64) -> Vec<(String, Value)> {
    let (_, events) = Session::inspect(store, id).unwrap();
    events[from as usize..]
        .iter()
        .map(|e| (e.ty().to_owned(), serde_json::from_str(e.data()).unwrap()))
        .collect()
}

fn count(store: &dyn Store, id: &str) -> u64 {
    Session::inspect(store, id).unwrap().1.len() as u64
}

fn assistant(id: &str, calls: &[&str], text: &str) -> String {
    let mut content: Vec<Value> = vec![json!({"type": "text", "text": text})];
    content.extend(
        calls
            .iter()
            .map(|c| json!({"type": "tool-call", "id": c, "name": "t", "arguments": "{}"})),
    );
    json!({"turn": 1, "step": 1, "message": {"id": id, "role": "assistant", "content": content,
        "source": {"kind": "model", "provider": "p", "model": "m"}}})
    .to_string()
}

fn result(call: &str, text: &str) -> String {
    json!({"turn": 1, "step": 1, "message": {"id": format!("r-{call}"), "role": "user",
        "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": text}]}],
        "source": {"kind": "tool", "callId": call}}})
    .to_string()
}

/// Appends `ty` with `data`; its seq.
fn put(s: &Session, ty: &str, data: &str) -> u64 {
    s.append(ty, data, Envelope::default()).unwrap().seq()
}

/// A conversation with no turn open: user u (seq 0), the model calling c1 (1), its
/// result (2), the model answering (3), and a message waiting in `next-turn`.
fn talked(store: &dyn Store, id: &str) -> Session {
    let s = Session::create(store, id, SessionMeta::default()).unwrap();
    put(
        &s,
        "user/message",
        r#"{"id":"u","role":"user","content":"hello there"}"#,
    );
    put(
        &s,
        "assistant/message",
        &assistant("a1", &["c1"], "looking"),
    );
    put(&s, "tool/result", &result("c1", "found it"));
    put(&s, "assistant/message", &assistant("a2", &[], "here it is"));
    s.inbox().append(Target::NextTurn, msg("later")).unwrap();
    s
}

#[test]
fn a_manual_compaction_replaces_its_range_by_its_summary() {
    each_store(|name, store| {
        let s = talked(store, "c");
        let baseline = s.baseline(None).unwrap();
        let c = s.begin_compaction(0, 2).unwrap();
        assert_eq!((c.turn(), c.range(), c.start_seq()), (None, (0, 2), 5));
        assert_eq!(c.shadowed_seqs(), [0, 1, 2]);
        assert_eq!(c.shadowed_messages().len(), 3);
        // "hello there" 11 → 3+4; "looking" 7 → 2+4; "found it" 8 → 2+4; 4 a message.
        assert_eq!(c.shadowed_token_count(), 7 + 6 + 6 + 12, "{name}");
        assert_eq!(s.running_compaction().unwrap().as_deref(), Some(c.id()));
        let done = c
            .commit(
                &Summary::Text("they talked".into()),
                "scripted",
                "m1",
                Some(r#"{"inputTokens":3}"#),
            )
            .unwrap();
        assert_eq!(done.compaction_id, "compaction-5");
        assert_eq!(s.running_compaction().unwrap(), None);
        let summary = json!([{"type": "text", "text": "they talked"}]);
        assert_eq!(
            since(store, "c", 5),
            [
                (
                    "compaction/start".to_owned(),
                    json!({"compactionId": "compaction-5", "turn": null})
                ),
                (
                    "compaction/summary".to_owned(),
                    json!({"compactionId": "compaction-5", "summary": summary,
                       "shadowedRange": {"start": 0, "end": 2}, "shadowedSeqs": [0, 1, 2],
                       "shadowedTokenCount": 31, "provider": "scripted", "model": "m1",
                       "usage": {"inputTokens": 3}})
                ),
                (
                    "user/message".to_owned(),
                    json!({"id": "summary-compaction-5", "role": "user", "content": summary,
                       "source": {"kind": "plugin", "plugin": "compact", "compactionId": "compaction-5"}})
                ),
                (
                    "compaction/end".to_owned(),
                    json!({"compactionId": "compaction-5", "turn": null})
                ),
            ],
            "{name}"
        );
        let message = &done.message;
        assert_eq!(
            message.envelope().source_event_seqs.as_deref(),
            Some(&[5, 6, 0, 1, 2][..])
        );
        assert_eq!(s.surface().unwrap(), [7, 3], "{name}");
        let messages = s.messages().unwrap();
        assert!(messages[0].contains("they talked") && messages[1].contains("here it is"));
        // The inbox is untouched.
        assert_eq!(s.baseline(None).unwrap().next_turn, baseline.next_turn);
        s.close().unwrap();
        // Read back, as a reader and as the next writer see it.
        assert_eq!(Session::read_surface(store, "c").unwrap().nodes, [7, 3]);
        assert!(!Session::verify(store, "c").unwrap().needs_repair());
        let s = Session::open(store, "c").unwrap();
        assert_eq!(s.surface().unwrap(), [7, 3]);
        assert_eq!(s.open_report().repaired_compaction, None);
        assert_eq!(s.with_inbox(|i| i.len(Target::NextTurn)).unwrap(), 1);
        // A later compaction may take the summary in.
        let again = s
            .compact(
                7,
                3,
                |m| {
                    assert_eq!(m.len(), 2);
                    Ok(Summary::Blocks(r#"[{"type":"text","text":"all"}]"#.into()))
                },
                "p",
                "m",
            )
            .unwrap();
        assert_eq!(s.surface().unwrap(), [again.message.seq()], "{name}");
        s.close().unwrap();
    });
}

#[test]
fn one_compaction_at_a_time_and_no_turn_meanwhile() {
    each_store(|name, store| {
        let s = talked(store, "b");
        let c = s.begin_compaction(3, 3).unwrap();
        let before = count(store, "b");
        assert_err(s.begin_compaction(0, 2), ErrorKind::Busy, &["runs"]);
        assert_err(s.open_turn(), ErrorKind::Busy, &["turn/start"]);
        assert_eq!(count(store, "b"), before, "{name}: nothing written");
        // Other appends and posts go on, and are kept.
        put(&s, "host/note", "{}");
        store.post("b", Target::NextTurn, &msg("posted")).unwrap();
        s.receive().unwrap();
        assert_eq!(s.with_inbox(|i| i.len(Target::NextTurn)).unwrap(), 2);
        c.commit(&Summary::Text("x".into()), "p", "m", None)
            .unwrap();
        assert_eq!(s.surface().unwrap(), [0, 1, 2, before + 3], "{name}");
        assert_eq!(s.with_inbox(|i| i.len(Target::NextTurn)).unwrap(), 2);
        s.open_turn().unwrap();
        s.close().unwrap();
    });
}

#[test]
fn an_automatic_compaction_belongs_to_the_turn_between_its_steps() {
    each_store(|name, store| {
        let s = Session::create(store, "t", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("go")).unwrap();
        s.open_turn().unwrap();
        s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
        let answered = put(&s, "assistant/message", &assistant("a", &[], "ok"));
        assert_err(
            s.begin_compaction(0, answered),
            ErrorKind::Protocol,
            &["step 1 of turn 1 open"],
        );
        s.end_step(StepOutcome::Continue).unwrap();
        let surface = s.surface().unwrap();
        let c = s.begin_compaction(surface[0], answered).unwrap();
        assert_eq!(c.turn(), Some(1));
        // Steps go on meanwhile; the turn does not end.
        s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
        s.end_step(StepOutcome::Completed).unwrap();
        let before = count(store, "t");
        assert_err(s.close_turn(), ErrorKind::Busy, &["turn/end"]);
        assert_eq!(count(store, "t"), before);
        // cancel ends it first; its handle then finds it ended.
        s.cancel(inboxlog::CancelCause::User, true).unwrap();
        let tail = since(store, "t", before);
        let ends: Vec<&Value> = tail
            .iter()
            .filter(|(ty, _)| ty == "compaction/end")
            .map(|(_, d)| d)
            .collect();
        assert_eq!(
            ends,
            [&json!({"compactionId": c.id(), "turn": 1, "error": "cancelled"})],
            "{name}"
        );
        let turn_end = tail.iter().position(|(ty, _)| ty == "turn/end").unwrap();
        let end = tail
            .iter()
            .position(|(ty, _)| ty == "compaction/end")
            .unwrap();
        assert!(end < turn_end);
        let after = count(store, "t");
        assert_err(
            c.commit(&Summary::Text("x".into()), "p", "m", None),
            ErrorKind::Protocol,
            &["not running"],
        );
        assert_eq!(count(store, "t"), after, "{name}: no second end");

        // fail ends it too.
        s.inbox().append(Target::NextTurn, msg("again")).unwrap();
        s.open_turn().unwrap();
        s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
        s.end_step(StepOutcome::Continue).unwrap();
        let last = *s.surface().unwrap().last().unwrap();
        let c = s.begin_compaction(last, last).unwrap();
        let from = count(store, "t");
        s.fail(TurnError::from_json(r#"{"message":"boom","code":"E"}"#).unwrap())
            .unwrap();
        let tail = since(store, "t", from);
        assert_eq!(tail[0].0, "compaction/end");
        assert_eq!(tail[0].1["error"], "failed");
        assert_eq!(tail.last().unwrap().0, "turn/end");
        drop(c); // ended already: the drop writes nothing
        assert_eq!(count(store, "t"), from + tail.len() as u64);
        s.close().unwrap();
    });
}

#[test]
fn a_bad_range_is_refused_and_nothing_written() {
    each_store(|name, store| {
        let s = talked(store, "r");
        // c2 is called and has no result yet: it waits (e.g. on an approval).
        let waiting = put(&s, "assistant/message", &assistant("a3", &["c2"], "more"));
        let before = count(store, "r");
        for ((start, end), needle) in [
            ((0, 99), "seq 99 is not"),
            ((2, 0), "not in order"),
            ((0, 1), "split tool calls [\"c1\"]"),
            ((2, 3), "split tool calls [\"c1\"]"),
            ((3, waiting), "split tool calls [\"c2\"]"),
        ] {
            assert_err(
                s.begin_compaction(start, end),
                ErrorKind::InvalidInput,
                &[needle],
            );
        }
        assert_eq!(count(store, "r"), before, "{name}");
        assert_eq!(s.running_compaction().unwrap(), None);
        s.close().unwrap();
    });
}

#[test]
fn a_surface_changed_under_it_is_a_conflict_with_one_end() {
    each_store(|name, store| {
        let s = talked(store, "x");
        let long = put(&s, "assistant/message", &assistant("a3", &["c3"], "read"));
        let big = put(&s, "tool/result", &result("c3", &"y".repeat(9000)));
        let c = s.begin_compaction(long, big).unwrap();
        let pruned = s.prune(big).unwrap().unwrap();
        let from = count(store, "x");
        let err = assert_err(
            c.commit(&Summary::Text("x".into()), "p", "m", None),
            ErrorKind::Conflict,
            &["changed inside the range"],
        );
        assert_eq!(err.session(), Some("x"));
        assert_eq!(
            since(store, "x", from),
            [(
                "compaction/end".to_owned(),
                json!({"compactionId": format!("compaction-{}", big + 1), "turn": null, "error": "conflict"})
            )],
            "{name}"
        );
        assert_eq!(*s.surface().unwrap().last().unwrap(), pruned.seq());
        s.close().unwrap();
    });
}

#[test]
fn abort_a_bad_summary_and_a_dropped_handle_each_write_one_end() {
    each_store(|name, store| {
        let s = talked(store, "a");
        let mut errors = Vec::new();
        let c = s.begin_compaction(3, 3).unwrap();
        c.abort("model timed out").unwrap();
        errors.push("model timed out");
        let c = s.begin_compaction(3, 3).unwrap();
        assert_err(
            c.commit(&Summary::Blocks("[]".into()), "p", "m", None),
            ErrorKind::InvalidInput,
            &["no block"],
        );
        errors.push("invalid_input");
        let c = s.begin_compaction(3, 3).unwrap();
        assert_err(
            c.commit(&Summary::Text("s".into()), "p", "m", Some("[1]")),
            ErrorKind::InvalidInput,
            &["usage"],
        );
        errors.push("invalid_input");
        drop(s.begin_compaction(3, 3).unwrap());
        errors.push("abandoned");
        let failed = s.compact(
            3,
            3,
            |_| Err(inboxlog::Error::new(ErrorKind::Unavailable, "model down")),
            "p",
            "m",
        );
        assert_err(failed, ErrorKind::Unavailable, &["model down"]);
        let ends: Vec<String> = since(store, "a", 0)
            .into_iter()
            .filter(|(ty, _)| ty == "compaction/end")
            .map(|(_, d)| d["error"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ends.len(), 5, "{name}: {ends:?}");
        assert_eq!(&ends[..4], &errors[..]);
        assert!(ends[4].contains("model down"), "{ends:?}");
        assert_eq!(s.surface().unwrap(), [0, 1, 2, 3], "{name}");
        s.close().unwrap();
    });
}

#[test]
fn a_start_left_by_a_crash_is_ended_by_the_next_open() {
    each_store(|name, store| {
        let s = talked(store, "k");
        let c = s.begin_compaction(0, 2).unwrap();
        let id = c.id().to_owned();
        // The process dies with the compaction running: no end is written.
        std::mem::forget(c);
        s.close().unwrap();
        let report = Session::verify(store, "k").unwrap();
        assert_eq!(report.compaction.as_deref(), Some(id.as_str()), "{name}");
        assert!(report.needs_repair());
        let peek_surface = Session::read_surface(store, "k").unwrap();
        let s = Session::open(store, "k").unwrap();
        assert_eq!(
            s.open_report().repaired_compaction.as_deref(),
            Some(id.as_str())
        );
        assert_eq!(s.running_compaction().unwrap(), None);
        let last = since(store, "k", count(store, "k") - 1);
        assert_eq!(
            last,
            [(
                "compaction/end".to_owned(),
                json!({"compactionId": id, "turn": null, "error": "interrupted"})
            )],
            "{name}"
        );
        assert_eq!(s.surface().unwrap(), peek_surface.nodes);
        assert_eq!(s.with_inbox(|i| i.len(Target::NextTurn)).unwrap(), 1);
        s.close().unwrap();
        // Opening twice adds nothing the second time.
        let n = count(store, "k");
        Session::open(store, "k").unwrap().close().unwrap();
        assert_eq!(count(store, "k"), n);
    });
}

#[test]
fn a_crash_in_a_turns_compaction_ends_it_before_the_turn() {
    each_store(|name, store| {
        let s = Session::create(store, "kt", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("go")).unwrap();
        s.open_turn().unwrap();
        s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
        s.end_step(StepOutcome::Continue).unwrap();
        let node = s.surface().unwrap()[0];
        std::mem::forget(s.begin_compaction(node, node).unwrap());
        s.close().unwrap();
        let from = count(store, "kt");
        let s = Session::open(store, "kt").unwrap();
        assert_eq!(s.open_report().repaired_turn, Some(1));
        let types: Vec<String> = since(store, "kt", from)
            .into_iter()
            .map(|(t, _)| t)
            .collect();
        assert_eq!(types, ["compaction/end", "turn/end"], "{name}");
        s.close().unwrap();
    });
}

#[test]
fn prune_shortens_a_long_tool_result_by_code_points() {
    each_store(|name, store| {
        let s = talked(store, "p");
        put(&s, "assistant/message", &assistant("a3", &["c3"], "read"));
        let text = format!("{}{}", "é".repeat(6000), "z".repeat(3000));
        let big = put(&s, "tool/result", &result("c3", &text));
        let before = count(store, "p");
        // Short, not a tool result, not on the surface.
        assert_eq!(s.prune(2).unwrap(), None);
        assert_err(s.prune(1), ErrorKind::InvalidInput, &["not a tool/result"]);
        assert_err(
            s.prune(999),
            ErrorKind::InvalidInput,
            &["not on the surface"],
        );
        assert_eq!(count(store, "p"), before, "{name}");
        let pruned = s.prune(big).unwrap().unwrap();
        let tail = since(store, "p", before);
        assert_eq!(tail.len(), 2);
        assert_eq!(tail[0].0, "compaction/prune");
        assert_eq!(
            tail[0].1["shadowedRange"],
            json!({"start": big, "end": big})
        );
        assert_eq!(tail[0].1["shadowedSeqs"], json!([big]));
        assert_eq!(tail[0].1["shadowedTokenCount"], json!(2250 + 4 + 4));
        let data: Value = serde_json::from_str(pruned.data()).unwrap();
        let kept = data["message"]["content"][0]["content"][0]["text"]
            .as_str()
            .unwrap();
        assert!(kept.starts_with(&"é".repeat(4096)) && kept.ends_with(&"z".repeat(1024)));
        assert!(kept.contains("3880 characters pruned"), "{kept:.50}");
        assert_eq!(
            pruned.envelope().source_event_seqs.as_deref(),
            Some(&[before, big][..])
        );
        assert_eq!(*s.surface().unwrap().last().unwrap(), pruned.seq());
        // Pruned once: the new result is short.
        assert_eq!(s.prune(pruned.seq()).unwrap(), None);
        s.close().unwrap();
        let s = Session::open(store, "p").unwrap();
        assert_eq!(*s.surface().unwrap().last().unwrap(), pruned.seq());
        s.close().unwrap();
    });
}

#[test]
fn a_fork_and_a_seed_never_copy_a_running_compaction() {
    each_store(|name, store| {
        let s = talked(store, "f");
        let c = s.begin_compaction(3, 3).unwrap();
        let start = c.start_seq();
        put(&s, "host/after", "{}");
        let child = Session::fork(store, "f", "child", SessionMeta::default()).unwrap();
        assert_eq!(child.running_compaction().unwrap(), None, "{name}");
        let (header, events) = Session::inspect(store, "child").unwrap();
        assert_eq!(header.seed_length, Some(start), "{name}");
        assert_eq!(events.len() as u64, start + 1); // and session/end-seed
        child.close().unwrap();
        let (_, parent) = Session::inspect(store, "f").unwrap();
        assert_err(
            Session::create_seeded(store, "seeded", SessionMeta::default(), parent, None),
            ErrorKind::InvalidInput,
            &["inside compaction"],
        );
        c.abort("done").unwrap();
        s.close().unwrap();
    });
}

#[test]
fn a_pending_approval_keeps_compaction_out_and_park_waits_for_it() {
    each_store(|name, store| {
        let s = Session::create(store, "ap", SessionMeta::default()).unwrap();
        s.inbox().append(Target::NextTurn, msg("go")).unwrap();
        s.open_turn().unwrap();
        s.step_boundary(None, TurnClaim::First).unwrap().unwrap();
        let calling = put(&s, "assistant/message", &assistant("a", &["c1"], "rm"));
        s.end_step(StepOutcome::Continue).unwrap();
        let first = s.surface().unwrap()[0];
        // The call has no result: a range covering it is refused.
        assert_err(
            s.begin_compaction(first, calling),
            ErrorKind::InvalidInput,
            &["\"c1\""],
        );
        let c = s.begin_compaction(first, first).unwrap();
        s.ask_approval("a1", "rm", None, None, None).unwrap();
        let before = count(store, "ap");
        assert_err(s.park(None), ErrorKind::Busy, &["park"]);
        assert_eq!(count(store, "ap"), before, "{name}");
        c.abort("not now").unwrap();
        s.park(None).unwrap();
        let before = count(store, "ap");
        assert_err(
            s.begin_compaction(first, first),
            ErrorKind::Protocol,
            &["parked"],
        );
        assert_err(s.prune(first), ErrorKind::Protocol, &["parked"]);
        assert_eq!(count(store, "ap"), before, "{name}");
        s.close().unwrap();
    });
}

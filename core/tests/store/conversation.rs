//! The conversation on every store (ARCHITECTURE.md#the-conversation): random
//! conversations of valid and invalid surface ops, tool calls and crashes, held to an
//! independent model of the surface fold and of the repair that answers tool calls a
//! crash left without a result. The session, a reopened session, the store's read
//! without owning (`Session::read_surface`) and `verify` must all agree with the model.

use std::collections::HashMap;

use inboxlog::store::Store;
use inboxlog::{Decision, Envelope, ErrorKind, Session, SessionMeta, StepOutcome, Target};
use serde_json::{Value, json};

use crate::{Rng, each_store, msg};

/// The model: the surface as seqs, each node's type and data, and the calls pending.
#[derive(Default)]
struct Model {
    surface: Vec<u64>,
    nodes: HashMap<u64, (String, Value)>,
    /// (call id, turn, step, the seq of its tool/call)
    pending: Vec<(String, u64, u64, Option<u64>)>,
    dispatched: HashMap<String, u64>,
}

impl Model {
    /// What the surface rules say of an op, without applying it.
    fn allows(&self, ty: &str, seq: u64, op: &Value, sources: &[u64], data: &Value) -> bool {
        let mut seen = sources.to_vec();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != sources.len() || sources.iter().any(|&s| s >= seq) {
            return false;
        }
        if op == "append" {
            return true;
        }
        let (start, end) = (op["start"].as_u64().unwrap(), op["end"].as_u64().unwrap());
        let pos = |s| self.surface.iter().position(|&x| x == s);
        let (Some(a), Some(b)) = (pos(start), pos(end)) else {
            return false;
        };
        if a > b || sources.is_empty() {
            return false;
        }
        let shadowed = &self.surface[a..=b];
        if !shadowed.iter().all(|s| sources.contains(s)) {
            return false;
        }
        if ty == "tool/result" {
            let [old] = shadowed else { return false };
            let (old_ty, old_data) = &self.nodes[old];
            let strip = |v: &Value| {
                let mut v = v.clone();
                v["message"]["content"][0]
                    .as_object_mut()
                    .map(|b| b.remove("content"));
                v
            };
            return old_ty == "tool/result" && strip(old_data) == strip(data);
        }
        true
    }

    fn apply(&mut self, ty: &str, seq: u64, op: &Value, data: &Value) {
        self.nodes.insert(seq, (ty.to_owned(), data.clone()));
        if op == "append" {
            self.surface.push(seq);
        } else {
            let pos = |s: u64| self.surface.iter().position(|&x| x == s).unwrap();
            let (a, b) = (
                pos(op["start"].as_u64().unwrap()),
                pos(op["end"].as_u64().unwrap()),
            );
            self.surface.splice(a..=b, [seq]);
        }
        self.calls(ty, seq, data);
    }

    fn calls(&mut self, ty: &str, seq: u64, data: &Value) {
        match ty {
            "assistant/message" => {
                for b in data["message"]["content"].as_array().unwrap() {
                    let id = b["id"].as_str().unwrap_or_default().to_owned();
                    if b["type"] == "tool-call" && !self.pending.iter().any(|p| p.0 == id) {
                        let d = self.dispatched.get(&id).copied();
                        let place = (
                            data["turn"].as_u64().unwrap(),
                            data["step"].as_u64().unwrap(),
                        );
                        self.pending.push((id, place.0, place.1, d));
                    }
                }
            }
            "tool/call" => {
                let id = data["callId"].as_str().unwrap().to_owned();
                if let Some(p) = self.pending.iter_mut().find(|p| p.0 == id) {
                    p.3.get_or_insert(seq);
                }
                self.dispatched.entry(id).or_insert(seq);
            }
            "tool/result" => {
                let id = data["message"]["content"][0]["toolCallId"]
                    .as_str()
                    .unwrap();
                self.pending.retain(|p| p.0 != id);
            }
            "reset" => {
                self.pending.clear();
                self.dispatched.clear();
            }
            _ => {}
        }
    }
}

fn assistant(turn: u64, step: u64, n: u64, calls: &[String]) -> Value {
    let mut content = vec![json!({"type": "text", "text": format!("answer {n}")})];
    content.extend(
        calls
            .iter()
            .map(|id| json!({"type": "tool-call", "id": id, "name": "t", "arguments": "{}"})),
    );
    json!({"turn": turn, "step": step, "message": {"id": format!("a{n}"), "role": "assistant",
        "content": content, "source": {"kind": "model", "provider": "p", "model": "m"}}})
}

fn result(turn: u64, step: u64, id: &str, text: &str) -> Value {
    json!({"turn": turn, "step": step, "message": {"id": format!("r-{id}"), "role": "user",
        "content": [{"type": "tool-result", "toolCallId": id,
            "content": [{"type": "text", "text": text}]}],
        "source": {"kind": "tool", "callId": id}}})
}

fn envelope(op: &Value, sources: &[u64]) -> Envelope {
    Envelope {
        surface_op: Some(serde_json::value::to_raw_value(op).unwrap()),
        source_event_seqs: (!sources.is_empty()).then(|| sources.to_vec()),
        ..Envelope::default()
    }
}

/// Checks the session, the store's read and `verify` against the model.
fn agree(name: &str, store: &dyn Store, s: Option<&Session>, model: &Model, round: u64) {
    let expected: Vec<u64> = model.surface.clone();
    if let Some(s) = s {
        assert_eq!(s.surface().unwrap(), expected, "{name} round {round}");
    }
    let view = Session::read_surface(store, "c").unwrap();
    assert_eq!(
        view.nodes, expected,
        "{name} round {round}: read without owning"
    );
    let projected = expected
        .iter()
        .filter(|seq| {
            let (ty, data) = &model.nodes[seq];
            ty != "assistant/message" || !data["message"]["content"].as_array().unwrap().is_empty()
        })
        .count();
    assert_eq!(view.messages.len(), projected, "{name} round {round}");
    let report = Session::verify(store, "c").unwrap();
    assert!(
        report.off_surface.is_empty() && report.older_shapes.is_empty(),
        "{name}"
    );
}

#[test]
fn random_conversations_fold_as_the_model_on_every_store() {
    each_store(|name, store| {
        let mut rng = Rng(0x5eed_c0de ^ name.len() as u64);
        let mut model = Model::default();
        let mut s = Session::create(store, "c", SessionMeta::default()).unwrap();
        let (mut calls, mut n) = (Vec::<String>::new(), 0u64);
        // How often each path ran: a run that never took the interesting ones proves little.
        let (mut taken, mut refused, mut answered) = (0, 0, 0);
        for round in 0..160 {
            let seq = s.last_seq().unwrap().map_or(0, |l| l + 1);
            let (turn, step) = (s.turn_open().unwrap().unwrap_or(0), 1);
            n += 1;
            match rng.below(10) {
                // A whole user turn: the entered message is appended by the library.
                0 | 1 if s.turn_open().unwrap().is_none() => {
                    s.inbox()
                        .append(Target::NextTurn, msg(&format!("u{n}")))
                        .unwrap();
                    let t = s.open_turn().unwrap();
                    let p = s.propose_step().unwrap();
                    s.decide(Decision::Enter(p.messages)).unwrap();
                    model.calls("reset", 0, &Value::Null);
                    // spliced, turn/start, spliced, step/start, user/message
                    let user = s.last_seq().unwrap().unwrap();
                    model.apply("user/message", user, &json!("append"), &json!({}));
                    let _ = t;
                }
                // The model answers, maybe calling tools; some are dispatched.
                2 | 3 if s.turn_open().unwrap().is_some() => {
                    let ids: Vec<String> = (0..rng.below(3)).map(|k| format!("c{n}-{k}")).collect();
                    let data = assistant(turn, step, n, &ids);
                    s.append("assistant/message", &data.to_string(), Envelope::default())
                        .unwrap();
                    model.apply("assistant/message", seq, &json!("append"), &data);
                    for id in &ids {
                        if rng.below(2) == 0 {
                            let call = json!({"turn": turn, "step": step, "callId": id, "name": "t", "arguments": "{}"});
                            let at = s.last_seq().unwrap().unwrap() + 1;
                            s.append("tool/call", &call.to_string(), Envelope::default())
                                .unwrap();
                            model.calls("tool/call", at, &call);
                        }
                    }
                    calls.extend(ids);
                }
                // A result for a pending call, or a shortened one in place of a result.
                4 if !model.pending.is_empty() => {
                    let id = model.pending[rng.below(model.pending.len() as u64) as usize]
                        .0
                        .clone();
                    let data = result(turn, step, &id, "a long result");
                    s.append("tool/result", &data.to_string(), Envelope::default())
                        .unwrap();
                    model.apply("tool/result", seq, &json!("append"), &data);
                }
                // A random replace, valid or not: the session and the model agree.
                5..=7 if !model.surface.is_empty() => {
                    let pick = |rng: &mut Rng| {
                        if rng.below(8) == 0 {
                            seq + 5 // not on the surface
                        } else {
                            model.surface[rng.below(model.surface.len() as u64) as usize]
                        }
                    };
                    let (a, b) = (pick(&mut rng), pick(&mut rng));
                    let op = json!({"op": "replace", "start": a, "end": b});
                    let mut sources: Vec<u64> = model
                        .surface
                        .iter()
                        .copied()
                        .filter(|_| rng.below(6) != 0)
                        .collect();
                    sources.sort_unstable();
                    let (ty, data) = match model.nodes.get(&a) {
                        Some((t, d)) if t == "tool/result" && rng.below(2) == 0 => {
                            let id = d["message"]["content"][0]["toolCallId"]
                                .as_str()
                                .unwrap()
                                .to_owned();
                            let mut shorter = d.clone();
                            shorter["message"]["content"][0]["content"] =
                                json!([{"type": "text", "text": "short"}]);
                            if rng.below(3) == 0 {
                                shorter["meta"] = json!({"changed": true});
                            }
                            let _ = id;
                            ("tool/result", shorter)
                        }
                        _ => (
                            "user/message",
                            json!({"id": format!("sum{n}"), "role": "user", "content": "summary"}),
                        ),
                    };
                    let allowed = model.allows(ty, seq, &op, &sources, &data);
                    let got = s.append(ty, &data.to_string(), envelope(&op, &sources));
                    match got {
                        Ok(_) => {
                            assert!(
                                allowed,
                                "{name} round {round}: {ty} {op} {sources:?} was taken"
                            );
                            model.apply(ty, seq, &op, &data);
                            taken += 1;
                        }
                        Err(e) => {
                            refused += 1;
                            assert!(!allowed, "{name} round {round}: {ty} {op} {sources:?}: {e}");
                            assert_eq!(e.kind(), ErrorKind::InvalidInput);
                            assert!(e.to_string().contains("surface rule"), "{e}");
                            assert_eq!(
                                s.last_seq().unwrap().map_or(0, |l| l + 1),
                                seq,
                                "nothing written"
                            );
                        }
                    }
                }
                // The step ends (its calls answered first, as an integration must).
                8 if s.turn_open().unwrap().is_some() => {
                    for (id, ..) in model.pending.clone() {
                        let at = s.last_seq().unwrap().unwrap() + 1;
                        let data = result(turn, step, &id, "done");
                        s.append("tool/result", &data.to_string(), Envelope::default())
                            .unwrap();
                        model.apply("tool/result", at, &json!("append"), &data);
                    }
                    if s.end_step(StepOutcome::Completed).unwrap() {
                        s.cancel(inboxlog::CancelCause::User, true).unwrap();
                    } else {
                        s.close_turn().unwrap();
                    }
                    model.calls("reset", 0, &Value::Null);
                }
                // A crash: the next open answers what the turn left pending.
                _ => {
                    let open = s.turn_open().unwrap().is_some();
                    let crashed = rng.below(2) == 0;
                    if crashed {
                        drop(s);
                    } else {
                        s.close().unwrap();
                    }
                    agree(name, store, None, &model, round);
                    s = Session::open(store, "c").unwrap();
                    if open {
                        for (at, (id, turn, step, dispatched)) in (seq..).zip(model.pending.clone())
                        {
                            let events = s.events(at).unwrap();
                            let e = &events[0];
                            assert_eq!(e.ty(), "tool/result", "{name} round {round}");
                            let data: Value = serde_json::from_str(e.data()).unwrap();
                            assert_eq!(data["message"]["content"][0]["toolCallId"], json!(id));
                            let code = if dispatched.is_some() {
                                "TOOL_OUTCOME_UNKNOWN"
                            } else {
                                "TOOL_NOT_STARTED"
                            };
                            assert_eq!(data["error"]["code"], code, "{name} round {round}");
                            assert_eq!(
                                (data["turn"].as_u64(), data["step"].as_u64()),
                                (Some(turn), Some(step))
                            );
                            assert_eq!(e.envelope().source_event_seqs, dispatched.map(|d| vec![d]));
                            model.apply("tool/result", at, &json!("append"), &data);
                            answered += 1;
                        }
                        model.calls("reset", 0, &Value::Null);
                    }
                }
            }
            agree(name, store, Some(&s), &model, round);
        }
        s.close().unwrap();
        assert!(
            taken > 5 && refused > 5 && answered > 2 && !calls.is_empty(),
            "{name}: {taken} replaces taken, {refused} refused, {answered} calls answered by repair"
        );
        store.delete("c").unwrap();
    });
}

#[test]
fn shapes_are_checked_on_append_and_a_stored_older_shape_keeps_its_place() {
    each_store(|name, store| {
        let s = Session::create(store, "shapes", SessionMeta::default()).unwrap();
        // The generic append gives surface types "append"; a shape refused writes nothing.
        let e = s
            .append("user/message", r#"{"id":"u"}"#, Envelope::default())
            .unwrap();
        assert_eq!(
            e.envelope().surface_op.as_ref().unwrap().get(),
            "\"append\""
        );
        for (ty, data, needle) in [
            (
                "assistant/message",
                r#"{"text":"older"}"#,
                "missing field `turn`",
            ),
            (
                "tool/call",
                r#"{"turn":1,"step":1,"callId":"c","name":"t","arguments":{}}"#,
                "arguments",
            ),
            (
                "tool/result",
                r#"{"turn":1,"step":1,"message":{}}"#,
                "message",
            ),
        ] {
            let err = s.append(ty, data, Envelope::default()).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{name}");
            assert!(
                err.to_string().contains(ty) && err.to_string().contains(needle),
                "{name}: {err}"
            );
        }
        assert_eq!(s.last_seq().unwrap(), Some(0), "{name}: nothing written");
        assert_eq!(s.surface().unwrap(), [0]);
        s.close().unwrap();
        store.delete("shapes").unwrap();
    });
}

//! The Rust example of README.md: one prompt through one turn on a JSONL store.
use inboxlog::store::{Durability, JsonlStore};
use inboxlog::{Decided, Decision, Envelope, Message, Session, SessionMeta, StepOutcome, Target};

fn main() -> inboxlog::Result<()> {
    let root = std::env::temp_dir().join(format!("inboxlog-readme-{}", std::process::id()));
    let store = JsonlStore::open(&root, Durability::Sync)?;
    let session = Session::create(&store, "s1", SessionMeta::default())?;
    let prompt = Message::from_json(r#"{"id":"m1","role":"user","content":"hello"}"#)?;
    session.inbox().append(Target::NextTurn, prompt)?;

    let turn = session.open_turn()?;
    let proposal = session.propose_step()?; // claims m1: a durable pure deletion
    let entered = session.decide(Decision::Enter(proposal.messages))?;
    assert_eq!(entered, Decided::Step { turn, step: 1 });
    let reply = r#"{"turn":1,"step":1,"message":{"id":"a1","role":"assistant",
        "content":[{"type":"text","text":"hi!"}],
        "source":{"kind":"model","provider":"scripted","model":"echo"}}}"#;
    session.append("assistant/message", reply, Envelope::default())?; // shape checked
    if !session.end_step(StepOutcome::Completed)? {
        session.close_turn()?;
    }
    for event in session.events(0)? {
        println!("{}", event.to_json());
    }
    for message in session.messages()? {
        println!("the model sees {message}"); // the user's m1, then the reply
    }
    session.close()?;
    std::fs::remove_dir_all(&root).ok();
    Ok(())
}

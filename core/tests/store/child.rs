//! The suite's other processes: this test binary run again with `INBOXLOG_STORE_ROLE`
//! set, running only `child::store_child` on the store its parent names, and saying on
//! stdout what it did; and the parent's handle on such a child ([`Kid`]).

use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::Receiver;
use std::thread;
use std::time::{Duration, Instant};

use inboxlog::store::{self, Durability, Store, StoreOptions};
use inboxlog::{Envelope, ErrorKind, Session, Target};

use crate::{Backend, msg};

const ROLE: &str = "INBOXLOG_STORE_ROLE";
const URL: &str = "INBOXLOG_STORE_URL";
const SCHEMA: &str = "INBOXLOG_STORE_SCHEMA";
const DURABILITY: &str = "INBOXLOG_STORE_DURABILITY";
const ARG: &str = "INBOXLOG_STORE_ARG";

/// The children's entry point, run only by [`Backend::spawn`]; ignored in a normal run.
#[test]
#[ignore = "the store suite's child process: its tests run it with INBOXLOG_STORE_ROLE set"]
fn store_child() {
    // Ends the harness's "test child::store_child ... " line: each line of ours stands alone.
    println!();
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let durability = Durability::parse(&std::env::var(DURABILITY).unwrap()).unwrap();
    let mut options = StoreOptions::durability(durability);
    options.schema = std::env::var(SCHEMA).ok().filter(|s| !s.is_empty());
    let store = store::open(&std::env::var(URL).unwrap(), &options).unwrap();
    let arg = std::env::var(ARG).unwrap_or_default();
    match role.as_str() {
        "holder" => holder(&*store),
        "writer" => writer(&*store),
        "poster" => poster(&*store, &arg),
        "steerer" => steerer(&*store),
        "owner" => owner(&*store),
        "follower" => crate::follow::into_projection(&*store, &mut |line| println!("{line}")),
        other => panic!("unknown role {other}"),
    }
}

/// Opens session "s", leaves a turn open with an event in it, says `holding <seq>`,
/// then runs the parent's commands from stdin: `append` answers `ok <seq>` or
/// `err <kind>`.
fn holder(store: &dyn Store) {
    let s = Session::open(store, "s").unwrap();
    s.inbox().append(Target::NextTurn, msg("held")).unwrap();
    s.open_turn().unwrap();
    let e = s.append("host/x", "{}", Envelope::default()).unwrap();
    println!("holding {}", e.seq());
    for line in std::io::stdin().lock().lines() {
        match line.unwrap().as_str() {
            "append" => match s.append("host/late", "{}", Envelope::default()) {
                Ok(e) => println!("ok {}", e.seq()),
                Err(e) => println!("err {}", e.kind()),
            },
            _ => return,
        }
    }
}

/// Opens session "s" and a turn, says `turn`, then appends forever, saying
/// `ack <event JSON>` for each acknowledged event.
fn writer(store: &dyn Store) {
    let s = Session::open(store, "s").unwrap();
    s.open_turn().unwrap();
    println!("turn");
    for i in 0u64.. {
        let e = s
            .append(
                "host/chunk",
                &format!(r#"{{"i":{i}}}"#),
                Envelope::default(),
            )
            .unwrap();
        println!("ack {}", e.to_json());
    }
}

/// Posts `<name>-<i>` to session "s" `count` times (`arg` is `name:count`), saying
/// `ack <message id>` once each post is acknowledged.
fn poster(store: &dyn Store, arg: &str) {
    let (name, count) = arg.split_once(':').unwrap();
    for i in 0..count.parse::<u64>().unwrap() {
        let id = format!("{name}-{i}");
        store.post("s", Target::NextTurn, &msg(&id)).unwrap();
        println!("ack {id}");
    }
}

/// Posts the message "steer" to `next-step` of session "s", says `ack steer` once it
/// is acknowledged, and exits.
fn steerer(store: &dyn Store) {
    store.post("s", Target::NextStep, &msg("steer")).unwrap();
    println!("ack steer");
}

/// Opens session "s" as soon as it is free, says `open`, then takes posts in forever.
fn owner(store: &dyn Store) {
    let s = loop {
        match Session::open(store, "s") {
            Ok(s) => break s,
            Err(e) if e.kind() == ErrorKind::Locked => thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("{e}"),
        }
    };
    println!("open");
    loop {
        s.receive().unwrap();
    }
}

/// A child process on one backend's store, killed when dropped.
pub struct Kid {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Its complete stdout lines.
    pub lines: Receiver<String>,
}

impl Backend {
    /// Starts a child in `role` (with `arg`) on this store.
    pub fn spawn(&self, role: &str, arg: &str) -> Kid {
        assert!(self.processes, "{}: no other process reaches it", self.name);
        let mut child = crate::common::rerun("child::store_child")
            .env(ROLE, role)
            .env(URL, &self.url)
            .env(SCHEMA, self.options.schema.as_deref().unwrap_or(""))
            .env(DURABILITY, self.options.durability.as_str())
            .env(ARG, arg)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = crate::common::lines_of(&mut child);
        Kid {
            child,
            stdin,
            lines,
        }
    }
}

impl Kid {
    /// Sends the child one command line.
    pub fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// The child's next line, within `wait`.
    #[track_caller]
    pub fn line(&self, wait: Duration) -> String {
        self.lines.recv_timeout(wait).expect("the child answers")
    }

    /// The rest of the first line that starts with `prefix`, within 20 s (the lines
    /// before it are skipped).
    #[track_caller]
    pub fn wait_for(&self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = self.line(deadline.saturating_duration_since(Instant::now()));
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.to_owned();
            }
        }
    }

    /// Sends the child a signal (`-STOP`, `-CONT`).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    /// SIGKILLs the child (a no-op when it already ended) and reaps it.
    pub fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        self.child.wait().unwrap()
    }

    /// Waits for the child to end.
    pub fn wait(&mut self) -> ExitStatus {
        self.child.wait().unwrap()
    }

    /// Whether the child still runs.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

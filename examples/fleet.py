"""A fleet on PostgreSQL: a producer posts, three workers answer, a follower watches.

    python examples/fleet.py [URL]   (default: $INBOXLOG_TEST_PG, else the local server)

A producer posts 3 prompts to each of 20 sessions with ``store.post`` (no session is
open for it). Three worker processes sweep the sessions: each opens whichever is free
(another worker's is ``locked``), takes its posts in, runs a turn per prompt with a
scripted model and closes it. Worker w0 is killed with SIGKILL inside a turn; the
worker that opens that session next finds the turn closed as interrupted, puts the
prompt it had taken back at the head of the inbox, and answers it. A follower prints a
live view of five sessions. At the end every log verifies and every prompt was
answered exactly once. Tables live in the schema ``inboxlog_fleet``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import inboxlog

URL = (sys.argv[1] if len(sys.argv) > 1 and "://" in sys.argv[1] else None) or os.environ.get(
    "INBOXLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"
)
SCHEMA = "inboxlog_fleet"
SESSIONS = [f"job-{i:02}" for i in range(20)]
PROMPTS = 3
WATCHED = SESSIONS[:5]
DOOMED_TURN = 3  # worker w0 dies inside its third turn


def store() -> inboxlog.Store:
    return inboxlog.Store.postgres(URL, schema=SCHEMA)


def requeue_interrupted(s: inboxlog.Session) -> list[str]:
    """Puts back the prompts of the turn the open closed as interrupted (entered into
    a step, never answered), in their order, at the head of the inbox."""
    events = s.events()
    start = max(i for i, e in enumerate(events) if e["type"] == "turn/start")
    turn = events[start:]
    answered = {e["data"]["answers"] for e in turn if e["type"] == "assistant/message"}
    lost = [
        e["data"] for e in turn if e["type"] == "user/message" and e["data"]["id"] not in answered
    ]
    for message in reversed(lost):
        s.inbox.prepend("next-turn", message)
    return [m["id"] for m in lost]


def worker(name: str, stop: Path) -> None:
    """Sweeps the sessions until `stop` exists, answering every prompt it finds."""
    st = store()
    turns = 0
    offset = int(name[1:]) * 7
    while not stop.exists():
        busy = False
        for id in SESSIONS[offset:] + SESSIONS[:offset]:
            try:
                s = st.open(id)
            except inboxlog.LockedError:
                continue
            with s:
                if s.open_report["repairedTurn"] is not None:
                    lost = requeue_interrupted(s)
                    print(f"{name}: resumed {id}, its turn was interrupted; re-queued {lost}")
                s.inbox.receive()
                while s.inbox.next_turn:
                    s.open_turn()
                    proposal = s.propose_step()
                    s.decide({"kind": "enter", "messages": proposal["messages"]})
                    turns += 1
                    if name == "w0" and turns == DOOMED_TURN:
                        print(f"mid-turn {id}", flush=True)
                        time.sleep(60)  # killed here
                    time.sleep(0.01)  # the scripted model thinks
                    for m in proposal["messages"]:
                        s.append(
                            "assistant/message",
                            {
                                "answers": m["id"],
                                "text": f"{name}: done with {m['content']}",
                            },
                        )
                    s.end_step("completed")
                    s.close_turn()
                    busy = True
                    s.inbox.receive()
        if not busy:
            time.sleep(0.05)
    print(f"{name}: stopped after {turns} turns", flush=True)


def produce(st: inboxlog.Store) -> None:
    for k in range(PROMPTS):
        for id in SESSIONS:
            st.post(
                id,
                "next-turn",
                {"id": f"{id}-p{k}", "role": "user", "content": f"task {k}"},
            )
        time.sleep(0.2)


def follow(st: inboxlog.Store, done: threading.Event) -> None:
    """A live view of a few sessions: one line per prompt taken in or answered."""
    followers = [st.follow(id) for id in WATCHED]
    while not done.is_set():
        for f in followers:
            e = f.next(timeout=0.02)
            while e is not None:
                if e["type"] == "assistant/message":
                    print(f"  live {f.session} #{e['seq']:<3} {e['data']['text']}")
                elif e["type"] == "agent/inbox/spliced" and "post" in e["data"]:
                    print(f"  live {f.session} #{e['seq']:<3} took in {e['data']['post']}")
                elif e["type"] == "turn/end" and e["data"]["reason"]["kind"] != "completed":
                    print(f"  live {f.session} #{e['seq']:<3} turn {e['data']['reason']}")
                e = f.next(timeout=0)


def answers(st: inboxlog.Store) -> Counter[str]:
    counts: Counter[str] = Counter()
    for id in SESSIONS:
        _, events = st.inspect(id)
        counts.update(e["data"]["answers"] for e in events if e["type"] == "assistant/message")
    return counts


def spawn(name: str, stop: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, URL, "--worker", name, str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )


def relay(name: str, child: subprocess.Popen[str], kill: bool) -> None:
    """Prints a worker's lines; kills it (SIGKILL) when it says it is mid-turn."""
    assert child.stdout is not None
    for line in child.stdout:
        print(line.rstrip())
        if kill and line.startswith("mid-turn"):
            print(f"killing {name} (pid {child.pid}) with SIGKILL inside a turn")
            child.send_signal(signal.SIGKILL)


def main() -> int:
    if "--worker" in sys.argv:
        i = sys.argv.index("--worker")
        worker(sys.argv[i + 1], Path(sys.argv[i + 2]))
        return 0
    st = store()
    for h in st.list():
        st.delete(h["id"])
    for id in SESSIONS:
        st.create(id).close()
    done = threading.Event()
    watcher = threading.Thread(target=follow, args=(st, done))
    watcher.start()
    stop = Path(tempfile.mkdtemp()) / "stop"
    workers = {name: spawn(name, stop) for name in ("w0", "w1", "w2")}
    relays = [
        threading.Thread(target=relay, args=(name, child, name == "w0"))
        for name, child in workers.items()
    ]
    for r in relays:
        r.start()
    produce(st)
    wanted = {f"{id}-p{k}" for id in SESSIONS for k in range(PROMPTS)}
    deadline = time.monotonic() + 120
    while set(answers(st)) != wanted and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.touch()
    for child in workers.values():
        child.wait()
    for r in relays:
        r.join()
    done.set()
    watcher.join()

    for id in SESSIONS:
        st.verify(id)
    counts = answers(st)
    twice = sorted(p for p, n in counts.items() if n > 1)
    missing = sorted(wanted - set(counts))
    killed = workers["w0"].returncode == -signal.SIGKILL
    print(
        f"{len(SESSIONS)} logs verify; {len(counts)} of {len(wanted)} prompts answered, "
        f"{len(twice)} twice; worker w0 killed: {killed}"
    )
    if twice or missing or not killed:
        print(f"FAILED: twice {twice}, missing {missing}")
        return 1
    print(f"every prompt answered exactly once; psql: SELECT line FROM {SCHEMA}.events ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())

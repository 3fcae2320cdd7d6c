"""A fleet on PostgreSQL: a producer posts, three workers answer, a follower watches.

    python examples/fleet.py [URL] [--sessions N] [--prompts K] [--schema NAME]

URL defaults to $INBOXLOG_TEST_PG, else the local server; N to 20, K to 3. A
producer posts K prompts to each of N sessions with ``store.post`` (no session is
open for it). Three worker processes each hold open every session they can get, all
on ONE store whose connections stay bounded (``max_connections=4``) however many
sessions it holds: a worker opens each session that is free (another worker's is
``locked``), then its eight threads sweep the sessions it holds, taking their posts
in and running a turn per prompt with a scripted model. Worker w0 is killed with
SIGKILL inside a turn: every session it held is free at once, and the survivors open
them when they are idle; opening closes the turns w0's threads were in as
interrupted, and the survivor puts the prompts those turns had claimed back at the
head of the inbox and answers them. A follower prints a live view of five sessions.
At the end every log verifies and every prompt was answered exactly once. Tables
live in the schema ``inboxlog_fleet`` (or NAME).
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import inboxlog

WORKERS = ("w0", "w1", "w2")
MAX_CONNECTIONS = 4  # per worker store, whatever the number of sessions it holds
WATCHED = 5  # sessions the follower shows
DOOMED_TURN = 3  # worker w0 dies inside its third turn
CLAIM_EVERY = 0.5  # seconds between an idle worker's sweeps for free sessions
THREADS = 8  # per worker, sweeping the sessions it holds
# What wrote each answer (SPEC §15.1): the scripted model every worker runs.
MODEL = {"kind": "model", "provider": "scripted", "model": "fleet-1"}


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "url",
        nargs="?",
        default=os.environ.get("INBOXLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--sessions", type=int, default=20, metavar="N")
    parser.add_argument("--prompts", type=int, default=3, metavar="K")
    parser.add_argument("--schema", default="inboxlog_fleet", metavar="NAME")
    # A worker process: its name and the file whose existence tells it to stop.
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sessions < 20 or args.prompts < 1:
        # Fewer, and worker w0 may answer all it holds before its doomed turn.
        parser.error("--sessions must be at least 20, --prompts at least 1")
    return args


def session_ids(n: int) -> list[str]:
    width = len(str(n - 1))
    return [f"job-{i:0{width}}" for i in range(n)]


def store(args: argparse.Namespace) -> inboxlog.Store:
    return inboxlog.Store.postgres(args.url, schema=args.schema, max_connections=MAX_CONNECTIONS)


def requeue_lost(s: inboxlog.Session) -> list[str]:
    """Puts back every prompt the log took in that is neither answered nor waiting (the
    ones an interrupted turn had claimed, entered into a step or not), in their order,
    at the head of the inbox."""
    events = s.events()
    answered = {e["data"]["answers"] for e in events if e["type"] == "assistant/message"}
    waiting = {m["id"] for m in [*s.inbox.next_turn, *s.inbox.next_step]}
    taken = {
        m["id"]: m
        for e in events
        if e["type"] == "agent/inbox/spliced"
        for m in e["data"].get("inserted", [])
    }
    lost = [m for id, m in taken.items() if id not in answered and id not in waiting]
    for message in reversed(lost):
        s.inbox.prepend("next-turn", message)
    return [m["id"] for m in lost]


def claim(
    name: str,
    st: inboxlog.Store,
    order: list[str],
    held: dict[str, inboxlog.Session],
    stop: Path,
) -> int:
    """Opens every session of `order` that no one holds (until `stop` exists); returns
    how many it opened."""
    opened = 0
    for id in order:
        if id in held:
            continue
        if stop.exists():
            break
        try:
            s = st.open(id)
        except inboxlog.LockedError:
            continue
        if s.open_report["repairedTurn"] is not None:
            lost = requeue_lost(s)
            again = f"; re-queued {lost}" if lost else ""
            print(f"{name}: resumed {id}, its turn was interrupted{again}")
        held[id] = s
        opened += 1
    return opened


class Turns:
    """A worker's turn count, shared by its threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0

    def next(self) -> int:
        with self.lock:
            self.count += 1
            return self.count


def answer_all(name: str, s: inboxlog.Session, turns: Turns) -> int:
    """Takes in the prompts posted to `s` and runs a turn per prompt; returns how many
    turns it ran."""
    ran = 0
    s.inbox.receive()
    while s.inbox.next_turn:
        s.open_turn()
        proposal = s.propose_step()
        s.decide({"kind": "enter", "messages": proposal["messages"]})
        ran += 1
        if turns.next() == DOOMED_TURN and name == "w0":
            print(f"mid-turn {s.id}", flush=True)
            time.sleep(60)  # killed here
        time.sleep(0.001)  # the scripted model thinks
        for m in proposal["messages"]:
            # The answer in SPEC §15.1's shape; which prompt it answers, and who answered
            # it, are this example's own keys after the library's.
            text = {"type": "text", "text": f"{name}: done with {m['content']}"}
            message = {
                "id": f"answer-{m['id']}",
                "role": "assistant",
                "content": [text],
                "source": MODEL,
            }
            s.append(
                "assistant/message",
                {
                    "turn": proposal["turn"],
                    "step": proposal["step"],
                    "message": message,
                    "answers": m["id"],
                    "worker": name,
                },
                surface_op="append",
            )
        s.end_step("completed")
        s.close_turn()
        s.inbox.receive()
    return ran


def worker(args: argparse.Namespace, name: str, stop: Path) -> None:
    """Holds every session it can get and answers their prompts until `stop` exists:
    THREADS threads sweep the held sessions, all through the one store."""
    st = store(args)
    ids = session_ids(args.sessions)
    start = WORKERS.index(name) * len(ids) // len(WORKERS)
    order = ids[start:] + ids[:start]
    held: dict[str, inboxlog.Session] = {}
    claim(name, st, order, held, stop)
    print(f"{name}: holds {len(held)} sessions open on one store", flush=True)
    turns = Turns()
    claimed = time.monotonic()
    with ThreadPoolExecutor(THREADS) as pool:
        while not stop.exists():
            answer = functools.partial(answer_all, name, turns=turns)
            if sum(pool.map(answer, list(held.values()))):
                continue
            if time.monotonic() - claimed < CLAIM_EVERY:
                time.sleep(0.05)
                continue
            opened = claim(name, st, order, held, stop)
            claimed = time.monotonic()
            if opened and not stop.exists():
                print(f"{name}: opened {opened} freed sessions, holds {len(held)}")
    for s in held.values():
        s.close()
    print(f"{name}: stopped after {turns.count} turns, holding {len(held)}", flush=True)


def produce(st: inboxlog.Store, ids: list[str], prompts: int) -> None:
    for k in range(prompts):
        for id in ids:
            st.post(
                id,
                "next-turn",
                {"id": f"{id}-p{k}", "role": "user", "content": f"task {k}"},
            )
        time.sleep(0.2)


def follow(st: inboxlog.Store, watched: list[str], done: threading.Event) -> None:
    """A live view of a few sessions: one line per prompt taken in or answered."""
    followers = [st.follow(id) for id in watched]
    while not done.is_set():
        for f in followers:
            e = f.next(timeout=0.02)
            while e is not None:
                if e["type"] == "assistant/message":
                    (said,) = e["data"]["message"]["content"]
                    print(f"  live {f.session} #{e['seq']:<3} {said['text']}")
                elif e["type"] == "agent/inbox/spliced" and "post" in e["data"]:
                    print(f"  live {f.session} #{e['seq']:<3} took in {e['data']['post']}")
                elif e["type"] == "turn/end" and e["data"]["reason"]["kind"] != "completed":
                    print(f"  live {f.session} #{e['seq']:<3} turn {e['data']['reason']}")
                e = f.next(timeout=0)


def answers(st: inboxlog.Store, id: str) -> Counter[str]:
    """How often each prompt of session `id` was answered."""
    _, events = st.inspect(id)
    return Counter(e["data"]["answers"] for e in events if e["type"] == "assistant/message")


def wait_answered(
    st: inboxlog.Store,
    ids: list[str],
    prompts: int,
    workers: dict[str, subprocess.Popen[str]],
) -> None:
    """Waits until every session has an answer to each of its prompts, a worker other
    than w0 exits, w0 exits otherwise than killed, or a deadline passes (the final
    check then names what is missing)."""
    pending = set(ids)
    deadline = time.monotonic() + 120 + len(ids) * prompts * 0.05

    def working() -> bool:
        return all(
            child.poll() is None or (name == "w0" and child.returncode == -signal.SIGKILL)
            for name, child in workers.items()
        )

    while pending and working() and time.monotonic() < deadline:
        pending = {id for id in pending if len(answers(st, id)) < prompts}
        time.sleep(0.5)


def spawn(args: argparse.Namespace, name: str, stop: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            args.url,
            f"--sessions={args.sessions}",
            f"--prompts={args.prompts}",
            f"--schema={args.schema}",
            "--worker",
            name,
            str(stop),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def relay(name: str, child: subprocess.Popen[str], kill: bool) -> None:
    """Prints a worker's lines; kills it (SIGKILL) when it says it is mid-turn."""
    assert child.stdout is not None
    for line in child.stdout:
        print(line.rstrip(), flush=True)
        if kill and line.startswith("mid-turn"):
            print(f"killing {name} (pid {child.pid}) with SIGKILL inside a turn")
            child.send_signal(signal.SIGKILL)


def main(argv: list[str]) -> int:
    args = arguments(argv)
    if args.worker:
        worker(args, args.worker[0], Path(args.worker[1]))
        return 0
    ids = session_ids(args.sessions)
    st = store(args)
    for h in st.list():
        st.delete(h["id"])
    for id in ids:
        st.create(id).close()
    done = threading.Event()
    watcher = threading.Thread(target=follow, args=(st, ids[:WATCHED], done))
    watcher.start()
    stop = Path(tempfile.mkdtemp()) / "stop"
    workers = {name: spawn(args, name, stop) for name in WORKERS}
    relays = [
        threading.Thread(target=relay, args=(name, child, name == "w0"))
        for name, child in workers.items()
    ]
    for r in relays:
        r.start()
    produce(st, ids, args.prompts)
    wait_answered(st, ids, args.prompts, workers)
    stop.touch()
    for child in workers.values():
        child.wait()
    for r in relays:
        r.join()
    done.set()
    watcher.join()

    counts: Counter[str] = Counter()
    for id in ids:
        st.verify(id)
        counts.update(answers(st, id))
    wanted = {f"{id}-p{k}" for id in ids for k in range(args.prompts)}
    twice = sorted(p for p, n in counts.items() if n > 1)
    missing = sorted(wanted - set(counts))
    killed = workers["w0"].returncode == -signal.SIGKILL
    exits = {name: child.returncode for name, child in workers.items()}
    print(
        f"{len(ids)} logs verify; {len(counts)} of {len(wanted)} prompts answered, "
        f"{len(twice)} twice; worker w0 killed: {killed}"
    )
    if twice or missing or not killed or any(exits[name] for name in WORKERS[1:]):
        print(
            f"FAILED: twice {twice[:20]}, missing {missing[:20]} "
            f"({len(missing)}), worker exit statuses {exits}",
            file=sys.stderr,
        )
        return 1
    print(f"every prompt answered exactly once; psql: SELECT line FROM {args.schema}.events ...")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

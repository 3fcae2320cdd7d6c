"""Many machines, one session: inboxlog's PostgreSQL store with two worker processes.

    python examples/postgres.py [URL]   (default: $INBOXLOG_TEST_PG, else the local server)

Worker A takes a prompt, opens a turn and dies mid-step (SIGKILL): the session is free
at once, and this process resumes it with the turn closed as interrupted and the rest
of the inbox replayed. Worker B then holds the session and stops answering (SIGSTOP):
a plain open is refused as locked, a takeover proceeds at once, and worker B, woken,
is fenced: it writes nothing more. Tables live in the schema `inboxlog_demo`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import inboxlog

URL = (sys.argv[1] if len(sys.argv) > 1 and "://" in sys.argv[1] else None) or os.environ.get(
    "INBOXLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"
)
SCHEMA = "inboxlog_demo"
SESSION = "support-42"


def store() -> inboxlog.Store:
    return inboxlog.Store.postgres(URL, schema=SCHEMA)


def worker(role: str) -> None:
    """A worker process: `a` starts a step and waits to be killed; `b` holds the
    session, waits to be stopped and continued, then tries to write."""
    s = store().open(SESSION)
    if role == "a":
        s.inbox.append("next-turn", {"id": "p1", "role": "user", "content": "refund order 7"})
        s.inbox.append("next-turn", {"id": "p2", "role": "user", "content": "and order 9"})
        s.open_turn()
        proposal = s.propose_step()
        s.decide({"kind": "enter", "messages": proposal["messages"]})
        s.append("assistant/chunk", {"text": "Looking up order 7"})
        print("ready", flush=True)
        time.sleep(60)
    else:
        print("ready", flush=True)
        sys.stdin.readline()  # the parent says when (after SIGSTOP and SIGCONT)
        try:
            s.append("assistant/chunk", {"text": "late"})
            print("worker B wrote after the takeover (wrong)", flush=True)
        except inboxlog.FencedError as e:
            print(f"worker B: FencedError: {e}", flush=True)


def spawn(role: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, __file__, URL, "--worker", role],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


def main() -> None:
    if "--worker" in sys.argv:
        worker(sys.argv[sys.argv.index("--worker") + 1])
        return
    st = store()
    if any(h["id"] == SESSION for h in st.list()):
        st.delete(SESSION)
    st.create(SESSION, cwd="/srv/support").close()

    a = spawn("a")
    print(f"worker A (pid {a.pid}) is inside step 1; killing it with SIGKILL")
    a.send_signal(signal.SIGKILL)
    a.wait()
    started = time.monotonic()
    while True:
        try:
            s = st.open(SESSION)
            break
        except inboxlog.LockedError:
            time.sleep(0.02)
    print(f"resumed here after {time.monotonic() - started:.3f} s: {s.open_report}")
    print(f"  pending next-turn: {[m['id'] for m in s.inbox.next_turn]}")
    for e in s.events()[-2:]:
        print(f"  {e['seq']:>3} {e['type']:<12} {e['data']}")
    s.close()

    b = spawn("b")
    os.kill(b.pid, signal.SIGSTOP)
    print(f"worker B (pid {b.pid}) holds the session and is stopped")
    try:
        st.open(SESSION)
    except inboxlog.LockedError as e:
        print(f"plain open: LockedError: {e}")
    with st.open(SESSION, takeover=True) as s:
        print(f"open(takeover=True): owner now; {s.open_report}")
        os.kill(b.pid, signal.SIGCONT)
        assert b.stdin is not None and b.stdout is not None
        b.stdin.write("go\n")
        b.stdin.flush()
        print(b.stdout.readline().strip())
        b.wait()
        s.append("assistant/chunk", {"text": "Refunded order 7"})
        print(f"the log has {s.last_seq + 1} events; psql shows it with:")
        print(f"  SELECT line FROM {SCHEMA}.events WHERE session = '{SESSION}' ORDER BY seq;")


if __name__ == "__main__":
    main()

"""The owner of a session in a process of its own, for the browser tests: it takes posted
messages in, claims and removes, then prints the inbox it left as JSON and exits.

    python inbox_worker.py STORE SESSION ROUNDS [SCHEMA]

STORE is a JSONL directory or a PostgreSQL URL (SCHEMA its schema), as ``Store.open``
takes.

Each round posts three messages (two to next-turn, one to next-step) as another process
would, takes them in, claims a step (next-step and the first next-turn message), removes
one next-turn message, and pauses a little so a watching page sees each state.
"""

from __future__ import annotations

import json
import sys
import time

import inboxlog


def main() -> None:
    root, session_id, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    schema = sys.argv[4] if len(sys.argv) > 4 else None
    poster = inboxlog.Store.open(root, schema=schema)
    with inboxlog.Store.open(root, schema=schema).open(session_id) as session:
        for r in range(rounds):
            poster.post(
                session_id, "next-turn", {"id": f"t{r}a", "role": "user", "content": f"a{r}"}
            )
            poster.post(
                session_id, "next-turn", {"id": f"t{r}b", "role": "user", "content": f"b{r}"}
            )
            poster.post(
                session_id, "next-step", {"id": f"s{r}", "role": "user", "content": f"s{r}"}
            )
            session.inbox.receive()
            time.sleep(0.05)
            if r % 2 == 0:
                turn = session.open_turn()
                proposal = session.propose_step()
                assert proposal["turn"] == turn
                session.decide({"kind": "enter", "messages": proposal["messages"]})
                session.append(
                    "assistant/message",
                    {
                        "turn": turn,
                        "step": proposal["step"],
                        "message": {
                            "id": f"answer-{r}",
                            "role": "assistant",
                            "content": [{"type": "text", "text": f"answer {r}"}],
                            "source": {"kind": "model", "provider": "scripted", "model": "m1"},
                        },
                    },
                    surface_op="append",
                )
                session.end_step("completed")
                session.close_turn()
            time.sleep(0.05)
            session.inbox.remove(f"t{r}b")
            time.sleep(0.05)
        baseline = session.baseline()
    print(json.dumps(baseline), flush=True)


if __name__ == "__main__":
    main()

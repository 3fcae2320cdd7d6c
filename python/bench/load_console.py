"""The console under load (SPEC §14.4), loopback only, each check bounded in time:
POSTs from concurrent posters, SSE followers while connections come and go, and a soak
of connect/read/hang-up cycles with the server's RSS before and after.

    .venv/bin/python python/bench/load_console.py [posts|churn|soak ...]
        [--posts 2000] [--posters 10] [--followers 100] [--rate 50] [--churn 500]
        [--seconds 20] [--cycles 100000] [--tree DIR]

``--tree`` serves from another source tree (its ``python/`` directory on PYTHONPATH of
the server's process): the same checks before and after a change, in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import inboxlog

WRITER = """
import sys, time, json, inboxlog
where, id, rate, seconds = sys.argv[1:5]
store = inboxlog.Store.open(where, "sync")
with store.open(id) as s:
    start = time.monotonic(); i = 0
    while time.monotonic() - start < float(seconds):
        s.append("host/tick", {"i": i, "text": "token " * 8})
        print(json.dumps([s.last_seq, time.time()]), flush=True)
        i += 1
        time.sleep(max(0.0, start + i / float(rate) - time.monotonic()))
"""


def rss_kib(pid: int) -> int:
    found = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert found
    return int(found.group(1))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


async def request(port: int, head: str, body: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head.encode() + body)
    data = await reader.read()
    writer.close()
    return data


async def posts(args: argparse.Namespace, port: int) -> None:
    """``--posts`` POSTs to one session from ``--posters`` keep-alive connections."""
    latencies: list[float] = []

    async def poster(n: int, k: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for i in range(n):
            body = json.dumps(
                {"target": "next-turn", "message": {"id": f"p{k}-{i}", "content": "hi"}}
            )
            start = time.perf_counter()
            writer.write(
                f"POST /api/sessions/load{k % args.sessions or ''}/inbox HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n\r\n{body}".encode()
            )
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 202"), head
            length = re.search(rb"content-length: (\d+)", head, re.I)
            assert length
            await reader.readexactly(int(length.group(1)))
            latencies.append((time.perf_counter() - start) * 1000)
        writer.close()

    start = time.perf_counter()
    each = args.posts // args.posters
    await asyncio.gather(*(poster(each, k) for k in range(args.posters)))
    took = time.perf_counter() - start
    print(
        f"posts: {len(latencies)} from {args.posters} posters in {took:.1f} s: "
        f"{len(latencies) / took:.0f}/s, p50 {pct(latencies, 50):.1f} ms, "
        f"p99 {pct(latencies, 99):.1f} ms"
    )


async def follower(
    port: int, arrivals: dict[int, float], ready: asyncio.Event, stop: asyncio.Event
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET /api/sessions/load/follow HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    )
    await reader.readuntil(b"\r\n\r\n")
    ready.set()
    carry = b""
    while not stop.is_set():
        try:
            data = await asyncio.wait_for(reader.read(1 << 16), 1.0)
        except TimeoutError:
            continue
        if not data:
            break
        now = time.time()
        carry += data
        for found in re.finditer(rb"\nid: (\d+)\n", carry):
            arrivals.setdefault(int(found.group(1)), now)
        carry = carry[carry.rfind(b"\n") :]
    writer.close()


async def churn(args: argparse.Namespace, port: int, where: str, pid: int) -> None:
    """``--followers`` follow a session written at ``--rate`` events/s while
    ``--churn`` connections a second connect, read a few events and hang up."""
    stop = asyncio.Event()
    readies = [asyncio.Event() for _ in range(args.followers)]
    arrivals: list[dict[int, float]] = [{} for _ in range(args.followers)]
    tasks = [
        asyncio.create_task(follower(port, arrivals[i], readies[i], stop))
        for i in range(args.followers)
    ]
    for ready in readies:
        await ready.wait()
    before = rss_kib(pid)
    writer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WRITER,
        where,
        "load",
        str(args.rate),
        str(args.seconds),
        stdout=subprocess.PIPE,
    )
    made = 0

    async def one() -> None:
        nonlocal made
        reader, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(
            f"GET /api/sessions/load/follow HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        )
        with __import__("contextlib").suppress(Exception):
            await asyncio.wait_for(reader.read(4096), 2.0)
        w.close()
        made += 1

    start = time.monotonic()
    pending: set[asyncio.Task[None]] = set()
    while time.monotonic() - start < args.seconds and args.churn:
        task = asyncio.create_task(one())
        pending.add(task)
        task.add_done_callback(pending.discard)
        await asyncio.sleep(
            max(0.0, start + made / args.churn - time.monotonic()) or 1 / args.churn
        )
    out, _ = await writer.communicate()
    await asyncio.sleep(2)
    stop.set()
    await asyncio.gather(*tasks, *pending, return_exceptions=True)
    committed = dict(json.loads(line) for line in out.decode().splitlines())
    latencies = [
        (t - committed[seq]) * 1000
        for got in arrivals
        for seq, t in got.items()
        if seq in committed
    ]
    missing = sum(len(committed) - len(got) for got in arrivals)
    print(
        f"churn: {args.followers} followers, {len(committed)} events at {args.rate}/s, "
        f"{made} connections came and went ({made / args.seconds:.0f}/s): "
        f"p50 {pct(latencies, 50):.1f} ms, p99 {pct(latencies, 99):.1f} ms, "
        f"max {max(latencies, default=0):.1f} ms, {missing} missing; "
        f"server RSS {before / 1024:.1f} -> {rss_kib(pid) / 1024:.1f} MiB"
    )


async def soak(args: argparse.Namespace, port: int, pid: int) -> None:
    """``--cycles`` connect/read/hang-up cycles, 20 at a time; RSS after warm-up and
    at the end."""
    done = 0

    async def worker(n: int) -> None:
        nonlocal done
        for _ in range(n):
            reader, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(
                f"GET /api/sessions/load/follow?since=0 HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{port}\r\n\r\n".encode()
            )
            data = b""
            while b"\nid: 2\n" not in data:
                chunk = await reader.read(1 << 16)
                assert chunk
                data += chunk
            w.close()
            done += 1

    warm = max(1, args.cycles // 20)
    await asyncio.gather(*(worker(warm // 20) for _ in range(20)))
    await asyncio.sleep(1)
    warmed = rss_kib(pid)
    start = time.monotonic()
    await asyncio.gather(*(worker((args.cycles - warm) // 20) for _ in range(20)))
    await asyncio.sleep(1)
    print(
        f"soak: {done} cycles in {time.monotonic() - start:.0f} s; server RSS after "
        f"{warm} {warmed / 1024:.1f} MiB, after all {rss_kib(pid) / 1024:.1f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checks", nargs="*", default=["posts", "churn", "soak"])
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--posters", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=1, help="sessions the posters post to")
    parser.add_argument("--followers", type=int, default=100)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--churn", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--cycles", type=int, default=100_000)
    parser.add_argument("--tree", help="serve from this source tree")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.tree:
        env["PYTHONPATH"] = str(Path(args.tree) / "python")
    with tempfile.TemporaryDirectory() as tmp:
        where = str(Path(tmp) / "logs")
        store = inboxlog.Store.open(where, "sync")
        with store.create("load") as s:
            for i in range(3):
                s.append("host/tick", {"i": i})
        for k in range(1, args.sessions):
            store.create(f"load{k}").close()
        server = subprocess.Popen(
            [sys.executable, "-m", "inboxlog", "serve", where, "--port", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert server.stderr is not None
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", server.stderr.readline())
            assert found
            # uvicorn's access log would fill the pipe: read it away.
            subprocess.Popen(["cat"], stdin=server.stderr, stdout=subprocess.DEVNULL)
            port = int(found.group(1))
            for check in args.checks:
                if check == "posts":
                    asyncio.run(posts(args, port))
                elif check == "churn":
                    asyncio.run(churn(args, port, where, server.pid))
                elif check == "soak":
                    asyncio.run(soak(args, port, server.pid))
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()

"""Commit-to-SSE-event latency of the console (SPEC §14.4): 100 SSE clients follow 10
sessions that 10 writer processes write, through ``inboxlog serve``.

    .venv/bin/python python/bench/bench_console.py [--clients 100] [--sessions 10]
        [--events 200] [--rate 20] [--store DIR_OR_URL] [--schema S] [--durability D]

Each writer appends ``--events`` events to its session at ``--rate`` per second and
records the wall-clock instant each append returned (committed: durable as
``--durability`` says); each client records the instant each event's bytes arrived.
The latency of a delivery is the difference (one machine, one clock), over every
event and every client following its session. The server's RSS is read from
``/proc`` before the clients connect and with all of them connected and idle; their
difference per client is the memory one SSE client costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

import inboxlog

WRITER = """
import json, sys, time, inboxlog
where, schema, durability, id, n, rate = sys.argv[1:7]
store = inboxlog.Store.open(where, durability, schema=schema or None)
with store.open(id) as s:
    pause = 1 / float(rate)
    start = time.monotonic()
    for i in range(int(n)):
        s.append("host/tick", {"i": i, "text": "token " * 8})
        print(json.dumps([s.last_seq, time.time()]), flush=True)
        time.sleep(max(0.0, start + (i + 1) * pause - time.monotonic()))
"""


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert found
    return int(found.group(1))


_ID = re.compile(rb"\nid: (\d+)\n")


async def client(url: str, arrivals: dict[int, float], ready: asyncio.Event, last: int) -> None:
    """One SSE client on a bare socket (an HTTP client library's per-line work would
    be measured too): the instant each event's ``id:`` line arrived."""
    address = httpx.URL(url)
    assert address.port is not None
    reader, writer = await asyncio.open_connection(address.host, address.port)
    path, host = address.raw_path.decode(), address.netloc.decode()
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    carry = b""
    seen = -1
    while seen < last:
        data = await reader.read(1 << 16)
        assert data, "the stream ended"
        now = time.time()
        if b"retry: 1000" in data:
            ready.set()
        carry += data
        for found in _ID.finditer(carry):
            seen = int(found.group(1))
            arrivals[seen] = now
        carry = carry[carry.rfind(b"\n") :]
    writer.close()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def run(args: argparse.Namespace, url: str, pid: int, where: str) -> None:
    ids = [f"bench-{i}" for i in range(args.sessions)]
    before = rss_kib(pid)
    readies = [asyncio.Event() for _ in range(args.clients)]
    arrivals: list[dict[int, float]] = [{} for _ in range(args.clients)]
    tasks = [
        asyncio.create_task(
            client(
                f"{url}/api/sessions/{ids[i % args.sessions]}/follow",
                arrivals[i],
                readies[i],
                args.events - 1,
            )
        )
        for i in range(args.clients)
    ]
    for ready in readies:
        await ready.wait()
    connected = rss_kib(pid)
    writers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WRITER,
            where,
            args.schema or "",
            args.durability,
            id,
            str(args.events),
            str(args.rate),
            stdout=subprocess.PIPE,
        )
        for id in ids
    ]
    outputs = await asyncio.gather(*(w.communicate() for w in writers))
    await asyncio.gather(*tasks)
    after = rss_kib(pid)
    committed = [dict(map(json.loads, out.decode().splitlines())) for out, _ in outputs]
    latencies = [
        (arrived - committed[i % args.sessions][seq]) * 1000
        for i, got in enumerate(arrivals)
        for seq, arrived in got.items()
    ]
    assert len(latencies) == args.clients * args.events, len(latencies)
    print(
        f"{args.clients} clients, {args.sessions} sessions x {args.events} events at "
        f"{args.rate}/s ({args.durability}): {len(latencies)} deliveries"
    )
    print(
        f"commit-to-event latency: p50 {percentile(latencies, 50):.1f} ms, "
        f"p99 {percentile(latencies, 99):.1f} ms, max {max(latencies):.1f} ms, "
        f"mean {statistics.fmean(latencies):.1f} ms"
    )
    print(
        f"server RSS: {before / 1024:.1f} MiB idle, {connected / 1024:.1f} MiB with "
        f"{args.clients} clients ({(connected - before) / args.clients:.0f} KiB per client), "
        f"{after / 1024:.1f} MiB after the run"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="events per second per session")
    parser.add_argument("--store", help="a JSONL directory or a postgresql:// URL (default: temp)")
    parser.add_argument("--schema", default=None)
    parser.add_argument("--durability", default="sync", choices=["sync", "batched", "none"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = args.store or str(Path(tmp) / "logs")
        store = inboxlog.Store.open(where, args.durability, schema=args.schema)
        for i in range(args.sessions):
            id = f"bench-{i}"
            if id in {h["id"] for h in store.list()}:
                store.delete(id)
            store.create(id).close()
        extra = [] if args.schema is None else ["--schema", args.schema]
        server = subprocess.Popen(
            [sys.executable, "-m", "inboxlog", "serve", where, *extra, "--port", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stderr is not None
            banner = server.stderr.readline()
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", banner)
            assert found, banner
            asyncio.run(run(args, f"http://127.0.0.1:{found.group(1)}", server.pid, where))
        finally:
            server.terminate()
            server.wait(30)
        for i in range(args.sessions):
            store.delete(f"bench-{i}")


if __name__ == "__main__":
    main()

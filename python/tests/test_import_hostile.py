"""Hostile imports through the wheel and the CLI (issue #28): a zstd bomb is refused as
too large with bounded memory, and depth and lone surrogates follow one rule."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import inboxlog

HEADER = '{"type":"session","version":0,"id":"bomb","createdAt":1}\n'
BLOCK = 128 << 10  # the largest zstd block


def block(kind: int, size: int, last: bool) -> bytes:
    """A zstd block header: last flag, type (0 raw, 1 RLE), size; little-endian, 3 bytes."""
    return struct.pack("<I", int(last) | kind << 1 | size << 3)[:3]


def zstd_frame(prefix: bytes, repeated: int, count: int, suffix: bytes) -> bytes:
    """One zstd frame: `prefix` raw, then `count` bytes of the byte `repeated` as RLE blocks
    (4 bytes of file per 128 KiB of text), then `suffix` raw. Built by hand: the standard
    library has no zstd."""
    # Magic, then a frame header with no content size and a 128 KiB window (log 17).
    out = bytearray(b"\x28\xb5\x2f\xfd\x00" + bytes([(17 - 10) << 3]))
    out += block(0, len(prefix), False) + prefix
    while count > 0:
        n = min(count, BLOCK)
        out += block(1, n, False) + bytes([repeated])
        count -= n
    out += block(0, len(suffix), True) + suffix
    return bytes(out)


def bomb(path: Path, mib: int) -> Path:
    """A `.jsonl.zstd` log of ~32 KB per GiB whose second line is `mib` MiB long."""
    text = zstd_frame(
        HEADER.encode() + b'{"type":"x","seq":0,"time":0,"data":"', ord("a"), mib << 20, b'"}\n'
    )
    path.write_bytes(text)
    return path


def test_a_hand_built_frame_is_read_as_zstd(tmp_path: Path) -> None:
    source = tmp_path / "small.jsonl.zstd"
    source.write_bytes(
        zstd_frame(
            HEADER.encode() + b'{"type":"x","seq":0,"time":0,"data":"', ord("b"), 300, b'"}\n'
        )
    )
    with inboxlog.import_reference(source, inboxlog.Store.memory()) as s:
        assert s.events()[0]["data"] == "b" * 300


WRAPPER = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(done.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(done.returncode)
"""


def peak(args: list[str], cwd: Path) -> tuple[int, str, int]:
    """Runs `args` in `cwd` as the only child of a fresh interpreter: its exit status,
    its stderr and its peak resident size in KiB (`ru_maxrss` of that one child). The
    directory is not python/, whose source package would shadow the installed one."""
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, check=False, cwd=cwd
    )
    return done.returncode, done.stderr, int(done.stdout.strip())


def test_a_zstd_bomb_is_refused_as_too_large_with_bounded_memory(tmp_path: Path) -> None:
    source = bomb(tmp_path / "bomb.jsonl.zstd", 1024)
    assert source.stat().st_size < 40_000
    root = tmp_path / "logs"
    status, _, bare_kib = peak([sys.executable, "-c", "import inboxlog.__main__"], tmp_path)
    assert status == 0
    status, err, import_kib = peak(
        [sys.executable, "-m", "inboxlog", "import", str(root), str(source)], tmp_path
    )
    assert status == 1, err
    assert err.startswith("inboxlog: too_large: cannot import "), err
    assert "line 2: the line is longer than the limit of 67108864 bytes" in err
    assert not root.exists() or list(root.iterdir()) == []
    # Within the budget of core/FORMAT.md (4 x 64 MiB + 32 MiB) above a bare interpreter
    # that imported the package; without the line limit this source takes gigabytes.
    assert import_kib - bare_kib <= (4 * 64 + 32) << 10, (import_kib, bare_kib)
    print(f"bare interpreter {bare_kib} KiB, import of the bomb {import_kib} KiB")


def test_depth_and_lone_surrogates_follow_one_rule(tmp_path: Path) -> None:
    source = tmp_path / "deep.jsonl"
    deep = "[" * 513 + "]" * 513
    source.write_text(HEADER + f'{{"type":"x","seq":0,"time":0,"data":{deep}}}\n')
    with pytest.raises(inboxlog.TooLargeError, match=r"line 2: .*deeper than 512 levels") as err:
        inboxlog.import_reference(source, inboxlog.Store.memory())
    assert err.value.line == 2
    lone = tmp_path / "lone.jsonl"
    chunk = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}
    plain = json.dumps({"type": "assistant/chunk", "seq": 0, "time": 1, "data": chunk})
    run = {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["x"]}
    packed = json.dumps({"type": "text-chunks", "seq0": 1, "time0": 1, "data": run})
    # The same lone surrogate escape in a plain event and in a packed run's member.
    lone.write_text(
        HEADER
        + plain.replace('"x"', '"\\ud83d"')
        + "\n"
        + packed.replace('"x"', '"\\ud83d"')
        + "\n"
    )
    with inboxlog.import_reference(lone, inboxlog.Store.memory()) as s:
        texts = [e["data"]["chunk"]["text"] for e in s.events()]
    # A str read back cannot hold a lone surrogate: both read as U+FFFD alike.
    assert texts == ["\ufffd", "\ufffd"]

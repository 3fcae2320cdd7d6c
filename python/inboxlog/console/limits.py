"""The console's bounds (SPEC §14.4): every buffer it holds of events, in bytes, per
client, per session and in total, and how long a send may stay untaken.

A client's buffer counts the encoded events queued for it and the body of its send in
progress (a catch-up page included); a session's history counts the JSON of the latest
events its page loads are answered from. A client whose buffer would pass
``client_bytes``, or whose event would take every client's buffers together past
``clients_bytes``, or that leaves a send untaken for ``stall`` seconds, falls behind: it
gets one ``event: error`` (kind ``too_large``) and its connection is closed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

#: The §8 code of ``too_large``, the kind of a client that fell behind.
TOO_LARGE = 12


@dataclass(frozen=True)
class Limits:
    """The console's bounds; ``inboxlog serve`` takes each as ``--NAME`` (``_`` as ``-``)."""

    #: One client's buffer: the encoded events queued for it and its send in progress.
    client_bytes: int = 1 << 20
    #: Every client's buffer together (catch-up pages included).
    clients_bytes: int = 64 << 20
    #: One page of older events a client reads from the store (at least one event).
    page_bytes: int = 256 << 10
    #: The latest events kept per session (their JSON) to answer its page loads.
    history_bytes: int = 1 << 20
    #: Every session's kept events together.
    histories_bytes: int = 16 << 20
    #: Seconds a send may stay untaken before its client falls behind.
    stall: float = 5.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"the console's {f.name} must be a positive number, not {value!r}")
        if self.client_bytes > self.clients_bytes:
            raise ValueError("the console's client_bytes cannot exceed its clients_bytes")
        if self.history_bytes > self.histories_bytes:
            raise ValueError("the console's history_bytes cannot exceed its histories_bytes")


__all__ = ["TOO_LARGE", "Limits"]

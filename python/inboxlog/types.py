"""The JSON shapes that cross the API, as typing aliases and ``TypedDict`` classes.

At run time every value is a plain ``dict`` or ``list``; these names only help type
checkers. Keys keep their wire spelling (``surfaceOp``, ``droppedUnrun``).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

Message = dict[str, Any]
"""A pending unit of work: a dict with a non-empty str ``"id"``; other keys verbatim."""

Target = Literal["next-turn", "next-step"]
StepOutcome = Literal["continue", "completed", "max-tokens"]
Durability = Literal["sync", "batched", "none"]
# How an approval was decided (SPEC §17.1): only "allowed-once" lets the call run.
ApprovalOutcome = Literal["allowed-once", "rejected", "cancelled", "unavailable"]


class _EventRequired(TypedDict):
    type: str
    seq: int
    time: int
    data: Any


class Event(_EventRequired, total=False):
    """One log event (ARCHITECTURE.md#events)."""

    ignorable: bool
    surfaceOp: Any
    sourceEventSeqs: list[int]


class _HeaderRequired(TypedDict):
    format: str
    version: int
    id: str
    createdAt: int


class Header(_HeaderRequired, total=False):
    """The metadata beside a log (ARCHITECTURE.md#header)."""

    cwd: str
    parentSession: str
    seedLength: int
    origin: str
    delegationDepth: int
    agentPreset: str


class Proposal(TypedDict):
    """The claimed input of a step boundary."""

    turn: int
    step: int
    messages: list[Message]


class EnterDecision(TypedDict):
    """Enter a step with this complete final batch."""

    kind: Literal["enter"]
    messages: list[Message]


class RejectDecision(TypedDict):
    """Refuse the input: the turn ends ``blocked``."""

    kind: Literal["reject"]


Decision = EnterDecision | RejectDecision


class StepEntered(TypedDict):
    """``decide`` entered a step."""

    kind: Literal["step"]
    turn: int
    step: int


class TurnEnded(TypedDict):
    """``decide`` or ``close_turn`` ended the turn with ``reason``."""

    kind: Literal["turn-end"]
    turn: int
    reason: dict[str, Any]


Decided = StepEntered | TurnEnded


class StepBoundary(TypedDict):
    """What ``step_boundary`` did when the loop went on: the claim, and what entering
    it unchanged did."""

    proposal: Proposal
    decided: Decided


class _NoticeRequired(TypedDict):
    type: Literal["agent/inbox/inserted", "agent/inbox/discarded", "agent/inbox/claimed"]
    message: Message


class InboxNotice(_NoticeRequired, total=False):
    """One live inbox notification; ``turn`` only on ``agent/inbox/claimed``."""

    turn: int


class ConsumedWork(TypedDict):
    """Result of ``fold_consumed_work``."""

    end: Event | None
    droppedUnrun: bool


class Baseline(TypedDict):
    """The inbox as of the event at ``seq`` (``None``: before any event)."""

    seq: int | None
    next_turn: list[Message]
    next_step: list[Message]


class OpenReport(TypedDict):
    """What opening a stored log found and fixed: bytes of a torn tail dropped, the
    turn closed as interrupted (``None`` when no turn was open), and the compaction
    ended as interrupted (its id; ``None`` when none was running, SPEC §16)."""

    tornBytes: int
    repairedTurn: int | None
    repairedCompaction: str | None


class VerifyReport(TypedDict):
    """What ``Store.verify`` found: the log opens; ``tornBytes`` and ``openTurn`` (with
    ``openStep``) are the repairs opening it for writing would make."""

    header: Header
    events: int
    tornBytes: int
    openTurn: int | None
    openStep: int | None
    parked: bool
    needsRepair: bool
    nextTurn: int
    nextStep: int
    pendingToolCalls: int
    compaction: str | None
    offSurface: list[Finding]
    olderShapes: list[Finding]


class Compacted(TypedDict):
    """What a committed compaction wrote (SPEC §16): its id, its
    ``compaction/summary`` event and the summary's ``user/message``, which replaced the
    range on the surface."""

    compactionId: str
    summary: Event
    message: Event


class Finding(TypedDict):
    """An event ``Store.verify`` names: its ``seq`` and ``why`` (a surface rule it
    breaks, or how its shape differs from what an append accepts now)."""

    seq: int
    why: str


class Surface(TypedDict):
    """What the model sees (SPEC §15.3): the surface's seqs in model-visible order
    (``nodes``) and the messages projected from them."""

    nodes: list[int]
    messages: list[Message]


class ApprovalAsked(TypedDict, total=False):
    """An ``approval/asked`` event's data (SPEC §17.1): ``id`` and ``toolName`` always."""

    id: str
    toolName: str
    callId: str
    arguments: Any
    reason: str


class ParkedTurn(TypedDict):
    """A turn parked on approvals: the approvals its ``turn/parked`` names, and whether
    all are decided (``ready``)."""

    turn: int
    approvals: list[str]
    ready: bool


class ApprovalDecision(TypedDict):
    """An ``approval/decided`` event's data."""

    id: str
    outcome: ApprovalOutcome


class Resumed(TypedDict):
    """What ``Session.resume_parked`` hands on: the ``turn/parked`` data (with the
    host's ``state``) and how each approval it named was decided."""

    turn: int
    parked: dict[str, Any]
    decisions: list[ApprovalDecision]


class Peek(TypedDict):
    """What ``Store.peek`` read without owning the log: where it ends (``events``), a
    torn tail left as it is, the turn and step left open, the inbox, the approvals
    waiting for a decision and the parked turn."""

    header: Header
    events: int
    tornBytes: int
    openTurn: int | None
    openStep: int | None
    baseline: Baseline
    approvals: list[ApprovalAsked]
    parked: ParkedTurn | None


# What ``Store.upgrade`` did: ``from`` is the format version the log had (the newest
# when there was nothing to do), ``events`` how many it holds, ``tornBytes`` a torn tail
# left out. (``from`` is a Python keyword, hence the functional form.)
UpgradeReport = TypedDict("UpgradeReport", {"from": int, "events": int, "tornBytes": int})


__all__ = [
    "ApprovalAsked",
    "ApprovalDecision",
    "ApprovalOutcome",
    "Baseline",
    "Compacted",
    "ConsumedWork",
    "Decided",
    "Decision",
    "Durability",
    "EnterDecision",
    "Event",
    "Finding",
    "Header",
    "InboxNotice",
    "Message",
    "OpenReport",
    "ParkedTurn",
    "Peek",
    "Proposal",
    "RejectDecision",
    "Resumed",
    "StepBoundary",
    "StepEntered",
    "StepOutcome",
    "Surface",
    "Target",
    "TurnEnded",
    "UpgradeReport",
    "VerifyReport",
]

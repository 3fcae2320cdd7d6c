"""ADK's ids (app, user, session) as inboxlog session ids, reversibly.

ADK accepts any string as an app name, a user id or a session id; an inboxlog id is 1-128
characters of ``[A-Za-z0-9._-]`` not starting with ``.`` (SPEC §1.4). Each component is
encoded on its own: ASCII letters, digits and ``-`` stay (so a UUID stays as it is),
every other character becomes ``_`` and the two lowercase hex digits of each of its
UTF-8 bytes (lone surrogates included, as ``surrogatepass`` writes them). The encoding
holds no ``.``, so components joined with ``.`` split back unambiguously. A component
whose encoding is longer than its share of the 128 characters (:data:`APP_LIMIT`,
:data:`USER_LIMIT`, :data:`SESSION_LIMIT`) is replaced by ``_h`` and 30 hex digits of its
SHA-256 (``_h`` is no escape, so a hashed component is never read as an encoded one);
the real ids are then read from the log's first record, which every log of this
integration holds (:mod:`inboxlog.integrations.adk.sessions`).

The three kinds of log have one prefix each, so listing an app's or a user's sessions
is a prefix match on ids:

- ``adks.<app>.<user>.<session>``: one ADK session;
- ``adku.<app>.<user>``: the user's ``user:`` state, shared by the user's sessions;
- ``adka.<app>``: the app's ``app:`` state.

The longest is ``5 + 32 + 1 + 40 + 1 + 49 = 128`` characters.
"""

from __future__ import annotations

import hashlib
import string

APP_LIMIT = 32
"""The longest encoded app name; longer ones are hashed."""
USER_LIMIT = 40
"""The longest encoded user id; longer ones are hashed."""
SESSION_LIMIT = 49
"""The longest encoded session id; longer ones are hashed."""
SESSION = "adks."
"""The id prefix of an ADK session's log."""
USER = "adku."
"""The id prefix of a user's shared state."""
APP = "adka."
"""The id prefix of an app's shared state."""

_KEPT = frozenset(string.ascii_letters + string.digits + "-")
_HASHED = 32


def component(text: str, limit: int = APP_LIMIT) -> str:
    """One id component encoded, or hashed when its encoding is longer than ``limit``
    (at least 32)."""
    encoded = "".join(
        ch if ch in _KEPT else "".join(f"_{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
        for ch in text
    )
    if len(encoded) <= limit:
        return encoded
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return "_h" + digest[: _HASHED - 2]


def decode_component(encoded: str) -> str | None:
    """The text :func:`component` encoded, or ``None`` for a hashed component (or text
    no encoding produces)."""
    if encoded.startswith("_h"):
        return None
    out = bytearray()
    i = 0
    while i < len(encoded):
        ch = encoded[i]
        if ch == "_":
            pair = encoded[i + 1 : i + 3]
            if len(pair) != 2 or any(c not in string.hexdigits for c in pair):
                return None
            out.append(int(pair, 16))
            i += 3
        elif ch in _KEPT:
            out.extend(ch.encode())
            i += 1
        else:
            return None
    try:
        return out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def session_id(app_name: str, user_id: str, session_id: str) -> str:
    """The log id of ADK session ``(app_name, user_id, session_id)``."""
    return ".".join(
        (
            SESSION[:-1],
            component(app_name),
            component(user_id, USER_LIMIT),
            component(session_id, SESSION_LIMIT),
        )
    )


def user_scope(app_name: str, user_id: str) -> str:
    """The log id of the shared ``user:`` state of ``user_id`` in ``app_name``."""
    return USER + component(app_name) + "." + component(user_id, USER_LIMIT)


def app_scope(app_name: str) -> str:
    """The log id of the shared ``app:`` state of ``app_name``."""
    return APP + component(app_name)


def sessions_prefix(app_name: str, user_id: str | None = None) -> str:
    """The prefix of the log ids of an app's sessions, or of one user's."""
    prefix = SESSION + component(app_name) + "."
    return prefix if user_id is None else prefix + component(user_id, USER_LIMIT) + "."


def parse_session(log_id: str) -> tuple[str | None, str | None, str | None] | None:
    """The (app, user, session) a session log id names, ``None`` for a component that was
    hashed; ``None`` for an id that is no ADK session's."""
    if not log_id.startswith(SESSION):
        return None
    parts = log_id[len(SESSION) :].split(".")
    if len(parts) != 3:
        return None
    app, user, session = (decode_component(part) for part in parts)
    return app, user, session


__all__ = [
    "APP",
    "APP_LIMIT",
    "SESSION",
    "SESSION_LIMIT",
    "USER",
    "USER_LIMIT",
    "app_scope",
    "component",
    "decode_component",
    "parse_session",
    "session_id",
    "sessions_prefix",
    "user_scope",
]

"""The C library loaded with ctypes beside the wheel, for the end-to-end tests.

`make test-e2e` passes the library cargo built (wherever its target dir is); run by
hand, CARGO_TARGET_DIR is honoured as cargo does.
"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = Path(
    os.environ.get("INBOXLOG_LIB")
    or Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "debug" / "libinboxlog.so"
)

OK = 0

_p, _s = ctypes.c_void_p, ctypes.c_char_p
_out = _err = ctypes.POINTER(ctypes.c_void_p)
_i64, _u64, _bool = ctypes.c_int64, ctypes.c_uint64, ctypes.POINTER(ctypes.c_bool)

# The prototypes of the functions the tests call (include/inboxlog.h).
PROTOTYPES: dict[str, list[Any]] = {
    "inboxlog_store_open_jsonl": [_s, _s, _out, _err],
    "inboxlog_store_inspect": [_p, _s, _out, _err],
    "inboxlog_store_verify": [_p, _s, _out, _err],
    "inboxlog_session_open": [_p, _s, _out, _err],
    "inboxlog_session_create": [_p, _s, _s, _out, _err],
    "inboxlog_session_open_report": [_p, _out, _err],
    "inboxlog_session_append": [_p, _s, _s, _s, _out, _err],
    "inboxlog_session_events": [_p, _u64, _out, _err],
    "inboxlog_session_close": [_p, _err],
    "inboxlog_session_watch": [_p, _err],
    "inboxlog_session_poll": [_p, _out, _err],
    "inboxlog_inbox_next_turn": [_p, _out, _err],
    "inboxlog_inbox_append": [_p, _s, _s, _err],
    "inboxlog_session_open_turn": [_p, _s, ctypes.POINTER(_u64), _err],
    "inboxlog_session_propose_step": [_p, _out, _err],
    "inboxlog_session_decide": [_p, _s, _s, _out, _err],
    "inboxlog_session_end_step": [_p, _s, _s, _bool, _err],
    "inboxlog_session_close_turn": [_p, _s, _out, _err],
    "inboxlog_session_fail": [_p, _s, _s, _err],
    "inboxlog_session_baseline": [_p, _i64, _out, _err],
    "inboxlog_fold_consumed_work": [_s, _out, _err],
    "inboxlog_session_surface": [_p, _out, _err],
    "inboxlog_store_surface": [_p, _s, _out, _err],
}


class C:
    """The C library with the prototypes above; results as JSON text or parsed."""

    def __init__(self) -> None:
        if not LIBRARY.exists():
            pytest.fail(f"{LIBRARY} is missing: run `cargo build -p inboxlog-ffi` first")
        lib = ctypes.CDLL(str(LIBRARY))
        for name, args in PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        for name in (
            "inboxlog_session_free",
            "inboxlog_store_free",
            "inboxlog_string_free",
        ):
            getattr(lib, name).argtypes, getattr(lib, name).restype = [_p], None
        self.lib = lib

    def call_text(self, name: str, *args: Any) -> tuple[int, str | None]:
        """Calls `name(*args, &error)`; returns (status, the error JSON text or None)."""
        error = ctypes.c_void_p()
        status = getattr(self.lib, name)(*args, ctypes.byref(error))
        text = None
        if error.value:
            text = ctypes.string_at(error.value).decode()
            self.lib.inboxlog_string_free(error)
        return status, text

    def call(self, name: str, *args: Any) -> tuple[int, Any]:
        """Calls `name(*args, &error)`; returns (status, error dict or None)."""
        status, text = self.call_text(name, *args)
        return status, None if text is None else json.loads(text)

    def text(self, name: str, *args: Any) -> str:
        """Calls a function with a `char **out_json`; returns the string as given."""
        out = ctypes.c_void_p()
        status, error = self.call(name, *args, ctypes.byref(out))
        assert status == OK, error
        try:
            return ctypes.string_at(out.value).decode()
        finally:
            self.lib.inboxlog_string_free(out)

    def string(self, name: str, *args: Any) -> Any:
        """Calls a function with a `char **out_json` and returns the parsed JSON."""
        return json.loads(self.text(name, *args))

    def handle(self, name: str, *args: Any) -> ctypes.c_void_p:
        out = ctypes.c_void_p()
        status, error = self.call(name, *args, ctypes.byref(out))
        assert status == OK, error
        return out


@pytest.fixture(scope="module")
def c() -> C:
    return C()

"""What the browser tests share: the server under test in a process of its own, Debian's
headless Chromium, and the page's state read through the stable hooks of SPEC §14.2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

import inboxlog

HERE = Path(__file__).resolve().parent
CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,800",
]
# Long enough for a loaded machine; every wait ends as soon as its condition holds.
WAIT = 30.0


class Server:
    """``serve_store.py`` in a process of its own: started, killed and started again on
    the port it first got."""

    def __init__(self, root: Path | str, logs: Path, *options: str) -> None:
        self.root = root
        self.logs = logs
        self.options = list(options)
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        with (self.logs / "server.log").open("a") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "serve_store.py"),
                    str(self.root),
                    str(self.port),
                    *self.options,
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("serving "), f"server said {line!r}; see {self.logs}/server.log"
        self.url = line.split()[1]
        self.port = int(self.url.split(":")[2].split("/")[0])
        deadline = time.monotonic() + WAIT
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}api/health", timeout=5) as answer:
                    assert json.load(answer) == {"ok": True}
                    return
            except OSError:
                assert time.monotonic() < deadline, "the server never answered /api/health"
                time.sleep(0.05)

    def kill(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc = None


def chromium(profile: Path) -> WebDriver:
    """Debian's Chromium, headless, with a new empty profile at ``profile`` and the
    browser's console kept for :func:`assert_clean`; no browser comes from elsewhere."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail("needs Debian's chromium and chromium-driver (make browser installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    profile.mkdir()
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


def until(driver: WebDriver, condition: Callable[[], Any], what: str) -> Any:
    return WebDriverWait(driver, WAIT, poll_frequency=0.05).until(
        lambda _: condition(), message=what
    )


def page_queues(driver: WebDriver) -> dict[str, list[str]]:
    return driver.execute_script(  # type: ignore[no-any-return]
        """return Object.fromEntries(["next-turn", "next-step"].map((t) => [t,
            [...document.querySelectorAll(`[data-queue="${t}"] [data-message-id]`)]
                .map((n) => n.dataset.messageId)]));"""
    )


def page_texts(driver: WebDriver) -> dict[str, str]:
    return driver.execute_script(  # type: ignore[no-any-return]
        """return Object.fromEntries([...document.querySelectorAll("[data-message-id]")]
            .map((n) => [n.dataset.messageId, n.querySelector(".msg-text").textContent]));"""
    )


def row_seqs(driver: WebDriver) -> list[int]:
    return driver.execute_script(  # type: ignore[no-any-return]
        "return [...document.querySelectorAll('[data-seq]')].map((n) => Number(n.dataset.seq));"
    )


def ids(baseline: inboxlog.types.Baseline) -> dict[str, list[str]]:
    return {
        "next-turn": [m["id"] for m in baseline["next_turn"]],
        "next-step": [m["id"] for m in baseline["next_step"]],
    }


# Counts the page's EventSources and drops the events whose seq is in window.__drop
# (once each), run before the page's own scripts: CDP injects it into every new document,
# outside the page's CSP.
COUNT_STREAMS = """
(() => {
  const Native = window.EventSource;
  const made = [];
  window.__drop = new Set();
  window.__streams = () => made.filter((s) => s.readyState !== Native.CLOSED).length;
  window.EventSource = class extends Native {
    constructor(...args) { super(...args); made.push(this); }
    set onmessage(handler) {
      super.onmessage = (message) => {
        if (window.__drop.delete(Number(message.lastEventId))) return;
        handler(message);
      };
    }
    get onmessage() { return super.onmessage; }
  };
})();
"""


def count_streams(driver: WebDriver) -> None:
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": COUNT_STREAMS})


def open_session(driver: WebDriver, server: Server, session_id: str) -> None:
    driver.get(f"{server.url}sessions/{session_id}")
    until(driver, lambda: driver.execute_script("return document.body.dataset.ready"), "ready")


def assert_clean(driver: WebDriver, allow: tuple[str, ...] = ()) -> None:
    """No console error, CSP violation or fresh baseline since the last call."""
    bad = [
        e["message"]
        for e in driver.get_log("browser")  # type: ignore[no-untyped-call]
        if (e["level"] == "SEVERE" or "new baseline" in e["message"])
        and not any(a in e["message"] for a in allow)
    ]
    assert bad == []


def message(id: str, content: str) -> dict[str, str]:
    return {"id": id, "role": "user", "content": content}

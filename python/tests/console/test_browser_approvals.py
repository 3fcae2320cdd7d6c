"""The pending approvals of SPEC §17.3 on a session's page, in a real browser (Debian's
headless Chromium against serve_store.py, as test_browser.py): shown as text, decided
with allow and reject, and kept live from the page's one stream while the session's
owner (held open by the test) asks, takes decisions in, resumes and ends its turn."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import WAIT, Server, assert_clean, chromium, message, open_session, until
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

import inboxlog

#: Markup that runs script if a page ever renders it as HTML.
HOSTILE = [
    '<img src=x onerror="window.__pwned=1">',
    "</pre><script>window.__pwned=2</script>",
    '"><svg onload="window.__pwned=3"></svg>',
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def store(root: Path) -> inboxlog.Store:
    return inboxlog.Store(root, durability="none")


@pytest.fixture
def server(root: Path, tmp_path: Path, store: inboxlog.Store) -> Iterator[Server]:
    running = Server(root, tmp_path)
    running.start()
    yield running
    if running.proc is not None:
        running.kill()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    driver = chromium(tmp_path / "chromium-profile")
    try:
        yield driver
    finally:
        driver.quit()


def ask(session: inboxlog.Session, *approvals: tuple[str, str, Any, str]) -> None:
    """Turn 1 with step 1 open, and each of ``approvals`` (id, tool, arguments, reason)
    asked."""
    session.inbox.append("next-turn", message("u1", "go"))
    session.open_turn()
    proposal = session.propose_step()
    session.decide({"kind": "enter", "messages": proposal["messages"]})
    for id, tool, arguments, reason in approvals:
        session.ask_approval(id, tool, None, arguments, reason)


def shown(driver: WebDriver) -> list[dict[str, Any]]:
    """The approvals on the page, in order: id, tool, reason, arguments (their text or
    None when absent) and whether each button is enabled."""
    return driver.execute_script(  # type: ignore[no-any-return]
        """return [...document.querySelectorAll("[data-approval-id]")].map((n) => ({
            id: n.dataset.approvalId,
            tool: n.querySelector("[data-field=tool]").textContent,
            reason: n.querySelector("[data-field=reason]")?.textContent ?? null,
            arguments: n.querySelector("[data-field=arguments]")?.textContent ?? null,
            allow: !n.querySelector("[data-action=allow]").disabled,
            reject: !n.querySelector("[data-action=reject]").disabled,
        }));"""
    )


def shown_ids(driver: WebDriver) -> list[str]:
    return [a["id"] for a in shown(driver)]


def parked_line(driver: WebDriver) -> tuple[str | None, str]:
    """The parked turn's line: its ``data-state`` (None while hidden) and text."""
    line = driver.find_element(By.CSS_SELECTOR, "[data-role=parked]")
    if line.get_attribute("hidden") is not None:
        return None, ""
    return line.get_attribute("data-state"), line.text


def take_in(session: inboxlog.Session, id: str) -> None:
    """Takes in what was posted until approval ``id`` is decided (the decision travels
    through the store to the owner, as a post does)."""
    deadline = time.monotonic() + WAIT
    while any(a["id"] == id for a in session.pending_approvals()):
        assert time.monotonic() < deadline, f"the decision of {id} never came"
        if session.inbox.receive() == 0:
            time.sleep(0.02)


def decided(session: inboxlog.Session) -> list[dict[str, Any]]:
    return [e["data"] for e in session.events() if e["type"] == "approval/decided"]


def test_an_approval_is_allowed_from_the_page_and_goes_when_decided(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    with store.create("s") as s:
        ask(s, ("a1", "rm", {"path": "x"}, "deletes a file"), ("a2", "send", "hi", "mails"))
        s.park({"run": "state"})
        s.flush()
        open_session(browser, server, "s")
        browser.execute_script("window.__sameDocument = true")
        args = json.dumps({"path": "x"}, indent=2)
        assert shown(browser) == [
            {"id": "a1", "tool": "rm", "reason": "deletes a file", "arguments": args}
            | {"allow": True, "reject": True},
            {"id": "a2", "tool": "send", "reason": "mails", "arguments": "hi"}
            | {"allow": True, "reject": True},
        ]
        assert parked_line(browser) == ("waiting", "Turn 1 is parked, waiting for 2 decisions.")
        assert browser.find_element(By.CSS_SELECTOR, "[data-role=turn]").text == "turn 1 parked"

        allow = browser.find_element(By.CSS_SELECTOR, '[data-approval-id="a1"] [data-action=allow]')
        allow.click()
        notice = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]")
        until(browser, lambda: notice.text.startswith("Allowed a1 (post "), "the post answered")
        post = re.search(r"\(post ([^)]+)\)", notice.text)
        assert post is not None, notice.text
        # Sent, not yet taken in: still shown, its buttons off until it is decided.
        assert [(a["id"], a["allow"], a["reject"]) for a in shown(browser)] == [
            ("a1", False, False),
            ("a2", True, True),
        ]
        take_in(s, "a1")
        assert decided(s) == [{"id": "a1", "outcome": "allowed-once", "post": post.group(1)}]
        until(browser, lambda: shown_ids(browser) == ["a2"], "a1 goes once decided")
        assert parked_line(browser) == ("waiting", "Turn 1 is parked, waiting for 1 decision.")

        # Decided from elsewhere (another handle on the store): it goes too, no reload.
        store.decide("s", "a2", "rejected")
        take_in(s, "a2")
        until(browser, lambda: shown_ids(browser) == [], "a2 goes once decided")
        assert parked_line(browser)[0] == "ready"
        assert s.approvals_ready()

        # Resumed: no longer parked; an approval asked while the page is open appears,
        # and a turn ended (cancelled) takes it away.
        s.resume_parked()
        s.ask_approval("a3", "deploy", None, ["prod"], None)
        s.flush()
        until(browser, lambda: shown_ids(browser) == ["a3"], "a3 appears")
        assert parked_line(browser) == (None, "")
        assert shown(browser)[0]["reason"] is None
        assert shown(browser)[0]["arguments"] == json.dumps(["prod"], indent=2)
        assert browser.find_element(By.CSS_SELECTOR, "[data-role=turn]").text == "turn 1 open"
        s.cancel()
        s.flush()
        until(browser, lambda: shown_ids(browser) == [], "a3 goes with the turn")
        panel = browser.find_element(By.CSS_SELECTOR, "[data-role=approvals-panel]")
        assert panel.get_attribute("hidden") is not None
        assert decided(s)[-1] == {"id": "a3", "outcome": "cancelled"}
    assert browser.execute_script("return window.__sameDocument") is True, "no reload"
    assert_clean(browser)


def test_reject_posts_rejected(browser: WebDriver, server: Server, store: inboxlog.Store) -> None:
    with store.create("s") as s:
        ask(s, ("a1", "rm", None, "why not"))
        s.flush()
        open_session(browser, server, "s")
        assert shown(browser)[0]["arguments"] is None
        assert parked_line(browser) == (None, "")
        browser.find_element(By.CSS_SELECTOR, "[data-action=reject]").click()
        take_in(s, "a1")
        assert [(d["id"], d["outcome"]) for d in decided(s)] == [("a1", "rejected")]
        until(browser, lambda: shown_ids(browser) == [], "a1 goes once decided")
        # One decision only, however the page was clicked: nothing else was posted.
        assert s.inbox.receive() == 0
    assert_clean(browser)


def test_hostile_approval_text_is_shown_as_text(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    with store.create("s") as s:
        ask(s, (HOSTILE[0], HOSTILE[1], {"html": HOSTILE[2]}, HOSTILE[0]))
        s.flush()
        open_session(browser, server, "s")
        # And one asked while the page is open.
        s.ask_approval("live", HOSTILE[2], None, HOSTILE[1], HOSTILE[2])
        s.flush()
        until(browser, lambda: len(shown(browser)) == 2, "the live one shown")
    first, second = shown(browser)
    assert (first["id"], first["tool"], first["reason"]) == (HOSTILE[0], HOSTILE[1], HOSTILE[0])
    assert first["arguments"] == json.dumps({"html": HOSTILE[2]}, indent=2)
    assert (second["tool"], second["reason"], second["arguments"]) == (
        HOSTILE[2],
        HOSTILE[2],
        HOSTILE[1],
    )
    markup = browser.execute_script(
        "return document.querySelectorAll('main img, main svg, main script').length;"
    )
    assert markup == 0
    # A failed image load would have run its handler by now: the live one is shown.
    assert browser.execute_script("return window.__pwned") is None
    assert_clean(browser)


def test_a_read_only_console_disables_the_decisions(
    browser: WebDriver, root: Path, tmp_path: Path, store: inboxlog.Store
) -> None:
    with store.create("s") as s:
        ask(s, ("a1", "rm", {"path": "x"}, "deletes a file"))
        s.park()  # so that opening it again leaves the turn as it is
    read_only = Server(root, tmp_path, "--read-only")
    read_only.start()
    try:
        open_session(browser, read_only, "s")
        assert [(a["id"], a["allow"], a["reject"]) for a in shown(browser)] == [
            ("a1", False, False)
        ]
        button = browser.find_element(By.CSS_SELECTOR, "[data-action=allow]")
        assert button.get_attribute("title") == "this console is read-only"
        # The page's own request, were it sent, is refused.
        status = browser.execute_async_script(
            """const done = arguments[arguments.length - 1];
            fetch("../api/sessions/s/approvals", {method: "POST",
                headers: {"content-type": "application/json"},
                body: JSON.stringify({id: "a1", outcome: "allowed-once"})})
              .then((r) => done(r.status));"""
        )
        assert status == 403
        assert_clean(browser, allow=("403",))
    finally:
        read_only.kill()
    # Opening takes in whatever was posted: nothing was.
    with store.open("s") as s:
        assert [a["id"] for a in s.pending_approvals()] == ["a1"]
        assert decided(s) == []

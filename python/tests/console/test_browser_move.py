"""Moving pending input from a session's page (SPEC §17.5), in a real browser (Debian's
headless Chromium against serve_store.py, as test_browser.py): each pending message's
``data-action="move"`` posts the move, the session's owner (held open by the test) applies
it as a removal with outcome ``moved`` and an insertion, and the page's queues follow
both splices from its one stream; a move of a message gone meanwhile is rejected and
said; a read-only console disables the control and refuses the post."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import Server, assert_clean, chromium, ids, message, open_session, page_queues, until
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

import inboxlog


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


def moves(driver: WebDriver) -> dict[str, dict[str, Any]]:
    """Each pending message's move control: where it sends the message, its label and
    whether it is enabled."""
    return driver.execute_script(  # type: ignore[no-any-return]
        """return Object.fromEntries([...document.querySelectorAll("[data-message-id]")]
            .map((n) => [n.dataset.messageId, n.querySelector("[data-action=move]")])
            .map(([id, b]) => [id, {target: b.dataset.target, label: b.textContent,
                enabled: !b.disabled, title: b.title}]));"""
    )


def click_move(driver: WebDriver, id: str) -> str:
    """Clicks message ``id``'s move and returns the post id the page says it sent."""
    driver.find_element(By.CSS_SELECTOR, f'[data-message-id="{id}"] [data-action=move]').click()
    notice = driver.find_element(By.CSS_SELECTOR, "[data-role=notice]")
    until(driver, lambda: notice.text.startswith(f"Move of {id} to "), "the post answered")
    post = re.search(r"\(post ([^)]+)\)", notice.text)
    assert post is not None, notice.text
    return post.group(1)


def notice(driver: WebDriver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "[data-role=notice]").text


def summary_of(driver: WebDriver, seq: int) -> str:
    return driver.find_element(By.CSS_SELECTOR, f'[data-seq="{seq}"] summary').text


def test_send_now_moves_a_next_turn_message_to_the_next_step_live(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", message("m1", "one"))
        s.inbox.append("next-turn", message("m2", "two"))
        s.inbox.append("next-step", message("m3", "three"))
        s.flush()
        open_session(browser, server, "s")
        browser.execute_script("window.__sameDocument = true")
        send_now = {"target": "next-step", "label": "Send now", "enabled": True}
        next_turn = {"target": "next-turn", "label": "Next turn", "enabled": True}
        now = send_now | {"title": "Move to the end of the next step"}
        later = next_turn | {"title": "Move to the end of the next turn"}
        assert moves(browser) == {"m1": now, "m2": now, "m3": later}

        post = click_move(browser, "m1")
        assert notice(browser) == f"Move of m1 to next-step sent (post {post})."
        # Sent, not yet applied: where it was, its move off until it moves.
        assert page_queues(browser) == {"next-turn": ["m1", "m2"], "next-step": ["m3"]}
        assert moves(browser)["m1"]["enabled"] is False
        assert s.inbox.receive() == 1
        s.flush()
        removal, insertion = s.events()[-2:]
        assert removal["data"] == {
            "target": "next-turn",
            "start": 0,
            "removedCount": 1,
            "inserted": [],
            "outcome": "moved",
        }
        assert insertion["data"] == {
            "target": "next-step",
            "start": 1,
            "inserted": [message("m1", "one")],
            "post": post,
        }
        expected = {"next-turn": ["m2"], "next-step": ["m3", "m1"]}
        assert ids(s.baseline()) == expected
        until(browser, lambda: page_queues(browser) == expected, "m1 in next-step")
        assert moves(browser) == {"m2": now, "m3": later, "m1": later}
        until(browser, lambda: summary_of(browser, insertion["seq"]) != "", "both rows shown")
        assert summary_of(browser, removal["seq"]) == "next-turn: moved 1"
        assert summary_of(browser, insertion["seq"]) == "next-step: added m1"

        # And back: a next-step message goes to the end of next-turn.
        click_move(browser, "m3")
        assert s.inbox.receive() == 1
        s.flush()
        expected = {"next-turn": ["m2", "m3"], "next-step": ["m1"]}
        assert ids(s.baseline()) == expected
        until(browser, lambda: page_queues(browser) == expected, "m3 in next-turn")
        assert moves(browser)["m3"] == now
        # Moves are neither claims nor cancellations: no work was dropped.
        assert inboxlog.fold_consumed_work(s.events())["droppedUnrun"] is False
    assert browser.execute_script("return window.__sameDocument") is True, "no reload"
    assert_clean(browser)


def test_a_move_of_a_message_removed_meanwhile_is_rejected_and_said(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", message("m1", "one"))
        s.inbox.append("next-step", message("m2", "two"))
        s.flush()
        open_session(browser, server, "s")
        # Removed by another process: posted before the click, not yet applied, so the
        # page still shows m1 when its move is clicked.
        store.remove_pending("s", "m1")
        post = click_move(browser, "m1")
        assert page_queues(browser)["next-turn"] == ["m1"]
        assert s.inbox.receive() == 2
        s.flush()
        rejected = [e["data"] for e in s.events() if e["type"] == "agent/inbox/rejected"]
        assert [(r["move"], r["reason"]["kind"], r["post"]) for r in rejected] == [
            ({"id": "m1", "target": "next-step"}, "not_found", post)
        ]
        expected = {"next-turn": [], "next-step": ["m2"]}
        assert ids(s.baseline()) == expected
        until(browser, lambda: page_queues(browser) == expected, "m1 gone")
        said = 'Move of m1 rejected: message "m1" is not pending'
        until(browser, lambda: notice(browser) == said, "the rejection said")
        kind = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]").get_attribute(
            "data-kind"
        )
        assert kind == "error"
        assert moves(browser)["m2"]["enabled"] is True
        # Nothing else was posted; the page followed without a new baseline.
        assert s.inbox.receive() == 0
    assert_clean(browser)


def test_a_read_only_console_disables_move_and_refuses_its_post(
    browser: WebDriver, root: Path, tmp_path: Path, store: inboxlog.Store
) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", message("m1", "one"))
        s.inbox.append("next-step", message("m2", "two"))
    read_only = Server(root, tmp_path, "--read-only")
    read_only.start()
    try:
        open_session(browser, read_only, "s")
        assert {id: (m["enabled"], m["title"]) for id, m in moves(browser).items()} == {
            "m1": (False, "this console is read-only"),
            "m2": (False, "this console is read-only"),
        }
        # Remove and replace too: every control of the queues is off.
        enabled = browser.execute_script(
            "return [...document.querySelectorAll('[data-queue] button')]"
            ".filter((b) => !b.disabled).length;"
        )
        assert enabled == 0
        # The page's own request, were it sent, is refused.
        status = browser.execute_async_script(
            """const done = arguments[arguments.length - 1];
            fetch("../api/sessions/s/inbox/move", {method: "POST",
                headers: {"content-type": "application/json"},
                body: JSON.stringify({id: "m1", target: "next-step"})})
              .then((r) => done(r.status));"""
        )
        assert status == 403
        assert_clean(browser, allow=("403",))
    finally:
        read_only.kill()
    # Opening takes in whatever was posted: nothing was.
    with store.open("s") as s:
        assert ids(s.baseline()) == {"next-turn": ["m1"], "next-step": ["m2"]}
        assert [e["type"] for e in s.events()] == ["agent/inbox/spliced"] * 2

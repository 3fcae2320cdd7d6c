"""The console of SPEC §14.2 in a real browser: Debian's headless Chromium driven by
Selenium against a real uvicorn serving a store on 127.0.0.1 (serve_store.py): a JSONL
directory, and PostgreSQL for the queues followed across processes.

Each test opens a fresh profile. Page state is read through the stable hooks of §14.2
(``data-seq``, ``data-queue``, ``data-message-id``, ``data-action``, ``data-field``) and
compared with what the store holds; every test ends with the browser's console clean (no
error, no CSP violation, no queue projection that had to start again from a baseline).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import (
    HERE,
    WAIT,
    Server,
    assert_clean,
    chromium,
    count_streams,
    ids,
    message,
    open_session,
    page_queues,
    page_texts,
    row_seqs,
    until,
)
from conftest import PG_URL, said, sql, text, tool_call, tool_result
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

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
def pg(tmp_path: Path) -> Iterator[tuple[inboxlog.Store, Server, str]]:
    """A PostgreSQL store in a schema of its own (dropped afterwards), its console served
    by a process of its own, and the schema's name. Skipped when no server answers at
    INBOXLOG_TEST_PG, except under CI=true, as conftest's stores are."""
    schema = f"py_console_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    try:
        store = inboxlog.Store.postgres(PG_URL, schema=schema, durability="none")
    except inboxlog.UnavailableError as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL server at INBOXLOG_TEST_PG: {e}")
    running = Server(PG_URL, tmp_path, "--schema", schema)
    try:
        running.start()
        yield store, running, schema
    finally:
        if running.proc is not None:
            running.kill()
        del store
        sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    driver = chromium(tmp_path / "chromium-profile")
    try:
        yield driver
    finally:
        driver.quit()


def test_the_session_list_updates_live(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    store.create("alpha").close()
    browser.get(server.url)
    listed = (
        "return [...document.querySelectorAll('[data-session-id]')]"
        ".map((n) => n.dataset.sessionId);"
    )
    until(browser, lambda: browser.execute_script(listed) == ["alpha"], "alpha listed")
    store.create("beta", agent_preset="support").close()
    until(browser, lambda: browser.execute_script(listed) == ["alpha", "beta"], "beta appears")
    store.delete("alpha")
    until(browser, lambda: browser.execute_script(listed) == ["beta"], "alpha goes")
    link = browser.find_element(By.CSS_SELECTOR, '[data-session-id="beta"] a')
    assert link.get_attribute("href") == f"{server.url}sessions/beta"
    assert_clean(browser)


def test_the_session_list_catches_up_after_a_restart(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    store.create("one").close()
    store.create("two").close()
    browser.get(server.url)
    listed = (
        "return [...document.querySelectorAll('[data-session-id]')]"
        ".map((n) => n.dataset.sessionId);"
    )
    until(browser, lambda: browser.execute_script(listed) == ["one", "two"], "listed")
    browser.execute_script("window.__sameDocument = true")
    server.kill()
    badge = browser.find_element(By.CSS_SELECTOR, "[data-role=stream]")
    until(browser, lambda: badge.text == "Reconnecting…", "the page sees the server gone")
    store.delete("one")
    store.create("three").close()
    server.start()
    until(browser, lambda: browser.execute_script(listed) == ["three", "two"], "caught up")
    until(browser, lambda: badge.text == "Live", "live again")
    store.create("four").close()
    until(browser, lambda: browser.execute_script(listed) == ["four", "three", "two"], "live")
    assert browser.execute_script("return window.__sameDocument") is True, "no reload"
    assert_clean(browser, allow=("net::ERR_",))


def test_the_session_list_comes_in_pages(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    for n in range(105):
        store.create(f"s{n:03}").close()
    browser.get(server.url)
    listed = (
        "return [...document.querySelectorAll('[data-session-id]')]"
        ".map((n) => n.dataset.sessionId);"
    )
    until(browser, lambda: len(browser.execute_script(listed)) == 100, "the first page")
    assert browser.execute_script(listed) == [f"s{n:03}" for n in range(100)]
    # Created meanwhile: one inside the loaded page shows at once, one past it with its page.
    store.create("s050a").close()
    store.create("s200").close()
    until(browser, lambda: "s050a" in browser.execute_script(listed), "s050a shown")
    assert "s200" not in browser.execute_script(listed)
    browser.find_element(By.CSS_SELECTOR, '[data-action="more"]').click()
    everything = sorted([f"s{n:03}" for n in range(105)] + ["s050a", "s200"])
    until(browser, lambda: browser.execute_script(listed) == everything, "the next page")
    assert not browser.find_element(By.CSS_SELECTOR, '[data-action="more"]').is_displayed()
    assert_clean(browser)


def test_a_session_list_that_fails_to_load_tries_again(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    store.create("listed").close()
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/api/sessions"]})
    browser.get(server.url)
    notice = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]")
    until(browser, lambda: notice.text.endswith("trying again."), "the failure said")
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    until(
        browser,
        lambda: browser.find_elements(By.CSS_SELECTOR, '[data-session-id="listed"]'),
        "listed",
    )
    until(browser, lambda: notice.text == "", "the notice cleared")
    assert_clean(browser, allow=("ERR_BLOCKED_BY_CLIENT",))


def test_the_queues_equal_the_store_inbox_while_another_process_works(
    browser: WebDriver, server: Server, store: inboxlog.Store, root: Path
) -> None:
    store.create("work").close()
    open_session(browser, server, "work")
    worker = subprocess.run(
        [sys.executable, str(HERE / "inbox_worker.py"), str(root), "work", "12"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert worker.returncode == 0, worker.stderr
    final = ids(json.loads(worker.stdout))
    assert final["next-turn"], "the worker leaves next-turn messages pending"
    until(browser, lambda: page_queues(browser) == final, f"the page's queues become {final}")
    _, events = store.inspect("work")
    until(browser, lambda: len(row_seqs(browser)) == len(events), "every event shown")
    assert sorted(row_seqs(browser)) == [e["seq"] for e in events]
    assert_clean(browser)


def test_the_queues_follow_a_postgresql_session_another_process_works_on(
    browser: WebDriver, pg: tuple[inboxlog.Store, Server, str]
) -> None:
    store, server, schema = pg
    store.create("work").close()
    open_session(browser, server, "work")
    worker = subprocess.run(
        [sys.executable, str(HERE / "inbox_worker.py"), PG_URL, "work", "6", schema],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert worker.returncode == 0, worker.stderr
    final = ids(json.loads(worker.stdout))
    assert final["next-turn"], "the worker leaves next-turn messages pending"
    until(browser, lambda: page_queues(browser) == final, f"the page's queues become {final}")
    _, events = store.inspect("work")
    until(browser, lambda: len(row_seqs(browser)) == len(events), "every event shown")
    assert sorted(row_seqs(browser)) == [e["seq"] for e in events]
    # The composer's post reaches the PostgreSQL store's owner.
    browser.find_element(By.CSS_SELECTOR, "[data-field=content]").send_keys("from the page")
    browser.find_element(By.CSS_SELECTOR, '[data-action="post"]').click()
    notice = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]")
    until(browser, lambda: notice.text.startswith("Posted"), "posted")
    with store.open("work") as session:  # opening takes the post in
        *before, posted = session.inbox.next_step
        assert posted["content"] == "from the page"
        assert [m["id"] for m in before] == final["next-step"]
    final["next-step"].append(posted["id"])
    until(browser, lambda: page_queues(browser) == final, "the post shown")
    assert_clean(browser)


def test_a_restarted_server_recovers_the_page_with_nothing_doubled(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    count_streams(browser)
    with store.create("restart") as session:
        session.inbox.append("next-turn", message("m1", "before"))
        open_session(browser, server, "restart")
        assert browser.execute_script("return window.__streams()") == 1
        browser.execute_script("window.__sameDocument = true")
        server.kill()
        until(
            browser,
            lambda: (
                browser.find_element(By.CSS_SELECTOR, "[data-role=stream]").text == "Reconnecting…"
            ),
            "the page sees the server gone",
        )
        session.inbox.append("next-step", message("m2", "while down"))
        session.open_turn()
        proposal = session.propose_step()
        session.decide({"kind": "enter", "messages": proposal["messages"]})
        server.start()
        session.inbox.append("next-turn", message("m3", "after"))
        expected = ids(session.baseline())
        last = session.last_seq
    assert last is not None
    until(browser, lambda: page_queues(browser) == expected, f"queues become {expected}")
    until(browser, lambda: max(row_seqs(browser)) == last, "the last event shown")
    assert sorted(row_seqs(browser)) == list(range(last + 1))
    until(
        browser,
        lambda: browser.find_element(By.CSS_SELECTOR, "[data-role=stream]").text == "Live",
        "live again",
    )
    assert browser.execute_script("return window.__sameDocument") is True, "no reload"
    # One live stream the whole time (the browser's own reconnects reuse it; a new one
    # replaces a closed one), and none after pagehide.
    assert browser.execute_script("return window.__streams()") == 1
    browser.execute_script("window.dispatchEvent(new PageTransitionEvent('pagehide'))")
    assert browser.execute_script("return window.__streams()") == 0
    assert_clean(browser, allow=("ERR_CONNECTION_REFUSED", "net::ERR_"))


def test_a_skipped_event_makes_the_page_start_again_from_a_baseline(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    """A stream that skips a seq (here: the page never sees it) is a gap: the page takes a
    new baseline and follows again from what it has, so nothing is missing or doubled."""
    count_streams(browser)
    with store.create("gap") as session:
        session.inbox.append("next-turn", message("m1", "one"))
        open_session(browser, server, "gap")
        skipped = (session.last_seq or 0) + 1
        browser.execute_script(f"window.__drop.add({skipped})")
        session.inbox.append("next-turn", message("m2", "two"))
        session.inbox.append("next-step", message("m3", "three"))
        session.inbox.remove("m1")
        expected = ids(session.baseline())
        last = session.last_seq
    assert last is not None
    until(browser, lambda: page_queues(browser) == expected, f"queues become {expected}")
    until(browser, lambda: max(row_seqs(browser)) == last, "the last event shown")
    assert sorted(row_seqs(browser)) == list(range(last + 1))
    assert browser.execute_script("return window.__drop.size") == 0, "the event was dropped"
    assert browser.execute_script("return window.__streams()") == 1
    logs = [e["message"] for e in browser.get_log("browser")]  # type: ignore[no-untyped-call]
    assert any(f"new baseline (gap: seq {skipped + 1} after {skipped - 1})" in m for m in logs)
    assert [m for m in logs if "SEVERE" in m] == []


def test_the_projection_applies_splices_with_the_checks_of_section_3_4(
    browser: WebDriver, server: Server
) -> None:
    """projection.js on its own, in the page: what it applies and what it refuses."""
    browser.get(server.url)
    until(browser, lambda: browser.execute_script("return document.readyState") == "complete", "")
    cases = (HERE / "projection_cases.js").read_text()
    outcome = browser.execute_async_script(cases)
    assert outcome == {
        "moved": {
            "between": [["b"], ["c"], False],
            "inserted": True,
            "after": [["b", "a"], ["c"], "next-turn", [True, True]],
            "seq": 8,
            "early": 'ProjectionError: message "a" is already pending',
        },
        "changed": [False, False, True, True],
        "lists": [["a", "b2", "d"], ["c"]],
        "seq": 7,
        "gap": "ProjectionError: gap: seq 6 after 4",
        "start": "ProjectionError: invalid inbox splice at seq 5: start 3 outside 0..2",
        "negative": "ProjectionError: invalid inbox splice at seq 5: start -1 outside 0..1",
        "past": "ProjectionError: invalid inbox splice at seq 5: removedCount 2 past the list",
        "unsafe": "ProjectionError: invalid inbox splice at seq 5: "
        "coordinates are not safe integers",
        "target": 'ProjectionError: invalid inbox splice at seq 5: unknown target "later"',
        "duplicate": 'ProjectionError: message "a" is already pending',
        "twice": 'ProjectionError: message "x" is already pending',
        "noId": "ProjectionError: a message without a non-empty string id",
        "baseline": 'ProjectionError: message "a" is already pending',
    }
    assert_clean(browser)


def test_a_missing_session_and_a_refused_post_are_said_on_the_page(
    browser: WebDriver, root: Path, tmp_path: Path, store: inboxlog.Store
) -> None:
    store.create("quiet").close()
    read_only = Server(root, tmp_path, "--read-only")
    read_only.start()
    try:
        browser.get(f"{read_only.url}sessions/nowhere")
        notice = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]")
        until(browser, lambda: notice.text == "No session nowhere.", "the 404 said")
        open_session(browser, read_only, "quiet")
        browser.find_element(By.CSS_SELECTOR, "[data-field=content]").send_keys("hello")
        browser.find_element(By.CSS_SELECTOR, '[data-action="post"]').click()
        notice = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]")
        until(browser, lambda: notice.text.startswith("Not posted: "), "the refusal said")
        assert notice.text.endswith("(403)"), notice.text
        assert (
            browser.find_element(By.CSS_SELECTOR, "[data-field=content]").get_attribute("value")
            == "hello"
        ), "the text stays for another try"
        assert_clean(browser, allow=("404", "403"))
    finally:
        read_only.kill()
    assert store.inspect("quiet")[1] == []


def test_a_page_whose_first_load_fails_tries_again(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    with store.create("retry") as session:
        session.inbox.append("next-step", message("m1", "hello"))
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/api/sessions/retry"]})
    browser.get(f"{server.url}sessions/retry")
    notice = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]")
    until(browser, lambda: notice.text.endswith("trying again."), "the failure said")
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    until(browser, lambda: browser.execute_script("return document.body.dataset.ready"), "")
    assert page_queues(browser) == {"next-turn": [], "next-step": ["m1"]}
    assert row_seqs(browser) == [0]
    assert notice.text == ""
    assert_clean(browser, allow=("ERR_BLOCKED_BY_CLIENT",))


def test_a_page_back_from_the_back_forward_cache_follows_again(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    """pagehide closed the stream; coming back reopens it where it stopped."""
    count_streams(browser)
    with store.create("cached") as session:
        session.inbox.append("next-turn", message("m1", "one"))
        open_session(browser, server, "cached")
        browser.execute_script("window.__sameDocument = true")
        browser.get(server.url)
        session.inbox.append("next-step", message("m2", "two"))
        browser.back()
        until(browser, lambda: page_queues(browser)["next-step"] == ["m2"], "caught up")
        restored = browser.execute_script("return window.__sameDocument === true")
        assert browser.execute_script("return window.__streams()") == 1
        assert sorted(row_seqs(browser)) == [0, 1]
    assert restored, "the page came back from the back/forward cache"
    assert_clean(browser)


def test_a_busy_session_keeps_its_page_bounded(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    """Live events add rows at the top; past a page more than it shows, the oldest go
    (and come back with "more")."""
    with store.create("busy") as session:
        session.append("host/tick", {"n": 0})
        open_session(browser, server, "busy")
        for n in range(1, 1600):
            session.append("host/tick", {"n": n})
        last = session.last_seq
    assert last == 1599
    until(browser, lambda: row_seqs(browser)[0] == last, "the last event shown")
    seqs = row_seqs(browser)
    assert 500 <= len(seqs) <= 1000, len(seqs)
    assert seqs == list(range(last, last - len(seqs), -1))
    more = browser.find_element(By.CSS_SELECTOR, '[data-action="more"]')
    assert more.is_displayed()
    more.click()
    until(browser, lambda: len(row_seqs(browser)) == len(seqs) + 500, "an older page")
    assert row_seqs(browser) == list(range(last, last - len(seqs) - 500, -1))
    assert_clean(browser)


def test_the_composer_posts_exactly_once(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    with store.create("compose") as session:
        open_session(browser, server, "compose")
        browser.find_element(By.CSS_SELECTOR, "[data-field=content]").send_keys("turn left")
        target = browser.find_element(By.CSS_SELECTOR, "select[data-target]")
        target.find_element(By.CSS_SELECTOR, "option[value=next-turn]").click()
        post = browser.find_element(By.CSS_SELECTOR, '[data-action="post"]')
        ActionChains(browser).double_click(post).perform()
        post.click()
        notice = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]")
        until(browser, lambda: notice.text.startswith("Posted"), "the post answered")
        assert (
            browser.find_element(By.CSS_SELECTOR, "[data-field=content]").get_attribute("value")
            == ""
        )
        assert session.inbox.receive() == 1
        (taken,) = session.inbox.next_turn
        assert taken["content"] == "turn left" and taken["role"] == "user"
        until(browser, lambda: page_queues(browser)["next-turn"] == [taken["id"]], "shown")
        assert page_texts(browser) == {taken["id"]: "turn left"}
        assert session.inbox.receive() == 0
        types = [e["type"] for e in session.events()]
    assert types == ["agent/inbox/spliced"]
    assert_clean(browser)


def test_remove_cancels_and_replace_edits_a_pending_message(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    with store.create("edit") as session:
        session.inbox.append("next-turn", message("m1", "first"))
        session.inbox.append("next-step", message("m2", "second"))
        open_session(browser, server, "edit")
        until(browser, lambda: page_queues(browser)["next-turn"] == ["m1"], "m1 shown")
        browser.find_element(
            By.CSS_SELECTOR, '[data-message-id="m1"] [data-action="remove"]'
        ).click()
        notice = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]")
        until(browser, lambda: notice.text.startswith("Removal of m1 sent"), "sent")
        assert session.inbox.receive() == 1
        until(
            browser,
            lambda: page_queues(browser) == {"next-turn": [], "next-step": ["m2"]},
            "m1 gone",
        )
        record = session.events()[-1]["data"]
        assert record["outcome"] == "canceled" and record["inserted"] == []

        browser.find_element(
            By.CSS_SELECTOR, '[data-message-id="m2"] [data-action="replace"]'
        ).click()
        field = browser.find_element(
            By.CSS_SELECTOR, '[data-message-id="m2"] [data-field="content"]'
        )
        assert field.get_attribute("value") == "second"
        field.clear()
        field.send_keys("second, edited")
        browser.find_element(By.CSS_SELECTOR, '[data-message-id="m2"] [data-action="save"]').click()
        until(browser, lambda: notice.text.startswith("Replacement of m2 sent"), "sent")
        assert session.inbox.receive() == 1
        until(browser, lambda: page_texts(browser) == {"m2": "second, edited"}, "m2 replaced")
        assert list(session.inbox.next_step) == [message("m2", "second, edited")]
    assert_clean(browser)


def test_picking_an_event_shows_the_inbox_at_its_seq(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    with store.create("history") as session:
        session.inbox.append("next-turn", message("m1", "one"))
        session.inbox.append("next-turn", message("m2", "two"))
        picked = session.last_seq
        session.open_turn()
        proposal = session.propose_step()
        session.decide({"kind": "enter", "messages": proposal["messages"]})
        session.inbox.append("next-step", message("m3", "three"))
        live = ids(session.baseline())
        assert picked is not None
        past = ids(session.baseline(picked))
    assert past != live
    open_session(browser, server, "history")
    until(browser, lambda: page_queues(browser) == live, "the live inbox")
    browser.find_element(By.CSS_SELECTOR, f'[data-seq="{picked}"] [data-action="inbox-at"]').click()
    until(browser, lambda: page_queues(browser) == past, f"the inbox at {picked}: {past}")
    assert browser.find_elements(By.CSS_SELECTOR, '[data-queue] [data-action="remove"]') == []
    browser.find_element(By.CSS_SELECTOR, '[data-action="live"]').click()
    until(browser, lambda: page_queues(browser) == live, "live again")
    assert browser.find_elements(By.CSS_SELECTOR, '[data-queue] [data-action="remove"]')
    assert_clean(browser)


HOSTILE = [
    '<img src=x onerror="window.__pwned=1">',
    "</script><script>window.__pwned=2</script>",
    '<svg onload="window.__pwned=3"></svg>',
    '"><iframe src="javascript:window.parent.__pwned=4"></iframe>',
]


def test_hostile_content_is_shown_as_text_and_never_runs(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    with store.create("hostile") as session:
        session.inbox.append("next-turn", message("h0", HOSTILE[0]))
        session.open_turn()
        proposal = session.propose_step()
        session.decide({"kind": "enter", "messages": proposal["messages"]})
        turn, step = proposal["turn"], proposal["step"]
        session.append(
            "assistant/message", said(turn, step, "a1", text(HOSTILE[1])), surface_op="append"
        )
        session.append(
            "tool/result", tool_result(turn, step, "c1", text(HOSTILE[2])), surface_op="append"
        )
        session.append("host/hostile", {"html": HOSTILE[3]})
        session.inbox.append("next-step", message(HOSTILE[3], HOSTILE[1]))
        open_session(browser, server, "hostile")
        session.inbox.append("next-step", message("h1", HOSTILE[2]))
    until(browser, lambda: "h1" in page_queues(browser)["next-step"], "the live one shown")
    with urllib.request.urlopen(f"{server.url}sessions/hostile", timeout=10) as answer:
        policy = answer.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "unsafe" not in policy, policy
    for details in browser.find_elements(By.CSS_SELECTOR, "details"):
        details.click()
    shown = browser.find_element(By.TAG_NAME, "main").text
    for payload in HOSTILE:
        assert payload in shown
    assert page_texts(browser) == {HOSTILE[3]: HOSTILE[1], "h1": HOSTILE[2]}
    markup = browser.execute_script(
        "return document.querySelectorAll('main img, main svg, main iframe, main script').length;"
    )
    assert markup == 0
    # An image whose load failed would have run its handler by now (the page's own
    # requests have all answered: the stream is live and the last event shown).
    assert browser.execute_script("return window.__pwned") is None
    # A header's fields on the session list, too.
    store.create("hostile-preset", agent_preset=HOSTILE[0]).close()
    browser.get(server.url)
    row = until(
        browser,
        lambda: browser.find_elements(By.CSS_SELECTOR, '[data-session-id="hostile-preset"]'),
        "listed",
    )[0]
    assert HOSTILE[0] in row.text
    assert browser.execute_script("return document.querySelectorAll('main img').length") == 0
    assert browser.execute_script("return window.__pwned") is None
    assert_clean(browser)


def row_body(driver: WebDriver, seq: int) -> WebElement:
    return driver.find_element(By.CSS_SELECTOR, f'[data-seq="{seq}"] .ev-body')


def row_kind(driver: WebDriver, seq: int) -> str | None:
    return driver.find_element(By.CSS_SELECTOR, f'[data-seq="{seq}"]').get_attribute("data-kind")


def test_the_conversation_is_shown_as_text(
    browser: WebDriver, server: Server, store: inboxlog.Store
) -> None:
    """A session written in the shapes of SPEC §15.1 through the Python API: the user's
    messages as the step entered them, the model's answer block by block (reasoning
    marked, each tool call's name and raw arguments, a block of an unknown type skipped),
    each tool call and its result, the failed one marked with its error code; hostile
    text anywhere in them shown as text, never run."""
    arguments = '{"path": "' + HOSTILE[1].replace('"', '\\"') + '"}'
    with store.create("talk") as s:
        s.inbox.append("next-turn", message("u1", "What do a.txt and b.txt say?"))
        image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        s.inbox.append(
            "next-turn", {"id": "u2", "role": "user", "content": [text(HOSTILE[0]), image]}
        )
        s.open_turn()
        p = s.propose_step(whole_next_turn=True)
        s.decide({"kind": "enter", "messages": p["messages"]})
        t, k = p["turn"], p["step"]
        answer = s.append(
            "assistant/message",
            said(
                t,
                k,
                "a1",
                {"type": "reasoning", "text": "Both files first; b.txt may be <b>locked</b>."},
                text("Reading them now."),
                {
                    "type": "tool-call",
                    "id": "call_1",
                    "name": "read_file",
                    "arguments": '{"path":"a.txt"}',
                },
                {"type": "tool-call", "id": "call_2", "name": "read_file", "arguments": arguments},
                {"type": "future-block", "text": "never shown"},
                usage={"inputTokens": 12, "outputTokens": 34},
            ),
            surface_op="append",
        )
        first = s.append("tool/call", tool_call(t, k, "call_1", "read_file", '{"path":"a.txt"}'))
        ok = s.append(
            "tool/result",
            tool_result(t, k, "call_1", text(HOSTILE[2])),
            surface_op="append",
            source_event_seqs=[first["seq"]],
        )
        second = s.append("tool/call", tool_call(t, k, "call_2", "read_file", arguments))
        denied = {"name": "PermissionError", "code": "EACCES"}
        failed = s.append(
            "tool/result",
            tool_result(t, k, "call_2", text("permission denied"), error=denied),
            surface_op="append",
            source_event_seqs=[second["seq"]],
        )
        s.end_step("completed")
        s.close_turn()
        users = [e["seq"] for e in s.events() if e["type"] == "user/message"]
        last = s.last_seq
    assert last is not None and len(users) == 2
    open_session(browser, server, "talk")
    until(browser, lambda: max(row_seqs(browser)) == last, "the last event shown")
    assert sorted(row_seqs(browser)) == list(range(last + 1))

    assert [row_kind(browser, seq) for seq in users] == ["user", "user"]
    assert row_body(browser, users[0]).text == "What do a.txt and b.txt say?"
    assert row_body(browser, users[1]).text == f"{HOSTILE[0]}\n[image]"

    assert row_kind(browser, answer["seq"]) == "assistant"
    body = row_body(browser, answer["seq"])
    (reasoning,) = body.find_elements(By.CSS_SELECTOR, '[data-block="reasoning"]')
    assert reasoning.text == "reasoning\nBoth files first; b.txt may be <b>locked</b>."
    calls = [
        (
            block.find_element(By.CSS_SELECTOR, ".ev-tool-name").text,
            block.find_element(By.CSS_SELECTOR, ".ev-args").text,
        )
        for block in body.find_elements(By.CSS_SELECTOR, '[data-block="tool-call"]')
    ]
    assert calls == [("read_file", '{"path":"a.txt"}'), ("read_file", arguments)]
    assert "Reading them now." in body.text
    assert "never shown" not in body.text
    assert "scripted/m1 · tokens: 12 in, 34 out" in body.text

    for seq, args in [(first["seq"], '{"path":"a.txt"}'), (second["seq"], arguments)]:
        assert row_kind(browser, seq) == "tool"
        assert row_body(browser, seq).find_element(By.CSS_SELECTOR, ".ev-tool-name").text == (
            "read_file"
        )
        assert row_body(browser, seq).find_element(By.CSS_SELECTOR, ".ev-args").text == args

    assert row_kind(browser, ok["seq"]) == "tool"
    shown = row_body(browser, ok["seq"])
    assert HOSTILE[2] in shown.text and "call_1" in shown.text
    assert shown.find_elements(By.CSS_SELECTOR, "[data-error]") == []
    assert "error" not in shown.text

    shown = row_body(browser, failed["seq"])
    (marker,) = shown.find_elements(By.CSS_SELECTOR, ".ev-error")
    assert marker.text == "error EACCES (PermissionError)"
    assert marker.get_attribute("data-error") == "EACCES"
    assert "permission denied" in shown.text and "call_2" in shown.text

    markup = browser.execute_script(
        "return document.querySelectorAll('main img, main svg, main iframe, main script, main b')"
        ".length;"
    )
    assert markup == 0
    assert browser.execute_script("return window.__pwned") is None
    assert_clean(browser)


def test_a_session_a_c_host_wrote_shows_its_conversation(
    browser: WebDriver, server: Server, root: Path, store: inboxlog.Store
) -> None:
    """A C host (the C library, called through ctypes as tests/e2e calls it: `make test`
    builds it first and names it in INBOXLOG_LIB) writes a turn in the shapes of SPEC
    §15.1: the page shows its tool call, the result and the answer as text."""
    import ctypes
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "e2e_c", HERE.parents[2] / "tests" / "e2e" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    e2e = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(e2e)
    c = e2e.C()
    source = '"source":{"kind":"model","provider":"c","model":"host"}'
    calling = (
        '{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":['
        '{"type":"text","text":"Let me look."},'
        '{"type":"tool-call","id":"k1","name":"lookup","arguments":"{\\"q\\":\\"tides\\"}"}],'
        + source
        + "}}"
    )
    result = (
        '{"turn":1,"step":1,"message":{"id":"r1","role":"user","content":[{"type":"tool-result",'
        '"toolCallId":"k1","content":[{"type":"text","text":"high tide at 6"}]}],'
        '"source":{"kind":"tool","callId":"k1"}}}'
    )
    answer = (
        '{"turn":1,"step":2,"message":{"id":"a2","role":"assistant","content":['
        '{"type":"text","text":"High tide is at six."}],' + source + "}}"
    )
    prompt = b'{"id":"q","role":"user","content":"When is high tide?"}'
    cstore = c.handle("inboxlog_store_open_jsonl", str(root).encode(), b"none")
    try:
        cs = c.handle("inboxlog_session_create", cstore, b"by-c-host", None)
        assert c.call("inboxlog_inbox_append", cs, b"next-turn", prompt)[0] == e2e.OK
        turn = ctypes.c_uint64()
        assert c.call("inboxlog_session_open_turn", cs, None, ctypes.byref(turn))[0] == e2e.OK
        c.string("inboxlog_session_propose_step", cs)
        c.string(
            "inboxlog_session_decide", cs, b'{"kind":"enter","messages":[' + prompt + b"]}", None
        )
        c.string("inboxlog_session_append", cs, b"assistant/message", calling.encode(), None)
        call = (
            b'{"turn":1,"step":1,"callId":"k1","name":"lookup","arguments":"{\\"q\\":\\"tides\\"}"}'
        )
        c.string("inboxlog_session_append", cs, b"tool/call", call, None)
        c.string("inboxlog_session_append", cs, b"tool/result", result.encode(), None)
        again = ctypes.c_bool()
        assert (
            c.call("inboxlog_session_end_step", cs, b"continue", None, ctypes.byref(again))[0] == 0
        )
        c.string("inboxlog_session_propose_step", cs)
        c.string("inboxlog_session_decide", cs, b'{"kind":"enter","messages":[]}', None)
        c.string("inboxlog_session_append", cs, b"assistant/message", answer.encode(), None)
        assert (
            c.call("inboxlog_session_end_step", cs, b"completed", None, ctypes.byref(again))[0] == 0
        )
        c.string("inboxlog_session_close_turn", cs, None)
        assert c.call("inboxlog_session_close", cs)[0] == e2e.OK
        c.lib.inboxlog_session_free(cs)
    finally:
        c.lib.inboxlog_store_free(cstore)
    events = store.inspect("by-c-host")[1]
    kinds = {e["seq"]: e["type"] for e in events}
    open_session(browser, server, "by-c-host")
    until(browser, lambda: max(row_seqs(browser)) == events[-1]["seq"], "the last event shown")
    [call_seq] = [seq for seq, ty in kinds.items() if ty == "tool/call"]
    shown = row_body(browser, call_seq)
    assert shown.find_element(By.CSS_SELECTOR, ".ev-tool-name").text == "lookup"
    assert shown.find_element(By.CSS_SELECTOR, ".ev-args").text == '{"q":"tides"}'
    talk = ("assistant/message", "tool/result")
    bodies = {seq: row_body(browser, seq).text for seq, ty in kinds.items() if ty in talk}
    assert any("high tide at 6" in bodies[seq] for seq, ty in kinds.items() if ty == "tool/result")
    said = [bodies[seq] for seq, ty in kinds.items() if ty == "assistant/message"]
    assert "Let me look." in said[0] and "lookup" in said[0]
    assert "High tide is at six." in said[1]
    assert_clean(browser)


@pytest.mark.parametrize("integration", ["adk", "langgraph", "openai_agents", "pydantic_ai"])
def test_a_session_an_integration_wrote_shows_its_conversation(
    browser: WebDriver, server: Server, store: inboxlog.Store, integration: str
) -> None:
    """A run of each framework integration (its real package, a scripted model calling
    the weather tool once, then answering) writes the conversation of SPEC §15.5, which
    the page shows as text: the tool call with its arguments, its result, the answer."""
    sys.path.insert(0, str(HERE.parent / "integrations"))
    import asyncio

    from adapters import ADAPTERS, Script, say, tool

    id = f"by-{integration.replace('_', '-')}"
    script = Script(tool("Paris"), say("Sunny in Paris."))
    asyncio.run(ADAPTERS[integration].run(store, id, "Weather in Paris?", script))
    events = store.inspect(id)[1]
    last = events[-1]["seq"]
    kinds = {e["seq"]: e["type"] for e in events}
    open_session(browser, server, id)
    until(browser, lambda: max(row_seqs(browser)) == last, "the last event shown")

    def bodies(kind: str) -> list[str]:
        return [row_body(browser, seq).text for seq, ty in kinds.items() if ty == kind]

    calls = [
        (
            b.find_element(By.CSS_SELECTOR, ".ev-tool-name").text,
            b.find_element(By.CSS_SELECTOR, ".ev-args").text,
        )
        for seq, ty in kinds.items()
        if ty == "tool/call"
        for b in [row_body(browser, seq)]
    ]
    assert [name for name, _ in calls] == ["weather"]
    assert "Paris" in calls[0][1]
    assert any("sunny, 22 C in Paris" in body for body in bodies("tool/result"))
    answers = bodies("assistant/message")
    assert any("weather" in body for body in answers), answers
    assert any("Sunny in Paris." in body for body in answers), answers
    assert any("Weather in Paris?" in body for body in bodies("user/message"))
    assert_clean(browser)


def test_a_conversation_of_older_shapes_still_shows_its_text(
    browser: WebDriver, server: Server, store: inboxlog.Store, root: Path
) -> None:
    """A log written before §15.1's shapes were checked (here a format-1 file, as such a
    log is stored): a message's text at the top of its data shows as it always did, a
    tool call with a name shows it and its arguments, one without collapses to its JSON."""
    store.create("placeholder").close()  # the store's directory exists
    time = 1_700_000_000_000
    events = [
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        ("user/message", {"text": "runtime context"}),
        ("assistant/message", {"text": "plain text"}),
        ("assistant/message", {"content": HOSTILE[1]}),
        ("tool/call", {"name": "get_weather", "args": {"city": "Paris"}}),
        ("tool/call", {"z": 1}),
        ("tool/result", {"content": [{"type": "text", "text": HOSTILE[2]}]}),
        (
            "tool/result",
            {
                "turn": 1,
                "step": 1,
                "message": {
                    "role": "user",
                    "source": {"kind": "tool", "callId": "c"},
                    "content": "hello",
                },
            },
        ),
    ]
    header = {"format": "inboxlog", "version": 1, "id": "old", "createdAt": time}
    lines = [header] + [
        {"type": kind, "seq": seq, "time": time + seq, "data": data}
        for seq, (kind, data) in enumerate(events)
    ]
    (root / "old.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    open_session(browser, server, "old")
    until(browser, lambda: len(row_seqs(browser)) == len(events), "every event shown")
    shown = {seq: row_body(browser, seq).text for seq in [2, 3, 4, 7, 8]}
    assert shown == {
        2: "runtime context",
        3: "plain text",
        4: HOSTILE[1],
        7: HOSTILE[2],
        8: "hello",
    }
    named = row_body(browser, 5)
    assert named.find_element(By.CSS_SELECTOR, ".ev-tool-name").text == "get_weather"
    assert named.find_element(By.CSS_SELECTOR, ".ev-args").text == '{"city":"Paris"}'
    assert browser.find_elements(By.CSS_SELECTOR, '[data-seq="6"] details pre')
    assert [row_kind(browser, seq) for seq in range(2, len(events))] == [
        "user",
        "assistant",
        "assistant",
        "tool",
        "host",
        "tool",
        "tool",
    ]
    assert browser.execute_script("return window.__pwned") is None
    assert_clean(browser)


def test_a_visit_with_the_token_logs_the_browser_in(
    browser: WebDriver, root: Path, tmp_path: Path, store: inboxlog.Store
) -> None:
    """With a token, the pages, their API calls, the streams and a post all go through on
    the cookie a ``?token=`` visit sets (and the page's own Origin)."""
    with store.create("guarded") as session:
        session.inbox.append("next-turn", message("m1", "hello"))
        guarded = Server(root, tmp_path, "--token", "s3cret")
        try:
            guarded.start()
            browser.get(guarded.url)
            assert "token needed" in browser.title
            browser.get(f"{guarded.url}?token=s3cret")
            until(browser, lambda: browser.current_url == guarded.url, "the token left the URL")
            link = until(
                browser,
                lambda: browser.find_elements(By.CSS_SELECTOR, '[data-session-id="guarded"] a'),
                "listed",
            )[0]
            link.click()
            until(browser, lambda: browser.execute_script("return document.body.dataset.ready"), "")
            assert page_queues(browser) == {"next-turn": ["m1"], "next-step": []}
            browser.find_element(By.CSS_SELECTOR, "[data-field=content]").send_keys("go on")
            browser.find_element(By.CSS_SELECTOR, '[data-action="post"]').click()
            notice = browser.find_element(By.CSS_SELECTOR, "[data-role=notice]")
            until(browser, lambda: notice.text.startswith("Posted"), "posted")
            assert session.inbox.receive() == 1
            until(browser, lambda: len(page_queues(browser)["next-step"]) == 1, "shown live")
            assert_clean(browser, allow=("401",))
        finally:
            guarded.kill()


def test_a_page_works_under_a_path_prefix(
    browser: WebDriver, root: Path, tmp_path: Path, store: inboxlog.Store
) -> None:
    with store.create("nested") as session:
        session.inbox.append("next-turn", message("m1", "hello"))
    mounted = Server(root, tmp_path, "--prefix", "/console")
    mounted.start()
    try:
        assert mounted.url.endswith("/console/")
        browser.get(mounted.url)
        link = until(
            browser,
            lambda: browser.find_elements(By.CSS_SELECTOR, '[data-session-id="nested"] a'),
            "listed",
        )[0]
        assert link.get_attribute("href") == f"{mounted.url}sessions/nested"
        link.click()
        until(browser, lambda: browser.execute_script("return document.body.dataset.ready"), "")
        assert page_queues(browser)["next-turn"] == ["m1"]
        assert row_seqs(browser) == [0]
        assert_clean(browser)
    finally:
        mounted.kill()


def test_a_100k_event_session_shows_its_first_rows_and_queues(
    browser: WebDriver, server: Server, store: inboxlog.Store, capsys: pytest.CaptureFixture[str]
) -> None:
    with store.create("big") as session:
        turn = 0
        while (session.last_seq or 0) < 99_999:
            turn += 1
            session.inbox.append("next-turn", message(f"u{turn}", f"prompt {turn}"))
            session.open_turn()
            proposal = session.propose_step()
            session.decide({"kind": "enter", "messages": proposal["messages"]})
            for i in range(40):
                session.append("assistant/chunk", {"text": f"chunk {i} of turn {turn}"})
            session.end_step("completed")
            session.close_turn()
        session.inbox.append("next-turn", message("pending", "still waiting"))
        last = session.last_seq
    assert last is not None and last >= 100_000
    with store.create("small") as session:
        session.inbox.append("next-turn", message("m1", "hello"))
    figures = []
    # The first visit finds the server cold (it has read nothing of the session yet);
    # the second, the server's state of the session as the first left it. A one-event
    # session beside them shows what the page itself costs.
    for visit, session_id in [
        ("first visit", "big"),
        ("second visit", "big"),
        ("a one-event session", "small"),
    ]:
        open_session(browser, server, session_id)
        ready = browser.execute_script(
            "return performance.getEntriesByName('inboxlog:first-render')[0].startTime;"
        )
        calls = browser.execute_script(
            """return performance.getEntriesByType("resource")
                .filter((r) => r.name.includes("/api/") && !r.name.includes("/follow"))
                .map((r) => new URL(r.name).pathname.split("/").pop()
                    + ` ${r.duration.toFixed(0)} ms`);"""
        )
        if session_id == "big":
            assert page_queues(browser) == {"next-turn": ["pending"], "next-step": []}
            assert row_seqs(browser) == list(range(last, last - 500, -1))
        figures.append(f"{visit}: {ready:.0f} ms ({', '.join(calls)})")
    open_session(browser, server, "big")
    with capsys.disabled():
        print(
            f"\n{last + 1}-event session, first rows and queues shown after navigation start: "
            + "; ".join(figures)
        )
    browser.find_element(By.CSS_SELECTOR, '[data-action="more"]').click()
    until(browser, lambda: len(row_seqs(browser)) == 1000, "the next page")
    assert row_seqs(browser) == list(range(last, last - 1000, -1))
    assert_clean(browser)


def test_the_demo_agent_is_steered_from_the_page(browser: WebDriver, tmp_path: Path) -> None:
    """examples/console_demo.py as a user runs it: steering typed into the page and posted
    is what the agent's next step takes in."""
    example = Path(__file__).resolve().parents[3] / "examples" / "console_demo.py"
    demo = subprocess.Popen(
        [sys.executable, str(example), str(tmp_path / "demo"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert demo.stdout is not None

    def pump() -> None:
        for line in demo.stdout or []:
            lines.put(line)

    reader = threading.Thread(target=pump)
    reader.start()

    def line_with(text: str) -> str:
        deadline = time.monotonic() + WAIT
        while True:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if text in line:
                return line

    try:
        url = line_with("console: ").split()[1]
        browser.get(url)
        until(browser, lambda: browser.execute_script("return document.body.dataset.ready"), "")
        line_with("turn 1 step 1 took p1")
        browser.find_element(By.CSS_SELECTOR, "[data-field=content]").send_keys("Keep it cheap.")
        browser.find_element(By.CSS_SELECTOR, '[data-action="post"]').click()
        took = line_with("'Keep it cheap.'")
        assert took.startswith("turn 1 step ") and " took web-" in took, took
        until(browser, lambda: "Noted: Keep it cheap." in browser.page_source, "the answer shown")
        assert_clean(browser)
    finally:
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=WAIT) == 0
        reader.join()
        demo.stdout.close()


def demo_session(store: inboxlog.Store) -> None:
    """A short support conversation: a tool call, steering waiting, a turn queued."""
    with store.create("support-chat-7", agent_preset="support") as s:
        s.inbox.append("next-turn", message("m1", "What is the weather in Paris tomorrow?"))
        s.open_turn()
        p = s.propose_step()
        s.decide({"kind": "enter", "messages": p["messages"]})
        t, k = p["turn"], p["step"]
        arguments = '{"city":"Paris","day":"tomorrow"}'
        s.append(
            "assistant/message",
            said(
                t,
                k,
                "a1",
                text("Let me look that up."),
                {
                    "type": "tool-call",
                    "id": "call_1",
                    "name": "get_weather",
                    "arguments": arguments,
                },
                usage={"inputTokens": 412, "outputTokens": 38},
            ),
            surface_op="append",
        )
        called = s.append("tool/call", tool_call(t, k, "call_1", "get_weather", arguments))
        s.append(
            "tool/result",
            tool_result(t, k, "call_1", text("18 °C, light rain in the afternoon")),
            surface_op="append",
            source_event_seqs=[called["seq"]],
        )
        s.end_step("continue")
        s.inbox.append("next-step", message("m2", "Give me the temperature in Fahrenheit too."))
        p = s.propose_step()
        s.decide({"kind": "enter", "messages": p["messages"]})
        s.append(
            "assistant/message",
            said(
                p["turn"],
                p["step"],
                "a2",
                text("Tomorrow in Paris: 18 °C (64 °F), light rain after noon."),
                usage={"inputTokens": 480, "outputTokens": 21},
            ),
            surface_op="append",
        )
        s.end_step("completed")
        s.close_turn()
        s.inbox.append("next-turn", message("m3", "Book a table for two near the Louvre at 8 pm."))
        s.inbox.append("next-step", message("m4", "Prefer somewhere with outdoor seating."))
    store.create("triage-bot-12", agent_preset="triage").close()
    store.create("nightly-report", cwd="/srv/reports").close()


def test_the_screenshot(
    browser: WebDriver, server: Server, store: inboxlog.Store, tmp_path: Path
) -> None:
    """The console as the README shows it: written where INBOXLOG_CONSOLE_SCREENSHOT says
    (``make console-screenshot``: docs/console.png)."""
    demo_session(store)
    browser.set_window_size(1280, 960)
    open_session(browser, server, "support-chat-7")
    until(
        browser,
        lambda: page_queues(browser) == {"next-turn": ["m3"], "next-step": ["m4"]},
        "queues",
    )
    browser.find_element(By.CSS_SELECTOR, '[data-message-id="m4"] [data-action="replace"]').click()
    shot = tmp_path / "console.png"
    assert browser.save_screenshot(str(shot))
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width >= 1000 and height >= 600, (width, height)
    if target := os.environ.get("INBOXLOG_CONSOLE_SCREENSHOT"):
        shutil.copyfile(shot, target)
    assert_clean(browser)

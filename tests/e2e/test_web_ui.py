"""The web chat in a real browser: Playwright drives Debian's headless Chromium against the five real
services (authentication on, as `make run` starts them), signed in with a real API key.

The user's way through: sign in, ask the README's demo question and watch the answer stream in,
open a citation and find the cited sentence highlighted, rate the answer, see an abstention as
such, start a new chat and delete one, upload files with a progress bar and per-file summary,
list and delete documents, and all of it at phone width. The README's two screenshots come from
here (WEB_UI_SCREENSHOTS=1 writes them to docs/).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import asyncio
import time

import httpx
import pytest
from redis.asyncio import Redis

from rag_gateway.api_keys import ApiKeyStore
from rag_gateway.chat_models import Turn
from rag_gateway.conversation_store import ConversationStore, owned_conversation
from ragctl.ingest_client import IngestOptions, ingest

pytestmark = pytest.mark.e2e

pytest.importorskip("playwright.async_api")
from browser import final_chat_event, launched_chromium  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DEMO_QUESTION = "Where are conversations stored?"
#: The screenshots are always taken; they replace the README's (docs/) only when asked to, so that a
#: test run leaves the checkout as it found it: WEB_UI_SCREENSHOTS=1 pytest tests/e2e/test_web_ui.py
SCREENSHOTS_TO_DOCS = os.environ.get("WEB_UI_SCREENSHOTS") == "1"


def _screenshot_path(tmp_path: Path, name: str) -> str:
    return str((DOCS if SCREENSHOTS_TO_DOCS else tmp_path) / name)
#: Long enough for an answer on two shared cores.
ANSWER_TIMEOUT_MS = 300_000


async def _create_key(redis_url: str, tenant: str, user: str = "web-tester") -> str:
    redis = Redis.from_url(redis_url, decode_responses=True)
    try:
        created = await ApiKeyStore(redis).create(tenant=tenant, user=user, scopes=["chat", "ingest"])
        return created.token
    finally:
        await redis.aclose()


@pytest.fixture(scope="module")
async def web(authenticated_stack, redis_url: str) -> AsyncIterator[dict[str, str]]:
    """The gateway's URL and an API key of a tenant of its own, holding the repository's docs/."""
    key = await _create_key(redis_url, "web-ui")
    gateway = authenticated_stack.urls["gateway"]
    summary = await asyncio.to_thread(ingest, [DOCS], gateway, IngestOptions(timeout_s=600, api_key=key))
    assert summary.documents >= 5 and not summary.failed
    yield {"url": gateway, "key": key}


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[object]:
    async with launched_chromium() as launched:
        yield launched


class Page:
    """A signed-in page, with the console errors (CSP violations among them) it logged."""

    def __init__(self, page, errors: list[str]) -> None:
        self.page = page
        self.errors = errors


#: The sign-in's field and button, and the new-chat button, as named in the page of each browser
#: language the tests open it in (the page follows the browser's language: tests/gateway/test_web_language.py).
SIGN_IN = {
    "en-US": ("API key", "Sign in with the key", "New chat"),
    "ro-RO": ("Cheie API", "Autentificare cu cheia", "Conversație nouă"),
}


async def _open(
    browser, web: dict[str, str], *, width: int = 1280, height: int = 860, sign_in: bool = True, locale: str = "en-US"
) -> Page:
    context = await browser.new_context(viewport={"width": width, "height": height}, base_url=web["url"], locale=locale)
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto("/")
    if sign_in:
        key_field, sign_in_button, new_chat = SIGN_IN[locale]
        await page.get_by_label(key_field).fill(web["key"])
        await page.get_by_role("button", name=sign_in_button).click()
        await page.get_by_role("button", name=new_chat).wait_for()
    return Page(page, errors)


@pytest.fixture
async def page(browser, web) -> AsyncIterator[Page]:
    opened = await _open(browser, web)
    yield opened
    await opened.page.context.close()


async def _ask(page, question: str, *, field: str = "Your question"):
    """Types ``question`` into the question field (named ``field``) and sends it with Enter; returns the
    answer's bubble once it is final."""
    await page.get_by_label(field).fill(question)
    await page.get_by_label(field).press("Enter")
    bubble = page.locator(".message.assistant").last
    await bubble.locator(".feedback, .error").first.wait_for(timeout=ANSWER_TIMEOUT_MS)
    return bubble


def _no_csp_violations(opened: Page) -> None:
    assert not [e for e in opened.errors if "Content Security Policy" in e or "Refused to" in e], opened.errors


def _api(web: dict[str, str]) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=web["url"], headers={"Authorization": f"Bearer {web['key']}"}, timeout=60)


async def test_a_wrong_key_is_refused_in_plain_words(browser, web) -> None:
    opened = await _open(browser, web, sign_in=False)
    page = opened.page
    await page.get_by_label("API key").fill("rag_0123456789ab_" + "x" * 43)
    await page.get_by_role("button", name="Sign in with the key").click()
    await page.locator("#sign-in-error").filter(has_text="not accepted").wait_for()
    assert await page.locator("#chat-page").is_hidden()
    await page.context.close()


#: Records what the answer looked like while it streamed: each token is a text node appended to the
#: streaming answer (the final rendering builds a new answer element off the page and swaps it in).
TOKEN_RECORDER = """() => {
    window.__tokens = [];
    new MutationObserver((records) => {
      for (const r of records) {
        const texts = [...r.addedNodes].filter((n) => n.nodeType === Node.TEXT_NODE);
        if (texts.length && r.target.classList && r.target.classList.contains('answer')) {
          window.__tokens.push(r.target.textContent);
        }
      }
    }).observe(document.getElementById('messages'), {childList: true, subtree: true});
}"""


async def test_the_demo_question_streams_and_its_citation_opens_the_highlighted_sentence(
    page: Page, web, tmp_path: Path
) -> None:
    p = page.page
    await p.evaluate(TOKEN_RECORDER)
    bubble = await _ask(p, DEMO_QUESTION)
    streamed = await p.evaluate("window.__tokens")
    assert streamed, "no token arrived before the final answer"
    assert len(streamed) == int(await bubble.get_attribute("data-tokens"))
    # The answer grew token by token (each state a prefix of the next) into the final one.
    assert all(b.startswith(a) for a, b in zip(streamed, streamed[1:])), streamed
    answer = await bubble.locator(".answer").inner_text()
    assert "Redis" in answer
    assert streamed[-1].split() == answer.split()

    # The stored turn says which sentence each marker cites.
    async with _api(web) as api:
        [summary, *_] = (await api.get("/v1/conversations")).json()["conversations"]
        assert summary["title"] == DEMO_QUESTION
        [turn] = (await api.get(f"/v1/conversations/{summary['conversation_id']}")).json()["turns"]
    citations = {c["id"]: c for c in turn["citations"]}
    markers = bubble.locator("button.cite")
    assert await markers.count() >= 1
    marker = markers.first
    cited = citations[int(await marker.get_attribute("data-cite"))]
    await marker.click()
    panel = p.locator("#source-panel")
    await panel.wait_for(state="visible")
    mark = panel.locator("mark#cited-sentence")
    await mark.wait_for()
    assert await mark.inner_text() == cited["quote"]
    assert await panel.locator("#source-title").inner_text() == (cited["title"] or cited["source"])
    if cited["section_path"]:
        assert " › ".join(cited["section_path"]) in await panel.locator("#source-meta").inner_text()
    # The highlight is exactly text[start:end] of the chunk the answer cited.
    async with _api(web) as api:
        chunk_path = quote(cited["chunk_id"], safe="")
        source = (await api.get(f"/v1/conversations/{summary['conversation_id']}/sources/{chunk_path}")).json()
    assert source["text"][cited["start"] : cited["end"]] == cited["quote"]
    shown = await panel.locator("#source-text").text_content()
    assert shown == source["text"]
    await p.screenshot(path=_screenshot_path(tmp_path, "web-ui-chat.png"))
    # The keyboard closes it.
    await p.keyboard.press("Escape")
    await panel.wait_for(state="hidden")
    _no_csp_violations(page)


async def test_thumbs_up_or_down_with_a_comment(page: Page, web) -> None:
    p = page.page
    bubble = await _ask(p, "What does the reranker do?")
    async with _api(web) as api:
        conversation_id = (await api.get("/v1/conversations")).json()["conversations"][0]["conversation_id"]
        probe = await api.post(
            f"/v1/conversations/{conversation_id}/turns/0/feedback", json={"rating": "up", "comment": None}
        )
    await bubble.get_by_role("button", name="Bad answer").click()
    assert await bubble.get_by_role("button", name="Bad answer").get_attribute("aria-pressed") == "true"
    await bubble.get_by_label("Comment on this answer (optional)").fill("Too vague")
    await bubble.get_by_role("button", name="Send feedback").click()
    status = bubble.locator(".feedback .status")
    if probe.status_code in (404, 405):
        await status.filter(has_text="not available").wait_for()
        pytest.skip(
            f"POST /v1/conversations/{{id}}/turns/{{i}}/feedback answers {probe.status_code}: the feedback "
            "route is built on another branch; the page says 'Feedback is not available on this server'"
        )
    assert probe.status_code < 300, probe.text
    await status.filter(has_text="Thank you").wait_for()


async def test_an_abstention_is_shown_as_such_with_its_reason(page: Page) -> None:
    p = page.page
    bubble = await _ask(p, "What was the price of copper futures in Singapore in 1987?")
    notice = bubble.locator(".notice.abstained")
    await notice.wait_for()
    text = await notice.inner_text()
    assert text.startswith("No answer from the documents.")
    assert "Try rephrasing" in text
    assert len(text) > len("No answer from the documents. Try rephrasing") + 10  # a reason in words
    assert await bubble.locator("button.cite").count() == 0


#: The issue's Romanian user's question ("Where are conversations stored?").
ROMANIAN_QUESTION = "Unde sunt stocate conversațiile?"


async def test_a_romanian_reader_asks_in_romanian_in_the_romanian_page(browser, web) -> None:
    """The page in the browser's language (Romanian) around the answer; which language the answer
    itself is in is the chat flow's to decide and its tests check it, so it is not asserted here."""
    opened = await _open(browser, web, locale="ro-RO")
    p = opened.page
    try:
        assert await p.evaluate("document.documentElement.lang") == "ro"
        async with p.expect_response(lambda response: response.url.endswith("/v1/chat/stream")) as streamed:
            bubble = await _ask(p, ROMANIAN_QUESTION, field="Întrebarea ta")
        assert await bubble.locator(".error").count() == 0, await bubble.inner_text()
        await bubble.get_by_role("button", name="Răspuns bun").wait_for()
        final = final_chat_event(await (await streamed.value).text())
        if final["abstained"]:
            notice = await bubble.locator(".notice.abstained").inner_text()
            assert notice.startswith("Niciun răspuns din documente."), notice
        else:
            assert (await bubble.locator(".answer").inner_text()).strip()
            if final["answer_mode"]:
                mode = await bubble.locator("p.meta-line").inner_text()
                assert mode in ("Răspuns citat din surse.", "Răspuns scris pe baza surselor și verificat."), mode
        # The answer is marked with the language the service named (none when it named none).
        assert await bubble.locator(".answer").get_attribute("lang") == (final.get("language") or None)
        _no_csp_violations(opened)
    finally:
        await p.context.close()


async def test_new_chat_reopen_and_delete_a_conversation(page: Page) -> None:
    p = page.page
    title = "How is a crashed service restarted?"
    await _ask(p, title)
    current = p.locator("#conversations li.current")
    await current.wait_for()
    assert await current.locator("button.open").inner_text() == title
    conversation_id = await current.get_attribute("data-conversation")
    await p.get_by_role("button", name="New chat").click()
    assert await p.locator("#messages .message").count() == 0
    assert await p.locator("#conversations li.current").count() == 0
    await p.locator(f"#conversations li[data-conversation='{conversation_id}'] button.open").click()
    await p.locator("#messages .message.user", has_text=title).wait_for()
    assert await p.locator("#messages .message.assistant .feedback").count() == 1
    conversations = p.locator("#conversations li[data-conversation]")
    before = await conversations.count()
    p.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await p.get_by_role("button", name=f"Delete conversation: {title}").click()
    await p.locator(f"#conversations li[data-conversation='{conversation_id}']").wait_for(state="detached")
    assert await conversations.count() == before - 1
    assert await p.locator("#messages .message").count() == 0  # the open conversation was the deleted one


async def test_upload_with_progress_and_per_file_summary_then_list_and_delete(page: Page, tmp_path: Path) -> None:
    p = page.page
    good = tmp_path / "web-ui-upload-note.md"
    good.write_text("# Lunar greenhouse\n\nThe lunar greenhouse grows basil under red light.\n\n## Water\n\nIt recycles water.\n")
    bad = tmp_path / "archive.exe"
    bad.write_bytes(b"MZ\x90\x00not a document")
    await p.get_by_role("button", name="Documents", exact=True).click()
    await p.get_by_label("Add files").set_input_files([str(good), str(bad)])
    await p.get_by_role("button", name="Upload").click()
    await p.locator("#upload-label", has_text="Done: 2 files.").wait_for(timeout=ANSWER_TIMEOUT_MS)
    assert await p.locator("#upload-progress").evaluate("bar => bar.value") == 100
    rows = p.locator("#upload-summary tbody tr")
    assert await rows.count() == 2
    assert await rows.nth(0).locator("td").nth(0).inner_text() == good.name
    assert (await rows.nth(0).locator("td").nth(1).inner_text()).startswith("indexed:")
    assert "chunk" in await rows.nth(0).inner_text()
    assert (await rows.nth(1).locator("td").nth(1).inner_text()).startswith("failed:")
    document_row = p.locator("#documents tbody tr", has_text="web-ui-upload-note.md")
    await document_row.wait_for()
    await p.screenshot(path=_screenshot_path(tmp_path, "web-ui-documents.png"))
    # The same file again is unchanged.
    await p.get_by_label("Add files").set_input_files([str(good)])
    await p.get_by_role("button", name="Upload").click()
    await p.locator("#upload-summary tbody tr td", has_text="unchanged").wait_for(timeout=ANSWER_TIMEOUT_MS)
    p.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await document_row.get_by_role("button").click()
    await document_row.wait_for(state="detached")
    _no_csp_violations(page)


async def test_at_phone_width_everything_fits_and_works_from_the_keyboard(browser, web) -> None:
    opened = await _open(browser, web, width=390, height=844)
    p = opened.page
    try:
        # Nothing wider than the screen.
        assert await p.evaluate("document.documentElement.scrollWidth") <= 390
        # Keyboard only: focus moves to the question, Enter sends it.
        await p.get_by_label("Your question").focus()
        await p.keyboard.type(DEMO_QUESTION)
        await p.keyboard.press("Enter")
        bubble = p.locator(".message.assistant").last
        await bubble.locator(".feedback, .error").first.wait_for(timeout=ANSWER_TIMEOUT_MS)
        assert "Redis" in await bubble.locator(".answer").inner_text()
        await bubble.locator("button.cite").first.focus()
        await p.keyboard.press("Enter")
        panel = p.locator("#source-panel")
        await panel.locator("mark#cited-sentence").wait_for()
        box = await panel.bounding_box()
        assert box is not None and box["width"] <= 390
        assert await p.evaluate("document.documentElement.scrollWidth") <= 390
        await p.keyboard.press("Escape")
        await panel.wait_for(state="hidden")
        _no_csp_violations(opened)
    finally:
        await p.context.close()


# ---------------------------------------------------------------- a long list, a long conversation

#: Conversations of one user: the list must scroll in its own pane, never the page (issue 31, item 5).
MANY_CONVERSATIONS = 200
#: Turns of the conversation opened before asking, so that the message pane has to scroll too.
LONG_CONVERSATION_TURNS = 12


async def _seed_conversations(redis_url: str, owner: str) -> None:
    """``MANY_CONVERSATIONS`` conversations of ``owner`` (``tenant/user``), written with the gateway's own
    store exactly as a chat turn writes them (asking 200 questions through the LLM would take an hour);
    the most recent one holds ``LONG_CONVERSATION_TURNS`` long turns."""
    redis = Redis.from_url(redis_url, decode_responses=True)
    store = ConversationStore(redis, max_turns=50, ttl_s=7 * 24 * 3600)
    try:
        for number in range(1, MANY_CONVERSATIONS + 1):
            conversation = owned_conversation(owner, ConversationStore.new_id())
            turns = LONG_CONVERSATION_TURNS if number == MANY_CONVERSATIONS else 1
            for turn in range(turns):
                message = f"Earlier question {number}.{turn + 1}: how does part {number} of the system behave under load?"
                answer = f"Earlier answer {number}.{turn + 1}. " + "The service keeps working and reports its state. " * 8
                await store.append(
                    conversation,
                    Turn(message=message, refined_query=message, answer=answer, created_at=time.time()),
                )
    finally:
        await redis.aclose()


@pytest.fixture(scope="module")
async def many(web, redis_url: str) -> dict[str, str]:
    """A user of the web-ui tenant (same documents) with ``MANY_CONVERSATIONS`` conversations."""
    user = "many-conversations"
    key = await _create_key(redis_url, "web-ui", user)
    await _seed_conversations(redis_url, f"web-ui/{user}")
    return {**web, "key": key}


#: What the layout looks like to the user: the page's own height and scroll, the list's and the
#: message pane's boxes and overflow.
LAYOUT = """() => {
    const list = document.getElementById('conversations');
    const pane = document.getElementById('messages');
    const box = (e) => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, height: r.height}; };
    return {
      pageHeight: document.scrollingElement.scrollHeight,
      innerHeight: window.innerHeight,
      scrollY: window.scrollY,
      list: {scrollHeight: list.scrollHeight, clientHeight: list.clientHeight, overflowY: getComputedStyle(list).overflowY, box: box(list)},
      pane: {scrollHeight: pane.scrollHeight, clientHeight: pane.clientHeight, overflowY: getComputedStyle(pane).overflowY, box: box(pane)},
    };
}"""

VISIBLE_TURN = """() => {
    const box = (e) => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, height: r.height}; };
    const questions = document.querySelectorAll('#messages .message.user');
    const answers = document.querySelectorAll('#messages .message.assistant .answer');
    return {question: box(questions[questions.length - 1]), answer: box(answers[answers.length - 1])};
}"""


def _fits_the_window(layout: dict) -> None:
    assert layout["pageHeight"] <= layout["innerHeight"] + 1, f"the page grew beyond the window: {layout}"
    assert layout["scrollY"] == 0, f"the window scrolled: {layout}"


@pytest.mark.parametrize(("width", "height"), [(1280, 900), (390, 844)], ids=["desktop", "phone"])
async def test_200_conversations_scroll_in_their_list_and_the_answer_stays_in_view(
    browser, many, width: int, height: int, tmp_path: Path
) -> None:
    opened = await _open(browser, many, width=width, height=height)
    p = opened.page
    try:
        items = p.locator("#conversations li[data-conversation]")
        await items.nth(99).wait_for()
        assert await items.count() >= 100  # GET /v1/conversations lists the 100 most recent
        layout = await p.evaluate(LAYOUT)
        _fits_the_window(layout)
        list_ = layout["list"]
        assert list_["overflowY"] in ("auto", "scroll") and list_["scrollHeight"] > list_["clientHeight"], layout
        assert list_["box"]["bottom"] <= height + 1, layout
        assert await p.evaluate("document.documentElement.scrollWidth") <= width
        # The oldest listed conversation is reachable by scrolling the list itself.
        await items.last.scroll_into_view_if_needed()
        last = await items.last.bounding_box()
        assert last is not None and last["y"] + last["height"] <= height + 1
        _fits_the_window(await p.evaluate(LAYOUT))

        # Open the long conversation (the most recent one): the message pane scrolls on its own.
        await items.first.locator("button.open").click()
        await p.locator("#messages .message.user").nth(LONG_CONVERSATION_TURNS - 1).wait_for()
        layout = await p.evaluate(LAYOUT)
        _fits_the_window(layout)
        pane = layout["pane"]
        assert pane["overflowY"] in ("auto", "scroll") and pane["scrollHeight"] > pane["clientHeight"], layout

        bubble = await _ask(p, DEMO_QUESTION)
        assert await bubble.locator(".feedback").count() == 1, await bubble.inner_text()
        layout = await p.evaluate(LAYOUT)
        _fits_the_window(layout)
        seen = await p.evaluate(VISIBLE_TURN)
        pane_box, answer, question = layout["pane"]["box"], seen["answer"], seen["question"]
        # The answer is in the window and inside the message pane: all of it when it fits in the pane,
        # else its beginning at the top of the pane.
        assert answer["height"] > 0, seen
        assert 0 <= pane_box["top"] - 1 <= answer["top"] < min(pane_box["bottom"], layout["innerHeight"]), (seen, layout)
        if answer["bottom"] - question["top"] <= pane_box["height"]:
            # Question and answer fit together: both are in view.
            assert pane_box["top"] - 1 <= question["top"] and answer["bottom"] <= pane_box["bottom"] + 1, (seen, layout)
            assert answer["bottom"] <= layout["innerHeight"], (seen, layout)
        await p.screenshot(path=str(tmp_path / f"web-ui-many-{width}x{height}.png"))
        _no_csp_violations(opened)
    finally:
        await p.context.close()

"""The web chat shows the phrase that answers and the sources' disagreement (issue 32, items 2-3), in
Debian's headless Chromium against the five real services (as tests/e2e/test_web_ui.py).

Two documents of a tenant of their own disagree on who acquired WhatsApp. Two ways through:

* the user asks and the served chain answers: to "Who acquired WhatsApp?" the notice "The sources
  disagree:" lists both owners above the answer, each with its clickable citation markers; to "When
  was WhatsApp acquired?" (both say 2014) the year is marked in the source list and in the answer.
  These need the generator's conflict detection and answer spans (issue 32's generator side);
* the page renders a stored turn that carries a span and a conflict, written with the gateway's own
  conversation store as a chat turn writes it: the page's code is checked whatever the generator
  answers today. Its citations name the two real documents (the access check lets them through) and
  its sources are what those turns cited, one of them a sentence long enough to be cut in the list.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from rag_common.schemas import AnswerSpan, Citation, Conflict, ConflictValue
from rag_gateway.chat_models import SourceChunk, Turn
from rag_gateway.conversation_store import ConversationStore, owned_conversation

pytestmark = pytest.mark.e2e

pytest.importorskip("playwright.async_api")
from browser import final_chat_event  # noqa: E402
from .test_web_ui import LAYOUT, Page, _ask, _create_key, _fits_the_window, _no_csp_violations, _open, browser  # noqa: E402,F401

TENANT, USER = "web-ui-conflict", "web-tester"
QUESTION = "Who acquired WhatsApp?"
FACEBOOK = "WhatsApp was acquired by Facebook in 2014."
APPLE = "WhatsApp was acquired by Apple in 2014."


@pytest.fixture(scope="module")
async def disagreeing(authenticated_stack, redis_url: str) -> AsyncIterator[dict[str, object]]:
    """The gateway, a key of the tenant, and the ids of its two documents that disagree."""
    key = await _create_key(redis_url, TENANT, USER)
    gateway = authenticated_stack.urls["gateway"]
    documents = [
        {"id": "whatsapp-facebook", "text": FACEBOOK, "title": "WhatsApp owner (report)", "source": "report.md"},
        {"id": "whatsapp-apple", "text": APPLE, "title": "WhatsApp owner (rumour)", "source": "rumour.md"},
    ]
    async with httpx.AsyncClient(base_url=gateway, headers={"Authorization": f"Bearer {key}"}, timeout=300) as api:
        ingested = await api.post("/v1/documents", json={"documents": documents})
    assert ingested.status_code == 200, ingested.text
    assert sorted(ingested.json()["doc_ids"]) == ["whatsapp-apple", "whatsapp-facebook"]
    yield {"url": gateway, "key": key}


async def _conflict_shown(p, bubble) -> None:
    """What the reader sees of a disagreement between Facebook [1] and Apple [2], and where its markers lead."""
    notice = bubble.locator(".notice.conflict")
    assert await notice.count() == 1
    # Above the answer, in the bubble.
    assert await bubble.evaluate("b => b.querySelector('.notice.conflict').compareDocumentPosition(b.querySelector('.answer')) & 4") == 4
    assert (await notice.locator("strong").inner_text()) == "The sources disagree:"
    values = notice.get_by_role("listitem")
    assert await values.count() == 2
    said = {}
    for index in range(2):
        item = values.nth(index)
        said[await item.locator(".value").inner_text()] = [await b.get_attribute("data-cite") for b in await item.locator("button.cite").all()]
    assert set(said) == {"Facebook", "Apple"} and all(said.values()), said
    # A value's marker opens the sentence that states it.
    await values.filter(has_text="Apple").locator("button.cite").first.click()
    panel = p.locator("#source-panel")
    await panel.locator("mark#cited-sentence").wait_for()
    assert "Apple" in await panel.locator("mark#cited-sentence").inner_text()
    await p.keyboard.press("Escape")
    await panel.wait_for(state="hidden")


async def _ask_for_real(browser, disagreeing, question: str) -> tuple[Page, object, dict]:
    """The page, the answer's bubble and the stream's final event (what the page rendered)."""
    opened = await _open(browser, disagreeing)
    p = opened.page
    async with p.expect_response(lambda response: response.url.endswith("/v1/chat/stream")) as streamed:
        bubble = await _ask(p, question)
    assert await bubble.locator(".error").count() == 0, await bubble.inner_text()
    return opened, bubble, final_chat_event(await (await streamed.value).text())


async def _span_shown(bubble, span: dict) -> None:
    """The phrase is marked in its citation's quote in the source list, and in the answer when it is there verbatim."""
    quotes = bubble.locator(".sources li").filter(has=bubble.page.locator(f"button[data-cite='{span['citation']}']"))
    assert [await m.inner_text() for m in await quotes.locator("mark.answer-span").all()] == [span["text"]]
    answer = bubble.locator(".answer")
    in_answer = [await m.inner_text() for m in await answer.locator("mark.answer-span").all()]
    assert in_answer == ([span["text"]] if span["text"] in await answer.inner_text() else [])


async def test_asking_who_acquired_it_shows_that_the_sources_disagree(browser, disagreeing) -> None:
    """Through the served chain: needs the generator's conflict detection (issue 32, item 3)."""
    opened, bubble, final = await _ask_for_real(browser, disagreeing, QUESTION)
    p = opened.page
    try:
        assert final["conflict"] is not None, final
        answer = await bubble.locator(".answer").inner_text()
        assert "Facebook" in answer and "Apple" in answer, answer
        await _conflict_shown(p, bubble)
        if final["answer_span"] is not None:
            await _span_shown(bubble, final["answer_span"])
        _fits_the_window(await p.evaluate(LAYOUT))
        _no_csp_violations(opened)
    finally:
        await p.context.close()


async def test_asking_when_it_was_acquired_marks_the_year(browser, disagreeing) -> None:
    """Through the served chain: both sources say 2014, so no conflict, and the year is the phrase that
    answers. Needs the generator's answer spans (issue 32, item 2)."""
    opened, bubble, final = await _ask_for_real(browser, disagreeing, "When was WhatsApp acquired?")
    p = opened.page
    try:
        assert final["conflict"] is None and await bubble.locator(".notice.conflict").count() == 0, final
        span = final["answer_span"]
        assert span is not None and span["text"] == "2014", final
        await _span_shown(bubble, span)
        _no_csp_violations(opened)
    finally:
        await p.context.close()


#: A long sentence (cut in the source list) whose phrase that answers lies past the cut.
LONG_FACEBOOK = (
    "After months of talks with several suitors and a regulatory review in many countries, "
    "the messaging service WhatsApp was acquired by Facebook in 2014."
)


def _cited(cid: int, doc_id: str, text: str, title: str, source: str) -> tuple[Citation, SourceChunk]:
    """Citation ``cid`` of a one-sentence chunk of ``doc_id``, and the chunk as the turn stored it."""
    chunk_id = f"{doc_id}:0:seeded"
    citation = Citation(id=cid, source=source, title=title, chunk_id=chunk_id, score=0.9, quote=text, start=0, end=len(text))
    return citation, SourceChunk(chunk_id=chunk_id, doc_id=doc_id, title=title, source=source, text=text)


async def _seed_disagreeing_turn(redis_url: str) -> str:
    """A conversation of the tenant's user with one stored turn whose sources disagree; its id."""
    facebook, facebook_source = _cited(1, "whatsapp-facebook", LONG_FACEBOOK, "WhatsApp owner (report)", "report.md")
    apple, apple_source = _cited(2, "whatsapp-apple", APPLE, "WhatsApp owner (rumour)", "rumour.md")
    start = LONG_FACEBOOK.index("Facebook")
    turn = Turn(
        message=QUESTION, refined_query=QUESTION, answer="The sources disagree: Facebook [1]; Apple [2].",
        citations=[facebook, apple], created_at=time.time(), language="en",
        answer_span=AnswerSpan(citation=1, start=start, end=start + len("Facebook"), text="Facebook", kind="organisation"),
        conflict=Conflict(kind="organisation", values=[
            ConflictValue(value="Facebook", citations=[1]), ConflictValue(value="Apple", citations=[2]),
        ]),
    )
    redis = Redis.from_url(redis_url, decode_responses=True)
    try:
        conversation_id = ConversationStore.new_id()
        store = ConversationStore(redis, max_turns=50, ttl_s=3600)
        await store.append(owned_conversation(f"{TENANT}/{USER}", conversation_id), turn, [facebook_source, apple_source])
        return conversation_id
    finally:
        await redis.aclose()


@pytest.mark.parametrize(
    ("locale", "heading", "width", "height"),
    [("en-US", "The sources disagree:", 1280, 860), ("ro-RO", "Sursele nu sunt de acord:", 390, 844)],
    ids=["english-desktop", "romanian-phone"],
)
async def test_a_stored_turn_with_a_span_and_a_conflict_is_rendered(
    browser, disagreeing, redis_url: str, locale: str, heading: str, width: int, height: int, tmp_path: Path
) -> None:
    conversation_id = await _seed_disagreeing_turn(redis_url)
    opened = await _open(browser, disagreeing, locale=locale, width=width, height=height)
    p = opened.page
    try:
        await p.locator(f"#conversations li[data-conversation='{conversation_id}'] button.open").click()
        bubble = p.locator("#messages .message.assistant").last
        notice = bubble.locator(".notice.conflict")
        await notice.wait_for()
        assert await notice.locator("strong").inner_text() == heading
        if locale == "en-US":
            await _conflict_shown(p, bubble)
        # The phrase in the answer text, once.
        marked = bubble.locator(".answer mark.answer-span")
        assert [await m.inner_text() for m in await marked.all()] == ["Facebook"]
        assert await bubble.locator(".answer").inner_text() == "The sources disagree: Facebook [1]; Apple [2]."
        # The long quote is cut around the phrase, which stays in view and marked; the other quote is whole.
        facebook_quote, apple_quote = (await bubble.locator(".sources li button.source-link").all())[:2]
        shown = await facebook_quote.inner_text()
        assert shown.startswith("“…") and shown.endswith("Facebook in 2014.”") and len(shown) <= 2 + 90, shown
        assert await facebook_quote.locator("mark.answer-span").inner_text() == "Facebook"
        assert await apple_quote.inner_text() == f"“{APPLE}”" and await apple_quote.locator("mark").count() == 0
        # Opened, the cited sentence is highlighted with the phrase marked inside it.
        await facebook_quote.click()
        sentence = p.locator("#source-panel mark#cited-sentence")
        await sentence.wait_for()
        assert await sentence.inner_text() == LONG_FACEBOOK
        assert await sentence.locator("mark.answer-span").inner_text() == "Facebook"
        await p.screenshot(path=str(tmp_path / f"web-ui-conflict-{locale}-{width}.png"))
        _fits_the_window(await p.evaluate(LAYOUT))
        assert await p.evaluate("document.documentElement.scrollWidth") <= width
        _no_csp_violations(opened)
    finally:
        await p.context.close()

"""The web chat in the reader's language (issue 31, item 5), in a real browser (Debian's Chromium
through Playwright): the page's own words come from a message table per language (English and
Romanian shipped), the language is the browser's unless the reader switched it, the switch re-words
the page at once and is remembered, and ``<html lang>`` follows. Answers are shown as the service wrote
them; when the chat response names the question's language the answer element carries it as ``lang``.

The gateway is the real app over real HTTP with real Redis (authentication off: no sign-in); its
downstream services are the fakes of tests/gateway. tests/e2e/test_web_ui.py runs the real ones."""

from __future__ import annotations

import json
import tomllib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from rag_gateway.app import create_app
from ragctl.in_process import serve_in_thread

from .support import gateway_settings

pytest.importorskip("playwright.async_api")
from browser import final_chat_event, launched_chromium  # noqa: E402

ROMANIAN_QUESTION = "Unde sunt stocate conversațiile?"
#: Messages whose Romanian is the English on purpose (a loanword, a name, a pass-through).
SAME_IN_BOTH = {"verbatim", "navChat", "oidcFallbackName"}


@pytest.fixture(scope="module")
def gateway(redis_url: str, fake_services) -> Iterator[str]:
    url, _ = fake_services
    with serve_in_thread(create_app(gateway_settings(redis_url, url))) as served:
        yield served


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[object]:
    async with launched_chromium() as launched:
        yield launched


class Opened:
    """A page opened in a browser context of one locale, with the errors it logged."""

    def __init__(self, page, errors: list[str]) -> None:
        self.page = page
        self.errors = errors


@pytest.fixture
async def open_page(browser, gateway: str) -> AsyncIterator:
    """Opens ``/`` in a fresh context (own storage) whose browser language is ``locale``; the chat is
    shown once the page has signed in (authentication is off)."""
    contexts = []

    async def opener(locale: str) -> Opened:
        context = await browser.new_context(locale=locale, base_url=gateway)
        contexts.append(context)
        page = await context.new_page()
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto("/")
        await page.locator("#chat-page").wait_for()
        return Opened(page, errors)

    yield opener
    for context in contexts:
        await context.close()


async def _chrome(page) -> dict[str, str | None]:
    """Words of the page's chrome, as the reader sees them (names of buttons and fields included)."""
    return await page.evaluate(
        """() => ({
        lang: document.documentElement.lang,
        title: document.title,
        heading: document.querySelector('h1').textContent,
        newChat: document.getElementById('new-chat').textContent,
        send: document.getElementById('send').textContent,
        placeholder: document.getElementById('question').placeholder,
        questionLabel: document.querySelector('label[for=question]').textContent,
        hint: document.querySelector('#messages > p.hint').textContent,
        who: document.getElementById('who').textContent,
        switch: document.getElementById('language').value,
    })"""
    )


async def test_a_romanian_browser_gets_the_romanian_page(open_page) -> None:
    opened = await open_page("ro-RO")
    chrome = await _chrome(opened.page)
    assert chrome["lang"] == "ro" and chrome["switch"] == "ro"
    assert chrome["title"] == chrome["heading"] == "Asistent pentru documente"
    assert chrome["newChat"] == "Conversație nouă"
    assert chrome["send"] == "Trimite"
    assert chrome["placeholder"].startswith("Scrie o întrebare")
    assert chrome["questionLabel"] == "Întrebarea ta"
    assert chrome["hint"].startswith("Pune o întrebare despre documentele organizației tale.")
    assert chrome["who"] == "utilizator local (autentificare dezactivată)"
    # Found by the names a screen reader announces, in Romanian.
    await opened.page.get_by_role("button", name="Conversație nouă").wait_for()
    await opened.page.get_by_label("Întrebarea ta").wait_for()
    # The switch names each language in itself.
    options = await opened.page.locator("#language option").evaluate_all("os => os.map((o) => [o.value, o.lang, o.textContent])")
    assert options == [["en", "en", "English"], ["ro", "ro", "Română"]]
    assert opened.errors == []


async def test_an_english_browser_gets_the_english_page(open_page) -> None:
    opened = await open_page("en-US")
    chrome = await _chrome(opened.page)
    assert chrome["lang"] == "en" and chrome["switch"] == "en"
    assert chrome["title"] == chrome["heading"] == "Document assistant"
    assert chrome["newChat"] == "New chat"
    assert chrome["send"] == "Send"
    assert chrome["placeholder"].startswith("Ask a question about the documents")
    assert chrome["who"] == "local user (authentication off)"
    assert opened.errors == []


async def test_a_language_not_shipped_gets_english(open_page) -> None:
    opened = await open_page("de-DE")
    chrome = await _chrome(opened.page)
    assert chrome["lang"] == "en" and chrome["newChat"] == "New chat"


async def test_the_switch_rewords_the_page_at_once_and_is_remembered(open_page) -> None:
    opened = await open_page("ro-RO")
    page = opened.page
    assert (await _chrome(page))["newChat"] == "Conversație nouă"
    await page.get_by_label("Limba").select_option("en")
    # At once, without a reload: the static page, the parts built since (the hint, who is signed in)
    # and the attributes (placeholder, the field's name).
    chrome = await _chrome(page)
    assert chrome["lang"] == "en" and chrome["title"] == "Document assistant"
    assert chrome["newChat"] == "New chat" and chrome["send"] == "Send"
    assert chrome["placeholder"].startswith("Ask a question about the documents")
    assert chrome["hint"].startswith("Ask a question about your organisation's documents.")
    assert chrome["who"] == "local user (authentication off)"
    await page.get_by_label("Your question").wait_for()
    # Remembered: the reload opens in English although the browser's language is Romanian.
    await page.reload()
    await page.locator("#chat-page").wait_for()
    chrome = await _chrome(page)
    assert chrome["lang"] == "en" and chrome["switch"] == "en" and chrome["newChat"] == "New chat"
    # And back.
    await page.get_by_label("Language").select_option("ro")
    assert (await _chrome(page))["send"] == "Trimite"
    assert opened.errors == []


async def test_a_romanian_question_in_the_romanian_page_gets_its_answer(open_page) -> None:
    opened = await open_page("ro-RO")
    page = opened.page
    async with page.expect_response(lambda response: response.url.endswith("/v1/chat/stream")) as streamed:
        await page.get_by_label("Întrebarea ta").fill(ROMANIAN_QUESTION)
        await page.get_by_label("Întrebarea ta").press("Enter")
    bubble = page.locator(".message.assistant").last
    await bubble.locator(".feedback").wait_for()
    assert await page.locator(".message.user").last.inner_text() == ROMANIAN_QUESTION
    answer = bubble.locator(".answer")
    assert (await answer.inner_text()).strip(), "no answer was rendered"
    # The answer's chrome in the page's language.
    await bubble.get_by_role("button", name="Răspuns bun").wait_for()
    assert await bubble.locator("ol.sources").get_attribute("aria-label") == "Surse"
    assert (await bubble.locator("button.cite").first.get_attribute("aria-label")).startswith("Sursa 1: ")
    # The answer element carries the language the service named, and none when it named none.
    final = final_chat_event(await (await streamed.value).text())
    assert await answer.get_attribute("lang") == (final.get("language") or None)
    await page.locator("#conversations li[data-conversation]", has_text=ROMANIAN_QUESTION).first.wait_for()
    assert opened.errors == []


def _stream(answer: str, **final: object) -> str:
    """A chat stream as the gateway sends it: meta, the answer as one token, final."""
    response = {
        "conversation_id": "c-lang", "answer": answer, "citations": [], "refined_query": answer, "abstained": False,
        "timings_ms": {}, "degraded": [], "intent": "rag", "answer_mode": "extractive", "answerability": None,
        "claims_dropped": 0, **final,
    }
    events = [
        ("meta", {"conversation_id": "c-lang", "refined_query": answer, "intent": "rag"}),
        ("token", {"text": answer}),
        ("final", response),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


async def test_the_answer_carries_the_language_the_response_names(open_page) -> None:
    """The response's ``language`` (its question's) becomes the ``lang`` of the answer and of the
    question, the page's chrome around them staying in the reader's language; a response without it
    renders all the same."""
    opened = await open_page("en-US")
    page = opened.page
    replies = {
        "romanian": _stream("Conversațiile sunt stocate în Redis.", language="ro"),
        "unnamed": _stream("Conversations are stored in Redis."),
        "abstained": _stream("", abstained=True, abstain_reason="no_passages", answer_mode=None, language="ro"),
    }

    async def reply(route) -> None:
        message = json.loads(route.request.post_data)["message"]
        await route.fulfill(status=200, content_type="text/event-stream", body=replies[message])

    await page.route("**/v1/chat/stream", reply)
    for message in replies:
        await page.locator("#send:enabled").wait_for()  # the previous turn is done
        await page.get_by_label("Your question").fill(message)
        await page.get_by_label("Your question").press("Enter")
        await page.locator(".message.assistant .feedback").nth(list(replies).index(message)).wait_for()
    romanian, unnamed, abstained = (page.locator(".message.assistant").nth(i) for i in range(3))
    assert await romanian.locator(".answer").get_attribute("lang") == "ro"
    questions = page.locator(".message.user")
    assert [await questions.nth(i).get_attribute("lang") for i in range(3)] == ["ro", None, "ro"]
    assert await romanian.locator(".answer").inner_text() == "Conversațiile sunt stocate în Redis."
    await romanian.get_by_role("button", name="Good answer").wait_for()
    assert await unnamed.locator(".answer").get_attribute("lang") is None
    assert await unnamed.locator(".answer").inner_text() == "Conversations are stored in Redis."
    notice = abstained.locator(".notice.abstained")
    assert (await notice.inner_text()).startswith("No answer from the documents. No document matched the question. Try")
    # Switched, the chrome of the answers already shown follows; the answers do not change.
    await page.get_by_label("Language").select_option("ro")
    assert (await notice.inner_text()).startswith("Niciun răspuns din documente. Niciun document nu corespunde întrebării.")
    assert await romanian.locator("p.meta-line").inner_text() == "Răspuns citat din surse."
    await romanian.get_by_role("button", name="Răspuns bun").wait_for()
    assert await unnamed.locator(".answer").inner_text() == "Conversations are stored in Redis."
    assert opened.errors == []


async def test_the_tables_word_every_message_and_pick_plurals_and_the_language(open_page) -> None:
    """The tables have the same keys (tsc checks it too: each is a Record<MessageKey, Message>), the
    Romanian translates all but a few on purpose and writes ș/ț with the comma below, every key
    index.html names exists, plurals follow each language's rules, and the starting language is the
    first shipped one of the browser's list."""
    opened = await open_page("en-US")
    checked = await opened.page.evaluate(
        """async () => {
        const { en } = await import('/static/js/messages-en.js');
        const { ro } = await import('/static/js/messages-ro.js');
        const i18n = await import('/static/js/i18n.js');
        const marked = [...document.querySelectorAll('*')].flatMap((node) =>
            node.getAttributeNames().filter((name) => name.startsWith('data-i18n')).map((name) => node.getAttribute(name)))
          .filter((value) => !value.startsWith('{'));
        const done = (n, locale) => i18n.format(i18n.text('uploadDone', { count: n }), locale);
        return {
          en: Object.keys(en).sort(), ro: Object.keys(ro).sort(),
          same: Object.keys(en).filter((key) => JSON.stringify(en[key]) === JSON.stringify(ro[key])),
          romanian: JSON.stringify(ro),
          unknown: marked.filter((key) => !(key in en)),
          marked: marked.length,
          plurals: [1, 2, 19, 20, 101].map((n) => [done(n, 'en'), done(n, 'ro')]),
          nested: i18n.format(i18n.text('indexed', { chunks: i18n.text('chunkCount', { count: 21 }),
                                                     documents: i18n.text('inDocuments', { count: 3 }),
                                                     unchanged: i18n.text('unchangedCount', { count: 1 }) }), 'ro'),
          starts: [
            i18n.initialLocale(null, ['de-DE', 'ro', 'en-GB']), i18n.initialLocale(null, ['RO-md']),
            i18n.initialLocale(null, ['fr-FR']), i18n.initialLocale(null, []),
            i18n.initialLocale('en', ['ro-RO']), i18n.initialLocale('xx', ['ro-RO']),
          ],
        };
    }"""
    )
    assert checked["en"] == checked["ro"] and len(checked["en"]) > 100
    assert set(checked["same"]) == SAME_IN_BOTH
    assert "ş" not in checked["romanian"] and "ţ" not in checked["romanian"]  # cedilla forms
    assert "ș" in checked["romanian"] and "ț" in checked["romanian"]
    assert checked["marked"] > 25 and checked["unknown"] == []
    assert checked["plurals"] == [
        ["Done: 1 file.", "Gata: 1 fișier."],
        ["Done: 2 files.", "Gata: 2 fișiere."],
        ["Done: 19 files.", "Gata: 19 fișiere."],
        ["Done: 20 files.", "Gata: 20 de fișiere."],
        ["Done: 101 files.", "Gata: 101 fișiere."],  # the last two digits: 01
    ]
    assert checked["nested"] == "indexat: 21 de fragmente în 3 documente, 1 neschimbat"
    assert checked["starts"] == ["ro", "ro", "en", "en", "en", "ro"]
    assert opened.errors == []


def test_the_gateway_wheel_carries_every_file_the_page_loads() -> None:
    """The message tables are modules of their own: the gateway's package data (what the wheel and
    the Docker image carry) must match each file under static/, or the page loads in development and
    breaks when installed."""
    root = Path(__file__).resolve().parents[2] / "services" / "gateway"
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["rag_gateway"]
    package = root / "rag_gateway"
    # pathlib's glob, like setuptools', does not let "*" cross a "/".
    carried = {path for pattern in patterns for path in package.glob(pattern)}
    served = [path for path in sorted((package / "static").rglob("*")) if path.is_file()]
    assert package / "static" / "js" / "messages-ro.js" in served
    assert [path.relative_to(package).as_posix() for path in served if path not in carried] == []

"""The gateway's stand-in answer reads the question and each passage in their languages."""

from __future__ import annotations

from rag_common.schemas import Passage
from rag_gateway.stage_fallbacks import answer_without_generator

QUESTION = "Unde sunt stocate conversațiile?"
PASSAGES = [
    Passage(chunk_id="c1", doc_id="d1", text="Unde sunt ei? Nimeni nu știe.", language="ro"),
    Passage(chunk_id="c2", doc_id="d2", text="Conversațiile se țin în Redis, conform art. 5 alin. (2) din regulament.", language="ro"),
]


def test_romanian_function_words_do_not_make_a_match() -> None:
    answer = answer_without_generator(QUESTION, PASSAGES, texts="ro", language="ro")
    assert not answer.abstained
    # The whole sentence of the second passage, not cut at "art." nor "alin.".
    assert answer.citations[0].chunk_id == "c2"
    assert answer.citations[0].quote == PASSAGES[1].text
    # Read as English (no language anywhere), "unde" and "sunt" are content words and the first
    # passage's question wins.
    unnamed = [passage.model_copy(update={"language": None}) for passage in PASSAGES]
    assert answer_without_generator(QUESTION, unnamed, texts="ro").citations[0].chunk_id == "c1"

"""Chunking a long text is linear in it (issue 29), and gives the chunks it always gave.

A "sentence" of megabytes (text without sentence ends) used to be tokenized whole, twice (count, then
offsets), each call holding the GIL for seconds and costing more per character the longer it was.
Now no tokenizer call sees more than a window (``TOKENIZE_WINDOW_CHARS``, cut at whitespace) and
each character is tokenized a bounded number of times: asserted here on counts, never on time.
The two regular expressions that were quadratic in a run of spaces are replaced by code that is
checked against them on random strings.
"""

from __future__ import annotations

import random
import re
import string

import pytest

from rag_common.schemas import DocumentIn
from rag_retriever.chunking import Chunker, heading
from rag_retriever.ingestion import to_source_document
from rag_retriever.records import normalise_text, strip_outer_space
from rag_retriever.settings import RetrieverSettings
from rag_retriever.tokens import EmbedderTokenizer

WINDOW = 2_000
TEMPLATE = RetrieverSettings().embed_template


class CountingTokenizer:
    """The real tokenizer, recording the length of every text it is given."""

    def __init__(self, tokenizer: EmbedderTokenizer) -> None:
        self._tokenizer = tokenizer
        self.max_tokens = tokenizer.max_tokens
        self.calls: list[int] = []

    def count(self, text: str) -> int:
        self.calls.append(len(text))
        return self._tokenizer.count(text)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        self.calls.append(len(text))
        return self._tokenizer.offsets(text)


def words(n_chars: int, seed: int, *, sentence_every: int = 0, newline_every: int = 0) -> str:
    """Random short words (the issue's "two million short words"), rarely a sentence end or a line break."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 6))) for _ in range(500)]
    out, size, count = [], 0, 0
    while size < n_chars:
        word = rng.choice(vocabulary)
        count += 1
        if sentence_every and count % sentence_every == 0:
            word += "."
        separator = "\n" if newline_every and count % newline_every == 0 else " "
        out.append(word + separator)
        size += len(word) + 1
    return "".join(out).strip()


def chunk_texts(chunker: Chunker, text: str, title: str = "Manual") -> list[str]:
    return [chunk.text for chunk in chunker.chunk_document(to_source_document(DocumentIn(id="d", text=text, title=title)))]


def samples() -> dict[str, str]:
    rng = random.Random(7)
    return {
        "short words, no sentence end": words(30_000, 1),
        "rare sentence ends and line breaks": words(30_000, 2, sentence_every=900, newline_every=4_000),
        "long words (UNK, many pieces)": " ".join(
            "".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 150))) for _ in range(400)
        ),
        "punctuation": "".join(rng.choice("ab,.;:-_/()[]'\" \n\t") for _ in range(12_000)),
        "unicode and odd spaces": "".join(
            rng.choice(["é", "ü", "漢", "字", " ", "a", "b", "ß", "\u00a0", "\u2009", "😀", "\x1c", "\f", "-", "."])
            for _ in range(12_000)
        ),
        "a run without whitespace": "x" * 9_000 + " and then some words",
        "a huge table row": "| a | b |\n|---|---|\n| " + words(12_000, 3) + " | c |\n",
    }


@pytest.mark.parametrize("name", list(samples()))
def test_windowed_tokenizing_gives_the_chunks_of_whole_tokenizing(tokenizer, name):
    text = samples()[name]
    whole = Chunker(tokenizer, 200, 40, TEMPLATE, window_chars=10**9)  # every span tokenized whole: as before
    for window in (64, 700, WINDOW):
        assert chunk_texts(Chunker(tokenizer, 200, 40, TEMPLATE, window_chars=window), text) == chunk_texts(whole, text)


def test_tokenizer_work_is_linear_in_a_long_sentence(tokenizer):
    """Characters handed to the tokenizer per character of text stay flat as the text grows 8x, and no
    call grows with it (before: one call of the whole text, then another)."""
    per_char, largest = [], []
    for size in (20_000, 40_000, 80_000, 160_000):
        counting = CountingTokenizer(tokenizer)
        chunks = chunk_texts(Chunker(counting, 200, 40, TEMPLATE, window_chars=WINDOW), words(size, size))
        assert chunks and all(len(chunk) < WINDOW for chunk in chunks)
        per_char.append(sum(counting.calls) / size)
        largest.append(max(counting.calls))
    assert max(per_char) < 5, per_char  # count, offsets and verification of each piece: a few times each
    assert max(per_char) - min(per_char) < 0.25, per_char
    assert max(largest) <= WINDOW + 64, largest  # a window, plus the word it ends in


def test_old_code_path_is_kept_for_ordinary_sentences(tokenizer):
    """Sentences shorter than a window are counted whole in one call each, as before."""
    counting = CountingTokenizer(tokenizer)
    text = words(20_000, 5, sentence_every=12)
    chunk_texts(Chunker(counting, 200, 40, TEMPLATE, window_chars=WINDOW), text)
    assert max(counting.calls) < WINDOW


# ----------------------------------------------------------------- the regular expressions replaced

_OUTER_SPACE = re.compile(r"\A[^\S\f]+|[^\S\f]+\Z")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


def test_strip_outer_space_is_the_regular_expression_it_replaced():
    rng = random.Random(11)
    alphabet = [" ", "\t", "\n", "\f", "\v", "\r", "\x1c", "\x85", "\u00a0", "\u2028", "\u3000", "a", "b"]
    for _ in range(50_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert strip_outer_space(text) == _OUTER_SPACE.sub("", text), repr(text)


def test_heading_is_the_regular_expression_it_replaced():
    rng = random.Random(12)
    alphabet = [" ", "\t", "#", "#", "a", "b", " "]
    for _ in range(50_000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        match = _HEADING.match(line)
        assert heading(line) == ((len(match.group(1)), match.group(2)) if match else None), repr(line)


def test_long_runs_of_spaces():
    """What made the regular expressions quadratic (a run of a million spaces took hours): correct here."""
    run = " " * 1_000_000
    assert normalise_text(f"{run}a{run}b{run}\f{run}") == f"a{run}b{run}\f"
    assert heading(f"## Title{run}##{run}") == (2, "Title")
    assert heading(f"# a{run}b") == (1, f"a{run}b")

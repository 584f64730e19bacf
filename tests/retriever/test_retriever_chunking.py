"""The chunker with the real MiniLM tokenizer: budgets, overlap, markdown sections, stable ids."""

from __future__ import annotations

import re

import pytest

from rag_retriever.chunking import Chunker, chunk_id, markdown_sections
from rag_retriever.records import SourceDocument
from retriever_builders import SETTINGS, settings_chunker

SENTENCES = [
    f"Sentence {i} explains how the {topic} system handles request number {i * 13} under load."
    for i, topic in enumerate(["billing", "search", "storage", "network", "auth", "queue"] * 8)
]
TEXT = " ".join(SENTENCES)


def test_no_chunk_exceeds_the_token_budget(tokenizer):
    chunker = Chunker(tokenizer, chunk_tokens=60, chunk_overlap_tokens=20)
    chunks = chunker.split_text(TEXT)
    assert len(chunks) > 5
    assert all(tokenizer.count(chunk) <= 60 for chunk in chunks)
    # Whole sentences only: every chunk starts and ends on a sentence boundary.
    assert all(chunk.startswith("Sentence ") and chunk.endswith("under load.") for chunk in chunks)


def test_consecutive_chunks_overlap_by_whole_trailing_sentences(tokenizer):
    chunker = Chunker(tokenizer, chunk_tokens=60, chunk_overlap_tokens=20)
    chunks = chunker.split_text(TEXT)
    for previous, following in zip(chunks, chunks[1:]):
        last_sentence = re.findall(r"Sentence \d+ [^.]*\.", previous)[-1]
        assert following.startswith(last_sentence)
        overlap = following[: len(last_sentence)]
        assert tokenizer.count(overlap) <= 20
    # Nothing lost: every sentence is in some chunk.
    assert all(any(sentence in chunk for chunk in chunks) for sentence in SENTENCES)


def test_no_overlap_when_disabled(tokenizer):
    chunks = Chunker(tokenizer, chunk_tokens=60, chunk_overlap_tokens=0).split_text(TEXT)
    assert " ".join(chunks) == TEXT


def test_a_sentence_longer_than_the_budget_is_split_without_losing_text(tokenizer):
    words = [f"antidisestablishmentarianism{i}" for i in range(120)]
    sentence = " ".join(words) + "."
    chunks = Chunker(tokenizer, chunk_tokens=50, chunk_overlap_tokens=10).split_text(sentence)
    assert len(chunks) > 1
    assert all(tokenizer.count(chunk) <= 50 for chunk in chunks)
    # Cut on word boundaries, and together the pieces are exactly the sentence.
    assert " ".join(chunks) == sentence


def test_the_budget_must_leave_room_for_special_tokens(tokenizer):
    assert tokenizer.max_tokens == 256
    Chunker(tokenizer, chunk_tokens=254, chunk_overlap_tokens=SETTINGS.chunk_overlap_tokens)
    with pytest.raises(ValueError, match="between 1 and 254"):
        Chunker(tokenizer, chunk_tokens=255, chunk_overlap_tokens=SETTINGS.chunk_overlap_tokens)
    with pytest.raises(ValueError, match="below chunk_tokens"):
        Chunker(tokenizer, chunk_tokens=50, chunk_overlap_tokens=50)


MARKDOWN = """# Operations guide

Read this first. It covers deployment.

## Deploying

Build the image. Push it to the registry.

```bash
# this is a shell comment, not a heading
make deploy
```

### Rollback

Run the previous tag.

## Monitoring

Watch the dashboards.

# Appendix

Glossary of terms.
"""


def test_markdown_sections_follow_the_heading_tree():
    sections = markdown_sections(MARKDOWN)
    assert [section.path for section in sections] == [
        ("Operations guide",),
        ("Operations guide", "Deploying"),
        ("Operations guide", "Deploying", "Rollback"),
        ("Operations guide", "Monitoring"),
        ("Appendix",),
    ]
    assert "# this is a shell comment" in sections[1].text


def test_markdown_chunks_carry_their_section_path_and_never_cross_a_heading(tokenizer):
    document = SourceDocument("guide.md", MARKDOWN, title="Operations guide", metadata={"content_type": "text/markdown"})
    chunks = Chunker(tokenizer, chunk_tokens=200, chunk_overlap_tokens=40).chunk_document(document)
    assert [(chunk.section_path, chunk.text.splitlines()[0]) for chunk in chunks] == [
        (["Operations guide"], "Read this first. It covers deployment."),
        (["Operations guide", "Deploying"], "Build the image. Push it to the registry."),
        (["Operations guide", "Deploying", "Rollback"], "Run the previous tag."),
        (["Operations guide", "Monitoring"], "Watch the dashboards."),
        (["Appendix"], "Glossary of terms."),
    ]
    assert [chunk.chunk_index for chunk in chunks] == [0, 1, 2, 3, 4]
    assert not any("#" in chunk.text.replace("# this is a shell comment", "") for chunk in chunks)


def test_plain_text_is_read_like_markdown_other_stated_types_are_not(tokenizer):
    # Issue 12: plain text used to be one flat block, so a Markdown text sent as JSON (no content_type,
    # hence text/plain) was chunked unlike the same text uploaded as .md. One reader for both now.
    text = "# Setup\nJust text."
    plain, markdown = (
        settings_chunker(tokenizer).chunk_document(SourceDocument("notes", text, metadata={"content_type": content_type}))
        for content_type in ("text/plain", "text/markdown")
    )
    assert [(c.section_path, c.text) for c in plain] == [(c.section_path, c.text) for c in markdown]
    assert [(c.section_path, c.text) for c in plain] == [(["Setup"], "Just text.")]
    # A content type the document states that is none of those (code, say) is still one flat text.
    [code] = settings_chunker(tokenizer).chunk_document(
        SourceDocument("run.py", "# not a heading here\nprint()", metadata={"content_type": "text/x-python"})
    )
    assert (code.section_path, code.text) == ([], "# not a heading here\nprint()")


def test_chunk_ids_are_stable_and_follow_the_format(tokenizer):
    document = SourceDocument("doc-1", TEXT, title="t", source="s")
    chunker = Chunker(tokenizer, chunk_tokens=60, chunk_overlap_tokens=20)
    first, second = chunker.chunk_document(document), chunker.chunk_document(document)
    assert [c.chunk_id for c in first] == [c.chunk_id for c in second]
    assert len({c.chunk_id for c in first}) == len(first)
    for chunk in first:
        assert chunk.chunk_id == chunk_id("doc-1", chunk.chunk_index, chunk.text)
        assert re.fullmatch(r"doc-1:\d+:[0-9a-f]{12}", chunk.chunk_id)
    edited = SourceDocument("doc-1", TEXT.replace("Sentence 47", "Sentence forty-seven"))
    changed = chunker.chunk_document(edited)
    assert [c.chunk_id for c in changed[:-1]] == [c.chunk_id for c in first[:-1]]
    assert changed[-1].chunk_id != first[-1].chunk_id


def test_a_word_longer_than_the_budget_is_cut_inside_it(tokenizer):
    # Base64-like: no whitespace or punctuation. (Past 100 characters BERT's WordPiece maps a word to
    # a single [UNK], so the word stays below that to be many tokens long.)
    blob = "QmFzZTY0" * 12
    assert tokenizer.count(blob) > 20
    chunks = Chunker(tokenizer, chunk_tokens=8, chunk_overlap_tokens=0).split_text(blob)
    assert len(chunks) > 1
    assert all(tokenizer.count(chunk) <= 8 for chunk in chunks)
    assert "".join(chunks) == blob

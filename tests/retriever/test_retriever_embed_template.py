"""What the embedder sees (issue 17): ``RETRIEVER_EMBED_TEMPLATE``, by default the document's title and
the chunk's section path with the chunk text, used at ingestion and at every re-embedding; a template
change is detected on re-ingestion (it is in the document's fingerprint). Real MiniLM, real runtime,
real embedded index; the stored vectors are compared with the model's own encoding of the expected
string."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.schemas import DocumentIn
from rag_retriever.embed_template import DEFAULT_TEMPLATE, EmbedTemplate
from rag_retriever.ingestion import to_source_document
from rag_retriever.records import DEFAULT_TENANT
from rag_retriever.runtime import open_runtime
from rag_retriever.settings import RetrieverSettings

DOC = DocumentIn(
    id="harbour", title="Port of Tallinn", text="# History\n\n## Lighthouse\n\nThe tower was rebuilt in 1951 after the war.",
    metadata={"content_type": "text/markdown"},
)


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    model.warm_up()
    return model


def settings(tmp_path: Path, template: str | None = None) -> RetrieverSettings:
    extra = {} if template is None else {"embed_template": template}
    return RetrieverSettings(backend="embedded", index_dir=str(tmp_path / "index"), **extra)


async def stored(runtime, doc_id: str) -> np.ndarray:  # noqa: ANN001
    vectors = await runtime.backend.document_vectors(doc_id, tenant=DEFAULT_TENANT)
    (vector,) = vectors.values()
    return np.asarray(vector)


def encoded(embedder: SentenceTransformerEmbedder, text: str) -> np.ndarray:
    return embedder.encode_documents([text])[0]


def test_default_setting_and_rendering() -> None:
    assert RetrieverSettings().embed_template == DEFAULT_TEMPLATE == "{title}\n{section_path}\n{text}"
    template = EmbedTemplate(DEFAULT_TEMPLATE)
    assert template.render("body") == "body"  # no title, no headings: the bare text
    assert template.render("body", "T", ["A", "B"]) == "T\nA > B\nbody"
    assert EmbedTemplate("{text}").render("body", "T", ["A"]) == "body"
    for bad in ("{title}", "{text} {text}", "{text} {author}", "{text"):
        with pytest.raises(ValidationError):
            RetrieverSettings(embed_template=bad)
    assert RetrieverSettings(embed_template="{title}\\n{text}").embed_template == "{title}\n{text}"  # env-style \n


async def test_ingestion_embeds_title_and_section_path(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    async with open_runtime(settings(tmp_path), embedder=embedder) as runtime:
        response = await runtime.ingestor.ingest([DOC])
        assert response.chunks == 1
        vector = await stored(runtime, "harbour")
    expected = "Port of Tallinn\nHistory > Lighthouse\nThe tower was rebuilt in 1951 after the war."
    np.testing.assert_allclose(vector, encoded(embedder, expected), atol=1e-5)
    assert not np.allclose(vector, encoded(embedder, "The tower was rebuilt in 1951 after the war."), atol=1e-3)


async def test_template_change_is_detected_on_reingestion(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    text_only = "The tower was rebuilt in 1951 after the war."
    async with open_runtime(settings(tmp_path, "{text}"), embedder=embedder) as runtime:
        assert (await runtime.ingestor.ingest([DOC])).documents == 1
        np.testing.assert_allclose(await stored(runtime, "harbour"), encoded(embedder, text_only), atol=1e-5)
        assert (await runtime.ingestor.ingest([DOC])).skipped == 1  # unchanged
    async with open_runtime(settings(tmp_path), embedder=embedder) as runtime:  # same index, default template
        response = await runtime.ingestor.ingest([DOC])
        assert response.documents == 1 and response.skipped == 0  # rewritten, not skipped
        titled = await stored(runtime, "harbour")
        assert (await runtime.ingestor.ingest([DOC])).skipped == 1
        # The title is embedded: changing it re-embeds (the chunk id covers the embedded string) …
        renamed = DOC.model_copy(update={"title": "Harbour of Tallinn"})
        assert (await runtime.ingestor.ingest([renamed])).documents == 1
        np.testing.assert_allclose(
            await stored(runtime, "harbour"),
            encoded(embedder, f"Harbour of Tallinn\nHistory > Lighthouse\n{text_only}"), atol=1e-5)
        # … while a metadata-only change keeps the stored vector.
        before = await stored(runtime, "harbour")
        tagged = renamed.model_copy(update={"metadata": {**renamed.metadata, "team": "docs"}})
        assert (await runtime.ingestor.ingest([tagged])).documents == 1
        np.testing.assert_array_equal(await stored(runtime, "harbour"), before)
    np.testing.assert_allclose(titled, encoded(embedder, f"Port of Tallinn\nHistory > Lighthouse\n{text_only}"), atol=1e-5)


async def test_long_context_is_cut_not_the_text(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    title = " ".join(["lighthouse keeper"] * 200)  # ~400 tokens: more than the model takes
    body = " ".join(f"Sentence {i} about the harbour." for i in range(30))
    document = DocumentIn(id="long-title", title=title, text=body)
    with caplog.at_level(logging.WARNING, logger="rag_common.embedders"):
        async with open_runtime(settings(tmp_path), embedder=embedder) as runtime:
            response = await runtime.ingestor.ingest([document])
            chunks = runtime.ingestor._chunker.chunk_document(to_source_document(document))  # noqa: SLF001
    assert response.documents == 1
    assert not [r for r in caplog.records if "truncated" in r.getMessage()]  # nothing the model cuts
    for chunk in chunks:
        assert chunk.embed_text is not None and chunk.embed_text.endswith(chunk.text)  # the text whole
        assert chunk.embed_text.startswith("lighthouse keeper")  # with as much title as fits
        assert embedder.input_tokens([chunk.embed_text])[0] <= embedder.max_seq_length

"""Span pooling (``encode_documents_pooled``): from one encoder pass, a text's vector and its parts'
vectors in context; the same numbers on both backends; parts the model's window cut off are NaN."""

from __future__ import annotations

import numpy as np
import pytest

from rag_common.embedders.onnx_runtime import OnnxEmbedder
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.embedders.span_pooling import SpanPoolingEmbedder, pool_spans
from rag_common.sentence_vectors import chunk_pools, scorable_spans
from rag_common.settings import EmbedderSettings

TITLE = "Lighthouses\nKeepers\n"
BODY = (
    "The keeper trimmed the lamp wick every four hours through the night. "
    "Fog signals were sounded by a steam whistle when visibility fell below two miles. "
    "Supplies arrived by boat once a month in summer and rarely in winter."
)
LONG = " ".join(f"Sentence {i} is about the tides of the northern harbour." for i in range(60))


@pytest.fixture(scope="module", params=["onnx", "torch"])
def pooling(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> SpanPoolingEmbedder:
    if request.param == "onnx":
        model = OnnxEmbedder("all-MiniLM-L6-v2", threads=EmbedderSettings().onnx_threads)
    else:
        model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    model.warm_up()
    return model


def test_both_backends_pool_spans(pooling) -> None:
    assert isinstance(pooling, SpanPoolingEmbedder)


def test_the_text_vector_is_encode_documents_and_each_sentence_is_nearest_its_own_string(pooling) -> None:
    text = TITLE + BODY
    spans = scorable_spans(BODY)
    pools = chunk_pools(text, BODY, spans)
    vectors, [rows, none] = pooling.encode_documents_pooled([text, LONG], [pools, []])
    assert none.shape == (0, 384)
    np.testing.assert_allclose(vectors, pooling.encode_documents([text, LONG]), atol=2e-6)
    assert rows.shape == (3, 384) and np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    alone = pooling.encode_documents([f"Lighthouses > Keepers: {BODY[s:e]}" for s, e in spans])
    similarity = rows @ alone.T
    # In context, each sentence's vector is still its own sentence's, not its neighbours'.
    assert (similarity.argmax(axis=1) == np.arange(3)).all(), similarity
    assert similarity.diagonal().min() > 0.7, similarity


def test_pooled_rows_do_not_depend_on_batch_mates(pooling) -> None:
    text = TITLE + BODY
    pools = chunk_pools(text, BODY, scorable_spans(BODY))
    _, [alone] = pooling.encode_documents_pooled([text], [pools])
    _, [_, batched, _] = pooling.encode_documents_pooled([LONG, text, "short"], [[], pools, [((0, 5),)]])
    np.testing.assert_allclose(alone, batched, atol=2e-6)


def test_a_span_past_the_models_window_is_nan(pooling) -> None:
    spans = scorable_spans(LONG)
    _, [rows] = pooling.encode_documents_pooled([LONG], [[(span,) for span in spans]])
    reached = ~np.isnan(rows).any(axis=1)
    assert reached[0] and not reached[-1]  # 60 sentences of ~12 tokens: the window ends at 256
    assert 15 <= reached.sum() < len(spans)


def test_backends_agree(tmp_path_factory: pytest.TempPathFactory) -> None:
    onnx = OnnxEmbedder("all-MiniLM-L6-v2", threads=EmbedderSettings().onnx_threads)
    torch_model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    text = TITLE + BODY
    pools = chunk_pools(text, BODY, scorable_spans(BODY))
    _, [a] = onnx.encode_documents_pooled([text], [pools])
    _, [b] = torch_model.encode_documents_pooled([text], [pools])
    assert (a * b).sum(axis=1).min() >= 0.99999


def test_pool_spans_averages_the_overlapping_tokens_and_never_the_special_ones() -> None:
    hidden = np.array([[9.0, 9.0], [0, 1.0], [0, 3.0], [5.0, 0], [9.0, -9.0]], dtype=np.float32)
    offsets = [(0, 0), (0, 4), (5, 9), (10, 14), (0, 0)]  # [CLS] word word word [SEP]
    special = [1, 0, 0, 0, 1]
    rows = pool_spans(hidden, offsets, special, [((6, 7),), ((0, 4), (10, 12)), ((20, 30),)])
    # (6, 7) touches the second word only; (0, 4) + (10, 12) the first and third, mean (2.5, 0.5).
    expected = np.array([[0.0, 1.0], [2.5, 0.5] / np.hypot(2.5, 0.5)])
    np.testing.assert_allclose(rows[:2], expected, rtol=1e-6, atol=1e-7)
    assert np.isnan(rows[2]).all()


def test_chunk_pools_put_the_context_lines_before_every_sentence() -> None:
    assert chunk_pools("T\nS\nab. cd.", "ab. cd.", [(0, 3), (4, 7)]) == [((0, 4), (4, 7)), ((0, 4), (8, 11))]
    assert chunk_pools("ab. cd.", "ab. cd.", [(4, 7)]) == [((4, 7),)]
    assert chunk_pools("something else", "ab. cd.", [(0, 3)]) is None

"""Learned fusion (issue 16, part 4): the per-candidate features (local standardisation, missing
signals), the parameter file (what is refused, and when), scoring with numpy equal to scikit-learn's,
and the candidates on a real index — the graph's additions included, never past the caller's access."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag_common.schemas import DocumentAcl, DocumentIn, SearchRequest
from rag_retriever.document_access import DocumentAccess
from rag_retriever.backends.base import AccessFilter, FusionSettings
from rag_retriever.backends.embedded import EmbeddedBackend
from rag_retriever.fusion_features import FEATURE_GROUPS, FEATURE_NAMES, CandidateSignals, feature_matrix, local_standardise
from rag_retriever.learned_fusion import SCHEMA_VERSION, SHIPPED_MODEL, FusionModel, FusionModelError
from rag_retriever.locking import ReadWriteLock
from rag_retriever.runtime import load_fusion_model
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings
from retriever_builders import HNSW, embedded_ingestor, settings_chunker

# ------------------------------------------------------------------------------ features


def test_local_standardisation_and_the_missing_default() -> None:
    z, missing = local_standardise([3.0, None, 1.0, 2.0])
    assert missing.tolist() == [0, 1, 0, 0]
    present = np.array([3.0, 1.0, 2.0])
    expected = (present - present.mean()) / present.std()
    assert z[[0, 2, 3]] == pytest.approx(expected)
    assert z[1] == pytest.approx(expected.min())  # no better than the worst candidate that has it
    assert local_standardise([None, None])[0].tolist() == [0.0, 0.0]
    assert local_standardise([5.0, 5.0])[0].tolist() == [0.0, 0.0]  # all equal: no information


def test_feature_matrix_columns() -> None:
    rows = feature_matrix([
        CandidateSignals(dense=0.9, bm25=10.0, dense_rank=1, bm25_rank=2, hybrid=1.0, entity_overlap=0.5,
                         title_match=True, section_neighbour=False, document_neighbour=True, ppr=None),
        CandidateSignals(dense=0.7, bm25=None, dense_rank=4, hybrid=0.2, hop=0.8, hop_found=True),
    ])
    assert rows.shape == (2, len(FEATURE_NAMES))
    row = dict(zip(FEATURE_NAMES, rows[0]))
    other = dict(zip(FEATURE_NAMES, rows[1]))
    assert row["dense_z"] == pytest.approx(1.0) and other["dense_z"] == pytest.approx(-1.0)
    assert (row["dense_rr"], other["dense_rr"]) == (1.0, 0.25)
    assert (row["bm25_rr"], other["bm25_rr"], other["bm25_missing"]) == (0.5, 0.0, 1.0)
    assert row["bm25_z"] == other["bm25_z"] == 0.0  # one present value: z 0, the missing one at that minimum
    assert (row["hop_found"], other["hop_found"]) == (0.0, 1.0) and other["hop_z"] > row["hop_z"]
    assert row["ppr_z"] == other["ppr_z"] == 0.0  # PageRank did not run
    assert (row["entity_overlap"], row["title_match"], row["document_neighbour"]) == (0.5, 1.0, 1.0)
    assert feature_matrix([]).shape == (0, len(FEATURE_NAMES))
    assert sorted(n for names in FEATURE_GROUPS.values() for n in names) == sorted(FEATURE_NAMES)


# ------------------------------------------------------------------------------ the parameter file


def _model_json(**changes: object) -> dict:
    data = {"schema_version": SCHEMA_VERSION, "kind": "logistic_regression", "features": ["dense_z", "hop_found"],
            "mean": [0.0, 0.5], "scale": [1.0, 0.5], "weights": [2.0, -1.0], "intercept": 0.25,
            "training": {"datasets": {"x": 3}}}
    data.update(changes)
    return data


def test_scores_equal_scikit_learn() -> None:
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, len(FEATURE_NAMES)))
    y = (x[:, 0] + 0.5 * x[:, 3] + rng.normal(scale=0.5, size=200) > 0).astype(int)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    fitted = LogisticRegression().fit((x - mean) / scale, y)
    model = FusionModel(FEATURE_NAMES, mean, scale, fitted.coef_[0], float(fitted.intercept_[0]), {})
    again = FusionModel.from_json(json.loads(json.dumps(model.to_json())))
    assert again.score(x) == pytest.approx(fitted.predict_proba((x - mean) / scale)[:, 1])


def test_a_model_reads_its_own_columns_of_the_full_matrix() -> None:
    model = FusionModel.from_json(_model_json())
    matrix = np.zeros((1, len(FEATURE_NAMES)))
    matrix[0, FEATURE_NAMES.index("dense_z")] = 1.0
    matrix[0, FEATURE_NAMES.index("hop_found")] = 1.0
    assert model.score(matrix)[0] == pytest.approx(1 / (1 + np.exp(-(2.0 * 1.0 - 1.0 * 1.0 + 0.25))))
    assert not model.uses_ppr and model.provenance == {"training": {"datasets": {"x": 3}}}


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"schema_version": 99}, "schema_version 99"),
        ({"features": ["dense_z", "clicks"]}, "'clicks'"),
        ({"weights": [1.0]}, "'weights' needs 2"),
        ({"scale": [1.0, 0.0]}, "'scale' must be positive"),
        ({"intercept": "x"}, "'intercept'"),
        ({"kind": "mlp"}, "kind 'mlp'"),
    ],
)
def test_incompatible_files_are_refused_with_the_reason(changes: dict, reason: str) -> None:
    with pytest.raises(FusionModelError, match=reason):
        FusionModel.from_json(_model_json(**changes))


def test_the_default_and_a_bad_file_refused_at_start(tmp_path: Path) -> None:
    # The default is min_max (docs/evaluation.md, "Learned fusion"); learned loads the shipped model.
    assert RetrieverSettings().hybrid_normalization == "min_max" and load_fusion_model(RetrieverSettings()) is None
    learned = RetrieverSettings(hybrid_normalization="learned")
    assert load_fusion_model(learned).features == FusionModel.load(SHIPPED_MODEL).features
    assert RetrieverSettings(backend="opensearch").hybrid_normalization == "min_max"
    assert load_fusion_model(RetrieverSettings(hybrid_normalization="rrf")) is None
    with pytest.raises(FusionModelError, match="does not exist"):
        load_fusion_model(RetrieverSettings(hybrid_normalization="learned", fusion_model=str(tmp_path / "none.json")))
    (tmp_path / "old.json").write_text(json.dumps(_model_json(schema_version=0)))
    with pytest.raises(FusionModelError, match="schema_version 0"):
        load_fusion_model(RetrieverSettings(hybrid_normalization="learned", fusion_model=str(tmp_path / "old.json")))
    with pytest.raises(ValueError, match="needs backend embedded"):
        RetrieverSettings(hybrid_normalization="learned", backend="opensearch")


def test_the_shipped_model_loads() -> None:
    model = FusionModel.load(SHIPPED_MODEL)
    assert set(model.features) <= set(FEATURE_NAMES)
    assert model.provenance["training"]["datasets"]


# ------------------------------------------------------------------------------ on a real index

QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
BRIDGE = [
    DocumentIn(id="kiss-and-tell", title="Kiss and Tell (1945 film)",
               text="Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss "
               "Archer. In the film, two teenage girls cause their respective parents much concern."),
    DocumentIn(id="shirley-temple", title="Shirley Temple",
               text="Shirley Temple Black was an American actress, singer and dancer, who later served as Chief of "
               "Protocol of the United States and as United States Ambassador to Ghana and to Czechoslovakia.",
               acl=DocumentAcl(users=["ann"])),
    *[DocumentIn(id=f"film-{i}", title=f"Comedy film {i}",
                 text=f"Comedy film {i} is an American comedy film about a teenage girl and her parents, who played "
                 f"parts in a film of {1940 + i}; the woman who portrayed the mother held no position.")
      for i in range(8)],
]
BOB = AccessFilter("default", ("*", "user:bob"))
ANN = AccessFilter("default", ("*", "user:ann"))


def _service(backend: EmbeddedBackend, embedder, lock: ReadWriteLock, learned: FusionModel | None = None) -> SearchService:
    """As the runtime composes it over the embedded backend: its graph and candidates injected."""
    settings = RetrieverSettings()
    return SearchService(
        backend, embedder, lock, fusion=FusionSettings.of(settings), default_top_k=settings.default_top_k,
        graph=GraphDefaults.of(settings), graph_searcher=backend, candidate_source=backend, learned=learned,
    )


@pytest.fixture
async def service(tmp_path: Path, embedder, tokenizer) -> SearchService:
    backend = EmbeddedBackend(tmp_path / "index", dim=embedder.dim, hnsw=HNSW, model_id=embedder.model_id)
    lock = ReadWriteLock()
    await embedded_ingestor(backend, embedder, settings_chunker(tokenizer), lock).ingest(BRIDGE, access=DocumentAccess.managing("default"))
    yield _service(backend, embedder, lock)
    await backend.close()


async def test_candidates_add_the_hop_and_honour_access(service: SearchService) -> None:
    found, matrix = await service.fusion_candidates(QUESTION, 3, ANN)
    doc_ids = [hit.chunk.doc_id for hit in found.hits]
    assert found.first_pass == 3 and matrix.shape == (len(doc_ids), len(FEATURE_NAMES))
    # The bridge passage is not in the first pass; the second hop (Shirley Temple) adds it, flagged.
    assert "shirley-temple" in doc_ids[found.first_pass:]
    bridge = doc_ids.index("shirley-temple")
    row = dict(zip(FEATURE_NAMES, matrix[bridge]))
    assert row["hop_found"] == 1.0 and row["hop_z"] > 0
    # Neither the hop nor PageRank reads past the caller's access.
    hidden, _ = await service.fusion_candidates(QUESTION, 3, BOB)
    assert "shirley-temple" not in {hit.chunk.doc_id for hit in hidden.hits}
    assert (await service.fusion_candidates(QUESTION, 3, AccessFilter("globex", ("*",))))[0].hits == []


async def test_learned_search_ranks_by_the_model(service: SearchService) -> None:
    # A model that trusts only the hop: the bridge passage, missing from plain hybrid's top 3, is in
    # the model's, scored in (0, 1).
    model = FusionModel(("hop_z",), np.zeros(1), np.ones(1), np.ones(1), 0.0, {})
    learned = _service(service._backend, service._embedder, service._lock, learned=model)
    plain = await service.search(SearchRequest(query=QUESTION, top_k=3, mode="hybrid"), ANN)
    assert "shirley-temple" not in {p.doc_id for p in plain.passages}
    response = await learned.search(SearchRequest(query=QUESTION, top_k=3, mode="hybrid"), ANN)
    assert "shirley-temple" in {p.doc_id for p in response.passages}
    assert all(0.0 < p.score < 1.0 for p in response.passages)
    hidden = await learned.search(SearchRequest(query=QUESTION, top_k=3, mode="hybrid"), BOB)
    assert "shirley-temple" not in {p.doc_id for p in hidden.passages}
    # Other modes are untouched by the model.
    dense = await learned.search(SearchRequest(query=QUESTION, top_k=3, mode="dense"), ANN)
    plain = await service.search(SearchRequest(query=QUESTION, top_k=3, mode="dense"), ANN)
    assert [p.chunk_id for p in dense.passages] == [p.chunk_id for p in plain.passages]

"""The served chain is the measured chain (issue 16, part 5): ``ragctl eval --run default`` runs what
``/v1/chat`` runs — the gateway's mode and candidate depth, the retriever's fusion and graph switches,
the reranker's default chain — all read from the services' settings, so changing a setting changes
both, and nothing in the evaluation keeps a depth of its own."""

from __future__ import annotations

import pytest

from rag_eval.evaluation import EvalOptions, ablation_configs
from rag_eval.runs import DEFAULT_CANDIDATES, StageConfig, default_run, parse_run, served_candidates
from rag_gateway.chat_policy import ChatPolicy
from rag_gateway.settings import GatewaySettings
from rag_reranker.settings import RerankerSettings
from rag_retriever.settings import RetrieverSettings

SERVICE_PREFIXES = ("GATEWAY_", "RETRIEVER_", "RERANKER_")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.startswith(SERVICE_PREFIXES):
            monkeypatch.delenv(name)
    return monkeypatch


def _served_search_top_k(settings: GatewaySettings, requested_top_k: int | None = None) -> int:
    """What the chat graph's retrieve node sends as the search's ``top_k`` (its policy, its rule)."""
    policy = ChatPolicy.of(settings)
    return policy.search_depth(policy.top_k(requested_top_k))


def test_default_run_is_the_served_chain_with_default_settings(clean_env: pytest.MonkeyPatch) -> None:
    gateway, retriever, reranker = GatewaySettings(), RetrieverSettings(), RerankerSettings()
    run = parse_run("default")
    assert run.name == "default"
    assert run.candidates == _served_search_top_k(gateway) == gateway.retrieval_candidates
    assert run.mode == gateway.search_mode == "hybrid"
    assert run.fusion == retriever.hybrid_normalization
    # min_max: the served fusion weight, searched explicitly; learned: the served search service itself
    assert run.dense_weight == (retriever.hybrid_dense_weight if run.fusion == "min_max" else None)
    assert (run.graph, run.hop) == (retriever.graph_ppr, retriever.graph_second_hop)
    assert [stage.name for stage in run.stages] == list(reranker.default_chain)
    assert run.top_k <= run.candidates


def test_one_candidate_depth_for_chat_ablation_and_runs(clean_env: pytest.MonkeyPatch) -> None:
    depth = GatewaySettings().retrieval_candidates
    assert served_candidates() == DEFAULT_CANDIDATES == depth
    options = EvalOptions()
    assert options.candidates == depth and options.top_k <= depth
    main, sweep, _ = ablation_configs(options, cross_encoder=False)
    assert {config.candidates for config in [*main, *sweep]} == {depth}
    assert parse_run("hybrid").candidates == depth


def test_default_run_follows_the_settings(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GATEWAY_RETRIEVAL_CANDIDATES", "35")
    clean_env.setenv("RETRIEVER_GRAPH_PPR", "true")
    clean_env.setenv("RETRIEVER_GRAPH_SECOND_HOP", "true")
    clean_env.setenv("RERANKER_DEFAULT_CHAIN", "diffusion,gmmr")
    clean_env.setenv("RERANKER_MMR_LAMBDA", "0.6")
    clean_env.setenv("RERANKER_MMR_RELEVANCE", "scores")
    clean_env.setenv("RETRIEVER_HYBRID_DENSE_WEIGHT", "0.3")
    assert parse_run("default").dense_weight == 0.3  # min_max: the served weight, searched explicitly
    clean_env.setenv("RETRIEVER_HYBRID_NORMALIZATION", "learned")
    assert parse_run("default").dense_weight is None  # learned fusion: the served service, its own weight
    clean_env.setenv("RETRIEVER_HYBRID_NORMALIZATION", "min_max")
    assert parse_run("default").dense_weight == 0.3  # (mode still hybrid here)
    clean_env.setenv("GATEWAY_SEARCH_MODE", "dense")
    run = parse_run("default", candidates=50, top_k=20)  # --candidates does not move the served depth
    assert run.dense_weight is None  # a dense search has no fusion weight
    assert run.candidates == _served_search_top_k(GatewaySettings()) == 35
    assert run.mode == "dense" and run.graph and run.hop
    alpha = RerankerSettings().diffusion_alpha
    assert run.stages == (StageConfig("diffusion", alpha), StageConfig("gmmr", 0.6, "scores"))
    assert run.top_k == 20 and run.name == "default"


def test_a_larger_request_top_k_deepens_both_alike(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GATEWAY_DEFAULT_TOP_K", "30")
    gateway = GatewaySettings()
    assert parse_run("default").candidates == _served_search_top_k(gateway) == 30


def test_graph_flags_parse_and_name() -> None:
    run = parse_run("hybrid+graph+hop+gmmr:0.7")
    assert run.graph and run.hop and run.name == "hybrid+graph+hop+gmmr:0.7"
    assert parse_run(run.name) == run
    assert not parse_run("hybrid").graph
    with pytest.raises(ValueError, match="before the rerank stages"):
        parse_run("hybrid+gmmr:0.7+graph")

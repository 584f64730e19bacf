"""A *run*: one named pipeline configuration, evaluated on one dataset.

A run is written as a spec string, ``+``-separated, the retrieval mode first::

    dense                         the retriever alone (dense), its first ``top_k`` passages
    hybrid+diffusion              hybrid retrieval, then graph diffusion over the candidates
    bm25+gmmr:0.7                 BM25, then gMMR with a fixed λ = 0.7
    hybrid+gmmr:0.7:scores        … gMMR whose relevance term is the hybrid score, not the cosine
    hybrid+diffusion+gmmr:adaptive   … gMMR with the λ an LLM picks per query
    hybrid:rrf+cross_encoder      hybrid with RRF fusion, then the cross-encoder (``ce`` also works)
    hybrid:learned                learned fusion, each question ranked by a model trained without it
                                  (k-fold by question within the dataset, fitted inside the evaluation)
    hybrid+refiner+llm            multi-turn: the refiner rewrites the question (LLM), and the
                                  generator answers from the final passages (LLM)

    hybrid+graph                  hybrid, then the retriever's graph signal (personalised PageRank over the
                                  structure-and-entity graph, docs/retriever.md)
    hybrid+hop                    hybrid with the retriever's second hop (entity follow-up searches)
    hybrid:0.3                    min_max hybrid with dense weight 0.3 (BM25 0.7) instead of the
                                  retriever's ``RETRIEVER_HYBRID_DENSE_WEIGHT``
    hybrid+depth:50               50 candidates for this run, whatever ``--candidates`` says
    default                       exactly what ``/v1/chat`` runs, read from the settings: the gateway's
                                  mode and candidate depth (``GATEWAY_SEARCH_MODE``,
                                  ``GATEWAY_RETRIEVAL_CANDIDATES``), the retriever's fusion and graph
                                  switches (``RETRIEVER_*``), the reranker's default chain
                                  (``RERANKER_DEFAULT_CHAIN``, ``RERANKER_MMR_*``)

``gmmr:adaptive``, ``refiner`` and ``llm`` need an LLM endpoint (``ragctl eval --llm``); only ``llm``
generates answers.

Tokens: a mode (``bm25``, ``dense``, ``hybrid`` or ``hybrid:<fusion>`` with fusion ``min_max``
(default), ``rrf`` or ``learned``, or ``hybrid:<w>`` / ``hybrid:min_max:<w>``: min_max with dense weight ``w``),
the retrieval flags ``graph``, ``hop`` and ``depth:<N>`` (this run's candidate depth), rerank stages in chain order (``cross_encoder``/``ce``, ``diffusion``,
``diffusion:<alpha>``, ``gmmr``, ``gmmr:<λ>``, ``gmmr:adaptive``), and the flags ``refiner`` and
``llm``. The spec, normalised, is the run's name and its report file name.

gMMR's relevance term: a last ``:scores`` (``gmmr:0.7:scores``, ``gmmr:adaptive:scores``,
``gmmr:scores`` = service-default λ) uses the incoming scores (the retriever's, or an earlier stage's
such as the cross-encoder's), min-max scaled to [0, 1], instead of cos(query, passage); ``:cosine``
asks for the cosine explicitly. Without either it is the cosine, as DF-RAG publishes it (not the
service default ``RERANKER_MMR_RELEVANCE``, so a run name means the same thing on every machine).

Every pipeline retrieves ``candidates`` chunks (default: ``GATEWAY_RETRIEVAL_CANDIDATES``, the served
depth, 20) and ends with ``top_k`` (default 20 = the largest default cut-off, never above
``candidates``): without rerank stages, the retriever's first ``top_k``; with them, the chain's
``top_k`` out of the same ``candidates``. Chunks of one document count once, at their best rank.
The ``default`` run always uses the served depth (``--candidates`` does not change it); the gateway
hands the generator the first ``GATEWAY_DEFAULT_TOP_K`` of the same ranking (every stage's order is
a prefix-stable: cutting it at 5 or at 20 gives the same first 5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["bm25", "dense", "hybrid"]
MODES: tuple[Mode, ...] = ("bm25", "dense", "hybrid")
#: ``learned``: learned fusion (docs/evaluation.md, "Learned fusion"). In a named run (``hybrid:learned``)
#: every question is ranked by a model cross-fitted without it (k-fold by question, inside ``ragctl
#: eval``); in ``default`` it is the served model (``RETRIEVER_FUSION_MODEL``), in-sample on its own
#: training questions.
FUSIONS = ("min_max", "rrf", "learned")
STAGE_ALIASES = {"ce": "cross_encoder", "cross_encoder": "cross_encoder", "diffusion": "diffusion", "gmmr": "gmmr"}
#: gMMR's relevance term (``rag_common.schemas.GmmrSpec.relevance``).
RELEVANCES = ("cosine", "scores")

DEFAULT_TOP_K = 20
#: The run that is the served chain (``default_run``).
DEFAULT_RUN = "default"
#: Retrieval flags a spec may name after the mode (``SearchRequest.graph`` / ``.second_hop``).
RETRIEVAL_FLAGS = ("graph", "hop")


def served_candidates() -> int:
    """The served candidate depth, ``GATEWAY_RETRIEVAL_CANDIDATES``: the one source of truth."""
    from rag_gateway.settings import GatewaySettings

    return GatewaySettings().retrieval_candidates


#: Read once at import from the gateway's settings (the environment as the service would read it).
DEFAULT_CANDIDATES = served_candidates()


@dataclass(frozen=True, slots=True)
class StageConfig:
    """One rerank stage: ``name`` in cross_encoder, diffusion, gmmr; ``param`` = diffusion's α or
    gMMR's λ (a float, ``"adaptive"``, or None for the service default); ``relevance`` = gMMR's
    relevance term (``"cosine"``, ``"scores"``, or None for the service default)."""

    name: str
    param: float | str | None = None
    relevance: str | None = None

    def __post_init__(self) -> None:
        if self.relevance is not None:
            if self.name != "gmmr":
                raise ValueError(f"only gmmr takes a relevance, not {self.name}")
            if self.relevance not in RELEVANCES:
                raise ValueError(f"unknown gmmr relevance {self.relevance!r}; use one of {', '.join(RELEVANCES)}")

    @property
    def token(self) -> str:
        parts = [self.name]
        if self.param is not None:
            parts.append(self.param if isinstance(self.param, str) else f"{self.param:g}")
        if self.relevance is not None:
            parts.append(self.relevance)
        return ":".join(parts)

    def wire(self) -> Any:
        """The reranker's wire spec (``rag_common.schemas``) for this stage."""
        from rag_common.schemas import CrossEncoderSpec, DiffusionSpec, GmmrSpec

        if self.name == "cross_encoder":
            return CrossEncoderSpec()
        if self.name == "diffusion":
            return DiffusionSpec(alpha=self.param)
        return GmmrSpec(mmr_lambda=self.param, relevance=self.relevance or "cosine")


@dataclass(frozen=True, slots=True)
class RunConfig:
    mode: Mode
    fusion: str = "min_max"
    stages: tuple[StageConfig, ...] = ()
    refiner: bool = False
    llm: bool = False
    candidates: int = DEFAULT_CANDIDATES
    top_k: int = DEFAULT_TOP_K
    #: The retriever's graph signal (PPR over the structure-and-entity graph) and second hop.
    graph: bool = False
    hop: bool = False
    #: min_max fusion's dense weight (BM25 gets 1 - it); None = the retriever's setting
    #: (``RETRIEVER_HYBRID_DENSE_WEIGHT``). Named in the spec as ``hybrid:<w>``.
    dense_weight: float | None = None
    #: The spec named the depth (``depth:<N>``): ``candidates`` is the run's own and part of its name.
    named_depth: bool = False
    #: A name that replaces the spec-derived one (``default``).
    label: str = ""
    #: Free-form tags (e.g. ``{"sweep": "lambda"}``); not part of the name.
    tags: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    #: May take the search another run of the same query already made (the ablation's λ sweep): that
    #: query's record is then marked ``search_reused`` and has no ``retrieve``/``total`` latency. Off
    #: for every named run and the ablation's rows, which all search (and are timed) themselves.
    share_search: bool = field(default=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown retrieval mode {self.mode!r}; use one of {', '.join(MODES)}")
        if self.fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {self.fusion!r}; use one of {', '.join(FUSIONS)}")
        if self.dense_weight is not None:
            if self.mode != "hybrid" or self.fusion != "min_max":
                raise ValueError(f"a dense weight needs min_max hybrid, got mode {self.mode!r} fusion {self.fusion!r}")
            if not 0.0 <= self.dense_weight <= 1.0:
                raise ValueError(f"dense weight must be in [0, 1], got {self.dense_weight}")
        if not 1 <= self.top_k <= self.candidates <= 200:
            raise ValueError(f"need 1 <= top_k ({self.top_k}) <= candidates ({self.candidates}) <= 200")

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        mode = self.mode if self.mode != "hybrid" or self.fusion == "min_max" else f"hybrid:{self.fusion}"
        if self.dense_weight is not None:
            mode = f"hybrid:{self.dense_weight:g}"
        tokens = [mode, *(flag for flag in RETRIEVAL_FLAGS if getattr(self, flag))]
        if self.named_depth:
            tokens.append(f"depth:{self.candidates}")
        tokens += [stage.token for stage in self.stages]
        if self.refiner:
            tokens.append("refiner")
        if self.llm:
            tokens.append("llm")
        return "+".join(tokens)

    @property
    def cross_fitted(self) -> bool:
        """Learned fusion scored held-out: each question by a model trained without it (every named
        ``hybrid:learned`` run); the ``default`` run uses the served model instead."""
        return self.mode == "hybrid" and self.fusion == "learned" and self.label != DEFAULT_RUN

    @property
    def adaptive(self) -> bool:
        return any(stage.name == "gmmr" and stage.param == "adaptive" for stage in self.stages)

    @property
    def uses_llm(self) -> bool:
        """Needs an LLM endpoint: to generate (``llm``), to rewrite (``refiner``) or to pick λ."""
        return self.llm or self.refiner or self.adaptive

    @property
    def reranks(self) -> bool:
        return bool(self.stages)

    @property
    def needs_embeddings(self) -> bool:
        """Diffusion and gMMR work on the candidates' vectors (the cross-encoder on text only)."""
        return any(stage.name in ("diffusion", "gmmr") for stage in self.stages)

    def with_stages(self, *stages: StageConfig, **changes: Any) -> RunConfig:
        return RunConfig(
            mode=changes.pop("mode", self.mode),
            fusion=changes.pop("fusion", self.fusion),
            stages=(*self.stages, *stages),
            refiner=changes.pop("refiner", self.refiner),
            llm=changes.pop("llm", self.llm),
            candidates=changes.pop("candidates", self.candidates),
            top_k=changes.pop("top_k", self.top_k),
            graph=changes.pop("graph", self.graph),
            hop=changes.pop("hop", self.hop),
            dense_weight=changes.pop("dense_weight", self.dense_weight),
            named_depth=changes.pop("named_depth", self.named_depth),
            tags=changes.pop("tags", dict(self.tags)),
            share_search=changes.pop("share_search", self.share_search),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": self.mode,
            "fusion": self.fusion if self.mode == "hybrid" else None,
            "dense_weight": self.dense_weight,
            "stages": [stage.token for stage in self.stages],
            "refiner": self.refiner,
            "llm": self.llm,
            "candidates": self.candidates,
            "top_k": self.top_k,
            "graph": self.graph,
            "hop": self.hop,
            "tags": dict(self.tags),
            "share_search": self.share_search,
        }


def parse_run(spec: str, *, candidates: int = DEFAULT_CANDIDATES, top_k: int = DEFAULT_TOP_K) -> RunConfig:
    """``"hybrid+diffusion+gmmr:0.7"`` → :class:`RunConfig`. Raises ValueError with the reason."""
    tokens = [token.strip().lower() for token in spec.split("+") if token.strip()]
    if tokens == [DEFAULT_RUN]:
        return default_run(top_k=top_k)
    if not tokens:
        raise ValueError("empty run spec; start with a mode: bm25, dense or hybrid")
    head, *rest = tokens
    mode, _, fusion = head.partition(":")
    if mode not in MODES:
        raise ValueError(f"run {spec!r} must start with a mode (bm25, dense, hybrid), got {head!r}")
    if fusion and mode != "hybrid":
        raise ValueError(f"only hybrid takes a fusion, got {head!r}")
    fusion, dense_weight = _fusion(fusion, spec)
    stages: list[StageConfig] = []
    refiner = llm = False
    flags: dict[str, bool] = {}
    depth: int | None = None
    for token in rest:
        name, _, value = token.partition(":")
        if token in RETRIEVAL_FLAGS or name == "depth":
            if stages:
                raise ValueError(f"{token} is a retrieval flag: put it before the rerank stages in {spec!r}")
            if name == "depth":
                try:
                    depth = int(value)
                except ValueError:
                    raise ValueError(f"depth wants a number of candidates, e.g. depth:50, got {token!r}") from None
                if not 1 <= depth <= 200:
                    raise ValueError(f"depth must be in [1, 200], got {depth}")
            else:
                flags[token] = True
        elif token == "refiner":
            refiner = True
        elif token == "llm":
            llm = True
        elif name in STAGE_ALIASES:
            stages.append(_stage(STAGE_ALIASES[name], value, spec))
        else:
            raise ValueError(
                f"unknown token {token!r} in run {spec!r}; use graph, hop, cross_encoder|ce, diffusion[:α], "
                "gmmr[:λ|:adaptive][:scores|:cosine], refiner, llm (or the whole spec: default)"
            )
    if depth is not None:
        candidates, top_k = depth, min(top_k, depth)
    return RunConfig(
        mode=mode,  # type: ignore[arg-type]
        fusion=fusion,
        dense_weight=dense_weight,
        stages=tuple(stages),
        refiner=refiner,
        llm=llm,
        candidates=candidates,
        top_k=top_k,
        named_depth=depth is not None,
        **flags,
    )


def _fusion(value: str, spec: str) -> tuple[str, float | None]:
    """``""`` / ``"min_max"`` / ``"rrf"`` / ``"0.3"`` / ``"min_max:0.3"`` → (fusion, dense weight or None)."""
    if value in ("", *FUSIONS):
        return value or "min_max", None
    method, _, weight = value.rpartition(":")
    if method not in ("", "min_max"):
        raise ValueError(f"only min_max fusion takes a dense weight, got {value!r} in {spec!r}")
    try:
        number = float(weight)
    except ValueError:
        raise ValueError(
            f"unknown fusion {value!r} in {spec!r}; use hybrid, hybrid:rrf, hybrid:<dense weight> (e.g. hybrid:0.3)"
        ) from None
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"dense weight must be in [0, 1], got {number} in {spec!r}")
    return "min_max", number


def default_run(*, top_k: int = DEFAULT_TOP_K) -> RunConfig:
    """What ``/v1/chat`` runs, from the services' settings (the environment as they read it): the
    gateway's search mode and depth (``ChatPolicy.search_depth``), the retriever's fusion and graph
    switches, the reranker's default chain with its configured λ/α/relevance. Only ``top_k`` (how
    deep the metrics look) is the evaluation's, capped at the depth."""
    from rag_gateway.chat_policy import ChatPolicy
    from rag_gateway.settings import GatewaySettings
    from rag_reranker.settings import RerankerSettings
    from rag_retriever.settings import RetrieverSettings

    gateway, retriever, reranker = GatewaySettings(), RetrieverSettings(), RerankerSettings()
    policy = ChatPolicy.of(gateway)
    candidates = policy.search_depth(policy.top_k(None))
    stages = []
    for name in reranker.default_chain:
        if name == "gmmr":
            stages.append(StageConfig("gmmr", reranker.mmr_lambda, reranker.mmr_relevance))
        elif name == "diffusion":
            stages.append(StageConfig("diffusion", reranker.diffusion_alpha))
        else:
            stages.append(StageConfig(name))
    fusion = retriever.hybrid_normalization if retriever.hybrid_normalization in FUSIONS else "min_max"
    weighted = gateway.search_mode == "hybrid" and fusion == "min_max"
    return RunConfig(
        mode=gateway.search_mode,
        fusion=fusion,
        dense_weight=retriever.hybrid_dense_weight if weighted else None,
        stages=tuple(stages),
        candidates=candidates,
        top_k=min(top_k, candidates),
        graph=retriever.graph_ppr,
        hop=retriever.graph_second_hop,
        label=DEFAULT_RUN,
    )


def _stage(name: str, value: str, spec: str) -> StageConfig:
    if name == "gmmr":
        return _gmmr(value, spec)
    if not value:
        return StageConfig(name)
    if name == "cross_encoder":
        raise ValueError(f"cross_encoder takes no parameter (in {spec!r})")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"bad parameter {value!r} for {name} in {spec!r}") from None
    if not 0.0 <= number < 1.0:
        raise ValueError(f"diffusion α must be in [0, 1), got {number}")
    return StageConfig(name, number)


def _gmmr(value: str, spec: str) -> StageConfig:
    """``""``, ``"0.7"``, ``"adaptive"``, ``"scores"``, ``"0.7:scores"``, ``"adaptive:cosine"`` …"""
    if not value:
        return StageConfig("gmmr")
    parts = value.split(":")
    relevance = None
    if parts[-1] in RELEVANCES:
        relevance = parts.pop()
    if len(parts) > 1 or (len(parts) == 1 and not parts[0]):
        raise ValueError(
            f"bad gmmr parameters {value!r} in {spec!r}; use gmmr[:λ|:adaptive][:scores|:cosine], "
            "e.g. gmmr:0.7:scores"
        )
    if not parts:
        return StageConfig("gmmr", None, relevance)
    if parts[0] == "adaptive":
        return StageConfig("gmmr", "adaptive", relevance)
    try:
        number = float(parts[0])
    except ValueError:
        raise ValueError(
            f"bad parameter {parts[0]!r} for gmmr in {spec!r}; use a λ in [0, 1] or adaptive, "
            "optionally followed by :scores or :cosine"
        ) from None
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"gmmr λ must be in [0, 1], got {number}")
    return StageConfig("gmmr", number, relevance)


def file_stem(name: str) -> str:
    """A run name as a file name: ``hybrid+gmmr:0.7`` → ``hybrid+gmmr=0.7`` (no ``:`` or ``/``)."""
    return re.sub(r"[^A-Za-z0-9+._=-]", "=", name)

"""The served chat chain for one question, in-process: what ``/v1/chat`` does after the refiner.

The question's language is named as the gateway names it (``rag_common.languages.identify_query`` with
the ``RAG_*`` language settings) and handed to the search and the generator; the retriever's own
search service (``RETRIEVER_*``: the served fusion) fetches the gateway's candidate depth
(``ChatPolicy``: ``GATEWAY_*``) with the vectors the gateway asks for; the reranker's runtime runs its
default chain (``RERANKER_DEFAULT_CHAIN``; without a cross-encoder model it is a pass-through) and
keeps the gateway's ``top_k``; the generator's runtime (``GeneratorSettings``) answers or assesses.
Nothing is assembled here: the runtimes are the services' own, opened by the caller
(:func:`open_served_chain`).

Importing this module imports the retriever, the reranker and the generator (and so torch).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_common.embedders import Embedder
from rag_common.languages import LanguageGuess, identifier_of, identify_query
from rag_common.schemas import GenerateRequest, GenerateResponse, Passage, RerankRequest, SearchRequest
from rag_common.settings import LanguageSettings
from rag_eval.datasets.types import Dataset
from rag_eval.harness import EVAL_ACCESS, Retriever
from rag_eval.pipeline import open_retriever
from rag_gateway.chat_policy import ChatPolicy
from rag_gateway.settings import GatewaySettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.runtime import open_runtime as open_generator
from rag_generator.settings import GeneratorSettings
from rag_reranker.rerank_service import RerankService
from rag_reranker.runtime import open_runtime as open_reranker


@dataclass
class Retrieved:
    """One question's passages as the generator receives them, and what led to them."""

    language: LanguageGuess
    passages: list[Passage]
    query_embedding: list[float] | None

    def request(self, text: str) -> GenerateRequest:
        return GenerateRequest(
            query=text, passages=self.passages, query_embedding=self.query_embedding, language=self.language.code
        )


class ServedChain:
    """Language → search → rerank → generator, over one open retriever (see the module docstring)."""

    def __init__(
        self, retriever: Retriever, reranker: RerankService, generator: AnswerGenerator, *, generator_mode: str
    ) -> None:
        self.retriever = retriever
        self.reranker = reranker
        self.generator = generator
        self.generator_mode = generator_mode
        self.policy = ChatPolicy.of(GatewaySettings())
        self.languages = LanguageSettings()
        self.identifier = identifier_of(self.languages)

    def identify(self, text: str) -> LanguageGuess:
        return identify_query(self.identifier, text, self.languages.languages)

    async def retrieve(self, text: str) -> Retrieved:
        language = self.identify(text)
        policy = self.policy
        top_k = policy.default_top_k
        found = await self.retriever.runtime.search.search(
            SearchRequest(
                query=text,
                top_k=policy.search_depth(top_k),
                mode=policy.search_mode,
                include_embeddings=policy.pass_embeddings,
                include_sentence_vectors=policy.pass_sentence_vectors,
                language=language.code,
            ),
            EVAL_ACCESS,
        )
        candidates = found.passages
        if not candidates:
            return Retrieved(language, [], found.query_embedding)
        ranked = await self.reranker.rerank(
            RerankRequest(
                query=text,
                passages=[p.model_copy(update={"sentence_vectors": None}) for p in candidates],
                top_k=top_k,
                query_embedding=found.query_embedding,
            )
        )
        return Retrieved(language, ranked.ranked_passages(candidates), found.query_embedding)

    async def answer(self, text: str) -> tuple[Retrieved, GenerateResponse]:
        retrieved = await self.retrieve(text)
        return retrieved, await self.generator.generate(retrieved.request(text))

    async def features(self, text: str) -> tuple[Retrieved, Any]:
        """The answerability gate's feature vector (None: no eligible sentence, the generator abstains first)."""
        retrieved = await self.retrieve(text)
        assessment = await self.generator.assess(retrieved.request(text))
        vector = assessment.features.feature_vector() if assessment.features is not None else None
        return retrieved, vector


@asynccontextmanager
async def open_served_chain(
    dataset: Dataset,
    cache_dir: Path,
    embedder: Embedder,
    *,
    generator_settings: GeneratorSettings | None = None,
    progress: bool = False,
) -> AsyncIterator[tuple[ServedChain, dict[str, Any]]]:
    """The chain over an embedded index of ``dataset``'s corpus (cached under ``cache_dir``), the
    generator in extractive mode unless ``generator_settings`` say otherwise. Yields it with the index facts."""
    settings = generator_settings or GeneratorSettings(mode="extractive")
    async with AsyncExitStack() as stack:
        retriever, index = await stack.enter_async_context(open_retriever(dataset, cache_dir, embedder, progress=progress))
        reranker = await stack.enter_async_context(open_reranker(use_llm=False, embedder=embedder))
        generator = await stack.enter_async_context(open_generator(settings, embedder=embedder))
        yield ServedChain(retriever, reranker.rerank, generator.generator, generator_mode=settings.mode), index

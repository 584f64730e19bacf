from __future__ import annotations


import pytest

from rag_common.schemas import Passage
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.app import build_answer_generator
from rag_generator.settings import GeneratorSettings

PASSAGES = [
    Passage(
        chunk_id="zorblax#0",
        doc_id="zorblax",
        title="Zorblax Aerospace",
        source="handbook/zorblax.md",
        section_path=["Company", "History"],
        score=0.91,
        text="Zorblax Aerospace is a maker of small satellite launchers headquartered in Tromsø, Norway. "
        "The company was founded in 1987 by the engineer Ingrid Halvorsen. "
        "Its best-known rocket, the Fjord-2, first flew in 2004.",
    ),
    Passage(
        chunk_id="quillfeather#0",
        doc_id="quillfeather",
        title="Quillfeather Library",
        source="handbook/quillfeather.md",
        page=3,
        score=0.55,
        text="The Quillfeather Library is a public library in Dunedin that specialises in maritime maps. "
        "It opened in 1923 and holds 40,000 charts.",
    ),
    Passage(
        chunk_id="basil#0",
        doc_id="basil",
        title="Growing basil",
        source="garden/basil.md",
        score=0.32,
        text="Basil needs six hours of sun a day and soil kept moist but not wet. "
        "Pinch the flowers off to keep the leaves tender.",
    ),
]


@pytest.fixture
def passages() -> list[Passage]:
    return [passage.model_copy() for passage in PASSAGES]


@pytest.fixture(scope="session")
def llm_settings(llm_base_url: str) -> LLMSettings:
    return LLMSettings(base_url=llm_base_url, timeout_s=180.0)


@pytest.fixture(scope="session")
def generator(llm_settings: LLMSettings) -> AnswerGenerator:
    return build_answer_generator(llm_settings, GeneratorSettings())

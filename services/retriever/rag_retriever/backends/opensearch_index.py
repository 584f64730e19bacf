"""The OpenSearch index itself, as pure functions: its template and mapping (and their versions, with
the in-place upgrade of an older mapping), the physical index behind the alias and the swap to a new
one, and the search pipelines hybrid search fuses in.

No I/O here (``opensearch.py`` sends these); the golden tests pin the exact bodies. Target version:
the ``opensearchproject/opensearch:2.19.x`` image of docker-compose.yml (faiss ``cosinesimil`` needs
2.19, the ``score-ranker-processor`` 2.19, knn ``method_parameters`` 2.16; ``z_score``
normalization needs 3.0). The field names the other request modules share are defined here, with
the mapping that gives them their types.

Lexical analysis (issue 31; measured in docs/languages.md): ``text`` and ``title`` are every chunk's
neutral fields (``rag_neutral``: standard tokenizer, lowercase, asciifolding, no stemming). A chunk
of a configured language (``RAG_LANGUAGES``, ``IndexConfig.languages``) also fills the routed fields
``text_<code>`` / ``title_<code>``, analysed by ``rag_<code>`` (lowercase, the language's stop list,
its stemmer, then asciifolding, the embedded engine's chain). Routed fields, not multi-field
sub-fields ``text.<code>``: a sub-field analyses every chunk in every configured language (the
postings ×18 with the default 17 languages), where the measured design needs the chunk's own
language only; and the embedded engine, whose analyzer is per field, can only route, so both engines
index alike. Per-language indices were not chosen either: BM25 statistics per index are not
comparable across indices, and access, filters, kNN and deletes would multiply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from rag_common.identity import EVERYONE
from rag_common.languages import LANGUAGES
from rag_common.languages import language as language_of
from rag_retriever.backends.base import RRF_RANK_CONSTANT, FusionSettings, HnswParams
from rag_retriever.records import DEFAULT_TENANT

if TYPE_CHECKING:
    from rag_retriever.settings import RetrieverSettings

#: Bump when the mapping or index settings change; then run ``reindex_into_new_version``, unless the
#: change only adds fields (``ADDED_FIELDS``): those an older index gets in place on startup.
#: Version 6: per-language analysis (the analyzers of ``text`` and ``title`` changed: reindex).
TEMPLATE_VERSION = 6
#: Fields each template version added, when that was its only change: ``{version: {field: mapping}}``.
#: Adding a field to a mapping is allowed (changing one is not), so an index of an older version is
#: brought up to date with one ``PUT {index}/_mapping`` (``mapping_upgrade_body``) instead of refusing
#: chunks that carry the new field under ``dynamic: strict``. Its older chunks simply lack the field.
ADDED_FIELDS: dict[int, dict[str, dict[str, Any]]] = {
    2: {"content_hash": {"type": "keyword"}},  # sha256 of the document's normalised text
    3: {"readers": {"type": "keyword"}},  # the principals that may read the chunk (tenant was mapped already)
    # The structure-and-entity graph's part of each chunk (``entity_graph.chunk_node``): its entities
    # and its document's title entity, what the second hop counts and searches (``opensearch_graph``).
    4: {"graph_entities": {"type": "keyword"}, "graph_title": {"type": "keyword"}},
    # Stored in _source, never indexed: the chunk's sentence vectors (rag_common.sentence_vectors).
    5: {"sentence_vectors": {"type": "object", "enabled": False}},
    # Version 6 (per-language analysis, the chunk's ``language``) changed analyzers: not listed, reindexed.
}
#: The chunk's entities (normalised names, ``rag_retriever.entities``) and its title entity.
GRAPH_ENTITIES_FIELD = "graph_entities"
GRAPH_TITLE_FIELD = "graph_title"
#: The last version that changed more than fields: an index older than it cannot be upgraded in place.
REINDEX_VERSION = 6
VECTOR_FIELD = "embedding"
#: The chunk texts analysed for BM25: each is a neutral field and, per configured language, a routed one.
TEXT_SOURCES = ("text", "title")
NEUTRAL_ANALYZER = "rag_neutral"
#: The chunk's sentence vectors (``SentenceVectors`` as JSON: base64 float32, about 2 KB per sentence).
SENTENCE_VECTORS_FIELD = "sentence_vectors"
#: Names of the search pipelines per fusion method (``{alias}-hybrid-{name}``).
PIPELINE_SUFFIX = {"min_max": "minmax", "z_score": "zscore", "rrf": "rrf"}
KnnEngine = Literal["faiss", "lucene"]
KnnSpace = Literal["cosinesimil", "innerproduct"]


@dataclass(frozen=True, slots=True)
class IndexConfig:
    """What the index is built for; ``dim`` and ``model_id`` come from the embedder, the rest from
    the settings (``of``), the one source of their defaults."""

    alias: str
    dim: int
    model_id: str
    engine: KnnEngine
    space: KnnSpace
    hnsw: HnswParams
    #: The analysed languages (``LanguageSettings.languages``, ``RAG_LANGUAGES``): one routed field pair each.
    languages: tuple[str, ...]
    #: ``RETRIEVER_NEUTRAL_FIELD_WEIGHT``: the neutral fields' boost beside a known query language's fields.
    neutral_weight: float = 1.0

    @classmethod
    def of(cls, settings: RetrieverSettings, *, dim: int, model_id: str, languages: Sequence[str]) -> IndexConfig:
        return cls(
            alias=settings.opensearch_index, dim=dim, model_id=model_id, engine=settings.knn_engine,
            space=settings.knn_space, hnsw=HnswParams.of(settings),
            languages=tuple(language_of(code).code for code in dict.fromkeys(languages)),
            neutral_weight=settings.neutral_field_weight,
        )

    @property
    def template_name(self) -> str:
        return f"{self.alias}-template"


# --------------------------------------------------------------------------- analysis


def language_field(source: str, code: str) -> str:
    """The routed field of ``source`` (``text`` or ``title``) for the language ``code``: ``text_ro``."""
    return f"{source}_{code}"


def analyzer_name(code: str) -> str:
    return f"rag_{code}"


@dataclass(frozen=True, slots=True)
class _Chain:
    """Where a language's chain departs from ``lowercase → stop _<name>_ → stemmer <name> → asciifolding``."""

    #: The ``stemmer`` filter's name for it, when not the language's name.
    stemmer: str | None = None
    #: Lucene's language-specific lowercasing (``lowercase`` with ``language``), as its built-in analyzer.
    lowercase: str | None = None
    #: Elided articles cut off before lowercasing (``elision``), as its built-in analyzer: the standard
    #: tokenizer keeps ``l'homme`` one token, where the embedded engine's simple tokenizer splits it.
    elision: tuple[str, ...] = ()
    #: Built-in filters before lowercasing and between the stop list and the stemmer.
    before: tuple[str, ...] = ()
    after_stop: tuple[str, ...] = ()


#: Departures per language, each following OpenSearch's built-in analyzer of that language except for
#: the stemmer, which is the Snowball one (as tantivy's) wherever OpenSearch has it: ``stemmer`` with a
#: language's name is Snowball for the 15 others, while ``english`` there is Porter 1 (``porter2`` is
#: Snowball English). Arabic and Greek have no Snowball stemmer in the ``stemmer`` filter: Lucene's
#: own light stemmers, with the normalisation and lowercasing they expect.
_CHAINS = {
    "ar": _Chain(after_stop=("arabic_normalization",)),
    "el": _Chain(lowercase="greek"),
    "en": _Chain(stemmer="porter2"),
    "fr": _Chain(elision=("l", "m", "t", "qu", "n", "s", "j", "d", "c", "jusqu", "quoiqu", "lorsqu", "puisqu")),
    "it": _Chain(
        elision=(
            "c", "l", "all", "dall", "dell", "nell", "sull", "coll", "pell", "gl", "agl", "dagl", "degl", "negl",
            "sugl", "un", "m", "t", "s", "v", "d",
        )
    ),
    # Turkish: ``Türkiye'nin`` → ``Türkiye`` (apostrophe), and I/ı, İ/i lowercased as Turkish does.
    "tr": _Chain(lowercase="turkish", before=("apostrophe",)),
}


def _language_analysis(code: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The custom filters ``rag_<code>`` needs and its filter chain."""
    name, chain, prefix = language_of(code).name, _CHAINS.get(code, _Chain()), analyzer_name(code)
    filters: dict[str, dict[str, Any]] = {}
    steps: list[str] = []
    if chain.elision:
        filters[f"{prefix}_elision"] = {"type": "elision", "articles_case": True, "articles": list(chain.elision)}
        steps.append(f"{prefix}_elision")
    steps += chain.before
    if chain.lowercase:
        filters[f"{prefix}_lowercase"] = {"type": "lowercase", "language": chain.lowercase}
        steps.append(f"{prefix}_lowercase")
    else:
        steps.append("lowercase")
    filters[f"{prefix}_stop"] = {"type": "stop", "stopwords": f"_{name}_"}
    filters[f"{prefix}_stemmer"] = {"type": "stemmer", "language": chain.stemmer or name}
    # Stop words before stemming, folding after it: a word typed without diacritics then stems as the
    # accented one (measured: Romanian queries without diacritics 0.924 unfolded, 0.966 folded).
    steps += [f"{prefix}_stop", *chain.after_stop, f"{prefix}_stemmer", "asciifolding"]
    return filters, steps


def analysis_settings(languages: Sequence[str]) -> dict[str, Any]:
    """``index.analysis``: ``rag_neutral`` and one ``rag_<code>`` per language. No char_filter: text is
    NFC already (ingestion), cedilla and comma-below ş/ș fold alike, and queries are ``normalise_text``-ed."""
    filters: dict[str, dict[str, Any]] = {}
    analyzers: dict[str, dict[str, Any]] = {
        NEUTRAL_ANALYZER: {"type": "custom", "tokenizer": "standard", "filter": ["lowercase", "asciifolding"]}
    }
    for code in languages:
        added, steps = _language_analysis(code)
        filters.update(added)
        analyzers[analyzer_name(code)] = {"type": "custom", "tokenizer": "standard", "filter": steps}
    return {"filter": filters, "analyzer": analyzers}


def language_mappings(languages: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The routed fields: ``text_<code>`` and ``title_<code>`` per language, each with its analyzer."""
    return {
        language_field(source, code): {"type": "text", "analyzer": analyzer_name(code)}
        for code in languages
        for source in TEXT_SOURCES
    }


# --------------------------------------------------------------------------- index, template, aliases


def physical_index_name(alias: str, now: datetime) -> str:
    return f"{alias}-v{TEMPLATE_VERSION}-{now:%Y%m%d-%H%M%S}"


def index_template_body(config: IndexConfig) -> dict[str, Any]:
    """``PUT _index_template/{alias}-template``: every ``{alias}-v*`` physical index gets this."""
    keyword = {"type": "keyword"}
    return {
        "index_patterns": [f"{config.alias}-v*"],
        "priority": 100,
        "version": TEMPLATE_VERSION,
        "template": {
            "settings": {
                "index": {
                    "knn": True,
                    # Default ef at query time for faiss (lucene uses k); queries raise it to k.
                    "knn.algo_param.ef_search": config.hnsw.ef_search,
                },
                "analysis": analysis_settings(config.languages),
            },
            "mappings": {
                # A field the code does not know is a bug: reject the document instead of guessing a type.
                "dynamic": "strict",
                # Checked on startup: vectors of another model or dimension are not comparable, and an
                # index analysing other languages lacks (or has extra) routed fields.
                "_meta": {
                    "template_version": TEMPLATE_VERSION, "model_id": config.model_id, "dim": config.dim,
                    "languages": list(config.languages),
                },
                "properties": {
                    VECTOR_FIELD: {
                        "type": "knn_vector",
                        "dimension": config.dim,
                        "method": {
                            "name": "hnsw",
                            "engine": config.engine,
                            "space_type": config.space,
                            "parameters": {"m": config.hnsw.m, "ef_construction": config.hnsw.ef_construction},
                        },
                    },
                    "text": {"type": "text", "analyzer": NEUTRAL_ANALYZER},
                    "title": {
                        "type": "text",
                        "analyzer": NEUTRAL_ANALYZER,
                        "fields": {"keyword": {"type": "keyword", "ignore_above": 256}},
                    },
                    **language_mappings(config.languages),
                    "chunk_id": keyword,
                    "doc_id": keyword,
                    "source": keyword,
                    "section_path": keyword,
                    "content_type": keyword,
                    "tenant": keyword,
                    "acl": keyword,
                    "table_id": keyword,
                    "doc_fingerprint": keyword,
                    # The chunk's language (declared or identified at ingestion); absent: neutral only.
                    "language": keyword,
                    **{name: spec for added in ADDED_FIELDS.values() for name, spec in added.items()},
                    "page": {"type": "integer"},
                    "chunk_index": {"type": "integer"},
                    # Returned as stored, never searched: any shape a document's metadata has is fine.
                    "metadata": {"type": "object", "enabled": False},
                    "created_at": {"type": "date"},
                    "updated_at": {"type": "date"},
                },
            },
        },
    }


def mapping_upgrade_body(mappings: Mapping[str, Any]) -> dict[str, Any] | None:
    """``PUT /{index}/_mapping`` bringing an index of an older template version (``mappings`` as
    ``GET _mapping`` returns them) up to ``TEMPLATE_VERSION``: the fields the versions since added and
    ``_meta`` with the new version (``_meta`` is replaced whole, so its other keys are kept). None if
    the index is current, newer, or behind by a version that changed more than fields (reindex then).
    """
    meta = dict(mappings.get("_meta") or {})
    version = meta.get("template_version")
    if not isinstance(version, int) or version >= TEMPLATE_VERSION:
        return None
    missing = range(version + 1, TEMPLATE_VERSION + 1)
    if any(step not in ADDED_FIELDS for step in missing):
        return None
    properties = {name: spec for step in missing for name, spec in ADDED_FIELDS[step].items()}
    return {"_meta": {**meta, "template_version": TEMPLATE_VERSION}, "properties": properties}


def create_index_body(alias: str | None) -> dict[str, Any]:
    """``PUT /{physical}``: settings and mappings come from the template; the alias (if any) atomically."""
    return {"aliases": {alias: {}}} if alias else {}


#: Run on every chunk a reindex copies (``reindex_body``): its routed fields made again for the
#: configured languages (copies of its stored text and title, NFC since ingestion, if its language is
#: configured; none otherwise, so a language taken out of ``RAG_LANGUAGES`` leaves no field the new
#: mapping lacks), and a chunk written before tenants and ACLs (version < 3, no ``readers``) made the
#: default tenant's, readable by all of it (the embedded backend's format upgrade does the same).
REINDEX_SCRIPT = (
    "for (String code : params.all) { for (String source : params.sources) "
    "{ ctx._source.remove(source + '_' + code); } } "
    "String language = ctx._source.language; "
    "if (language != null && params.languages.contains(language)) { for (String source : params.sources) "
    "{ if (ctx._source[source] != null && ctx._source[source] != '') "
    "{ ctx._source[source + '_' + language] = ctx._source[source]; } } } "
    "if (ctx._source.readers == null) { ctx._source.tenant = params.tenant; ctx._source.readers = params.readers; }"
)


def reindex_body(source: str, dest: str, languages: Sequence[str]) -> dict[str, Any]:
    """``POST _reindex`` from ``source`` into ``dest`` (made from the current template): the stored
    vectors are copied, every text is analysed again by ``dest``'s analyzers (``REINDEX_SCRIPT``)."""
    return {
        "source": {"index": source},
        "dest": {"index": dest},
        "script": {
            "lang": "painless",
            "source": REINDEX_SCRIPT,
            "params": {
                "all": sorted(LANGUAGES), "languages": list(languages), "sources": list(TEXT_SOURCES),
                "tenant": DEFAULT_TENANT, "readers": [EVERYONE],
            },
        },
    }


def outdated_index_reason(mappings: Mapping[str, Any], languages: Sequence[str]) -> str | None:
    """Why an index (``mappings`` as ``GET _mapping`` returns them) must be reindexed before this code
    writes to it, or None: a template version before ``REINDEX_VERSION`` (its fields are analysed
    otherwise) or other analysed languages than ``languages`` (its routed fields differ)."""
    meta = mappings.get("_meta") or {}
    version = meta.get("template_version")
    if not isinstance(version, int) or version < REINDEX_VERSION:
        return f"it has template version {version}, analysed before per-language fields (version {REINDEX_VERSION})"
    indexed = meta.get("languages", [])
    if sorted(indexed) != sorted(languages):
        return f"it analyses the languages {sorted(indexed)}, RAG_LANGUAGES names {sorted(languages)}"
    return None


def alias_swap_body(alias: str, old_indices: Iterable[str], new_index: str) -> dict[str, Any]:
    """``POST _aliases``: one request, so readers and writers see the old index or the new, never neither."""
    actions: list[dict[str, Any]] = [{"remove": {"index": old, "alias": alias}} for old in sorted(old_indices)]
    actions.append({"add": {"index": new_index, "alias": alias}})
    return {"actions": actions}


# --------------------------------------------------------------------------- search pipelines


def pipeline_name(alias: str, fusion: FusionSettings) -> str:
    """A pure function of the fusion parameters: replicas with other settings (say, mid rolling
    deploy) use their own pipeline instead of overwriting each other's weights."""
    name = f"{alias}-hybrid-{PIPELINE_SUFFIX[fusion.method]}"
    if fusion.method == "rrf":
        return name if fusion.rank_constant == RRF_RANK_CONSTANT else f"{name}-k{fusion.rank_constant}"
    per_mille = round(fusion.dense_weight * 1000)
    return name if per_mille == 500 else f"{name}-dense{per_mille}"


def pipeline_body(fusion: FusionSettings) -> dict[str, Any]:
    """``PUT _search/pipeline/{name}``. Weights are in sub-query order: [dense, bm25]."""
    if fusion.method == "rrf":
        processor = {
            "score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": fusion.rank_constant}}
        }
        description = f"RRF of [dense, bm25], rank_constant {fusion.rank_constant}"
    else:
        # Rounded so they sum to exactly 1.0, which the processor requires.
        dense = round(fusion.dense_weight, 4)
        weights = [dense, round(1.0 - dense, 4)]
        processor = {
            "normalization-processor": {
                "normalization": {"technique": fusion.method},
                "combination": {"technique": "arithmetic_mean", "parameters": {"weights": weights}},
            }
        }
        description = f"{fusion.method} then weighted mean of [dense, bm25] = {weights}"
    return {"description": description, "phase_results_processors": [processor]}

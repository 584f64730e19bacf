"""The OpenSearch index itself, as pure functions: its template and mapping (and their versions, with
the in-place upgrade of an older mapping), the physical index behind the alias and the swap to a new
one, and the search pipelines hybrid search fuses in.

No I/O here (``opensearch.py`` sends these); the golden tests pin the exact bodies. Target version:
the ``opensearchproject/opensearch:2.19.x`` image of docker-compose.yml (faiss ``cosinesimil`` needs
2.19, the ``score-ranker-processor`` 2.19, knn ``method_parameters`` 2.16; ``z_score``
normalization needs 3.0). The field names the other request modules share are defined here, with
the mapping that gives them their types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from rag_common.identity import EVERYONE
from rag_retriever.backends.base import RRF_RANK_CONSTANT, FusionSettings, HnswParams
from rag_retriever.records import DEFAULT_TENANT

if TYPE_CHECKING:
    from rag_retriever.settings import RetrieverSettings

#: Bump when the mapping or index settings change; then run ``reindex_into_new_version``, unless the
#: change only adds fields (``ADDED_FIELDS``): those an older index gets in place on startup.
TEMPLATE_VERSION = 5
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
}
#: The chunk's entities (normalised names, ``rag_retriever.entities``) and its title entity.
GRAPH_ENTITIES_FIELD = "graph_entities"
GRAPH_TITLE_FIELD = "graph_title"
#: What chunks written before version 3 get when an index is upgraded to it: the default tenant,
#: readable by all of it (the embedded backend's format upgrade does the same).
ACCESS_BACKFILL_VERSION = 3
VECTOR_FIELD = "embedding"
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

    @classmethod
    def of(cls, settings: RetrieverSettings, *, dim: int, model_id: str) -> IndexConfig:
        return cls(
            alias=settings.opensearch_index, dim=dim, model_id=model_id, engine=settings.knn_engine,
            space=settings.knn_space, hnsw=HnswParams.of(settings),
        )

    @property
    def template_name(self) -> str:
        return f"{self.alias}-template"


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
                }
            },
            "mappings": {
                # A field the code does not know is a bug: reject the document instead of guessing a type.
                "dynamic": "strict",
                # Checked on startup: vectors of another model or dimension are not comparable.
                "_meta": {"template_version": TEMPLATE_VERSION, "model_id": config.model_id, "dim": config.dim},
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
                    "text": {"type": "text", "analyzer": "english"},
                    "title": {
                        "type": "text",
                        "analyzer": "english",
                        "fields": {"keyword": {"type": "keyword", "ignore_above": 256}},
                    },
                    "chunk_id": keyword,
                    "doc_id": keyword,
                    "source": keyword,
                    "section_path": keyword,
                    "content_type": keyword,
                    "tenant": keyword,
                    "acl": keyword,
                    "table_id": keyword,
                    "doc_fingerprint": keyword,
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


def access_backfill_body() -> dict[str, Any]:
    """``POST {alias}/_update_by_query`` after an upgrade to version 3: chunks written before tenants
    and ACLs (no ``readers``) become the default tenant's, readable by all of it."""
    return {
        "query": {"bool": {"must_not": [{"exists": {"field": "readers"}}]}},
        "script": {
            "lang": "painless",
            "source": "ctx._source.tenant = params.tenant; ctx._source.readers = params.readers",
            "params": {"tenant": DEFAULT_TENANT, "readers": [EVERYONE]},
        },
    }


def create_index_body(alias: str | None) -> dict[str, Any]:
    """``PUT /{physical}``: settings and mappings come from the template; the alias (if any) atomically."""
    return {"aliases": {alias: {}}} if alias else {}


def reindex_body(source: str, dest: str) -> dict[str, Any]:
    return {"source": {"index": source}, "dest": {"index": dest}}


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

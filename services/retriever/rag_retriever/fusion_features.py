"""Per-candidate features of learned fusion (issue 16, part 4): pure functions, no index.

A search's candidates are the first-pass hybrid list plus what the second hop and personalised
PageRank add (``rag_retriever.fusion_candidates``). For each, :class:`CandidateSignals` holds the raw
signals; :func:`feature_matrix` turns one query's candidates into a row per candidate, columns in
:data:`FEATURE_NAMES` order:

- ``dense_z``, ``bm25_z``, ``hybrid_z``, ``hop_z``, ``ppr_z``: the dense score ((1 + cos) / 2), the BM25
  score, the min-max hybrid score, the second hop's score and the PageRank share, each **standardised
  within the query** (minus the mean over the query's candidates that have it, divided by their
  standard deviation; 0 when all are equal). Raw BM25 scores differ by corpus and query length and
  cosines cluster differently per embedder, so only a candidate's standing among its query's
  candidates transfers between queries and datasets.
- **Missing signal**: a candidate absent from a list (a BM25-only hit has no dense score, a hop
  addition may be in neither list) gets the query's **lowest** standardised value of that signal (it
  is no better than the worst candidate that has it; 0 when no candidate has it) and the indicator
  ``*_missing`` = 1. ``ppr_z`` is 0 for every candidate when PageRank did not run (a model without
  PPR features never needs it).
- ``dense_rr``, ``bm25_rr``: 1 / rank in that list (0 when absent).
- ``hop_found``: 1 when a second-hop follow-up search found the candidate.
- ``entity_overlap``: share of the question's entities (``rag_retriever.entities.query_entities``)
  that the chunk mentions or is titled by; ``title_match``: 1 when the chunk's document title is one
  of them.
- ``section_neighbour`` / ``document_neighbour``: 1 when the chunk shares a section / a document with
  one of the first-pass top hits (other than itself).
- ``dense_z_blind``, ``dense_rr_blind``: ``dense_z`` and ``dense_rr`` again when the embedder was not
  trained for the query's language (``EMBEDDER_LANGUAGES``; an unknown language counts as
  not), else 0: the model learns how much less a blind dense list is worth, one model for every language.

``FEATURE_GROUPS`` names which columns belong to one signal, for the drop-one-group ablation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "dense": ("dense_z", "dense_rr", "dense_missing"),
    "bm25": ("bm25_z", "bm25_rr", "bm25_missing"),
    "hybrid": ("hybrid_z", "hybrid_missing"),
    "hop": ("hop_z", "hop_found"),
    "ppr": ("ppr_z",),
    "entity": ("entity_overlap", "title_match"),
    "section": ("section_neighbour", "document_neighbour"),
    "language": ("dense_z_blind", "dense_rr_blind"),
}
FEATURE_NAMES: tuple[str, ...] = tuple(name for names in FEATURE_GROUPS.values() for name in names)
#: Changes whenever a feature's definition changes (bump the number) or the list does: cached
#: training features (``rag_eval.fusion_training``) of another version are not reused.
FEATURES_VERSION = "f1-" + hashlib.sha256(" ".join(FEATURE_NAMES).encode()).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class CandidateSignals:
    """One candidate's raw signals; None = the candidate is not in that list (or the signal did not run)."""

    dense: float | None = None
    bm25: float | None = None
    dense_rank: int | None = None
    bm25_rank: int | None = None
    hybrid: float | None = None
    hop: float = 0.0
    hop_found: bool = False
    ppr: float | None = None
    entity_overlap: float = 0.0
    title_match: bool = False
    section_neighbour: bool = False
    document_neighbour: bool = False


def local_standardise(values: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    """(standardised values, missing indicator) of one signal over one query's candidates: present
    values as z-scores among themselves, missing ones at the lowest present z (0 if none is present)."""
    missing = np.array([value is None for value in values], dtype=np.float64)
    present = np.array([value for value in values if value is not None], dtype=np.float64)
    out = np.zeros(len(values), dtype=np.float64)
    if present.size == 0:
        return out, missing
    std = present.std()
    z = (present - present.mean()) / std if std > 1e-12 else np.zeros_like(present)
    out[missing == 0] = z
    out[missing == 1] = z.min()
    return out, missing


def _reciprocal_rank(rank: int | None) -> float:
    return 0.0 if rank is None else 1.0 / rank


def feature_matrix(candidates: Sequence[CandidateSignals], *, dense_blind: bool = False) -> np.ndarray:
    """One query's candidates as a ``(len(candidates), len(FEATURE_NAMES))`` float64 matrix;
    ``dense_blind``: the embedder was not trained for the query's language."""
    n = len(candidates)
    if n == 0:
        return np.zeros((0, len(FEATURE_NAMES)))
    dense_z, dense_missing = local_standardise([c.dense for c in candidates])
    bm25_z, bm25_missing = local_standardise([c.bm25 for c in candidates])
    hybrid_z, hybrid_missing = local_standardise([c.hybrid for c in candidates])
    hop_z, _ = local_standardise([c.hop for c in candidates])
    ppr_z, _ = local_standardise([c.ppr for c in candidates])
    dense_rr = np.array([_reciprocal_rank(c.dense_rank) for c in candidates])
    blind = 1.0 if dense_blind else 0.0
    columns = {
        "dense_z": dense_z,
        "dense_rr": dense_rr,
        "dense_missing": dense_missing,
        "bm25_z": bm25_z,
        "bm25_rr": [_reciprocal_rank(c.bm25_rank) for c in candidates],
        "bm25_missing": bm25_missing,
        "hybrid_z": hybrid_z,
        "hybrid_missing": hybrid_missing,
        "hop_z": hop_z,
        "hop_found": [float(c.hop_found) for c in candidates],
        "ppr_z": ppr_z,
        "entity_overlap": [c.entity_overlap for c in candidates],
        "title_match": [float(c.title_match) for c in candidates],
        "section_neighbour": [float(c.section_neighbour) for c in candidates],
        "document_neighbour": [float(c.document_neighbour) for c in candidates],
        "dense_z_blind": dense_z * blind,
        "dense_rr_blind": dense_rr * blind,
    }
    return np.column_stack([np.asarray(columns[name], dtype=np.float64) for name in FEATURE_NAMES])

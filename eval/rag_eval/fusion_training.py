"""Learned fusion (issue 16, part 4): training data, fitting, and held-out evaluation.

- :func:`extract` asks the retriever's own ``SearchService.fusion_candidates`` for every query's
  candidates and feature matrix (what the service scores at a search) and labels each candidate by
  the qrels (its document relevant or not).
- :func:`fit` trains a logistic regression (scikit-learn) on the positives and the **hard
  negatives** of the training queries (one row per document, :func:`training_rows`): per query, the
  non-relevant documents among the first-pass top ``hard_negatives`` and among the
  ``hard_negatives`` best additions of the second hop / PageRank
  (a model that never saw a non-relevant hop addition would learn that the hop is always right: the
  MTRAG-UN regression of the fixed-weight hop). Classes are balanced. It returns the
  retriever's :class:`~rag_retriever.learned_fusion.FusionModel` (numpy parameters).
- Held-out evaluation: every query is scored only by a model that did not see it. Protocols
  (:func:`held_out_rankings`): ``within`` (k-fold by question inside each dataset, trained on that
  dataset's other folds), ``pooled`` (k-fold by question, trained on the other folds of *all* datasets:
  how the shipped model is trained, on everything), ``lodo`` (leave one dataset out: trained on
  the other datasets only) and ``lolo`` (leave one language out, for datasets of a known language:
  trained on every other language's data and never on the question's fold). Folds are a seeded
  permutation of each dataset's question ids.
- **Families** (``QueryExamples.family``): datasets that are translations of one question set (XQuAD's
  languages: the same ids, paragraphs and answers) share their folds by question id, and ``lodo``
  leaves the whole family out, so a question is never scored by a model that saw its translation.
- **Weights** (:func:`fit`'s ``weights``): a dataset's questions can count as fewer (or more) questions
  in training, so that four translations of 1,190 questions do not outweigh the other datasets.
- :func:`ablation`: the pooled protocol with one feature group (``FEATURE_GROUPS``) left out at a time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from rag_eval.harness import EVAL_ACCESS, dedupe_doc_ids
from rag_eval.metrics import score
from rag_eval.stats import DEFAULT_RESAMPLES, paired_bootstrap
from rag_retriever.fusion_features import FEATURE_GROUPS, FEATURE_NAMES, FEATURES_VERSION
from rag_retriever.learned_fusion import FusionModel

if TYPE_CHECKING:
    from rag_eval.datasets.types import Dataset, Query
    from rag_retriever.search_service import SearchService

DEFAULT_FOLDS = 5
DEFAULT_HARD_NEGATIVES = 10
#: The logistic regression's inverse regularisation strength (scikit-learn's default; not tuned).
DEFAULT_C = 1.0
PROTOCOLS = ("within", "pooled", "lodo", "lolo")


@dataclass
class QueryExamples:
    """One question's candidates: rows in candidate order (first pass, then the graph's additions)."""

    dataset: str
    query_id: str
    doc_ids: list[str]
    features: np.ndarray
    labels: np.ndarray
    #: How many leading rows are the first pass (the hybrid ranking).
    first_pass: int
    #: Datasets of one family are translations of one question set (same query ids); "" = its own.
    family: str = ""
    #: The dataset's language (ISO 639-1) when known; the ``lolo`` protocol scores only these.
    language: str | None = None

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.query_id}"

    @property
    def group(self) -> str:
        """The family, or the dataset when it has none: what ``lodo`` leaves out and folds are dealt in."""
        return self.family or self.dataset

    def hybrid_ranking(self) -> list[str]:
        """The plain hybrid run's ranking (the first pass), documents once."""
        return dedupe_doc_ids(self.doc_ids[: self.first_pass])

    def ranking(self, model: FusionModel, depth: int) -> list[str]:
        """The ranking ``model`` serves: candidates by its score (ties: candidate order), top ``depth``."""
        scores = model.score(self.features)
        order = sorted(range(len(self.doc_ids)), key=lambda i: (-scores[i], i))[:depth]
        return dedupe_doc_ids(self.doc_ids[i] for i in order)


async def extract(
    search: SearchService, dataset: Dataset, queries: Sequence[Query], depth: int, *, ppr: bool,
    cache: Path | None = None, progress: bool = True, family: str = "", language: str | None = None,
) -> list[QueryExamples]:
    """Candidates, features and labels of ``queries`` (the question's own text, as the hybrid runs).

    ``ppr``: whether PageRank runs, as it will at a search with the model (``FusionModel.uses_ppr``):
    its additions change the candidate set and so every within-query standardisation, and a model
    trained on other candidates than it is served with ranks worse (measured: HotpotQA coverage@5
    0.82 held out, 0.75 served, before extraction followed the model's features).

    ``cache``: a JSONL file of earlier extractions with the same index, depth and feature version
    (:func:`cache_path`); questions in it are read back, the others extracted and appended as they
    are done, so an interrupted extraction resumes and training and evaluation share one pass.

    ``family``, ``language``: carried on every example (:class:`QueryExamples`)."""
    cached = _read_cache(cache) if cache is not None else {}
    missing = [query for query in queries if query.id not in cached]
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
    for query in tqdm(missing, desc=f"{dataset.name}: fusion features", unit="q", disable=not progress):
        found, matrix = await search.fusion_candidates(query.text, depth, EVAL_ACCESS, ppr=ppr)
        row = {"query_id": query.id, "doc_ids": [hit.chunk.doc_id for hit in found.hits],
               "features": matrix.tolist(), "first_pass": found.first_pass}
        cached[query.id] = row
        if cache is not None:
            with cache.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
    examples = []
    for query in queries:
        row = cached[query.id]
        relevant = {doc for doc, grade in dataset.qrels.get(query.id, {}).items() if grade > 0}
        features = np.asarray(row["features"], dtype=np.float64).reshape(len(row["doc_ids"]), len(FEATURE_NAMES))
        examples.append(QueryExamples(
            dataset.name, query.id, list(row["doc_ids"]), features,
            np.array([doc in relevant for doc in row["doc_ids"]], dtype=np.int8), int(row["first_pass"]),
            family, language,
        ))
    return examples


def cache_path(report_dir: Path, fingerprint: str, depth: int, *, ppr: bool) -> Path:
    """Where a dataset's extracted features are kept: per index, candidate depth, PageRank on or off
    and feature set."""
    return report_dir / "fusion_features" / f"{fingerprint[:16]}-c{depth}-ppr{int(ppr)}-{FEATURES_VERSION}.jsonl"


def _read_cache(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut by an interruption
        rows[row["query_id"]] = row
    return rows


def training_rows(
    examples: Sequence[QueryExamples], hard_negatives: int = DEFAULT_HARD_NEGATIVES
) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of the positives and hard negatives of ``examples`` (queries without a relevant
    candidate give nothing to learn from and are left out).

    One row per **document**: its first chunk in candidate order. Relevance is judged per document,
    so a document's later chunks would carry its label without their own evidence and teach the model
    that "in the same document as a top hit" means relevant: on MTRAG-UN (several chunks per
    document) that model filled the top 10 with chunks of the same documents (held-out nDCG@10 −0.025
    with every chunk as a row, −0.000 with one row per document; docs/evaluation.md)."""
    xs, ys = [], []
    for example in examples:
        rows = _document_rows(example, hard_negatives)
        if rows:
            xs.append(example.features[rows])
            ys.append(example.labels[rows])
    if not xs:
        return np.zeros((0, len(FEATURE_NAMES))), np.zeros(0, dtype=np.int8)
    return np.vstack(xs), np.concatenate(ys)


def _document_rows(example: QueryExamples, hard_negatives: int) -> list[int]:
    """The rows :func:`training_rows` takes of one question (none without a relevant candidate)."""
    if not example.labels.any():
        return []
    hop, ppr = FEATURE_NAMES.index("hop_z"), FEATURE_NAMES.index("ppr_z")
    first_row = {doc: example.doc_ids.index(doc) for doc in dict.fromkeys(example.doc_ids)}
    rows_by_document = sorted(first_row.values())
    positives = [i for i in rows_by_document if example.labels[i]]
    negatives = [i for i in rows_by_document if i < example.first_pass and not example.labels[i]][:hard_negatives]
    added = [i for i in rows_by_document if i >= example.first_pass and not example.labels[i]]
    added.sort(key=lambda i: (-example.features[i, hop], -example.features[i, ppr], i))
    return [*positives, *negatives, *added[:hard_negatives]]


def row_weights(
    examples: Sequence[QueryExamples], weights: Mapping[str, float] | None,
    hard_negatives: int = DEFAULT_HARD_NEGATIVES,
) -> np.ndarray:
    """One weight per row of :func:`training_rows`: its question's dataset weight (``weights``,
    dataset → the weight of each of its questions, 1 if absent)."""
    return np.concatenate([np.full(len(_document_rows(e, hard_negatives)), (weights or {}).get(e.dataset, 1.0))
                           for e in examples] + [np.zeros(0)])


def _balanced(y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``weights`` times the class weight that gives the positives and the negatives equal mass (with
    unit weights, scikit-learn's ``class_weight="balanced"``)."""
    out = weights.astype(np.float64)
    for label in (0, 1):
        out[y == label] *= weights.sum() / (2 * weights[y == label].sum())
    return out


def fit(
    examples: Sequence[QueryExamples],
    *,
    features: Sequence[str] = FEATURE_NAMES,
    hard_negatives: int = DEFAULT_HARD_NEGATIVES,
    c: float = DEFAULT_C,
    provenance: Mapping[str, Any] | None = None,
    weights: Mapping[str, float] | None = None,
) -> FusionModel:
    """A logistic regression on ``features`` (a subset of ``FEATURE_NAMES``) of ``examples``, classes
    balanced; ``weights``: dataset → the weight of each of its questions (1 if absent)."""
    from sklearn.linear_model import LogisticRegression

    x, y = training_rows(examples, hard_negatives)
    if len(set(y.tolist())) < 2:
        raise ValueError("the training questions need both relevant and non-relevant candidates")
    columns = [FEATURE_NAMES.index(name) for name in features]
    x = x[:, columns]
    # Weighted like the fit, so a weight of 2 is exactly the same question twice.
    w = row_weights(examples, weights, hard_negatives)
    mean = np.average(x, axis=0, weights=w)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
    scale[scale < 1e-12] = 1.0  # a constant feature: leave it unscaled (its weight ends up ~0)
    model = LogisticRegression(C=c, max_iter=2000)
    model.fit((x - mean) / scale, y, sample_weight=_balanced(y, w))
    info = {"rows": int(len(y)), "positives": int(y.sum()), "negatives": int(len(y) - y.sum()),
            "hard_negatives_per_query": hard_negatives, "C": c,
            **({"question_weights": dict(weights)} if weights else {}), **(provenance or {})}
    return FusionModel(tuple(features), mean, scale, model.coef_[0].astype(np.float64), float(model.intercept_[0]),
                       {"training": info})


def folds_of(examples: Sequence[QueryExamples], folds: int, seed: int) -> dict[str, int]:
    """Each question's fold: a seeded permutation of every dataset's questions, dealt round-robin; in a
    family (translations), of the family's question ids, so a question and its translations share a fold."""
    assignment: dict[str, int] = {}
    for group in dict.fromkeys(example.group for example in examples):
        members = [example for example in examples if example.group == group]
        ids = list(dict.fromkeys(example.query_id for example in members))
        order = np.random.default_rng(seed).permutation(len(ids))
        fold_of_id = {ids[index]: position % folds for position, index in enumerate(order)}
        for example in members:
            assignment[example.key] = fold_of_id[example.query_id]
    return assignment


def held_out_models(
    examples: Sequence[QueryExamples], protocol: str, *, folds: int = DEFAULT_FOLDS, seed: int = 0,
    features: Sequence[str] = FEATURE_NAMES, hard_negatives: int = DEFAULT_HARD_NEGATIVES,
    weights: Mapping[str, float] | None = None,
) -> dict[str, FusionModel]:
    """Question key → the model that scores it under ``protocol``, trained without that question
    (``within``/``pooled``: without its fold; ``lodo``: without its dataset's family; ``lolo``: without
    its language and its fold, for the questions of a known language only)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}")
    fold = folds_of(examples, folds, seed)
    groups: dict[tuple[str, int], list[QueryExamples]] = {}
    for example in examples:
        if protocol == "within":
            group = (example.dataset, fold[example.key])
        elif protocol == "pooled":
            group = ("*", fold[example.key])
        elif protocol == "lodo":
            group = (example.group, -1)
        elif example.language is not None:
            group = (example.language, fold[example.key])
        else:
            continue
        groups.setdefault(group, []).append(example)
    models: dict[str, FusionModel] = {}
    for (name, number), scored in groups.items():
        if protocol == "within":
            train = [e for e in examples if e.dataset == name and fold[e.key] != number]
        elif protocol == "pooled":
            train = [e for e in examples if fold[e.key] != number]
        elif protocol == "lodo":
            train = [e for e in examples if e.group != name]
        else:  # the question's translations share its fold: leaving the fold out keeps them all out
            families = {e.group for e in scored}
            train = [e for e in examples
                     if e.language != name and not (e.group in families and fold[e.key] == number)]
        model = fit(train, features=features, hard_negatives=hard_negatives, weights=weights)
        held_out = {example.key for example in scored}
        assert not held_out & {e.key for e in train}, "a question was trained and scored on"
        for example in scored:
            models[example.key] = model
    return models


def held_out_rankings(
    examples: Sequence[QueryExamples], protocol: str, depth: int, **options: Any
) -> dict[str, list[str]]:
    """Question key → its held-out ranking under ``protocol`` (``lolo``: questions of a known language)."""
    models = held_out_models(examples, protocol, **options)
    return {example.key: example.ranking(models[example.key], depth) for example in examples if example.key in models}


def per_query(
    examples: Sequence[QueryExamples], rankings: Mapping[str, list[str]], datasets: Mapping[str, Dataset], metric: str
) -> dict[str, float]:
    """Question key → ``metric`` of its ranking (questions the metric is undefined for left out)."""
    values = {}
    for example in examples:
        if example.key not in rankings:
            continue
        value = score(metric, rankings[example.key], datasets[example.dataset].qrels.get(example.query_id, {}))
        if value is not None:
            values[example.key] = value
    return values


def compare(
    examples: Sequence[QueryExamples], rankings: Mapping[str, list[str]], baseline: Mapping[str, list[str]],
    datasets: Mapping[str, Dataset], metrics: Sequence[str], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
) -> dict[str, dict[str, float | bool | int]]:
    """Per metric: the mean of ``rankings`` and of ``baseline`` and the paired bootstrap 95 % CI of
    their difference, over ``examples``."""
    out: dict[str, dict[str, float | bool | int]] = {}
    for metric in metrics:
        ours = per_query(examples, rankings, datasets, metric)
        theirs = per_query(examples, baseline, datasets, metric)
        keys = sorted(set(ours) & set(theirs))
        ci = paired_bootstrap([ours[k] for k in keys], [theirs[k] for k in keys], resamples=resamples, seed=seed)
        out[metric] = {"value": float(np.mean([ours[k] for k in keys])) if keys else 0.0,
                       "baseline": float(np.mean([theirs[k] for k in keys])) if keys else 0.0,
                       "delta": ci.delta, "low": ci.low, "high": ci.high, "noise": ci.noise, "n": ci.n}
    return out


def ablation(
    examples: Sequence[QueryExamples], depth: int, *, folds: int = DEFAULT_FOLDS, seed: int = 0,
    hard_negatives: int = DEFAULT_HARD_NEGATIVES, weights: Mapping[str, float] | None = None,
) -> dict[str, dict[str, list[str]]]:
    """Group name → held-out (pooled protocol) rankings of the model without that feature group;
    ``"(all)"`` = every feature."""
    options = {"folds": folds, "seed": seed, "hard_negatives": hard_negatives, "weights": weights}
    out = {"(all)": held_out_rankings(examples, "pooled", depth, **options)}
    for group, names in FEATURE_GROUPS.items():
        kept = [name for name in FEATURE_NAMES if name not in names]
        out[group] = held_out_rankings(examples, "pooled", depth, features=kept, **options)
    return out

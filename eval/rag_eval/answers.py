"""Metrics of generated answers, their citations and abstentions. Implemented once, tested by hand.

=========================  =======================================================================
``exact_match``            1 if the SQuAD-normalised answer equals a normalised reference, else 0
``token_f1``               SQuAD token F1 (bag of normalised tokens), best over the references
``rouge_l``                ROUGE-L F-measure (longest common subsequence of tokens; the
                           ``rouge-score`` package, its tokenizer: lower case, non [a-z0-9] → space,
                           no stemming), best over the references
``citation_scores``        precision = cited gold passages / cited passages, recall = cited gold
                           passages / gold passages (passages counted once, by document id)
``abstention_scores``      positive = the system abstained, truth = the question is unanswerable:
                           precision = abstentions on unanswerable / all abstentions, recall =
                           abstentions on unanswerable / all unanswerable
``fold_text``              not a metric: the fold the benchmarks match a cited sentence against
                           gold sentences with (NFKC, casefold, typographic quotes and dashes to
                           ASCII, whitespace runs to one space)
=========================  =======================================================================

SQuAD normalisation: lower case, punctuation removed, the articles a / an / the removed, whitespace
collapsed. A question without a reference answer has no answer score (``None``); unanswerable
questions are scored by abstention, not by these.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's ``normalize_answer``: lower, drop punctuation, drop articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


_FOLD = str.maketrans(
    {c: "'" for c in "\u2018\u2019\u201a\u201b\u2032\u0060\u00b4"}
    | {c: '"' for c in "\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb"}
    | {c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"}
)


def fold_text(text: str) -> str:
    """``text`` folded for matching a quote against a source sentence: Unicode compatibility forms
    (NFKC), case (``casefold``), typographic quotes and dashes to ASCII, every whitespace run to one
    space, no space at either end."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(_FOLD).split())


def _best(prediction: str, references: Sequence[str], metric: Any) -> float | None:
    if isinstance(references, str):
        references = [references]
    if not references:
        return None
    return max(metric(prediction, reference) for reference in references)


def _exact(prediction: str, reference: str) -> float:
    return 1.0 if normalize_answer(prediction) == normalize_answer(reference) else 0.0


def _f1(prediction: str, reference: str) -> float:
    predicted = normalize_answer(prediction).split()
    gold = normalize_answer(reference).split()
    if not predicted or not gold:
        # SQuAD v2: both empty is a match, one empty is not.
        return 1.0 if predicted == gold else 0.0
    common = Counter(predicted) & Counter(gold)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(predicted)
    recall = overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


@lru_cache(maxsize=1)
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def _rouge_l(prediction: str, reference: str) -> float:
    # RougeScorer.score(target, prediction)
    return float(_rouge_scorer().score(reference, prediction)["rougeL"].fmeasure)


def exact_match(prediction: str, references: Sequence[str]) -> float | None:
    return _best(prediction, references, _exact)


def token_f1(prediction: str, references: Sequence[str]) -> float | None:
    return _best(prediction, references, _f1)


def rouge_l(prediction: str, references: Sequence[str]) -> float | None:
    return _best(prediction, references, _rouge_l)


# ------------------------------------------------------------------------------------ citations


@dataclass(frozen=True, slots=True)
class CitationScores:
    #: None when nothing was cited.
    precision: float | None
    #: None when the question has no gold passage.
    recall: float | None


def citation_scores(cited_doc_ids: Iterable[str], gold: Mapping[str, int] | Iterable[str]) -> CitationScores:
    """Citations (document ids; repeats count once) against the gold passages (``{doc_id: grade}``
    with grade > 0, or a plain collection of ids)."""
    if isinstance(gold, Mapping):
        gold_ids = {doc_id for doc_id, grade in gold.items() if grade > 0}
    else:
        gold_ids = set(gold)
    cited = set(cited_doc_ids)
    hits = len(cited & gold_ids)
    return CitationScores(
        precision=hits / len(cited) if cited else None,
        recall=hits / len(gold_ids) if gold_ids else None,
    )


# ------------------------------------------------------------------------------------ abstention


@dataclass(frozen=True, slots=True)
class AbstentionScores:
    """Positive = abstained. ``None`` where the ratio is undefined (0 / 0)."""

    precision: float | None
    recall: float | None
    f1: float | None
    true_positives: int  # abstained on an unanswerable question
    false_positives: int  # abstained on an answerable one
    false_negatives: int  # answered an unanswerable one
    true_negatives: int  # answered an answerable one
    evaluated: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def abstention_scores(abstained: Mapping[str, bool], answerable: Mapping[str, bool | None]) -> AbstentionScores:
    """Over the questions in both mappings whose answerability is known (not None)."""
    tp = fp = fn = tn = 0
    for query_id, did_abstain in abstained.items():
        label = answerable.get(query_id)
        if label is None:
            continue
        unanswerable = not label
        if did_abstain and unanswerable:
            tp += 1
        elif did_abstain:
            fp += 1
        elif unanswerable:
            fn += 1
        else:
            tn += 1
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    if precision is None or recall is None:
        f1 = None
    else:
        f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return AbstentionScores(precision, recall, f1, tp, fp, fn, tn, tp + fp + fn + tn)

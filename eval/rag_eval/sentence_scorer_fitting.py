"""Fit the extractive answerer's sentence scorer (``rag_generator.sentence_scorer``) on labelled
sentences of shared data, through the served chain, and report it on held-out passages.

Rows: each question is asked as ``/v1/chat`` asks it (``rag_eval.served_chain``: its language named as
the gateway names it, the retriever's search, the reranker's default chain, the gateway's ``top_k``);
the passages the generator would get are cut into its evidence units and every eligible unit's
features are computed (``ExtractiveAnswerer.candidate_features``). A unit's label, 1 = it answers:

- XQuAD (any language): it lies in the gold paragraph and holds a gold answer span, by the offsets of
  ``xquad.<language>.json`` (the answer's text in the unit when the chunk cannot be placed in its paragraph);
- HotpotQA: it overlaps a supporting fact that holds the answer (yes/no questions are skipped: no
  sentence holds "yes");
- ClapNQ: it overlaps a sentence the annotators selected (answerable questions only).

Overlap is the folded shorter text inside the longer or rapidfuzz ``partial_ratio`` >= 90. A question
none of whose units is labelled 1 (retrieval missed, or the labels do not reach our units) teaches no
choice and is left out (counted).

Counterfactual copies (``<dataset>+cf``): the shared sets hold next to no sentence that is not evidence
(a quoted question, another edition of the asked event), so each question is asked a second time with
a page inserted after its gold passage that quotes the question and, when the question fixes a year
that an answering sentence states, that sentence with the year moved by one
(:func:`counterfactual_passages`); the page's sentences are labelled 0. The weights of the features
that say "not evidence" are bounded at 0 in the fit (``sentence_scorer.NON_POSITIVE``). Halves are by passage: a question's half is drawn from its gold
document's group (``calibration.group_halves``: XQuAD's article, the same in every language), so a
paragraph, its translations and its article's other paragraphs never sit in both halves. Each
dataset weighs the same in the fit (row weights ``1 / rows of its dataset``), whatever its size.

The selection margins are chosen on the fit half too: the pair that makes the most answers hold an
answering sentence without making answers longer, on average, than the hand-set weights and margins
of before (``HAND_SET``, kept here only as the baseline every report compares against).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
from rapidfuzz import fuzz

from rag_common.embedders import Embedder
from rag_common.schemas import Passage
from rag_common.sentences import sentence_spans
from rag_eval.answer_containment import contains_gold, document_group, normalise_answer, sample_questions
from rag_eval.calibration import Half, group_halves
from rag_eval.datasets.paths import datasets_dir
from rag_eval.datasets.types import Dataset, Query
from rag_eval.served_chain import Retrieved, open_served_chain
from rag_eval.stats import paired_delta
from rag_generator.evidence import EvidenceUnit, build_evidence
from rag_generator.extractive_answerer import ExtractiveAnswerer, choose_sentences
from rag_generator.sentence_features import FEATURE_NAMES, AskedQuestion
from rag_generator.sentence_scorer import SentenceScorer, fit_sentence_scorer
from rag_generator.settings import GeneratorSettings

#: The hand-set scoring this scorer replaces: weights of cosine (clipped at 0), lexical, rank prior,
#: position prior, then the neighbour and other margins. Only a baseline for the reports.
HAND_SET = {"cosine": 0.6, "lexical": 0.2, "rank_prior": 0.15, "position_prior": 0.05,
            "neighbour_margin": 0.1, "other_margin": 0.03}
MAX_SENTENCES = 3
#: The suffix of a counterfactual copy's dataset name (``counterfactual_passages``).
COUNTERFACTUAL = "+cf"
_OVERLAP = 90.0
_NEIGHBOUR_GRID = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)
_OTHER_GRID = (-1.0, 0.0, 0.01, 0.02, 0.05, 0.1, 0.2)


@dataclass(frozen=True)
class QuestionRows:
    """One question's candidates: features (rows in evidence order), labels, and where each sits."""

    dataset: str
    query_id: str
    group: str
    matrix: np.ndarray
    labels: np.ndarray
    positions: tuple[tuple[int, int], ...]  # (source, index) per row

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.query_id}"


# ------------------------------------------------------------------------------------------ labels


def overlaps(text: str, references: Sequence[str]) -> bool:
    """Whether ``text`` and one of ``references`` are the same sentence, give or take splitting."""
    mine = normalise_answer(text)
    for reference in references:
        theirs = normalise_answer(reference)
        if not mine or not theirs:
            continue
        shorter, longer = (mine, theirs) if len(mine) <= len(theirs) else (theirs, mine)
        if shorter in longer or fuzz.partial_ratio(shorter, longer) >= _OVERLAP:
            return True
    return False


def xquad_spans(language: str, root: Path | None = None) -> dict[str, list[tuple[int, int, str]]]:
    """``{question id: [(start, end, text)]}``: the gold answer spans in their paragraph (SQuAD offsets)."""
    path = datasets_dir(root) / "xquad" / language / f"xquad.{language}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        qa["id"]: [(a["answer_start"], a["answer_start"] + len(a["text"]), a["text"]) for a in qa["answers"]]
        for article in data["data"] for paragraph in article["paragraphs"] for qa in paragraph["qas"]
    }


def hotpot_facts(root: Path | None = None) -> dict[str, list[str]]:
    """``{question id: [supporting sentence that holds the answer]}`` (yes/no questions: none)."""
    path = datasets_dir(root) / "hotpotqa" / "hotpotqa_train.json"
    facts: dict[str, list[str]] = {}
    for record in json.loads(path.read_text(encoding="utf-8")):
        sentences = {title: lines for title, lines in record.get("context", [])}
        answer = str(record.get("answer", ""))
        found = []
        for title, index in record.get("supporting_facts", []):
            lines = sentences.get(title, [])
            if index < len(lines) and answer.lower() not in ("yes", "no") and contains_gold(lines[index], [answer]):
                found.append(lines[index])
        facts[str(record["_id"])] = found
    return facts


Labeller = Callable[[Query, EvidenceUnit], bool]


def labeller_for(dataset: Dataset) -> Labeller:
    """The dataset's sentence label (module docstring); raises ValueError for a dataset it cannot label."""
    name = dataset.name
    if name.startswith("xquad-"):
        spans = xquad_spans(name.removeprefix("xquad-"))

        def xquad(query: Query, unit: EvidenceUnit) -> bool:
            if unit.passage.doc_id not in dataset.relevant(query.id):
                return False
            document = dataset.corpus[unit.passage.doc_id].text
            offset = document.find(unit.passage.text)
            gold = [(s, e) for s, e, text in spans.get(query.id, []) if document[s:e] == text]
            if offset < 0 or not gold:
                return contains_gold(unit.text, query.answers)
            start, end = offset + unit.start, offset + unit.end
            return any(start <= s and e <= end for s, e in gold)

        return xquad
    if name == "hotpotqa":
        facts = hotpot_facts()
        return lambda query, unit: unit.passage.doc_id in dataset.relevant(query.id) and overlaps(unit.text, facts.get(query.id, []))
    if name.startswith("clapnq"):
        return lambda query, unit: overlaps(unit.text, query.metadata.get("selected_sentences") or [])
    raise ValueError(f"{name}: no sentence labels (supported: xquad-<language>, hotpotqa, clapnq)")


def labelled_questions(dataset: Dataset) -> list[Query]:
    """The questions a label can exist for: answerable, with a gold passage."""
    return [q for q in dataset.queries if q.answerable is not False and dataset.relevant(q.id)
            and (q.answers or q.metadata.get("selected_sentences"))]


# -------------------------------------------------------------------------------------------- rows


async def question_rows(
    dataset: Dataset, cache_dir: Path, embedder: Embedder, *, limit: int | None, seed: int, progress: bool = False,
) -> tuple[list[QuestionRows], dict[str, int]]:
    """Every labelled question's candidates through the served chain, and counts of what was left out;
    with each its counterfactual copy (``<dataset>+cf``, :func:`counterfactual_passage`)."""
    label = labeller_for(dataset)
    settings = GeneratorSettings(mode="extractive", gate_path="off")
    answerer = ExtractiveAnswerer.of(settings, embedder)
    questions = sample_questions(labelled_questions(dataset), limit, seed)
    found: list[QuestionRows] = []
    counts = {"questions": len(questions), "no_candidate": 0, "no_positive": 0, "counterfactual": 0,
              "counterfactual_years": 0}

    def rows(name: str, query: Query, passages: list[Passage], retrieved: Retrieved, synthetic: str = "") -> QuestionRows | None:
        units = build_evidence(passages, max_passages=settings.max_passages, max_passage_chars=settings.max_passage_chars)
        candidates, _ = answerer.candidate_features(
            query.text, units, query_vector=retrieved.query_embedding, language=retrieved.language.code)
        labels = np.asarray([int(unit.passage.chunk_id != synthetic and label(query, unit)) for unit, _ in candidates])
        if not candidates or not labels.any():
            return None
        return QuestionRows(
            name, query.id, document_group(min(dataset.relevant(query.id))),
            np.stack([features.vector() for _, features in candidates]), labels,
            tuple((unit.source, unit.index) for unit, _ in candidates),
        )

    async with open_served_chain(dataset, cache_dir, embedder, generator_settings=settings, progress=progress) as (chain, _):
        for query in questions:
            retrieved = await chain.retrieve(query.text)
            real = rows(dataset.name, query, retrieved.passages, retrieved)
            if real is None:
                counts["no_positive" if retrieved.passages else "no_candidate"] += 1
                continue
            found.append(real)
            made = counterfactual_passages(query, retrieved, dataset, label)
            if made is not None:
                passages, synthetic, altered_year = made
                copy = rows(f"{dataset.name}{COUNTERFACTUAL}", query, passages, retrieved, synthetic)
                if copy is not None:
                    found.append(copy)
                    counts["counterfactual"] += 1
                    counts["counterfactual_years"] += altered_year
    return found, counts


#: A chunk id suffix no real chunk has.
_CF = "#counterfactual"


def counterfactual_passages(
    query: Query, retrieved: Retrieved, dataset: Dataset, label: Labeller
) -> tuple[list[Passage], str, bool] | None:
    """The passages with a counterfactual page right after the gold one: the question quoted as a
    sentence (an FAQ heading, a forum post) and, when the question names a year that an answering
    sentence states, that sentence with the year moved by one (another edition of the event: the
    robustness benchmarks' substitution). Its sentences are labelled 0 whatever they hold, which is what
    gives the scorer's ``question`` and ``contradicts`` features data to be fitted on: the shared sets
    hold next to no quoted question and no wrong edition. Returns (passages, its chunk id, whether a
    year was moved), or None when the gold passage did not reach the generator."""
    gold = [i for i, p in enumerate(retrieved.passages) if p.doc_id in dataset.relevant(query.id)]
    if not gold:
        return None
    passage = retrieved.passages[gold[0]]
    asked = AskedQuestion.of(query.text, retrieved.language.code)
    sentences = [query.text]
    moved = False  # one moved sentence at most
    for start, end in sentence_spans(passage.text):
        text = passage.text[start:end]
        for value in sorted(asked.constraints.years):
            pattern = re.compile(rf"(?<!\d){value}(?!\d)")
            if not moved and pattern.search(text) and contains_gold(text, query.answers):
                sentences.append(pattern.sub(str(value + 1), text))
                moved = True
    page = passage.model_copy(update={"chunk_id": passage.chunk_id + _CF, "text": " ".join(sentences),
                                      "sentence_vectors": None})
    passages = list(retrieved.passages)
    passages.insert(gold[0] + 1, page)
    return passages, page.chunk_id, moved


def save_rows(rows: Sequence[QuestionRows], path: Path) -> None:
    """The rows as JSON, so a refit (other ``c``, other half) does not ask every question again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"features": list(FEATURE_NAMES), "rows": [
        {"dataset": r.dataset, "query_id": r.query_id, "group": r.group, "matrix": r.matrix.tolist(),
         "labels": r.labels.tolist(), "positions": [list(p) for p in r.positions]} for r in rows]}), encoding="utf-8")


def load_rows(path: Path) -> list[QuestionRows]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("features") != list(FEATURE_NAMES):
        raise ValueError(f"{path}: rows of other features ({data.get('features')}); delete it to recompute")
    return [QuestionRows(r["dataset"], r["query_id"], r["group"], np.asarray(r["matrix"], dtype=np.float64),
                         np.asarray(r["labels"], dtype=int), tuple(tuple(p) for p in r["positions"])) for r in data["rows"]]


def halves_of(rows: Sequence[QuestionRows], seed: int) -> dict[str, Half]:
    return group_halves({r.key: r.group for r in rows}, seed)


# ------------------------------------------------------------------------------- scoring and choice


def hand_set_scores(matrix: np.ndarray) -> np.ndarray:
    """The baseline's score of each row (``HAND_SET``)."""
    column = {name: matrix[:, i] for i, name in enumerate(FEATURE_NAMES)}
    return (HAND_SET["cosine"] * np.maximum(column["cosine"], 0.0) + HAND_SET["lexical"] * column["lexical"]
            + HAND_SET["rank_prior"] * column["rank_prior"] + HAND_SET["position_prior"] * column["position_prior"])


def chosen(rows: QuestionRows, scores: np.ndarray, neighbour: float, other: float) -> tuple[bool, bool, int]:
    """(best sentence answers, answer holds an answering sentence, sentences in the answer)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], rows.positions[i]))
    ranked = [(float(scores[i]), *rows.positions[i]) for i in order]
    picked = [order[i] for i in choose_sentences(ranked, max_sentences=MAX_SENTENCES,
                                                 neighbour_margin=neighbour, other_margin=other)]
    return bool(rows.labels[order[0]]), bool(rows.labels[picked].any()), len(picked)


def choose_margins(rows: Sequence[QuestionRows], scores: Sequence[np.ndarray], max_sentences: float) -> tuple[float, float]:
    """The grid's (neighbour, other) margins that put an answering sentence in the most answers with
    at most ``max_sentences`` sentences per answer on average (ties: the shorter answers)."""
    best: tuple[float, float, float, float] | None = None  # (-contains, length, neighbour, other)
    for neighbour, other in product(_NEIGHBOUR_GRID, _OTHER_GRID):
        outcomes = [chosen(r, s, neighbour, other) for r, s in zip(rows, scores)]
        length = float(np.mean([n for _, _, n in outcomes]))
        if length > max_sentences:
            continue
        key = (-float(np.mean([c for _, c, _ in outcomes])), length, neighbour, other)
        best = key if best is None or key < best else best
    if best is None:
        return 0.0, -1.0
    return best[2], best[3]


def fit_half(rows: Sequence[QuestionRows], halves: dict[str, Half], half: Half, *, provenance: dict, c: float = 1.0) -> dict:
    """The scorer's parameters fitted on ``half`` (datasets weighted equally), margins chosen on it."""
    fit = [r for r in rows if halves[r.key] == half]
    sizes: dict[str, int] = {}
    for r in fit:
        sizes[r.dataset] = sizes.get(r.dataset, 0) + len(r.labels)
    matrix = np.concatenate([r.matrix for r in fit])
    labels = np.concatenate([r.labels for r in fit])
    weights = np.concatenate([np.full(len(r.labels), len(matrix) / (len(sizes) * sizes[r.dataset])) for r in fit])
    params = fit_sentence_scorer(matrix, labels, sample_weight=weights, neighbour_margin=0.0, other_margin=-1.0,
                                 provenance=provenance, c=c)
    scorer = SentenceScorer(params)
    real = [r for r in fit if not r.dataset.endswith(COUNTERFACTUAL)]  # answers are chosen on real passages
    baseline_length = float(np.mean([chosen(r, hand_set_scores(r.matrix), HAND_SET["neighbour_margin"],
                                            HAND_SET["other_margin"])[2] for r in real]))
    neighbour, other = choose_margins(real, [scorer.probabilities(r.matrix) for r in real], baseline_length)
    params.update(neighbour_margin=neighbour, other_margin=other)
    params["fitted_on"]["fit"] = {"questions": len(fit), "rows_per_dataset": sizes,
                                  "hand_set_mean_sentences": round(baseline_length, 3)}
    SentenceScorer(params)
    return params


def held_out_report(rows: Sequence[QuestionRows], halves: dict[str, Half], params: dict, fit_on: Half) -> dict:
    """On the other half, per dataset and pooled: best sentence answers, answer holds an answering
    sentence, mean sentences; fitted scorer against the hand-set baseline (paired bootstrap 95 % CIs)."""
    scorer = SentenceScorer(params)
    held = [r for r in rows if halves[r.key] != fit_on]
    report: dict[str, Any] = {"fit_half": fit_on, "held_out_questions": len(held)}
    for name in ["all", "real", *sorted({r.dataset for r in held})]:
        mine = [r for r in held if name in ("all", r.dataset) or name == "real" and not r.dataset.endswith(COUNTERFACTUAL)]
        fitted = {r.key: chosen(r, scorer.probabilities(r.matrix), scorer.neighbour_margin, scorer.other_margin) for r in mine}
        base = {r.key: chosen(r, hand_set_scores(r.matrix), HAND_SET["neighbour_margin"], HAND_SET["other_margin"]) for r in mine}
        entry: dict[str, Any] = {"questions": len(mine)}
        for i, metric in enumerate(("best_answers", "answer_holds_answer", "sentences")):
            after = {k: float(v[i]) for k, v in fitted.items()}
            before = {k: float(v[i]) for k, v in base.items()}
            entry[metric] = {"scorer": round(float(np.mean(list(after.values()))), 4),
                             "hand_set": round(float(np.mean(list(before.values()))), 4),
                             "delta": paired_delta(after, before).to_dict()}
        report[name] = entry
    return report


def coefficients(params: dict) -> dict[str, float]:
    """The fitted weights per feature (on standardised features), for the report."""
    return {name: round(w, 4) for name, w in zip(params["features"], params["coef"])}

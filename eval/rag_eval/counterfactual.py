"""A counterfactual (conflicting sources) set built from a short-answer dataset.

The construction follows the published robustness benchmarks: Longpre et al. 2021 ("Entity-Based
Knowledge Conflicts in Question Answering", EMNLP) replace *every* occurrence of a question's answer
in its context passage with a substitute of the same type, drawn from the answers of other questions
of the same dataset ("corpus substitution"); RGB (Chen et al. 2023, "Benchmarking Large Language
Models in Retrieval-Augmented Generation") plants documents that state a false fact next to the
question and asks whether the system notices the error. Here, unlike both, the original passage is
kept: the copy with the false value sits next to it in the same corpus, so the two sources disagree.

For each selected question (:func:`build_counterfactual`):

- its answering passage is the first gold passage (qrels) in which its first findable gold answer
  occurs (case-blind, Romanian's cedilla and comma-below letters alike, whole words);
- the answer's kind is ``kind_of(answer, language)`` (``rag_generator.answer_kinds.value_kind``);
  questions whose answer is UNKNOWN, DESCRIPTION or YES_NO, or does not occur, are skipped (counted);
- the false value: a DATE or NUMBER written with digits is perturbed (:func:`perturb_value`: a year
  moved by 1-10 years, a decade by 10 or 20, another number of the same magnitude, written in the
  original's format); anything else (names, places, organisations, numbers in words) is replaced by
  the gold answer of the same kind of a *different* question of the same dataset and language, one
  that does not occur in the passage and neither contains nor is contained in the true value (when
  the question asks for that kind, ``wanted_kind``, preferably a donor question that asks for it too);
- the copy (``<passage id>-cf``) is the passage with every occurrence of the true value replaced by
  the false one (title too); at most one copy per passage (one planted question per passage).

As many untouched *control* questions (same eligibility, passages never copied) are added, so a
conflict detector's precision can be measured (a conflict reported on a control is a false alarm).
Questions are split into ``fit`` and ``held-out`` halves by passage: passages linked by a question or
by their document group (XQuAD's article) stay together, so no passage of a fitting question is
seen by a held-out one. Everything is seeded and depends on the ids, not on order.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rag_eval.answer_containment import document_group, normalise_answer
from rag_eval.datasets.types import Corpus, Dataset, Document, Query

#: ``kind_of(value, language)`` → an AnswerKind name (``rag_generator.answer_kinds.value_kind``).
KindOf = Callable[[str, str | None], Any]
#: Kinds whose answers get a planted conflict.
PLANTED_KINDS = ("PERSON", "PLACE", "DATE", "NUMBER", "ORGANISATION")
#: Kinds that digits are perturbed for (else substituted like names).
NUMERIC_KINDS = ("DATE", "NUMBER")
FIT, HELD_OUT = "fit", "held-out"
COPY_SUFFIX = "-cf"
CONFLICTS_FILE = "conflicts.jsonl"
MANIFEST_FILE = "manifest.json"

_VARIANTS = {"ș": "[șş]", "ş": "[șş]", "ț": "[țţ]", "ţ": "[țţ]", "Ș": "[ȘŞ]", "Ş": "[ȘŞ]", "Ț": "[ȚŢ]", "Ţ": "[ȚŢ]"}
#: A digit group: digits with thousands/decimal separators inside ("1,500.25", "1.500", "2016").
_DIGIT_GROUP = re.compile(r"\d+(?:[.,\u00a0\u202f]\d+)*")


def kind_name(kind: Any) -> str:
    """An AnswerKind (a StrEnum) or a plain string as an upper-case name (``"person"`` → ``"PERSON"``)."""
    return str(kind).rsplit(".", 1)[-1].upper()


@dataclass(frozen=True)
class ConflictRecord:
    """One question of the set. ``false_value`` None: a control (nothing planted, no copy)."""

    question_id: str
    kind: str
    true_value: str
    false_value: str | None
    original_id: str
    copy_id: str | None
    split: str
    method: str = ""  # "perturbed" | "substituted" | "" (control)
    wanted: str = ""  # the kind the question asks for (``wanted_kind``), "" when not asked

    @property
    def planted(self) -> bool:
        return self.false_value is not None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "planted": self.planted}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> ConflictRecord:
        return cls(**{name: record[name] for name in cls.__dataclass_fields__ if name in record})


@dataclass
class CounterfactualSet:
    dataset: Dataset
    records: list[ConflictRecord]
    language: str | None
    skipped: Counter[str] = field(default_factory=Counter)

    def counts(self) -> dict[str, Any]:
        planted = [r for r in self.records if r.planted]
        controls = [r for r in self.records if not r.planted]
        return {
            "planted": len(planted),
            "controls": len(controls),
            "planted_by_kind": dict(sorted(Counter(r.kind for r in planted).items())),
            "controls_by_kind": dict(sorted(Counter(r.kind for r in controls).items())),
            "planted_by_method": dict(sorted(Counter(r.method for r in planted).items())),
            "planted_question_wants_the_kind": sum(r.wanted == r.kind for r in planted),
            "by_split": {s: {"planted": sum(r.planted for r in self.records if r.split == s),
                             "controls": sum(not r.planted for r in self.records if r.split == s)} for s in (FIT, HELD_OUT)},
            "skipped": dict(sorted(self.skipped.items())),
            "documents": len(self.dataset.corpus),
        }


# ------------------------------------------------------------------------------- finding a value


def value_pattern(value: str) -> re.Pattern[str]:
    """``value`` anywhere as whole words, case-blind, cedilla/comma-below alike, any run of spaces."""
    parts = []
    for ch in value.strip():
        parts.append(r"\s+" if ch.isspace() else _VARIANTS.get(ch, re.escape(ch)))
    body = re.sub(r"(?:\\s\+)+", r"\\s+", "".join(parts))
    start = r"(?<!\w)" if value.strip()[:1].isalnum() else ""
    end = r"(?!\w)" if value.strip()[-1:].isalnum() else ""
    return re.compile(start + body + end, re.IGNORECASE)


def occurs(text: str, value: str) -> bool:
    return bool(value.strip()) and value_pattern(value).search(text) is not None


def replace_all(text: str, value: str, replacement: str) -> str:
    return value_pattern(value).sub(lambda _: replacement, text)


def _same_value(a: str, b: str) -> bool:
    """Equal, or one inside the other as whole words (then "states false" could not be told apart)."""
    na, nb = f" {normalise_answer(a)} ", f" {normalise_answer(b)} "
    return na in nb or nb in na


# ------------------------------------------------------------------------------- false values


def _perturb_digits(digits: str, rng: random.Random, *, year: bool, day: bool) -> str | None:
    """Another digit string of the same length: a year ±1-10 (a decade ±10/20), a day 1-28, else the
    significant digits moved by up to a quarter (leading and trailing zeros kept)."""
    value = int(digits)
    if year:
        steps = [10, 20] if value % 10 == 0 else list(range(1, 11))
        new = value + rng.choice(steps) * rng.choice((-1, 1))
        return str(new) if len(str(new)) == len(digits) else None
    if day:  # another day written with as many digits
        days = [d for d in range(1, 29) if d != value and len(str(d)) == len(str(value))]
        return str(rng.choice(days)).zfill(len(digits)) if days else None
    stripped = digits.lstrip("0")
    if not stripped:
        return None
    lead = len(digits) - len(stripped)
    core = stripped.rstrip("0")
    trail = len(stripped) - len(core)
    number = int(core)
    for _ in range(20):
        if len(core) == 1:
            new = rng.choice([d for d in range(1, 10) if d != number and abs(d - number) <= 3])
        else:
            new = number + rng.randint(1, max(1, number // 4)) * rng.choice((-1, 1))
        if new > 0 and new != number and len(str(new)) == len(core):
            return "0" * lead + str(new) + "0" * trail
    return None


def perturb_value(value: str, kind: str, rng: random.Random) -> str | None:
    """``value`` with its digit groups changed (see :func:`_perturb_digits`), written in the same format
    (separators and surrounding words kept); None when it has no digits. In a DATE with a year only
    the year changes; without one, a day-sized number does."""
    groups = list(_DIGIT_GROUP.finditer(value))
    if not groups:
        return None
    digits_of = [re.sub(r"\D", "", g.group()) for g in groups]
    is_year = [len(d) == 4 and 1000 <= int(d) <= 2999 for d in digits_of]
    has_year = kind == "DATE" and any(is_year)
    out, last = [], 0
    for group, digits, year in zip(groups, digits_of, is_year, strict=True):
        out.append(value[last:group.start()])
        last = group.end()
        text = group.group()
        if kind == "DATE" and has_year and not year:
            out.append(text)
            continue
        new = _perturb_digits(digits, rng, year=kind == "DATE" and year,
                              day=kind == "DATE" and not has_year and int(digits) <= 31)
        if new is None:
            return None
        chars = iter(new)  # write the new digits into the old digit positions: the format stays
        out.append("".join(next(chars) if ch.isdigit() else ch for ch in text))
    out.append(value[last:])
    return "".join(out)


@dataclass(frozen=True)
class _Candidate:
    query: Query
    answer: str
    passage_id: str
    gold: tuple[str, ...]
    kind: str
    wanted: str = ""


def _substitute(candidate: _Candidate, pool: Sequence[_Candidate], passage: str, rng: random.Random) -> str | None:
    """Another question's answer of the same kind, from another passage, absent from ``passage``; when
    the question asks for that kind, preferably the answer of a question that asks for it too (two
    signals agreeing: "Who ...?" gets another "Who ...?" question's name, not any capitalised phrase)."""
    donors = [
        other for other in pool
        if other.kind == candidate.kind and other.query.id != candidate.query.id
        and not set(other.gold) & set(candidate.gold)
        and not _same_value(other.answer, candidate.answer) and not occurs(passage, other.answer)
    ]
    if candidate.wanted == candidate.kind:
        donors = [d for d in donors if d.wanted == candidate.kind] or donors
    options = sorted({d.answer for d in donors})
    return rng.choice(options) if options else None


def false_value(candidate: _Candidate, pool: Sequence[_Candidate], passage: str, seed: int) -> tuple[str, str] | None:
    """(false value, method) for ``candidate`` in ``passage``, or None when none fits."""
    rng = random.Random(f"counterfactual:{seed}:{candidate.query.id}")
    if candidate.kind in NUMERIC_KINDS:
        for _ in range(20):
            new = perturb_value(candidate.answer, candidate.kind, rng)
            if new is None:
                break
            if not _same_value(new, candidate.answer) and not occurs(passage, new):
                return new, "perturbed"
    new = _substitute(candidate, pool, passage, rng)
    return (new, "substituted") if new is not None else None


# ------------------------------------------------------------------------------- the set


def _candidates(
    dataset: Dataset, language: str | None, kind_of: KindOf, wanted_of: KindOf | None, skipped: Counter[str]
) -> list[_Candidate]:
    found = []
    for query in sorted(dataset.queries, key=lambda q: q.id):
        if not query.answers or query.answerable is False:
            skipped["no answer"] += 1
            continue
        gold = tuple(sorted(dataset.relevant(query.id)))
        hit = next(((a, d) for a in query.answers for d in gold if d in dataset.corpus and occurs(dataset.corpus[d].text, a)), None)
        if hit is None:
            skipped["answer not in its passage"] += 1
            continue
        kind = kind_name(kind_of(hit[0], language))
        if kind not in PLANTED_KINDS:
            skipped[f"kind {kind}"] += 1
            continue
        wanted = kind_name(wanted_of(query.text, language)) if wanted_of is not None else ""
        found.append(_Candidate(query, hit[0], hit[1], gold, kind, wanted))
    return found


def _controls(candidates: Sequence[_Candidate], planted_ids: set[str], copied: set[str], wanted: int) -> list[_Candidate]:
    return [c for c in candidates if c.query.id not in planted_ids and not set(c.gold) & copied][:wanted]


def _splits(chosen: Sequence[_Candidate], seed: int) -> dict[str, str]:
    """question id → fit | held-out: passages joined by a question or a document group stay together."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    for c in chosen:
        for doc in c.gold:
            union(f"doc:{doc}", f"group:{document_group(doc)}")
            union(f"doc:{doc}", f"doc:{c.gold[0]}")
    roots = sorted({find(f"doc:{c.gold[0]}") for c in chosen})
    random.Random(f"counterfactual-split:{seed}").shuffle(roots)
    fit = set(roots[: len(roots) // 2])
    return {c.query.id: FIT if find(f"doc:{c.gold[0]}") in fit else HELD_OUT for c in chosen}


def build_counterfactual(
    dataset: Dataset, *, language: str | None, kind_of: KindOf, limit: int | None = None, seed: int = 0,
    wanted_of: KindOf | None = None,
) -> CounterfactualSet:
    """Up to ``limit`` planted questions and as many controls (module docstring); the corpus is the
    whole original corpus plus the copies. ``wanted_of(question, language)`` (``wanted_kind``), when
    given, is recorded and steers substitutes. Raises ValueError when nothing can be planted."""
    skipped: Counter[str] = Counter()
    candidates = _candidates(dataset, language, kind_of, wanted_of, skipped)
    random.Random(f"counterfactual:{seed}").shuffle(candidates)
    planted: list[tuple[_Candidate, str, str]] = []
    used: set[str] = set()
    for candidate in candidates:
        if limit is not None and len(planted) >= limit:
            break
        if candidate.passage_id in used:
            continue
        made = false_value(candidate, candidates, dataset.corpus[candidate.passage_id].text, seed)
        if made is None:
            skipped["no false value"] += 1
            continue
        planted.append((candidate, *made))
        used.add(candidate.passage_id)
    while planted:  # as many controls as planted questions, from passages never copied
        copied = {c.passage_id for c, _, _ in planted}
        controls = _controls(candidates, {c.query.id for c, _, _ in planted}, copied, len(planted))
        if len(controls) >= len(planted):
            break
        planted.pop()
    if not planted:
        raise ValueError(f"{dataset.name}: no question could get a planted conflict ({dict(skipped)})")
    splits = _splits([c for c, _, _ in planted] + controls, seed)

    corpus = Corpus(dataset.corpus.documents())
    records: list[ConflictRecord] = []
    for candidate, false, method in planted:
        original = dataset.corpus[candidate.passage_id]
        copy_id = next(f"{original.id}{COPY_SUFFIX}{n or ''}" for n in range(len(corpus) + 1)
                       if f"{original.id}{COPY_SUFFIX}{n or ''}" not in corpus)  # "-cf2" only if "-cf" is taken
        corpus.add(Document(id=copy_id, title=replace_all(original.title, candidate.answer, false),
                            text=replace_all(original.text, candidate.answer, false)))
        records.append(ConflictRecord(candidate.query.id, candidate.kind, candidate.answer, false, original.id, copy_id,
                                      splits[candidate.query.id], method, candidate.wanted))
    for control in controls:
        records.append(ConflictRecord(control.query.id, control.kind, control.answer, None, control.passage_id, None,
                                      splits[control.query.id], "", control.wanted))
    records.sort(key=lambda r: r.question_id)
    by_id = {r.question_id: r for r in records}
    queries = [Query(id=q.id, text=q.text, answers=(by_id[q.id].true_value,), answerable=True,
                     metadata={"counterfactual": by_id[q.id].to_json()})
               for q in sorted(dataset.queries, key=lambda q: q.id) if q.id in by_id]
    qrels = {r.question_id: {**dataset.relevant(r.question_id), **({r.copy_id: 0} if r.copy_id else {})} for r in records}
    name = f"{dataset.name}-counterfactual{seed}"
    return CounterfactualSet(Dataset(name, corpus, queries, qrels), records, language, skipped)


# ------------------------------------------------------------------------------- files


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_counterfactual(cf: CounterfactualSet, out: Path, *, source: str, seed: int, limit: int | None) -> Path:
    """The set as a BEIR folder ``ragctl eval -d OUT --answers`` reads (corpus.jsonl, queries.jsonl with
    each question's record in its metadata, answers.jsonl = the true values, qrels/test.tsv: the
    original 1, the copy 0), plus ``conflicts.jsonl`` (the records) and ``manifest.json`` (counts)."""
    out = Path(out)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    dataset = cf.dataset
    _write_jsonl(out / "corpus.jsonl", ({"_id": d.id, "title": d.title, "text": d.text} for d in dataset.corpus.values()))
    _write_jsonl(out / "queries.jsonl", ({"_id": q.id, "text": q.text, "metadata": dict(q.metadata)} for q in dataset.queries))
    _write_jsonl(out / "answers.jsonl", ({"_id": q.id, "answers": list(q.answers)} for q in dataset.queries))
    _write_jsonl(out / CONFLICTS_FILE, (r.to_json() for r in cf.records))
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{qid}\t{doc}\t{grade}" for qid, judged in dataset.qrels.items() for doc, grade in judged.items()]
    (out / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = {"source": source, "language": cf.language, "seed": seed, "limit": limit, **cf.counts()}
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def load_conflicts(path: Path) -> list[ConflictRecord]:
    """The records of a ``conflicts.jsonl`` (a file, or the folder that holds it)."""
    path = Path(path)
    if path.is_dir():
        path = path / CONFLICTS_FILE
    if not path.is_file():
        raise ValueError(f"missing {path}")
    return [ConflictRecord.from_json(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def served_kinds() -> tuple[KindOf, KindOf]:
    """The generator's ``value_kind`` and ``wanted_kind`` (imported here: the builder needs no generator)."""
    from rag_generator.answer_kinds import value_kind, wanted_kind

    return value_kind, wanted_kind

"""Scoring served answers on the counterfactual set (``rag_eval.counterfactual``), pure functions.

Per question, given its :class:`ConflictRecord`:

- :func:`states_true` / :func:`states_false`: the answer text holds the true / the planted false value
  as whole words, case- and diacritic-blind, numbers normalised (thousands separators dropped, a
  decimal comma read as a point: "1,500" = "1.500" = "1 500" = "1500", "6,5" = "6.5");
  :func:`states_only_false`: the false one and not the true one (the answer was misled);
- :func:`conflict_detected`: the response's ``conflict`` (``{"values": [{"value", "citations"}]}`` or
  None) names the true value in one entry and the false value in another, an entry naming a value when
  one holds the other as whole words ("30%" names "up to 30%") and it does not fit the other value too;
  :func:`conflict_reported`: it holds at least two values (on a control question, a false alarm).

:func:`summarise_conflicts` aggregates per split (``all``, ``fit``, ``held-out``): over planted
questions the shares stating true, false, only false, abstained, and conflict recall (also among
those whose original and copy were both among the passages given to the generator, and both cited);
precision = detected / reported over planted and control questions; false alarms on the controls.
RGB's counterfactual testbed reports the analogous error detection rate (recall here) and error
correction rate (an answer with the true value despite the false document: ``states_true``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rag_common.languages import fold_diacritics
from rag_eval.answer_containment import normalise_answer
from rag_eval.counterfactual import FIT, HELD_OUT, ConflictRecord
from rag_eval.stats import DEFAULT_RESAMPLES, paired_delta

#: A number written with thousands separators (one kind of separator, groups of three).
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:([,.\u00a0\u202f ])\d{3})(?:\1\d{3})*(?!\d)")


def comparable(text: str) -> str:
    """Markers dropped, thousands separators dropped, then :func:`normalise_answer`, diacritics folded."""
    text = _THOUSANDS.sub(lambda m: re.sub(r"\D", "", m.group()), text)
    return fold_diacritics(normalise_answer(text))


def states(text: str, value: str | None) -> bool:
    """``value`` occurs in ``text`` as whole words, both :func:`comparable`."""
    needle = comparable(value or "")
    return bool(needle) and f" {needle} " in f" {comparable(text)} "


def states_true(answer: str, record: ConflictRecord) -> bool:
    return states(answer, record.true_value)


def states_false(answer: str, record: ConflictRecord) -> bool:
    return record.planted and states(answer, record.false_value)


def states_only_false(answer: str, record: ConflictRecord) -> bool:
    return states_false(answer, record) and not states_true(answer, record)


def _values(conflict: Mapping[str, Any] | None) -> list[str]:
    if not conflict:
        return []
    return [str(v.get("value", "")) for v in conflict.get("values") or [] if isinstance(v, Mapping)]


def conflict_reported(conflict: Mapping[str, Any] | None) -> bool:
    """The response says its sources disagree: at least two values."""
    return len(_values(conflict)) >= 2


def names(entry: str, value: str | None, other: str | None) -> bool:
    """A conflict entry names ``value`` rather than ``other``: one holds the other as whole words (a
    detector may quote "30%" of "up to 30%", or "the 30% figure"), and it does not fit ``other`` too."""

    def fits(candidate: str | None) -> bool:
        return states(entry, candidate) or (bool(comparable(entry)) and states(candidate or "", entry))

    return fits(value) and not fits(other)


def conflict_detected(conflict: Mapping[str, Any] | None, record: ConflictRecord) -> bool:
    """The conflict names the true value in one entry and the planted false value in another (:func:`names`)."""
    if not record.planted:
        return False
    values = _values(conflict)
    true_at = {i for i, v in enumerate(values) if names(v, record.true_value, record.false_value)}
    false_at = {i for i, v in enumerate(values) if names(v, record.false_value, record.true_value)}
    return any(i != j for i in true_at for j in false_at)


def score_response(
    record: ConflictRecord, *, answer: str, abstained: bool, conflict: Mapping[str, Any] | None,
    passages: Iterable[str], cited: Iterable[str],
) -> dict[str, Any]:
    """One question's row: ``passages`` / ``cited`` are the document ids the generator got / cited."""
    text = "" if abstained else answer
    given, quoted = set(passages), set(cited)
    both = {record.original_id, record.copy_id} if record.copy_id else set()
    return {
        "planted": record.planted,
        "split": record.split,
        "kind": record.kind,
        "wanted": record.wanted,
        "abstained": abstained,
        "states_true": states_true(text, record),
        "states_false": states_false(text, record),
        "states_only_false": states_only_false(text, record),
        "conflict_reported": conflict_reported(conflict),
        "conflict_detected": conflict_detected(conflict, record),
        "both_given": bool(both) and both <= given,
        "both_cited": bool(both) and both <= quoted,
    }


def _share(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any]:
    hits = sum(bool(r[key]) for r in rows)
    return {"value": round(hits / len(rows), 4) if rows else None, "count": hits, "n": len(rows)}


def _aggregate(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    planted = [r for r in rows if r["planted"]]
    controls = [r for r in rows if not r["planted"]]
    reported = [r for r in rows if r["conflict_reported"]]
    return {
        "planted": len(planted),
        "controls": len(controls),
        **{key: _share(planted, key) for key in ("states_true", "states_false", "states_only_false", "abstained",
                                                 "both_given", "both_cited")},
        "conflict_recall": _share(planted, "conflict_detected"),
        "conflict_recall_both_given": _share([r for r in planted if r["both_given"]], "conflict_detected"),
        "conflict_recall_both_cited": _share([r for r in planted if r["both_cited"]], "conflict_detected"),
        "conflict_precision": _share(reported, "conflict_detected"),
        "control_false_alarms": _share(controls, "conflict_reported"),
        "control_states_true": _share(controls, "states_true"),
        "control_abstained": _share(controls, "abstained"),
    }


def summarise_conflicts(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The aggregates of :func:`score_response` rows, over all questions and per split."""
    return {"all": _aggregate(rows), **{split: _aggregate([r for r in rows if r["split"] == split]) for split in (FIT, HELD_OUT)}}


#: Per planted question, compared before/after by :func:`paired_conflicts`.
PAIRED = ("states_true", "states_false", "states_only_false", "abstained", "conflict_detected")


def paired_conflicts(
    rows: Mapping[str, Mapping[str, Any]], baseline: Mapping[str, Mapping[str, Any]], *, split: str = "all",
    resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """``rows`` − ``baseline`` (both ``{question id: score_response row}``, e.g. after and before a change)
    on the questions both have, of ``split`` (``all``, ``fit``, ``held-out``): paired bootstrap 95 % CIs of
    :data:`PAIRED` over planted questions, and of false alarms over controls."""

    def values(source: Mapping[str, Mapping[str, Any]], key: str, planted: bool) -> dict[str, float]:
        return {q: float(r[key]) for q, r in source.items() if r["planted"] == planted and split in ("all", r["split"])}

    out = {key: paired_delta(values(rows, key, True), values(baseline, key, True), resamples=resamples, seed=seed).to_dict()
           for key in PAIRED}
    out["control_false_alarms"] = paired_delta(values(rows, "conflict_reported", False), values(baseline, "conflict_reported", False),
                                               resamples=resamples, seed=seed).to_dict()
    return out


def _cell(share: Mapping[str, Any]) -> str:
    return "–" if share["value"] is None else f"{100 * share['value']:.1f} % ({share['count']}/{share['n']})"


def conflict_table(named: Sequence[tuple[str, Mapping[str, Any]]], split: str = HELD_OUT) -> str:
    """One Markdown row per (dataset, :func:`summarise_conflicts` result), on ``split``."""
    lines = [
        f"| dataset ({split}) | planted / controls | states true | states false | only false | abstained "
        "| conflict recall | recall, both cited | precision | control false alarms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, summary in named:
        s = summary[split]
        lines.append(
            f"| {name} | {s['planted']} / {s['controls']} | {_cell(s['states_true'])} | {_cell(s['states_false'])} "
            f"| {_cell(s['states_only_false'])} | {_cell(s['abstained'])} | {_cell(s['conflict_recall'])} "
            f"| {_cell(s['conflict_recall_both_cited'])} | {_cell(s['conflict_precision'])} "
            f"| {_cell(s['control_false_alarms'])} |"
        )
    return "\n".join(lines)

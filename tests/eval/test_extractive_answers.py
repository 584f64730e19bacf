"""``ragctl eval -d FOLDER --answers`` end to end on a five-document folder with answers.jsonl: the
real in-process chain (retriever runtime over an embedded index, the reranker's default chain, the
generator's runtime in extractive mode), the summary and the off-topic index built without the
held-out documents."""

from __future__ import annotations

import json
from pathlib import Path

from rag_eval.answer_containment import document_group
from rag_eval.extractive_answers import RUN
from ragctl.eval_command import compare_summaries, run_eval

DOCUMENTS = {
    "library-0": "The Quillfeather Library opened in 1923. It holds forty thousand maritime charts.",
    "library-1": "The Quillfeather Library is run by a harbour trust. Its reading room seats ninety people.",
    "rocket-0": "The Fjord-2 rocket first flew in 2019. It was built by Nordlys Aerospace in Tromsø.",
    "rocket-1": "The Fjord-2 burns kerosene and liquid oxygen. Its second stage carries three tonnes to orbit.",
    "basil-0": "Basil needs six hours of sun a day. Its soil should be kept moist but never wet.",
}
QUESTIONS = {
    "q1": ("When did the Quillfeather Library open?", "library-0", ["1923"]),
    "q2": ("How many people does the Quillfeather reading room seat?", "library-1", ["ninety", "90"]),
    "q3": ("Who built the Fjord-2 rocket?", "rocket-0", ["Nordlys Aerospace"]),
    "q4": ("What fuel does the Fjord-2 burn?", "rocket-1", ["kerosene"]),
    "q5": ("How many hours of sun does basil need?", "basil-0", ["six hours", "6 hours"]),
}


def write_folder(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in DOCUMENTS.items()), encoding="utf-8"
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": text}) + "\n" for q, (text, _, _) in QUESTIONS.items()), encoding="utf-8"
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{doc}\t1\n" for q, (_, doc, _) in QUESTIONS.items())
    )
    (root / "answers.jsonl").write_text(
        "".join(json.dumps({"_id": q, "corpus_id": doc, "answers": gold}) + "\n" for q, (_, doc, gold) in QUESTIONS.items()),
        encoding="utf-8",
    )
    return root


def test_answers_command_runs_the_served_chain_and_scores_containment(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "tiny")
    reports = tmp_path / "reports"
    lines: list[str] = []
    done = run_eval(
        datasets=[str(folder)], runs=[], ablation=False, limit=None, reports=reports, llm=False, corpus_sample=None,
        ks="1,5", candidates=None, top_k=None, adaptive_limit=1, resamples=200, seed=0, plots=False, progress=False,
        echo=lines.append, answers=True, off_topic=10,
    )
    assert done == 1
    path = reports / "tiny" / f"{RUN}.json"
    summary = json.loads(path.read_text(encoding="utf-8"))
    records = {r["query_id"]: r for r in summary["questions"]}
    assert set(records) == set(QUESTIONS) and summary["evaluated"] == 5 and summary["errors"] == 0
    for qid, record in records.items():
        assert record["gold_answers"] == QUESTIONS[qid][2]
        assert record["language"] == "en"  # named as the gateway names it, and passed on
        assert record["passages"] and record["gold_in_passages"]
        # The score is the answer's: contains a gold answer exactly when it was answered and holds one.
        holds = any(g.casefold() in record["answer"].casefold() for g in record["gold_answers"])
        assert record["contains"] == (not record["abstained"] and holds)
    assert records["q1"]["contains"], records["q1"]  # a one-sentence fact, asked in the document's words
    per_query = summary["per_query"]
    assert summary["metrics"]["contains"] == sum(v["contains"] for v in per_query.values()) / 5
    assert summary["metrics"]["abstained"] == sum(v["abstained"] for v in per_query.values()) / 5
    assert summary["settings"]["generator_mode"] == "extractive" and summary["settings"]["limit"] == 200

    # Off topic: the held-out groups' questions, asked against an index without those documents.
    held = summary["off_topic_split"]["held_out_groups"]
    assert held == 1 and summary["off_topic_split"]["kept_documents"] in (3, 4)
    off = summary["off_topic_questions"]
    assert off and summary["off_topic"]["evaluated"] == len(off)
    held_groups = {document_group(QUESTIONS[r["query_id"]][1]) for r in off}
    assert len(held_groups) == 1
    for record in off:
        assert not {document_group(doc) for doc in record["passages"]} & held_groups
    assert any("| tiny | 5 |" in line for line in lines)

    # The summary is a run summary: ``ragctl eval-compare`` pairs two of them.
    other = tmp_path / "again" / "tiny" / f"{RUN}.json"
    other.parent.mkdir(parents=True)
    other.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert "(baseline)" in compare_summaries([path, other], metrics=["contains", "abstained"], resamples=200)


def test_datasets_without_answers_or_not_on_this_machine_are_skipped_saying_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RAG_DATASETS_DIR", str(tmp_path / "nothing-here"))
    lines: list[str] = []
    example = Path(__file__).resolve().parents[2] / "eval" / "examples" / "tiny-beir"  # no answers.jsonl
    done = run_eval(
        datasets=[str(example), "xquad-ro"], runs=[], ablation=False, limit=None, reports=tmp_path, llm=False,
        corpus_sample=None, ks="1,5", candidates=None, top_k=None, adaptive_limit=1, resamples=200, seed=0,
        plots=False, progress=False, echo=lines.append, answers=True,
    )
    assert done == 0
    assert any("tiny-beir: no answers run" in line for line in lines)
    assert any(line.startswith("xquad-ro: skipped") and "nothing-here" in line for line in lines)

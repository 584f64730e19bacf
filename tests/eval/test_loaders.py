"""Dataset loaders on small fixture files written here, in each dataset's own layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval.datasets import (
    DatasetNotFound,
    Turn,
    clapnq_passage_id,
    datasets_dir,
    load_dataset,
    load_generic,
    read_qrels,
    read_trec_documents,
    read_trec_topics,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    return write(path, "".join(json.dumps(record) + "\n" for record in records))


# ------------------------------------------------------------------------------------ TREC formats


def test_trec_documents_join_lines_and_drop_tags(tmp_path: Path) -> None:
    path = write(
        tmp_path / "docs.trec",
        "<DOC>\n<DOCNO>1</DOCNO>\ncompact memories have\nflexible capacities\n</DOC>\n"
        "<DOC>\n<DOCNO> FT-2 </DOCNO>\n<TEXT>\nsecond   document\n</TEXT>\n</DOC>\n",
    )
    assert list(read_trec_documents(path)) == [
        ("1", "compact memories have flexible capacities"),
        ("FT-2", "second document"),
    ]


def test_trec_document_without_docno_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "docs.trec", "<DOC>\ntext only\n</DOC>\n")
    with pytest.raises(ValueError, match="no <DOCNO>"):
        list(read_trec_documents(path))


def test_trec_topics_closed_and_unclosed_tags(tmp_path: Path) -> None:
    path = write(
        tmp_path / "topics.trec",
        "<top>\n<num>1</num><title>\nMEASUREMENT OF DIELECTRIC\nCONSTANT\n</title>\n</top>\n"
        "<top>\n<num> Number: 401\n<title> Topic: foreign minorities, Germany\n<desc> Description:\nignored\n</top>\n",
    )
    assert list(read_trec_topics(path)) == [
        ("1", "MEASUREMENT OF DIELECTRIC CONSTANT"),
        ("401", "foreign minorities, Germany"),
    ]


def test_qrels_trec_and_tsv(tmp_path: Path) -> None:
    trec = write(tmp_path / "qrels", "1 0 1239 1\n1 0 1502 2\n\n2 0 7 0\n")
    assert read_qrels(trec) == {"1": {"1239": 1, "1502": 2}, "2": {"7": 0}}
    tsv = write(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore\nq<::>1\tdoc-a\t1\nq<::>1\tdoc-b\t1\n")
    assert read_qrels(tsv) == {"q<::>1": {"doc-a": 1, "doc-b": 1}}
    bad = write(tmp_path / "bad", "1 0 1239 1\n1 0 x\n1 2\n")
    with pytest.raises(ValueError, match="bad:2"):
        read_qrels(bad)


# ------------------------------------------------------------------------------------ vaswani


def make_vaswani(root: Path) -> None:
    folder = root / "vaswani"
    write(
        folder / "corpus" / "doc-text.trec",
        "<DOC>\n<DOCNO>1</DOCNO>\ncompact memories have flexible capacities\n</DOC>\n"
        "<DOC>\n<DOCNO>2</DOCNO>\nan electronic analogue computer\nfor solving linear equations\n</DOC>\n"
        "<DOC>\n<DOCNO>3</DOCNO>\nelectronic coordinate transformer\n</DOC>\n",
    )
    write(
        folder / "query-text.trec",
        "<top>\n<num>1</num><title>\nANALOGUE COMPUTERS\n</title>\n</top>\n"
        "<top>\n<num>2</num><title>\nMEMORY CAPACITY\n</title>\n</top>\n",
    )
    write(folder / "qrels", "1 0 2 1\n1 0 3 1\n2 0 1 1\n")


def test_vaswani(tmp_path: Path) -> None:
    make_vaswani(tmp_path)
    dataset = load_dataset("vaswani", root=tmp_path)
    dataset.check()
    assert len(dataset.corpus) == 3
    assert dataset.corpus["2"].text == "an electronic analogue computer for solving linear equations"
    assert [(q.id, q.text) for q in dataset.queries] == [("1", "ANALOGUE COMPUTERS"), ("2", "MEMORY CAPACITY")]
    assert dataset.qrels == {"1": {"2": 1, "3": 1}, "2": {"1": 1}}
    assert dataset.queries[0].history == () and dataset.queries[0].answerable is None


def test_vaswani_root_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_vaswani(tmp_path)
    monkeypatch.setenv("RAG_DATASETS_DIR", str(tmp_path))
    assert datasets_dir() == tmp_path
    assert len(load_dataset("vaswani").queries) == 2


def test_default_root_is_shared_datasets_next_to_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_DATASETS_DIR", raising=False)
    repository = Path(__file__).resolve().parents[2]
    assert datasets_dir() == repository.parent / "shared" / "datasets"


def test_missing_dataset_names_path_and_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_DATASETS_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(DatasetNotFound) as caught:
        load_dataset("vaswani")
    message = str(caught.value)
    assert str(tmp_path / "nowhere" / "vaswani") in message
    assert "RAG_DATASETS_DIR" in message
    assert isinstance(caught.value, FileNotFoundError)


def test_missing_file_inside_a_dataset(tmp_path: Path) -> None:
    make_vaswani(tmp_path)
    (tmp_path / "vaswani" / "qrels").unlink()
    with pytest.raises(DatasetNotFound, match="qrels"):
        load_dataset("vaswani", root=tmp_path)


def test_unknown_dataset_name() -> None:
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("msmarco")


# ------------------------------------------------------------------------------------ hotpotqa


def make_hotpotqa(root: Path) -> None:
    folder = root / "hotpotqa"
    corpus = {
        "Alû": ["Alû is a demon.", " It is of Akkadian origin."],
        "Lilu (mythology)": ["Lilu is a masculine Akkadian word for a spirit."],
        "Demon Dice": ["Demon Dice is a dice game."],
    }
    questions = [
        {
            "_id": "5a77ec",
            "question": "If Gallu is a demon Lilu is what?",
            "answer": "a spirit",
            "supporting_facts": [["Alû", 0], ["Alû", 1], ["Lilu (mythology)", 0]],
            "context": [[title, sentences] for title, sentences in corpus.items()],
            "type": "bridge",
            "level": "easy",
        }
    ]
    write(folder / "hotpotqa_train_corpus.json", json.dumps(corpus))
    write(folder / "hotpotqa_train.json", json.dumps(questions))


def test_hotpotqa(tmp_path: Path) -> None:
    make_hotpotqa(tmp_path)
    dataset = load_dataset("hotpotqa", root=tmp_path)
    dataset.check()
    assert list(dataset.corpus) == ["Alû", "Lilu (mythology)", "Demon Dice"]
    passage = dataset.corpus["Alû"]
    assert (passage.title, passage.text) == ("Alû", "Alû is a demon. It is of Akkadian origin.")
    (query,) = dataset.queries
    assert (query.id, query.text, query.answers, query.answerable) == (
        "5a77ec", "If Gallu is a demon Lilu is what?", ("a spirit",), True,
    )
    assert query.metadata["type"] == "bridge"
    # Two facts from Alû still make one gold passage: the gold set is the distinct titles.
    assert dataset.qrels == {"5a77ec": {"Alû": 1, "Lilu (mythology)": 1}}


# ------------------------------------------------------------------------------------ clapnq


def make_clapnq(root: Path) -> tuple[str, str]:
    folder = root / "clapnq" / "annotated_data" / "dev"
    shared = {"title": "Bubonic plague", "text": "Plague is spread by fleas . ", "sentences": ["Plague is spread by fleas ."]}
    other = {"title": "Forecasting", "text": "Seasonality recurs every year . ", "sentences": ["Seasonality recurs every year ."]}
    write_jsonl(
        folder / "clapnq_dev_answerable.jsonl",
        [
            {"id": "11", "input": "how is plague spread", "passages": [shared],
             "output": [{"answer": "By fleas.", "selected_sentences": ["Plague is spread by fleas .&"]}]},
            {"id": "12", "input": "what is seasonality", "passages": [other],
             "output": [{"answer": "A yearly pattern.", "selected_sentences": []}]},
        ],
    )
    # The same passage with a different trailing space, as in the real files: one corpus entry.
    write_jsonl(
        folder / "clapnq_dev_unanswerable.jsonl",
        [{"id": -99, "input": "who cured the plague", "passages": [dict(shared, text="Plague is spread by fleas .")],
          "output": [{"answer": None, "meta": None}]}],
    )
    return clapnq_passage_id(shared["title"], shared["text"]), clapnq_passage_id(other["title"], other["text"])


def test_clapnq(tmp_path: Path) -> None:
    plague, forecasting = make_clapnq(tmp_path)
    dataset = load_dataset("clapnq", root=tmp_path)
    dataset.check()
    assert set(dataset.corpus) == {plague, forecasting}
    assert dataset.corpus[plague].title == "Bubonic plague"
    by_id = {query.id: query for query in dataset.queries}
    assert by_id["11"].answers == ("By fleas.",) and by_id["11"].answerable is True
    assert by_id["11"].metadata["selected_sentences"] == ["Plague is spread by fleas ."]
    assert by_id["-99"].answers == () and by_id["-99"].answerable is False
    assert by_id["-99"].answerability == "unanswerable"
    # Unanswerable questions have no gold passage (their passage is related but does not answer).
    assert dataset.qrels == {"11": {plague: 1}, "12": {forecasting: 1}}


# ------------------------------------------------------------------------------------ mtrag-un


def make_mtrag(root: Path) -> None:
    folder = root / "mtrag-un"
    write_jsonl(
        folder / "generation_tasks" / "reference.jsonl",
        [
            {
                "conversation_id": "c1", "task_id": "c1<::>2", "turn": "2", "Collection": "fiqa",
                "contexts": [{"document_id": "p1", "text": "\nCash needs a cashier's check."},
                             {"document_id": "p2", "text": "Loans cost interest.", "title": "Loans"}],
                "input": [{"speaker": "user", "text": "How to pay cash for a car?"},
                          {"speaker": "agent", "text": "Use a cashier's check."},
                          {"speaker": "user", "text": "And with a loan?"}],
                "targets": [{"speaker": "agent", "text": "A loan costs interest."}],
                "answerability": ["PARTIAL"], "Multi-Turn": ["Follow-up"], "Question Type": ["Factoid"],
            },
            {
                "conversation_id": "c2", "task_id": "c2<::>1", "turn": "1", "Collection": "govt",
                "contexts": [{"document_id": "p1", "text": "\nCash needs a cashier's check."}],
                "input": [{"speaker": "user", "text": "What is it?"}],
                "targets": [{"speaker": "agent", "text": "Could you say what you mean?"}],
                "answerability": ["UNDERSPECIFIED"], "Multi-Turn": ["N/A"],
            },
        ],
    )
    write(folder / "retrieval_tasks" / "qrels" / "fiqa.tsv", "query-id\tcorpus-id\tscore\nc1<::>2\tp2\t1\n")
    write(folder / "retrieval_tasks" / "qrels" / "govt.tsv", "query-id\tcorpus-id\tscore\nother<::>1\tp9\t1\n")


def test_mtrag_un(tmp_path: Path) -> None:
    make_mtrag(tmp_path)
    dataset = load_dataset("mtrag-un", root=tmp_path)
    dataset.check()
    assert list(dataset.corpus) == ["p1", "p2"]  # union of contexts, deduplicated
    assert dataset.corpus["p1"].text == "Cash needs a cashier's check."
    assert dataset.corpus["p2"].title == "Loans"
    first, second = dataset.queries
    assert first.text == "And with a loan?"
    assert first.history == (Turn("user", "How to pay cash for a car?"), Turn("agent", "Use a cashier's check."))
    assert first.answers == ("A loan costs interest.",)
    assert (first.answerability, first.answerable) == ("partial", True)
    assert (second.answerability, second.answerable) == ("underspecified", False)
    assert second.history == ()
    assert first.metadata["collection"] == "fiqa" and first.metadata["multi_turn"] == "Follow-up"
    # Qrels of tasks that are not in the generation tasks are dropped.
    assert dataset.qrels == {"c1<::>2": {"p2": 1}}


# ------------------------------------------------------------------------------------ generic


def test_generic_format(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [
        {"_id": "d1", "title": "One", "text": "first text", "metadata": {"tenant": "acme"}},
        {"id": 2, "text": "second text"},
    ])
    queries = write_jsonl(tmp_path / "queries.jsonl", [
        {"_id": "q1", "text": "first?", "answers": ["first"], "answerable": True},
        {"id": "q2", "query": "and then?", "history": [{"speaker": "user", "text": "first?"}], "answers": "second"},
    ])
    qrels = write(tmp_path / "qrels.txt", "q1 0 d1 2\nq2 0 2 1\n")
    dataset = load_generic(corpus, queries, qrels, name="tiny")
    dataset.check()
    assert dataset.name == "tiny"
    assert dataset.corpus["d1"].metadata == {"tenant": "acme"}
    assert dataset.corpus["2"].text == "second text"
    q1, q2 = dataset.queries
    assert (q1.answers, q1.answerable) == (("first",), True)
    assert (q2.text, q2.history, q2.answers) == ("and then?", (Turn("user", "first?"),), ("second",))
    assert dataset.qrels == {"q1": {"d1": 2}, "q2": {"2": 1}}
    assert dataset.relevant("q1") == {"d1": 2}


def test_generic_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFound, match="corpus.jsonl"):
        load_generic(tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl")


def test_check_reports_relevant_documents_missing_from_the_corpus(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "text": "x"}])
    queries = write_jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "y"}])
    qrels = write(tmp_path / "qrels.txt", "q1 0 d404 1\n")
    with pytest.raises(ValueError, match="not in the corpus"):
        load_generic(corpus, queries, qrels).check()


def test_duplicate_document_ids_are_rejected(tmp_path: Path) -> None:
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "text": "x"}, {"_id": "d1", "text": "y"}])
    queries = write_jsonl(tmp_path / "queries.jsonl", [])
    with pytest.raises(ValueError, match="duplicate document id"):
        load_generic(corpus, queries)

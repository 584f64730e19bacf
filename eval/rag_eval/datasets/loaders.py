"""One loader per dataset, each returning the internal :class:`Dataset` form.

Folder layouts are those of the shared datasets folder (see its README.md); ``root`` defaults to
``$RAG_DATASETS_DIR``. A missing file raises :class:`DatasetNotFound` naming the path.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rag_eval.datasets.formats import read_jsonl, read_qrels, read_trec_documents, read_trec_topics, squash
from rag_eval.datasets.paths import DatasetNotFound, datasets_dir, require
from rag_eval.datasets.types import Corpus, Dataset, Document, Qrels, Query, Turn

# ---------------------------------------------------------------------------------------- vaswani


def load_vaswani(root: str | Path | None = None) -> Dataset:
    """Vaswani/NPL: 11,429 physics abstracts, 93 queries, binary qrels (TREC format)."""
    folder = require("vaswani", datasets_dir(root) / "vaswani")
    corpus = Corpus(
        Document(id=docno, text=text)
        for docno, text in read_trec_documents(require("vaswani", folder / "corpus" / "doc-text.trec"))
    )
    queries = [
        Query(id=number, text=text)
        for number, text in read_trec_topics(require("vaswani", folder / "query-text.trec"))
    ]
    qrels = read_qrels(require("vaswani", folder / "qrels"))
    return Dataset("vaswani", corpus, queries, qrels)


# ---------------------------------------------------------------------------------------- hotpotqa


def load_hotpotqa(root: str | Path | None = None) -> Dataset:
    """HotpotQA subset: 100 multi-hop questions over 994 Wikipedia paragraphs.

    Passage id = its title, text = its sentences joined. Gold = the distinct titles of
    ``supporting_facts`` (two per question), each with grade 1.
    """
    folder = require("hotpotqa", datasets_dir(root) / "hotpotqa")
    passages = _read_json(require("hotpotqa", folder / "hotpotqa_train_corpus.json"))
    questions = _read_json(require("hotpotqa", folder / "hotpotqa_train.json"))
    if isinstance(passages, dict):
        items: Iterable[tuple[str, Any]] = passages.items()
    else:  # also accept a list of {"title", "text" | "sentences"}
        items = ((p["title"], p.get("sentences", p.get("text", ""))) for p in passages)
    corpus = Corpus(
        Document(id=title, title=title, text=_join_sentences(sentences)) for title, sentences in items
    )
    queries: list[Query] = []
    qrels: Qrels = {}
    for record in questions:
        query_id = str(record["_id"])
        gold_titles = list(dict.fromkeys(title for title, _ in record.get("supporting_facts", [])))
        queries.append(
            Query(
                id=query_id,
                text=record["question"],
                answers=(str(record["answer"]),) if record.get("answer") is not None else (),
                answerable=True,
                metadata={
                    "type": record.get("type"),
                    "level": record.get("level"),
                    "supporting_facts": [tuple(fact) for fact in record.get("supporting_facts", [])],
                },
            )
        )
        if gold_titles:
            qrels[query_id] = {title: 1 for title in gold_titles}
    return Dataset("hotpotqa", corpus, queries, qrels)


def _join_sentences(sentences: str | list[str]) -> str:
    # HotpotQA sentences carry their own leading space (" In it, ..."), so plain concatenation
    # restores the paragraph; squash() normalises anything else.
    return squash(sentences if isinstance(sentences, str) else "".join(sentences))


# ---------------------------------------------------------------------------------------- clapnq


def clapnq_passage_id(title: str, text: str) -> str:
    """ClapNQ passages carry no id in the annotated files: a stable hash of title and text."""
    return hashlib.sha1(f"{title}\n{text.strip()}".encode()).hexdigest()[:16]


def load_clapnq(root: str | Path | None = None, split: str = "dev") -> Dataset:
    """ClapNQ dev: 300 answerable questions (gold = their passage) and 300 unanswerable ones (a related
    passage that does not answer: in the corpus, but no qrels, ``answerable=False``).

    The corpus is the union of the passages of all questions, deduplicated by title + text (597)."""
    folder = require("clapnq", datasets_dir(root) / "clapnq" / "annotated_data" / split)
    corpus = Corpus()
    queries: list[Query] = []
    qrels: Qrels = {}
    for answerable in (True, False):
        kind = "answerable" if answerable else "unanswerable"
        path = require("clapnq", folder / f"clapnq_{split}_{kind}.jsonl")
        for record in read_jsonl(path):
            query_id = str(record["id"])
            gold: dict[str, int] = {}
            for passage in record.get("passages", []):
                title, text = passage.get("title", ""), passage.get("text", "")
                passage_id = clapnq_passage_id(title, text)
                if passage_id not in corpus:
                    corpus.add(Document(id=passage_id, title=title, text=text.strip(), metadata={"collection": "clapnq"}))
                if answerable:
                    gold[passage_id] = 1
            outputs = record.get("output") or []
            answers = tuple(o["answer"] for o in outputs if isinstance(o, dict) and o.get("answer"))
            selected = [s for o in outputs if isinstance(o, dict) for s in (o.get("selected_sentences") or [])]
            queries.append(
                Query(
                    id=query_id,
                    text=record["input"],
                    answers=answers,
                    answerable=answerable,
                    answerability=kind,
                    metadata={"selected_sentences": [s.rstrip("&").strip() for s in selected]},
                )
            )
            if gold:
                qrels[query_id] = gold
    return Dataset(f"clapnq-{split}", corpus, queries, qrels)


# ---------------------------------------------------------------------------------------- mtrag-un

#: MTRAG-UN answerability labels → can the question be answered from the passages?
#: ``partial`` counts as answerable (there is something to answer); ``underspecified`` does not (the
#: right move is to ask back). The label itself is kept in ``Query.answerability``.
MTRAG_ANSWERABLE = {"answerable": True, "partial": True, "unanswerable": False, "underspecified": False}


def load_mtrag_un(root: str | Path | None = None) -> Dataset:
    """MTRAG-UN generation tasks: 507 conversations, the last user turn is the question.

    Corpus = the union of all tasks' reference ``contexts`` (1,152 passages). Qrels come from
    ``retrieval_tasks/qrels/*.tsv`` (answerable and partial tasks only); ``history`` holds the turns
    before the question, ``answers`` the reference answers.
    """
    folder = require("mtrag-un", datasets_dir(root) / "mtrag-un")
    tasks = list(read_jsonl(require("mtrag-un", folder / "generation_tasks" / "reference.jsonl")))
    qrels_dir = require("mtrag-un", folder / "retrieval_tasks" / "qrels")
    qrels: Qrels = {}
    for path in sorted(qrels_dir.glob("*.tsv")):
        for query_id, judged in read_qrels(path).items():
            qrels.setdefault(query_id, {}).update(judged)
    corpus = Corpus()
    queries: list[Query] = []
    for task in tasks:
        collection = task.get("Collection", "")
        for context in task.get("contexts", []):
            if context["document_id"] not in corpus:
                corpus.add(
                    Document(
                        id=context["document_id"],
                        title=context.get("title") or "",
                        text=context["text"].strip(),
                        metadata={"collection": collection},
                    )
                )
        turns = task.get("input", [])
        if not turns or turns[-1].get("speaker") != "user":
            raise ValueError(f"mtrag-un task {task.get('task_id')}: the last input turn is not the user's")
        label = _first(task.get("answerability")).lower() or None
        queries.append(
            Query(
                id=task["task_id"],
                text=turns[-1]["text"],
                history=tuple(Turn(turn["speaker"], turn["text"]) for turn in turns[:-1]),
                answers=tuple(target["text"] for target in task.get("targets", []) if target.get("text")),
                answerable=MTRAG_ANSWERABLE.get(label) if label else None,
                answerability=label,
                metadata={
                    "collection": collection,
                    "conversation_id": task.get("conversation_id"),
                    "turn": task.get("turn"),
                    "multi_turn": _first(task.get("Multi-Turn")) or None,
                    "question_type": list(task.get("Question Type") or []),
                },
            )
        )
    task_ids = {query.id for query in queries}
    qrels = {query_id: judged for query_id, judged in qrels.items() if query_id in task_ids}
    return Dataset("mtrag-un", corpus, queries, qrels)


def _first(value: Any) -> str:
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return "" if value is None else str(value)


# ---------------------------------------------------------------------------------------- generic


def load_generic(
    corpus_path: str | Path,
    queries_path: str | Path,
    qrels_path: str | Path | None = None,
    *,
    name: str = "generic",
) -> Dataset:
    """A dataset in the generic format (BEIR-compatible field names):

    - corpus JSONL: ``{"_id" | "id", "text", "title"?, "metadata"?}`` per line;
    - queries JSONL: ``{"_id" | "id", "text" | "query", "history"?: [{"speaker", "text"}],
      "answers"?: [str], "answerable"?: bool, "answerability"?: str, "metadata"?}`` per line;
    - qrels: TREC (``qid 0 docid grade``) or TSV (``query-id corpus-id score``, header optional).
    """
    corpus_file = Path(corpus_path)
    queries_file = Path(queries_path)
    for path in (corpus_file, queries_file, *([Path(qrels_path)] if qrels_path is not None else [])):
        if not path.exists():
            raise DatasetNotFound(name, path)
    corpus = Corpus(
        Document(
            id=str(_id(record, corpus_file)),
            text=record["text"],
            title=record.get("title") or "",
            metadata=record.get("metadata") or {},
        )
        for record in read_jsonl(corpus_file)
    )
    queries = []
    for record in read_jsonl(queries_file):
        history = tuple(Turn(turn["speaker"], turn["text"]) for turn in record.get("history") or [])
        answers = record.get("answers") or []
        queries.append(
            Query(
                id=str(_id(record, queries_file)),
                text=record["text"] if "text" in record else record["query"],
                history=history,
                answers=(answers,) if isinstance(answers, str) else tuple(answers),
                answerable=record.get("answerable"),
                answerability=record.get("answerability"),
                metadata=record.get("metadata") or {},
            )
        )
    qrels = read_qrels(Path(qrels_path)) if qrels_path is not None else {}
    return Dataset(name, corpus, queries, qrels)


# ---------------------------------------------------------------------------------------- xquad

#: XQuAD's languages in the shared datasets folder (``xquad/<code>/``), each a BEIR folder with answers.jsonl.
XQUAD_LANGUAGES = ("en", "ro", "de", "es")


def load_xquad(language: str, root: str | Path | None = None) -> Dataset:
    """XQuAD in one language: 240 paragraphs, 1,190 answerable questions (the same ids in every
    language), named ``xquad-<language>``."""
    from rag_eval.datasets.folder import load_folder

    name = f"xquad-{language}"
    return load_folder(require(name, datasets_dir(root) / "xquad" / language), name=name)


def _id(record: dict[str, Any], path: Path) -> Any:
    if "_id" in record:
        return record["_id"]
    if "id" in record:
        return record["id"]
    raise ValueError(f"{path}: a record has neither '_id' nor 'id': {json.dumps(record)[:120]}")


def _read_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return json.load(handle)

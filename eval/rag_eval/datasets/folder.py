"""Your own data: a folder in BEIR layout (or with plain TREC qrels), loaded into a :class:`Dataset`.

::

    my-set/
      corpus.jsonl          {"_id": "d1", "title": "…", "text": "…"}          one document per line
      queries.jsonl         {"_id": "q1", "text": "…"}                        one query per line
      qrels/test.tsv        query-id<TAB>corpus-id<TAB>score                  header line optional

The qrels are ``qrels/test.tsv`` when there is one, else the only file in ``qrels/``; instead of the
folder a single ``qrels.tsv``, ``qrels.txt`` or ``qrels.trec`` next to the JSONL files also works.
A qrels file is BEIR TSV (``query-id corpus-id score``) or plain TREC (``qid 0 docid grade``,
whitespace separated). ``id`` is accepted for ``_id``, and ``query`` for a query's ``text``; a
document's ``metadata`` (an object) and a query's ``answers`` (a list of strings) are kept. An optional
``answers.jsonl`` next to them (``{"_id": query id, "answers": [...]}``, XQuAD's layout) gives the
reference answers instead: a query with a non-empty list is answerable (extractive answers are scored
against them: ``ragctl eval --answers``).

Every problem is a :class:`DatasetFormatError` (a ``ValueError``) naming the missing file, or the
file and line of the malformed record, so ``ragctl eval -d PATH`` can say exactly what to fix.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from rag_eval.datasets.formats import DatasetFormatError, read_jsonl_lines, read_qrels
from rag_eval.datasets.types import Corpus, Dataset, Document, Query, Qrels

#: Single-file qrels names accepted next to corpus.jsonl (in this order) when there is no qrels/ folder.
QRELS_FILES = ("qrels.tsv", "qrels.txt", "qrels.trec")
#: Optional reference answers next to queries.jsonl (``{"_id", "answers"}`` per line).
ANSWERS_FILE = "answers.jsonl"
#: The split BEIR evaluates on; chosen when ``qrels/`` holds several files.
DEFAULT_SPLIT = "test"

LAYOUT_HINT = (
    "expected corpus.jsonl ({\"_id\", \"title\"?, \"text\"}), queries.jsonl ({\"_id\", \"text\"}) and "
    "qrels/test.tsv (query-id, corpus-id, score) or qrels.tsv / qrels.txt / qrels.trec; see docs/evaluation.md"
)


def is_dataset_folder(value: str | Path) -> bool:
    """Whether ``value`` names a folder (rather than a built-in dataset): it exists as a directory, or
    it looks like a path (has a separator or starts with ``.`` or ``~``)."""
    text = str(value)
    return Path(text).expanduser().is_dir() or "/" in text or text.startswith((".", "~"))


def qrels_path(folder: Path, split: str = DEFAULT_SPLIT) -> Path:
    qrels_dir = folder / "qrels"
    if qrels_dir.is_dir():
        files = sorted(p for p in qrels_dir.iterdir() if p.is_file() and not p.name.startswith("."))
        for path in files:
            if path.stem == split:
                return path
        if len(files) == 1:
            return files[0]
        if not files:
            raise DatasetFormatError(f"{qrels_dir} is empty; {LAYOUT_HINT}")
        raise DatasetFormatError(
            f"{qrels_dir} holds {', '.join(p.name for p in files)} and no {split}.tsv: say which split to use "
            f"by keeping only that file or naming it {split}.tsv"
        )
    for name in QRELS_FILES:
        if (folder / name).is_file():
            return folder / name
    raise DatasetFormatError(f"{folder}: no qrels (missing {qrels_dir}/{split}.tsv); {LAYOUT_HINT}")


def _records(path: Path) -> Any:
    if not path.is_file():
        raise DatasetFormatError(f"missing {path}; {LAYOUT_HINT}")
    yield from read_jsonl_lines(path)


def _field(record: dict[str, Any], names: tuple[str, ...], where: str, *, required: bool = True) -> str:
    for name in names:
        if name in record and record[name] is not None:
            value = record[name]
            if isinstance(value, (int, float)) and not isinstance(value, bool) and name in ("_id", "id"):
                return str(value)
            if not isinstance(value, str):
                raise DatasetFormatError(f"{where}: {name!r} must be a string, got {type(value).__name__}")
            return value
    if required:
        raise DatasetFormatError(f"{where}: missing {' or '.join(repr(n) for n in names)}")
    return ""


def load_folder(folder: str | Path, *, name: str | None = None, split: str = DEFAULT_SPLIT) -> Dataset:
    """The dataset in ``folder`` (layout in the module docstring); its name is the folder's unless given."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise DatasetFormatError(f"dataset folder {root} does not exist; {LAYOUT_HINT}")
    corpus_file, queries_file = root / "corpus.jsonl", root / "queries.jsonl"
    for path in (corpus_file, queries_file):  # all missing files are reported before any parsing
        if not path.is_file():
            raise DatasetFormatError(f"missing {path}; {LAYOUT_HINT}")
    qrels_file = qrels_path(root, split)

    corpus = Corpus()
    for line_number, record in _records(corpus_file):
        where = f"{corpus_file}:{line_number}"
        doc_id = _field(record, ("_id", "id"), where)
        if doc_id in corpus:
            raise DatasetFormatError(f"{where}: duplicate document id {doc_id!r}")
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise DatasetFormatError(f"{where}: 'metadata' must be an object")
        corpus.add(Document(id=doc_id, text=_field(record, ("text",), where), title=_field(record, ("title",), where, required=False),
                            metadata=metadata))
    if not corpus:
        raise DatasetFormatError(f"{corpus_file}: no documents")

    queries: list[Query] = []
    seen: set[str] = set()
    for line_number, record in _records(queries_file):
        where = f"{queries_file}:{line_number}"
        query_id = _field(record, ("_id", "id"), where)
        if query_id in seen:
            raise DatasetFormatError(f"{where}: duplicate query id {query_id!r}")
        seen.add(query_id)
        answers = record.get("answers") or []
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise DatasetFormatError(f"{where}: 'answers' must be a list of strings")
        queries.append(Query(id=query_id, text=_field(record, ("text", "query"), where), answers=tuple(answers),
                             metadata=record.get("metadata") if isinstance(record.get("metadata"), dict) else {}))
    if not queries:
        raise DatasetFormatError(f"{queries_file}: no queries")
    if (root / ANSWERS_FILE).is_file():
        queries = _with_answers(queries, root / ANSWERS_FILE)

    try:
        qrels: Qrels = read_qrels(qrels_file)
    except ValueError as exc:  # read_qrels names file:line already
        raise DatasetFormatError(str(exc)) from None
    _check_qrels(qrels, qrels_file, seen, corpus)
    return Dataset(name or root.resolve().name, corpus, queries, qrels)


def _with_answers(queries: list[Query], path: Path) -> list[Query]:
    """``queries`` with the reference answers of ``path`` (one ``{"_id", "answers"}`` per line)."""
    answers: dict[str, tuple[str, ...]] = {}
    for line_number, record in _records(path):
        where = f"{path}:{line_number}"
        query_id = _field(record, ("_id", "id"), where)
        values = record.get("answers")
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, list) or not all(isinstance(a, str) for a in values):
            raise DatasetFormatError(f"{where}: 'answers' must be a list of strings")
        answers[query_id] = tuple(values)
    return [
        replace(query, answers=answers[query.id], answerable=bool(answers[query.id]) or query.answerable)
        if query.id in answers else query
        for query in queries
    ]


def _check_qrels(qrels: Qrels, path: Path, query_ids: set[str], corpus: Corpus) -> None:
    """Relevant pairs must name known queries and documents: the line of the first one that does not."""
    bad_queries = {qid for qid in qrels if qid not in query_ids}
    bad_docs = {doc for judged in qrels.values() for doc, grade in judged.items() if grade > 0 and doc not in corpus}
    if not bad_queries and not bad_docs:
        return
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.split("\t") if "\t" in line else line.split()
            fields = [f.strip() for f in fields]
            if len(fields) not in (3, 4):
                continue
            qid, doc = fields[0], fields[-2]
            if qid in bad_queries:
                raise DatasetFormatError(
                    f"{path}:{line_number}: query {qid!r} is not in queries.jsonl "
                    f"({len(bad_queries)} unknown query id(s) in the qrels)")
            if doc in bad_docs and qid in qrels and qrels[qid].get(doc, 0) > 0:
                raise DatasetFormatError(
                    f"{path}:{line_number}: document {doc!r} is not in corpus.jsonl "
                    f"({len(bad_docs)} unknown relevant document id(s) in the qrels)")
    raise DatasetFormatError(f"{path}: qrels name unknown queries {sorted(bad_queries)[:5]} or documents {sorted(bad_docs)[:5]}")

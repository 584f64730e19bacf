"""File formats shared by several datasets: TREC documents and topics, qrels, JSON lines."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag_eval.datasets.types import Qrels

_DOC = re.compile(r"<DOC>(.*?)</DOC>", re.DOTALL | re.IGNORECASE)
_DOCNO = re.compile(r"<DOCNO>\s*(.*?)\s*</DOCNO>", re.DOTALL | re.IGNORECASE)
_TOP = re.compile(r"<top>(.*?)</top>", re.DOTALL | re.IGNORECASE)
# <num> may be closed (<num>1</num>) or not (<num> Number: 401); the same for <title>.
_NUM = re.compile(r"<num>\s*(?:Number:)?\s*(.*?)\s*(?:</num>|<|$)", re.DOTALL | re.IGNORECASE)
_TITLE = re.compile(r"<title>\s*(?:Topic:)?\s*(.*?)\s*(?:</title>|<|$)", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")


def squash(text: str) -> str:
    """Whitespace runs (line breaks of fixed-width TREC files included) → one space; stripped."""
    return " ".join(text.split())


def read_trec_documents(path: Path) -> Iterator[tuple[str, str]]:
    """``(docno, text)`` per ``<DOC>`` block. The text is everything but the DOCNO, tags removed."""
    content = path.read_text(encoding="utf-8", errors="replace")
    for position, match in enumerate(_DOC.finditer(content)):
        block = match.group(1)
        docno = _DOCNO.search(block)
        if docno is None:
            raise ValueError(f"{path}: <DOC> number {position + 1} has no <DOCNO>")
        text = _TAG.sub(" ", block[: docno.start()] + block[docno.end() :])
        yield docno.group(1).strip(), squash(text)


def read_trec_topics(path: Path) -> Iterator[tuple[str, str]]:
    """``(number, title text)`` per ``<top>`` block."""
    content = path.read_text(encoding="utf-8", errors="replace")
    for position, match in enumerate(_TOP.finditer(content)):
        block = match.group(1)
        num, title = _NUM.search(block), _TITLE.search(block)
        if num is None or not num.group(1) or title is None:
            raise ValueError(f"{path}: <top> number {position + 1} lacks <num> or <title>")
        yield num.group(1).strip(), squash(title.group(1))


def read_qrels(path: Path) -> Qrels:
    """TREC qrels (``qid iteration docid grade``, whitespace separated) or BEIR-style TSV
    (``query-id corpus-id score``, optional header line). Blank lines and ``#`` comments are skipped;
    a pair given twice keeps the last grade."""
    qrels: Qrels = {}
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            fields = stripped.split("\t") if "\t" in stripped else stripped.split()
            fields = [field.strip() for field in fields]
            if len(fields) == 4:
                query_id, _, doc_id, grade = fields
            elif len(fields) == 3:
                query_id, doc_id, grade = fields
            else:
                raise ValueError(f"{path}:{line_number}: expected 3 or 4 fields, got {len(fields)}: {stripped!r}")
            try:
                value = int(float(grade))
            except ValueError:
                if line_number == 1:
                    continue  # a header such as "query-id corpus-id score"
                raise ValueError(f"{path}:{line_number}: grade {grade!r} is not a number") from None
            qrels.setdefault(query_id, {})[doc_id] = value
    return qrels


class DatasetFormatError(ValueError):
    """A dataset file that cannot be read; the message names the file (and line)."""


def read_jsonl_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each JSON object of a JSON-lines file with its line number; blank lines skipped. A line that is
    not a JSON object is a :class:`DatasetFormatError` naming ``file:line``."""
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetFormatError(f"{path}:{line_number}: invalid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise DatasetFormatError(f"{path}:{line_number}: expected a JSON object, got {type(record).__name__}")
            yield line_number, record


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    return (record for _, record in read_jsonl_lines(path))

"""The embedded index's lexical analysis: the text fields a chunk fills, the analyzer of each, and the
BM25 clauses of a query over them (measured in /work/notes/i31/tantivy/REPORT.md, docs/languages.md).

Every chunk fills ``text_neutral``/``title_neutral`` (lowercased, diacritics folded, no stemming);
a chunk of a configured language also fills ``text_<code>``/``title_<code>`` (its stop words dropped,
its stemmer, then folded, so a word typed without diacritics stems as the accented one does). Text is
``normalise_text``-ed first on both paths: tantivy has no NFC filter and its tokenizer cuts a word at
a combining mark. A query reads every field with that field's own analyzer (analysing it with another
language's chain than the field was indexed with ranks far below no stemming at all), one Should
clause per term and field, so the fields' BM25 scores add up.

Tokenizer names are persisted in tantivy's schema, so a change to a chain must change its name (the
``_v1`` suffix) and bump the index format: segments analysed by the old chain would silently miss.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import tantivy
from tantivy import Filter, Occur, Query, TextAnalyzerBuilder, Tokenizer

from rag_common.languages import language as language_of
from rag_common.languages import normalise_text
from rag_retriever.records import ChunkRecord

#: The group every chunk is analysed in, whatever its language.
NEUTRAL = "neutral"
#: The keyword field naming the language group a chunk fills (none: neutral only). A query skips the
#: groups no chunk fills (``present``): their fields match nothing, and 17 groups of clauses built
#: for nothing tripled an unsure query's BM25 time.
LANGUAGE_FIELD = "language"
#: The two chunk texts every group indexes, each in a field ``<source>_<group>``.
SOURCES = ("text", "title")
#: The version of every chain below: part of each tokenizer name.
_CHAIN_VERSION = 1
#: Longer tokens are dropped (base64, URLs glued together): tantivy's default tokenizer's limit.
_MAX_TOKEN_CHARS = 40


def tokenizer_name(group: str) -> str:
    return f"rag_{group}_v{_CHAIN_VERSION}"


def _words() -> TextAnalyzerBuilder:
    return (
        TextAnalyzerBuilder(Tokenizer.simple())
        .filter(Filter.remove_long(_MAX_TOKEN_CHARS))
        .filter(Filter.lowercase())
    )


def neutral_analyzer() -> tantivy.TextAnalyzer:
    return _words().filter(Filter.ascii_fold()).build()


def language_analyzer(code: str) -> tantivy.TextAnalyzer:
    """Stop words before stemming (``über`` is one only unfolded), folding after it (stemming the
    accented word keeps more suffix rules; folding its stem makes ``studentilor`` ``studenților``)."""
    spec = language_of(code)
    builder = _words()
    # Normalised as the text is: the list may spell Romanian's ș/ț with a cedilla.
    stop_words = sorted({normalise_text(word) for word in spec.stop_words})
    if stop_words:
        builder = builder.filter(Filter.custom_stopword(stop_words))
    return builder.filter(Filter.stemmer(spec.name)).filter(Filter.ascii_fold()).build()


def english_stem_analyzer() -> tantivy.TextAnalyzer:
    """tantivy's built-in ``en_stem`` chain, the only analysis of indexes before per-language fields."""
    return _words().filter(Filter.stemmer("english")).build()


@dataclass(frozen=True, slots=True)
class FieldGroup:
    """``fields`` (one per source) indexed by the tokenizer ``tokenizer``; ``analyzer`` is the same
    chain, which analyses queries for them (``registered``: ours, registered on every open)."""

    key: str
    tokenizer: str
    analyzer: tantivy.TextAnalyzer
    fields: tuple[str, ...]
    registered: bool = True


class LexicalFields:
    """The text fields of an index and how each is analysed: ``neutral`` for every chunk, and one
    group per configured language (``languages``: sorted codes) for that language's chunks."""

    def __init__(self, neutral: FieldGroup, by_language: dict[str, FieldGroup]) -> None:
        self.neutral = neutral
        self.by_language = by_language

    @classmethod
    def of(cls, languages: Iterable[str]) -> LexicalFields:
        """The neutral group and one per code of ``languages`` (``UnsupportedLanguageError`` for one
        tantivy cannot stem)."""
        by_language = {
            code: FieldGroup(code, tokenizer_name(code), language_analyzer(code), _fields(code))
            for code in sorted(set(languages))
        }
        return cls(FieldGroup(NEUTRAL, tokenizer_name(NEUTRAL), neutral_analyzer(), _fields(NEUTRAL)), by_language)

    @classmethod
    def english_stemmed(cls) -> LexicalFields:
        """The fields ``text``/``title`` of formats before 4, analysed by tantivy's ``en_stem``."""
        return cls(FieldGroup("en_stem", "en_stem", english_stem_analyzer(), SOURCES, registered=False), {})

    @property
    def languages(self) -> list[str]:
        return list(self.by_language)

    def groups(self) -> list[FieldGroup]:
        return [self.neutral, *self.by_language.values()]

    def add_to_schema(self, builder: tantivy.SchemaBuilder) -> None:
        for group in self.groups():
            for field in group.fields:
                builder.add_text_field(field, tokenizer_name=group.tokenizer)

    def register(self, index: tantivy.Index) -> None:
        """Our analyzers, on every open before any commit: a tokenizer the schema names and nobody
        registered fails only at the commit (``Schema error: Error getting tokenizer``)."""
        for group in self.groups():
            if group.registered:
                index.register_tokenizer(group.tokenizer, group.analyzer)

    def add_to_document(self, document: tantivy.Document, chunk: ChunkRecord) -> None:
        """The neutral fields, and the chunk's language's (and ``LANGUAGE_FIELD``) when that
        language is configured."""
        texts = (normalise_text(chunk.text), normalise_text(chunk.title))
        groups = [self.neutral]
        if chunk.language in self.by_language:
            groups.append(self.by_language[chunk.language])
            document.add_text(LANGUAGE_FIELD, chunk.language)
        for group in groups:
            for field, text in zip(group.fields, texts, strict=True):
                document.add_text(field, text)

    def present(self, searcher: tantivy.Searcher) -> set[str]:
        """The configured languages some chunk in ``searcher`` fills (deleted ones may still count
        until a merge: a group queried for nothing, never one missed)."""
        return {code for code in self.by_language if searcher.doc_freq(LANGUAGE_FIELD, code)}

    def query_groups(self, language: str | None, present: Collection[str]) -> list[FieldGroup]:
        """The neutral group and ``language``'s; every configured language's when it is None or not
        configured (unsure: measured never below neutral alone, and no language needed). Only the
        languages in ``present``: the others' fields are empty."""
        if language in self.by_language:
            codes = [language]
        else:
            codes = list(self.by_language)
        return [self.neutral, *(self.by_language[code] for code in codes if code in present)]

    def clauses(
        self, schema: tantivy.Schema, query: str, language: str | None, present: Collection[str],
        neutral_weight: float = 1.0,
    ) -> list[tuple[Occur, Query]]:
        """One Should clause per distinct term and field (of ``query_groups``), each field's terms
        from its own analyzer (never ``parse_query``: it is a query language, and "art. 5 alin. (2)"
        is a syntax error); ``neutral_weight``: the neutral fields' boost when ``language`` is one of
        the index's (``RETRIEVER_NEUTRAL_FIELD_WEIGHT``)."""
        text = normalise_text(query)
        clauses = []
        # The neutral field is the fallback beside a known language's own field; unsure, every field counts alike.
        neutral_weight = neutral_weight if language in self.by_language else 1.0
        for group in self.query_groups(language, present):
            terms = dict.fromkeys(group.analyzer.analyze(text))
            for term in terms:
                for field in group.fields:
                    clause = Query.term_query(schema, field, term)
                    if group is self.neutral and neutral_weight != 1.0:
                        clause = Query.boost_query(clause, neutral_weight)
                    clauses.append((Occur.Should, clause))
        return clauses


def _fields(group: str) -> tuple[str, ...]:
    return tuple(f"{source}_{group}" for source in SOURCES)

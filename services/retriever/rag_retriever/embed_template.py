"""What the embedder sees of a chunk: a template over the chunk's text and its document's context.

``RETRIEVER_EMBED_TEMPLATE`` (default :data:`DEFAULT_TEMPLATE`, ``"{title}\\n{section_path}\\n{text}"``)
names ``{title}`` (the document's title), ``{section_path}`` (the headings above the chunk, joined by
``" > "``) and ``{text}`` (the chunk's text, exactly once). A template line that renders empty (no
title, no headings) is dropped, so a chunk without either embeds as its bare text. ``"{text}"`` is
text only (what the retriever did before issue 17). The stored and returned chunk text never changes:
the template only decides the string that is embedded, at ingestion and at any re-embedding (both
go through ``Chunker``, which renders it, and ``Ingestor``, which embeds it).

The rendered string must fit the model: the chunker budgets the text alone, so when title and
headings push it over ``max_seq_length``, the context part is cut (on token boundaries) and the text
is kept whole. A changed template changes every document's fingerprint (re-ingestion rewrites it) and
the chunk ids of chunks whose rendered string changed (those are re-embedded; the others keep their
vectors).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

TEXT_ONLY = "{text}"
DEFAULT_TEMPLATE = "{title}\n{section_path}\n{text}"
FIELDS = ("title", "section_path", "text")
SECTION_SEPARATOR = " > "
_BLANK_LINES = re.compile(r"\n\s*\n")


def validate(template: str) -> str:
    """``template`` if it names only :data:`FIELDS` and ``{text}`` exactly once, else ValueError."""
    try:
        names = [name for _, name, spec, conv in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ValueError(f"embed template {template!r} is not a valid format string: {exc}") from None
    unknown = sorted({name for name in names if name not in FIELDS})
    if unknown:
        raise ValueError(f"embed template {template!r} names unknown field(s) {unknown}; use {', '.join(FIELDS)}")
    if names.count("text") != 1:
        raise ValueError(f"embed template {template!r} must contain {{text}} exactly once")
    return template


@dataclass(frozen=True, slots=True)
class EmbedTemplate:
    template: str = TEXT_ONLY

    def __post_init__(self) -> None:
        validate(self.template)

    @property
    def text_only(self) -> bool:
        return self.template == TEXT_ONLY

    def parts(self, title: str, section_path: Sequence[str]) -> tuple[str, str]:
        """The rendered context before and after the text (empty lines dropped)."""
        before, _, after = self.template.partition("{text}")
        values = {"title": " ".join(title.split()), "section_path": SECTION_SEPARATOR.join(section_path)}

        def render(part: str) -> str:
            rendered = part.format(**values)
            lines = rendered.split("\n")
            kept = [line for i, line in enumerate(lines) if line.strip() or i == len(lines) - 1]
            return "\n".join(kept) if any(line.strip() for line in kept) else ""

        return render(before), render(after)

    def render(
        self, text: str, title: str = "", section_path: Sequence[str] = (), *,
        fits: Callable[[str], bool] | None = None, cut: Callable[[str, int], str] | None = None,
    ) -> str:
        """The string to embed. ``fits(s)`` says whether ``s`` fits the model; when the whole does not,
        ``cut(context, n)`` shortens the context before the text (dropping the one after) until it does."""
        if self.text_only:
            return text
        before, after = self.parts(title, section_path)
        whole = f"{before}{text}{after}"
        if fits is None or fits(whole):
            return whole
        if fits(f"{before}{text}"):
            return f"{before}{text}"
        if cut is not None and before:
            head = before.rstrip("\n")
            for keep in (64, 32, 16, 8, 4):
                shortened = cut(head, keep)
                if shortened and fits(f"{shortened}\n{text}"):
                    return f"{shortened}\n{text}"
        return text

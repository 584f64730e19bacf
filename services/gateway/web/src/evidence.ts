// What an answer says about its evidence beyond the citations: the phrase that answers
// (``answer_span``), marked wherever the reader meets it (the answer text, the cited quote in the
// source list, the cited sentence in the source panel), and the sources' disagreement (``conflict``),
// a notice above the answer listing each value with its citation markers. Built with
// createElement/textContent only: what a document says is never parsed as markup.

import type { AnswerSpan, Citation, Conflict } from "./api.js";
import { localise } from "./i18n.js";

/** The longest quote the source list shows whole; a longer one is cut (with "…") around the phrase. */
export const QUOTE_CHARS = 90;
/** Characters kept after the phrase when a long quote is cut around it (the phrase's context). */
const AFTER_PHRASE = 24;

function answerMark(phrase: string): HTMLElement {
  const mark = document.createElement("mark");
  mark.className = "answer-span";
  mark.textContent = phrase;
  localise(mark, "answerPhrase", "title");
  return mark;
}

/** ``sentence`` with ``sentence.slice(start, end)`` marked as the phrase that answers. */
function marked(sentence: string, start: number, end: number): (Node | string)[] {
  return [sentence.slice(0, start), answerMark(sentence.slice(start, end)), sentence.slice(end)].filter((part) => part !== "");
}

/** The response's span when it lies in ``citation``'s quote (and says the same text), else null. */
export function spanIn(citation: Citation, span: AnswerSpan | null | undefined): AnswerSpan | null {
  if (!span || span.citation !== citation.id) return null;
  return citation.quote.slice(span.start, span.end) === span.text ? span : null;
}

/** A cited sentence with the phrase marked, when the span's offsets still give its text there. */
export function sentenceParts(sentence: string, span: AnswerSpan | null): (Node | string)[] {
  return span && sentence.slice(span.start, span.end) === span.text ? marked(sentence, span.start, span.end) : [sentence];
}

/** A quote as the source list shows it: whole when short, else cut to QUOTE_CHARS so that the phrase
 * that answers stays in view; the phrase marked. */
export function quoteParts(quote: string, span: AnswerSpan | null): (Node | string)[] {
  if (quote.length <= QUOTE_CHARS) return sentenceParts(quote, span);
  const room = QUOTE_CHARS - 1;
  if (span === null || span.end <= room) {
    const head = quote.slice(0, room).trimEnd();
    return span === null ? [`${head}…`] : [...marked(head, span.start, Math.min(span.end, head.length)), "…"];
  }
  // The phrase is past the cut: the window ends a little after it (or starts at it, when it is longer).
  const from = Math.min(span.start, Math.max(0, Math.min(quote.length, span.end + AFTER_PHRASE) - (room - 1)));
  const to = Math.min(quote.length, from + room - 1);
  const parts = marked(quote.slice(from, to), span.start - from, Math.min(span.end, to) - from);
  return [...(from > 0 ? ["…"] : []), ...parts, ...(to < quote.length ? ["…"] : [])];
}

/** Marks the first verbatim occurrence of ``phrase`` in the answer's own text (its direct text
 * nodes: the citation markers are buttons and are left alone), if it is there. */
export function markPhrase(answer: HTMLElement, phrase: string): void {
  for (const node of Array.from(answer.childNodes)) {
    if (node.nodeType !== Node.TEXT_NODE) continue;
    const at = (node.textContent ?? "").indexOf(phrase);
    if (at < 0) continue;
    const found = (node as Text).splitText(at);
    found.splitText(phrase.length);
    found.replaceWith(answerMark(phrase));
    return;
  }
}

/** "The sources disagree:" then each value with the markers of the citations that state it;
 * ``cite`` makes a marker's button (null for a citation the answer does not carry: shown as text). */
export function conflictNotice(conflict: Conflict, cite: (id: number) => HTMLElement | null): HTMLElement {
  const notice = document.createElement("div");
  notice.className = "notice conflict";
  notice.setAttribute("role", "note");
  const heading = document.createElement("strong");
  localise(heading, "sourcesDisagree");
  const list = document.createElement("ul");
  localise(list, "conflictValues", "aria-label");
  for (const { value, citations } of conflict.values) {
    const item = document.createElement("li");
    const said = document.createElement("span");
    said.className = "value";
    said.textContent = value;
    item.append(said, " ", ...citations.map((id) => cite(id) ?? `[${id}]`));
    list.append(item);
  }
  notice.append(heading, list);
  return notice;
}

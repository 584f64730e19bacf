// The web chat: sign-in, conversations, streamed answers with clickable citations, feedback,
// and the documents page. DOM built with createElement/textContent only (no innerHTML): what the
// server or a document says is never parsed as markup.

import { Api, ApiError } from "./api.js";
import type { AnswerSpan, AuthConfig, ChatResponse, Citation, ConversationSummary, Rating } from "./api.js";
import { finishOidc, forgetToken, startOidc, storeToken, storedToken } from "./auth.js";
import { LocalisedError, format, localise, startLocale, text, verbatim } from "./i18n.js";
import type { Localisable, LocalisedAttribute, Text } from "./i18n.js";
import { conflictNotice, markPhrase, quoteParts, sentenceParts, spanIn } from "./evidence.js";
import { abstentionText, degradedText, fileSummary } from "./wording.js";

function $(id: string): HTMLElement {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`#${id} missing from the page`);
  return element;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: {
    className?: string;
    /** Text as the server or a document wrote it (never translated). */
    text?: string;
    /** The page's own words: a message, in the reader's language (re-worded when it changes). */
    msg?: Localisable;
    attrs?: Record<string, string>;
    /** Attributes that are the page's own words. */
    msgAttrs?: Partial<Record<LocalisedAttribute, Localisable>>;
  } = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.className) node.className = props.className;
  if (props.text !== undefined) node.textContent = props.text;
  if (props.msg !== undefined) localise(node, props.msg);
  for (const [name, value] of Object.entries(props.attrs ?? {})) node.setAttribute(name, value);
  for (const [name, value] of Object.entries(props.msgAttrs ?? {})) localise(node, value, name as LocalisedAttribute);
  for (const child of children) node.append(child);
  return node;
}

/** Scrolls the message pane (never the window) so that the newest exchange is in view: the question
 * and all of its answer when they fit together, else the question at the top with the beginning of
 * the answer under it (the user reads on by scrolling the pane). */
function revealTurn(question: HTMLElement, answer: HTMLElement): void {
  const pane = $("messages");
  const paneTop = pane.getBoundingClientRect().top + pane.clientTop;
  const margin = 8;
  const top = question.getBoundingClientRect().top - paneTop + pane.scrollTop - margin;
  const bottom = answer.getBoundingClientRect().bottom - paneTop + pane.scrollTop + margin;
  pane.scrollTop = Math.max(0, bottom - top <= pane.clientHeight ? bottom - pane.clientHeight : top);
}

/** Where a citation is: title, section and page (the page worded in the reader's language). */
function whereOf(citation: Citation): (Node | string)[] {
  const parts: (Node | string)[] = [citation.title || citation.source, citation.section_path.join(" › ")].filter(Boolean);
  if (citation.page != null) parts.push(el("span", { msg: text("pageNumber", { page: citation.page }) }));
  return parts.flatMap((part, index) => (index === 0 ? [part] : [" — ", part]));
}

/** What went wrong, for the reader: the page's own words where it has them, else the server's text. */
function messageOf(error: unknown): Text {
  if (error instanceof LocalisedError) return error.text;
  if (error instanceof ApiError && error.status === 0) return text("errorUnreachable");
  if (error instanceof ApiError && error.status === 401) return text("errorSignIn");
  if (error instanceof ApiError && error.status === 403) return text("errorForbidden", { reason: error.message });
  if (error instanceof ApiError && error.status === 429) return text("errorTooMany");
  return verbatim(error instanceof Error ? error.message : String(error));
}

class App {
  private api = new Api(null);
  private conversationId: string | null = null;
  private turnCount = 0;
  private busy = false;

  constructor(private config: AuthConfig) {}

  async start(): Promise<void> {
    this.bind();
    if (this.config.auth === "off") {
      this.api = new Api(null);
      await this.enter(text("whoLocal"));
      return;
    }
    try {
      const returned = await finishOidc(this.config.oidc);
      if (returned !== null) storeToken(returned, "oidc");
    } catch (error) {
      this.showSignIn(messageOf(error));
      return;
    }
    const stored = storedToken();
    if (stored === null) {
      this.showSignIn(null);
      return;
    }
    this.api = new Api(stored.token);
    try {
      const provider = this.config.oidc?.provider_name ?? format("oidcFallbackName");
      await this.enter(stored.kind === "oidc" ? text("whoOidc", { provider }) : text("whoKey"));
    } catch (error) {
      forgetToken();
      this.showSignIn(messageOf(error));
    }
  }

  private bind(): void {
    startLocale($("language") as HTMLSelectElement);
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      void this.signInWithKey();
    });
    if (this.config.oidc !== null) {
      const button = $("oidc-sign-in");
      localise(button, text("signInWith", { provider: this.config.oidc.provider_name }));
      const oidc = this.config.oidc;
      button.addEventListener("click", () => void startOidc(oidc));
      $("oidc").hidden = false;
    }
    $("sign-out").addEventListener("click", () => {
      forgetToken();
      location.assign("/");
    });
    $("nav-chat").addEventListener("click", () => this.showPage("chat"));
    $("nav-documents").addEventListener("click", () => {
      this.showPage("documents");
      void this.loadDocuments();
    });
    $("new-chat").addEventListener("click", () => this.newChat());
    $("ask-form").addEventListener("submit", (event) => {
      event.preventDefault();
      void this.ask();
    });
    const question = $("question") as HTMLTextAreaElement;
    question.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        void this.ask();
      }
    });
    $("source-close").addEventListener("click", () => this.closeSource());
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !$("source-panel").hidden) this.closeSource();
    });
    $("upload-form").addEventListener("submit", (event) => {
      event.preventDefault();
      void this.upload();
    });
  }

  private showSignIn(error: Text | null): void {
    $("sign-in").hidden = false;
    $("chat-page").hidden = true;
    $("documents-page").hidden = true;
    $("nav").hidden = true;
    localise($("sign-in-error"), error);
    ($("api-key") as HTMLInputElement).focus();
  }

  private async signInWithKey(): Promise<void> {
    const input = $("api-key") as HTMLInputElement;
    const key = input.value.trim();
    if (!key) return;
    this.api = new Api(key);
    try {
      await this.enter(text("whoKey"));
      storeToken(key, "api-key");
      input.value = "";
    } catch (error) {
      localise($("sign-in-error"), messageOf(error));
    }
  }

  /** Signed in: the conversation list is the first request, so a refused credential fails here. */
  private async enter(who: Text): Promise<void> {
    await this.loadConversations();
    localise($("who"), who);
    $("sign-in").hidden = true;
    $("nav").hidden = false;
    this.showPage("chat");
    this.newChat();
  }

  private showPage(page: "chat" | "documents"): void {
    $("chat-page").hidden = page !== "chat";
    $("documents-page").hidden = page !== "documents";
    $("nav-chat").toggleAttribute("aria-current", page === "chat");
    $("nav-documents").toggleAttribute("aria-current", page === "documents");
    if (page === "chat") $("nav-chat").setAttribute("aria-current", "page");
    else $("nav-documents").setAttribute("aria-current", "page");
  }

  // ------------------------------------------------------------------ conversations

  private async loadConversations(): Promise<void> {
    const { conversations } = await this.api.conversations();
    const list = $("conversations");
    list.replaceChildren(...conversations.map((c) => this.conversationItem(c)));
    if (conversations.length === 0) list.append(el("li", { className: "hint", msg: "noConversations" }));
  }

  private conversationItem(summary: ConversationSummary): HTMLLIElement {
    const open = el("button", {
      className: "open",
      ...(summary.title ? { text: summary.title } : { msg: "untitled" }),
      attrs: { type: "button", title: summary.title },
    });
    open.addEventListener("click", () => void this.openConversation(summary.conversation_id));
    const remove = el("button", {
      className: "delete",
      text: "×",
      attrs: { type: "button" },
      msgAttrs: { "aria-label": text("deleteConversation", { title: summary.title }) },
    });
    remove.addEventListener("click", () => void this.deleteConversation(summary));
    const item = el("li", { attrs: { "data-conversation": summary.conversation_id } }, open, remove);
    if (summary.conversation_id === this.conversationId) item.classList.add("current");
    return item;
  }

  private markCurrent(): void {
    for (const item of $("conversations").querySelectorAll("li[data-conversation]")) {
      item.classList.toggle("current", item.getAttribute("data-conversation") === this.conversationId);
    }
  }

  private newChat(): void {
    this.conversationId = null;
    this.turnCount = 0;
    $("messages").replaceChildren(
      el("p", { className: "hint", msg: "newChatHint" }),
    );
    this.closeSource();
    this.markCurrent();
    ($("question") as HTMLTextAreaElement).focus();
  }

  private async openConversation(id: string): Promise<void> {
    try {
      const conversation = await this.api.conversation(id);
      this.conversationId = id;
      this.turnCount = conversation.turns.length;
      const messages = $("messages");
      messages.replaceChildren();
      let question: HTMLElement | null = null;
      let bubble: HTMLElement | null = null;
      for (const [index, turn] of conversation.turns.entries()) {
        question = el("div", { className: "message user", text: turn.message, attrs: turn.language ? { lang: turn.language } : {} });
        bubble = el("div", { className: "message assistant" });
        messages.append(question, bubble);
        const { answer, citations, abstained, answer_span, conflict } = turn;
        this.renderAnswer(bubble, { answer, citations, abstained, answer_span, conflict, language: turn.language ?? null }, index);
      }
      this.closeSource();
      this.markCurrent();
      // The last exchange in view, as after asking it.
      if (question !== null && bubble !== null) revealTurn(question, bubble);
    } catch (error) {
      this.notice(messageOf(error));
      await this.loadConversations();
    }
  }

  private async deleteConversation(summary: ConversationSummary): Promise<void> {
    if (!confirm(format(text("confirmDeleteConversation", { title: summary.title })))) return;
    try {
      await this.api.deleteConversation(summary.conversation_id);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) this.notice(messageOf(error));
    }
    if (summary.conversation_id === this.conversationId) this.newChat();
    await this.loadConversations();
    ($("new-chat") as HTMLButtonElement).focus();
  }

  private notice(message: Text): void {
    $("messages").append(el("p", { className: "error", msg: message, attrs: { role: "alert" } }));
  }

  // ------------------------------------------------------------------ asking

  private async ask(): Promise<void> {
    const input = $("question") as HTMLTextAreaElement;
    const message = input.value.trim();
    if (!message || this.busy) return;
    this.busy = true;
    ($("send") as HTMLButtonElement).disabled = true;
    input.value = "";
    const messages = $("messages");
    messages.querySelector(":scope > p.hint")?.remove();
    const question = el("div", { className: "message user", text: message });
    messages.append(question);
    const bubble = el("div", { className: "message assistant streaming", attrs: { "aria-busy": "true" } });
    const answer = el("div", { className: "answer" });
    const status = el("p", { className: "meta-line", msg: "searching" });
    bubble.append(answer, status);
    messages.append(bubble);
    revealTurn(question, bubble);
    let final: ChatResponse | null = null;
    try {
      await this.api.chatStream(message, this.conversationId, (event) => {
        switch (event.event) {
          case "meta":
            this.conversationId = event.data.conversation_id;
            localise(status, event.data.intent === "rag" ? "checking" : null);
            break;
          case "token":
            answer.append(event.data.text);
            bubble.dataset["tokens"] = String(Number(bubble.dataset["tokens"] ?? "0") + 1);
            revealTurn(question, bubble);
            break;
          case "final":
            final = event.data;
            break;
          case "error":
            if (event.data.stage) throw new LocalisedError(text("streamError", { error: event.data.error, stage: event.data.stage }));
            throw new ApiError(event.data.status, event.data.error);
        }
      });
      if (final === null) throw new LocalisedError(text("streamEndedEarly"));
      const response: ChatResponse = final;
      if (response.language) question.lang = response.language;
      this.conversationId = response.conversation_id;
      this.renderAnswer(bubble, response, this.turnCount);
      revealTurn(question, bubble);
      this.turnCount += 1;
      await this.loadConversations();
      this.markCurrent();
    } catch (error) {
      bubble.classList.remove("streaming");
      bubble.removeAttribute("aria-busy");
      status.remove();
      bubble.append(el("p", { className: "error", msg: text("noAnswer", { reason: messageOf(error) }), attrs: { role: "alert" } }));
      revealTurn(question, bubble);
    } finally {
      this.busy = false;
      ($("send") as HTMLButtonElement).disabled = false;
      // The answer just shown keeps its place: focusing the question box scrolls nothing.
      input.focus({ preventScroll: true });
    }
  }

  private renderAnswer(
    bubble: HTMLElement,
    response: Pick<ChatResponse, "answer" | "citations" | "abstained"> & Partial<ChatResponse>,
    turnIndex: number,
  ): void {
    bubble.classList.remove("streaming");
    bubble.removeAttribute("aria-busy");
    const byId = new Map(response.citations.map((c) => [c.id, c]));
    // Every way to a citation opens it with the phrase that answers marked, when it holds that phrase.
    const cite = (citation: Citation, label: string | (Node | string)[]) =>
      this.citeButton(citation, label, spanIn(citation, response.answer_span));
    // In the question's language when the service says which (for screen readers); the chrome around it
    // stays in the page's.
    const answer = el("div", { className: "answer", attrs: response.language ? { lang: response.language } : {} });
    // "[n]" markers become buttons that open the cited sentence.
    const parts = response.answer.split(/(\[\d+\])/);
    for (const part of parts) {
      const match = /^\[(\d+)\]$/.exec(part);
      const citation = match ? byId.get(Number(match[1])) : undefined;
      if (citation) answer.append(cite(citation, part));
      else if (part) answer.append(part);
    }
    if (response.answer_span) markPhrase(answer, response.answer_span.text);
    const children: Node[] = [answer];
    if (response.conflict) {
      children.unshift(conflictNotice(response.conflict, (id) => {
        const citation = byId.get(id);
        return citation ? cite(citation, `[${id}]`) : null;
      }));
    }
    const conversationId = this.conversationId;
    if (response.abstained) {
      const reason = abstentionText(response.abstain_reason ?? "", response.answerability ?? null, response.intent ?? "rag");
      children.push(el("div", { className: "notice abstained", attrs: { role: "note" } },
        el("strong", { msg: "noAnswerFromDocuments" }), ...reason.flatMap((part) => [" ", el("span", { msg: part })])));
    }
    if (response.degraded && response.degraded.length > 0) {
      const details = el("details", {}, el("summary", { msg: "technicalDetails" }), ...response.degraded.map((d) => el("div", { text: d })));
      children.push(el("div", { className: "notice degraded", attrs: { role: "note" } },
        el("strong", { msg: "reducedMode" }),
        ...response.degraded.flatMap((entry) => [" ", el("span", { msg: degradedText(entry) })]),
        details));
    }
    if (response.citations.length > 0) {
      const sources = el("ol", { className: "sources", msgAttrs: { "aria-label": "sources" } });
      for (const citation of response.citations) {
        const quote = citation.quote;
        const label = quote ? ["“", ...quoteParts(quote, spanIn(citation, response.answer_span)), "”"] : whereOf(citation);
        const item = el("li", { attrs: { value: String(citation.id) } },
          cite(citation, label),
          el("span", { className: "where" }, ...(quote ? [" ", ...whereOf(citation)] : [])));
        sources.append(item);
      }
      children.push(sources);
    }
    if (response.answer_mode) {
      const mode = response.answer_mode === "extractive" ? "answerExtractive" : "answerGenerative";
      children.push(el("p", { className: "meta-line", msg: mode }));
    }
    if (conversationId !== null) children.push(this.feedbackControls(conversationId, turnIndex));
    bubble.replaceChildren(...children);
  }

  private citeButton(citation: Citation, label: string | (Node | string)[], span: AnswerSpan | null = null): HTMLButtonElement {
    const isMarker = typeof label === "string" && /^\[\d+\]$/.test(label);
    const button = el("button", {
      className: isMarker ? "cite" : "source-link",
      attrs: { type: "button", "data-cite": String(citation.id) },
      msgAttrs: { "aria-label": text("citeLabel", { id: String(citation.id), title: citation.title || citation.source }) },
    }, ...(typeof label === "string" ? [label] : label));
    const conversationId = this.conversationId;
    button.addEventListener("click", () => void this.openSource(conversationId, citation, span));
    return button;
  }

  // ------------------------------------------------------------------ sources

  private async openSource(conversationId: string | null, citation: Citation, span: AnswerSpan | null): Promise<void> {
    const panel = $("source-panel");
    const meta = $("source-meta");
    const body = $("source-text");
    const title = citation.title || citation.source;
    localise($("source-title"), title ? verbatim(title) : "source");
    const rows: [Localisable, string][] = [];
    if (citation.section_path.length) rows.push(["section", citation.section_path.join(" › ")]);
    if (citation.page != null) rows.push(["page", String(citation.page)]);
    if (citation.source) rows.push(["source", citation.source]);
    meta.replaceChildren(...rows.flatMap(([term, value]) => [el("dt", { msg: term }), el("dd", { text: value })]));
    body.replaceChildren(el("p", { className: "hint", msg: "loadingSource" }));
    panel.hidden = false;
    $("chat-page").classList.add("with-source");
    panel.focus();
    try {
      if (conversationId === null) throw new LocalisedError(text("notStored"));
      const source = await this.api.source(conversationId, citation.chunk_id);
      const { start, end } = citation;
      if (start != null && end != null && end <= source.text.length && start < end) {
        const mark = el("mark", { attrs: { id: "cited-sentence" } }, ...sentenceParts(source.text.slice(start, end), span));
        body.replaceChildren(source.text.slice(0, start), mark, source.text.slice(end));
        mark.scrollIntoView({ block: "center" });
      } else {
        body.replaceChildren(source.text, el("p", { className: "hint", msg: text("cited", { quote: citation.quote }) }));
      }
    } catch (error) {
      body.replaceChildren(
        el("p", { className: "error", msg: text("sourceUnavailable", { reason: messageOf(error) }) }),
        el("p", { msg: text("citedSentence", { quote: citation.quote }) }),
      );
    }
  }

  private closeSource(): void {
    const panel = $("source-panel");
    if (panel.hidden) return;
    panel.hidden = true;
    $("chat-page").classList.remove("with-source");
    ($("question") as HTMLTextAreaElement).focus();
  }

  // ------------------------------------------------------------------ feedback

  private feedbackControls(conversationId: string, turnIndex: number): HTMLElement {
    const rate = (rating: Rating) => ({ type: "button", "aria-pressed": "false", "data-rating": rating });
    const up = el("button", { msg: "good", attrs: rate("up"), msgAttrs: { "aria-label": "goodAnswer" } });
    const down = el("button", { msg: "bad", attrs: rate("down"), msgAttrs: { "aria-label": "badAnswer" } });
    const comment = el("input", {
      attrs: { type: "text", maxlength: "2000" },
      msgAttrs: { "aria-label": "commentLabel", placeholder: "commentPlaceholder" },
    });
    const send = el("button", { msg: "sendFeedback", attrs: { type: "button" } });
    const status = el("span", { className: "status", attrs: { role: "status" } });
    let rating: Rating | null = null;
    const choose = (chosen: Rating) => {
      rating = chosen;
      up.setAttribute("aria-pressed", String(chosen === "up"));
      down.setAttribute("aria-pressed", String(chosen === "down"));
      comment.hidden = false;
      send.hidden = false;
      comment.focus();
    };
    comment.hidden = true;
    send.hidden = true;
    up.addEventListener("click", () => choose("up"));
    down.addEventListener("click", () => choose("down"));
    send.addEventListener("click", async () => {
      if (rating === null) return;
      send.disabled = true;
      try {
        await this.api.feedback(conversationId, turnIndex, rating, comment.value.trim() || null);
        localise(status, "feedbackThanks");
        comment.hidden = true;
        send.hidden = true;
      } catch (error) {
        localise(status, error instanceof ApiError && (error.status === 404 || error.status === 405)
          ? "feedbackUnavailable"
          : text("feedbackNotSent", { reason: messageOf(error) }));
        send.disabled = false;
      }
    });
    return el("div", { className: "feedback", attrs: { role: "group" }, msgAttrs: { "aria-label": "rateAnswer" } }, up, down, comment, send, status);
  }

  // ------------------------------------------------------------------ documents

  private async loadDocuments(): Promise<void> {
    const body = $("documents").querySelector("tbody") as HTMLTableSectionElement;
    localise($("documents-error"), null);
    try {
      const { documents } = await this.api.documents();
      body.replaceChildren(
        ...documents.map((doc) => {
          const remove = el("button", {
            msg: "delete",
            attrs: { type: "button" },
            msgAttrs: { "aria-label": text("deleteDocument", { name: doc.title || doc.doc_id }) },
          });
          remove.addEventListener("click", () => void this.deleteDocument(doc.doc_id, doc.title || doc.doc_id));
          return el("tr", { attrs: { "data-doc": doc.doc_id } },
            el("td", { text: doc.title || doc.doc_id }), el("td", { text: doc.source }),
            el("td", { text: String(doc.chunks) }), el("td", {}, remove));
        }),
      );
      if (documents.length === 0) body.append(el("tr", {}, el("td", { msg: "noDocuments", attrs: { colspan: "4" } })));
    } catch (error) {
      localise($("documents-error"), messageOf(error));
    }
  }

  private async deleteDocument(docId: string, name: string): Promise<void> {
    if (!confirm(format(text("confirmDeleteDocument", { name })))) return;
    try {
      await this.api.deleteDocument(docId);
    } catch (error) {
      localise($("documents-error"), messageOf(error));
    }
    await this.loadDocuments();
  }

  /** One request per file, so each file gets its own summary line; one bar for the whole batch. */
  private async upload(): Promise<void> {
    const input = $("files") as HTMLInputElement;
    const files = Array.from(input.files ?? []);
    if (files.length === 0) return;
    const button = $("upload") as HTMLButtonElement;
    button.disabled = true;
    const progress = $("upload-progress") as HTMLProgressElement;
    const label = $("upload-label");
    const summary = $("upload-summary");
    const rows = summary.querySelector("tbody") as HTMLTableSectionElement;
    rows.replaceChildren();
    summary.hidden = false;
    $("upload-status").hidden = false;
    const total = files.reduce((sum, file) => sum + Math.max(file.size, 1), 0);
    let done = 0;
    for (const [index, file] of files.entries()) {
      localise(label, text("uploadingFile", { file: file.name, index: index + 1, total: files.length }));
      const result = el("td", { msg: "uploadingShort" });
      rows.append(el("tr", {}, el("td", { text: file.name }), result));
      try {
        const response = await this.api.upload(file, (fraction) => {
          progress.value = Math.round(((done + fraction * Math.max(file.size, 1)) / total) * 100);
        });
        localise(result, fileSummary(response));
        if (response.failed.length > 0) result.classList.add("failed");
      } catch (error) {
        localise(result, text("uploadFailed", { reason: messageOf(error) }));
        result.classList.add("failed");
      }
      done += Math.max(file.size, 1);
      progress.value = Math.round((done / total) * 100);
    }
    localise(label, text("uploadDone", { count: files.length }));
    button.disabled = false;
    input.value = "";
    await this.loadDocuments();
  }
}

async function main(): Promise<void> {
  let config: AuthConfig;
  try {
    const response = await fetch("/v1/auth/config");
    config = (await response.json()) as AuthConfig;
  } catch {
    config = { auth: "on", api_keys: true, oidc: null };
  }
  await new App(config).start();
}

void main();

// The web chat: sign-in, conversations, streamed answers with clickable citations, feedback,
// and the documents page. DOM built with createElement/textContent only (no innerHTML): what the
// server or a document says is never parsed as markup.

import { Api, ApiError } from "./api.js";
import type { AuthConfig, ChatResponse, Citation, ConversationSummary, Rating } from "./api.js";
import { finishOidc, forgetToken, startOidc, storeToken, storedToken } from "./auth.js";
import { abstentionText, degradedText } from "./wording.js";

function $(id: string): HTMLElement {
  const element = document.getElementById(id);
  if (element === null) throw new Error(`#${id} missing from the page`);
  return element;
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { className?: string; text?: string; attrs?: Record<string, string> } = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.className) node.className = props.className;
  if (props.text !== undefined) node.textContent = props.text;
  for (const [name, value] of Object.entries(props.attrs ?? {})) node.setAttribute(name, value);
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

function messageOf(error: unknown): string {
  if (error instanceof ApiError && error.status === 401) return "Your sign-in was not accepted or has expired. Sign in again.";
  if (error instanceof ApiError && error.status === 403) return `Not allowed: ${error.message}`;
  if (error instanceof ApiError && error.status === 429) return "Too many requests; wait a moment and try again.";
  return error instanceof Error ? error.message : String(error);
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
      await this.enter("local user (authentication off)");
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
      this.showSignIn("");
      return;
    }
    this.api = new Api(stored.token);
    try {
      await this.enter(stored.kind === "oidc" ? `signed in with ${this.config.oidc?.provider_name ?? "OIDC"}` : "signed in with an API key");
    } catch (error) {
      forgetToken();
      this.showSignIn(messageOf(error));
    }
  }

  private bind(): void {
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      void this.signInWithKey();
    });
    if (this.config.oidc !== null) {
      const button = $("oidc-sign-in");
      button.textContent = `Sign in with ${this.config.oidc.provider_name}`;
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

  private showSignIn(error: string): void {
    $("sign-in").hidden = false;
    $("chat-page").hidden = true;
    $("documents-page").hidden = true;
    $("nav").hidden = true;
    $("sign-in-error").textContent = error;
    ($("api-key") as HTMLInputElement).focus();
  }

  private async signInWithKey(): Promise<void> {
    const input = $("api-key") as HTMLInputElement;
    const key = input.value.trim();
    if (!key) return;
    this.api = new Api(key);
    try {
      await this.enter("signed in with an API key");
      storeToken(key, "api-key");
      input.value = "";
    } catch (error) {
      $("sign-in-error").textContent = messageOf(error);
    }
  }

  /** Signed in: the conversation list is the first request, so a refused credential fails here. */
  private async enter(who: string): Promise<void> {
    await this.loadConversations();
    $("who").textContent = who;
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
    if (conversations.length === 0) list.append(el("li", { className: "hint", text: "No conversations yet." }));
  }

  private conversationItem(summary: ConversationSummary): HTMLLIElement {
    const open = el("button", {
      className: "open",
      text: summary.title || "(untitled)",
      attrs: { type: "button", title: summary.title },
    });
    open.addEventListener("click", () => void this.openConversation(summary.conversation_id));
    const remove = el("button", {
      className: "delete",
      text: "×",
      attrs: { type: "button", "aria-label": `Delete conversation: ${summary.title}` },
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
      el("p", { className: "hint", text: "Ask a question about your organisation's documents. Answers cite their sources: select a [n] marker to see the sentence it comes from." }),
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
        question = el("div", { className: "message user", text: turn.message });
        bubble = el("div", { className: "message assistant" });
        messages.append(question, bubble);
        this.renderAnswer(bubble, { answer: turn.answer, citations: turn.citations, abstained: turn.abstained }, index);
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
    if (!confirm(`Delete the conversation "${summary.title}"?`)) return;
    try {
      await this.api.deleteConversation(summary.conversation_id);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) this.notice(messageOf(error));
    }
    if (summary.conversation_id === this.conversationId) this.newChat();
    await this.loadConversations();
    ($("new-chat") as HTMLButtonElement).focus();
  }

  private notice(text: string): void {
    $("messages").append(el("p", { className: "error", text, attrs: { role: "alert" } }));
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
    const status = el("p", { className: "meta-line", text: "Searching the documents…" });
    bubble.append(answer, status);
    messages.append(bubble);
    revealTurn(question, bubble);
    let final: ChatResponse | null = null;
    try {
      await this.api.chatStream(message, this.conversationId, (event) => {
        switch (event.event) {
          case "meta":
            this.conversationId = event.data.conversation_id;
            status.textContent = event.data.intent === "rag" ? "Checking the answer against the sources…" : "";
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
            throw new ApiError(event.data.status, `${event.data.error}${event.data.stage ? ` (stage: ${event.data.stage})` : ""}`);
        }
      });
      if (final === null) throw new Error("the answer stream ended early; please ask again");
      const response: ChatResponse = final;
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
      bubble.append(el("p", { className: "error", text: `No answer: ${messageOf(error)}`, attrs: { role: "alert" } }));
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
    const answer = el("div", { className: "answer" });
    // "[n]" markers become buttons that open the cited sentence.
    const parts = response.answer.split(/(\[\d+\])/);
    for (const part of parts) {
      const match = /^\[(\d+)\]$/.exec(part);
      const citation = match ? byId.get(Number(match[1])) : undefined;
      if (citation) answer.append(this.citeButton(citation, part));
      else if (part) answer.append(part);
    }
    const children: Node[] = [answer];
    const conversationId = this.conversationId;
    if (response.abstained) {
      children.push(el("div", { className: "notice abstained", attrs: { role: "note" } },
        el("strong", { text: "No answer from the documents. " }),
        abstentionText(response.abstain_reason ?? "", response.answerability ?? null, response.intent ?? "rag")));
    }
    if (response.degraded && response.degraded.length > 0) {
      const details = el("details", {}, el("summary", { text: "Technical details" }), ...response.degraded.map((d) => el("div", { text: d })));
      children.push(el("div", { className: "notice degraded", attrs: { role: "note" } },
        el("strong", { text: "Answered in a reduced mode. " }),
        response.degraded.map(degradedText).join(" "),
        details));
    }
    if (response.citations.length > 0) {
      const sources = el("ol", { className: "sources", attrs: { "aria-label": "Sources" } });
      for (const citation of response.citations) {
        const where = [citation.title || citation.source, citation.section_path.join(" › "), citation.page != null ? `page ${citation.page}` : ""]
          .filter(Boolean).join(" — ");
        const quote = citation.quote.length > 90 ? `${citation.quote.slice(0, 89).trimEnd()}…` : citation.quote;
        const item = el("li", { attrs: { value: String(citation.id) } },
          this.citeButton(citation, quote ? `“${quote}”` : where), el("span", { className: "where", text: quote ? ` ${where}` : "" }));
        sources.append(item);
      }
      children.push(sources);
    }
    if (response.answer_mode) {
      const mode = response.answer_mode === "extractive" ? "quoted from the sources" : "written from the sources and checked";
      children.push(el("p", { className: "meta-line", text: `Answer ${mode}.` }));
    }
    if (conversationId !== null) children.push(this.feedbackControls(conversationId, turnIndex));
    bubble.replaceChildren(...children);
  }

  private citeButton(citation: Citation, label: string): HTMLButtonElement {
    const isMarker = /^\[\d+\]$/.test(label);
    const button = el("button", {
      className: isMarker ? "cite" : "source-link",
      text: label,
      attrs: { type: "button", "aria-label": `Source ${citation.id}: ${citation.title || citation.source}`, "data-cite": String(citation.id) },
    });
    const conversationId = this.conversationId;
    button.addEventListener("click", () => void this.openSource(conversationId, citation));
    return button;
  }

  // ------------------------------------------------------------------ sources

  private async openSource(conversationId: string | null, citation: Citation): Promise<void> {
    const panel = $("source-panel");
    const meta = $("source-meta");
    const text = $("source-text");
    $("source-title").textContent = citation.title || citation.source || "Source";
    const rows: [string, string][] = [];
    if (citation.section_path.length) rows.push(["Section", citation.section_path.join(" › ")]);
    if (citation.page != null) rows.push(["Page", String(citation.page)]);
    if (citation.source) rows.push(["Source", citation.source]);
    meta.replaceChildren(...rows.flatMap(([term, value]) => [el("dt", { text: term }), el("dd", { text: value })]));
    text.replaceChildren(el("p", { className: "hint", text: "Loading the source…" }));
    panel.hidden = false;
    $("chat-page").classList.add("with-source");
    panel.focus();
    try {
      if (conversationId === null) throw new Error("this answer is not part of a stored conversation");
      const source = await this.api.source(conversationId, citation.chunk_id);
      const { start, end } = citation;
      if (start != null && end != null && end <= source.text.length && start < end) {
        const mark = el("mark", { text: source.text.slice(start, end), attrs: { id: "cited-sentence" } });
        text.replaceChildren(source.text.slice(0, start), mark, source.text.slice(end));
        mark.scrollIntoView({ block: "center" });
      } else {
        text.replaceChildren(source.text, el("p", { className: "hint", text: `Cited: “${citation.quote}”` }));
      }
    } catch (error) {
      text.replaceChildren(
        el("p", { className: "error", text: `The source text is not available: ${messageOf(error)}` }),
        el("p", { text: `Cited sentence: “${citation.quote}”` }),
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
    const up = el("button", { text: "▲ Good", attrs: { type: "button", "aria-label": "Good answer", "aria-pressed": "false", "data-rating": "up" } });
    const down = el("button", { text: "▼ Bad", attrs: { type: "button", "aria-label": "Bad answer", "aria-pressed": "false", "data-rating": "down" } });
    const comment = el("input", { attrs: { type: "text", "aria-label": "Comment on this answer (optional)", placeholder: "Comment (optional)", maxlength: "2000" } });
    const send = el("button", { text: "Send feedback", attrs: { type: "button" } });
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
        status.textContent = "Thank you for your feedback.";
        comment.hidden = true;
        send.hidden = true;
      } catch (error) {
        status.textContent = error instanceof ApiError && (error.status === 404 || error.status === 405)
          ? "Feedback is not available on this server."
          : `Feedback not sent: ${messageOf(error)}`;
        send.disabled = false;
      }
    });
    return el("div", { className: "feedback", attrs: { role: "group", "aria-label": "Rate this answer" } }, up, down, comment, send, status);
  }

  // ------------------------------------------------------------------ documents

  private async loadDocuments(): Promise<void> {
    const body = $("documents").querySelector("tbody") as HTMLTableSectionElement;
    $("documents-error").textContent = "";
    try {
      const { documents } = await this.api.documents();
      body.replaceChildren(
        ...documents.map((doc) => {
          const remove = el("button", { text: "Delete", attrs: { type: "button", "aria-label": `Delete ${doc.title || doc.doc_id}` } });
          remove.addEventListener("click", () => void this.deleteDocument(doc.doc_id, doc.title || doc.doc_id));
          return el("tr", { attrs: { "data-doc": doc.doc_id } },
            el("td", { text: doc.title || doc.doc_id }), el("td", { text: doc.source }),
            el("td", { text: String(doc.chunks) }), el("td", {}, remove));
        }),
      );
      if (documents.length === 0) body.append(el("tr", {}, el("td", { text: "No documents yet.", attrs: { colspan: "4" } })));
    } catch (error) {
      $("documents-error").textContent = messageOf(error);
    }
  }

  private async deleteDocument(docId: string, name: string): Promise<void> {
    if (!confirm(`Delete the document "${name}" from the index?`)) return;
    try {
      await this.api.deleteDocument(docId);
    } catch (error) {
      $("documents-error").textContent = messageOf(error);
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
      label.textContent = `Uploading ${file.name} (${index + 1} of ${files.length})…`;
      const result = el("td", { text: "uploading…" });
      rows.append(el("tr", {}, el("td", { text: file.name }), result));
      try {
        const response = await this.api.upload(file, (fraction) => {
          progress.value = Math.round(((done + fraction * Math.max(file.size, 1)) / total) * 100);
        });
        result.textContent = fileSummary(response);
        if (response.failed.length > 0) result.classList.add("failed");
      } catch (error) {
        result.textContent = `failed: ${messageOf(error)}`;
        result.classList.add("failed");
      }
      done += Math.max(file.size, 1);
      progress.value = Math.round((done / total) * 100);
    }
    label.textContent = `Done: ${files.length} file${files.length === 1 ? "" : "s"}.`;
    button.disabled = false;
    input.value = "";
    await this.loadDocuments();
  }
}

function fileSummary(response: { documents: number; chunks: number; skipped: number; failed: { reason: string }[] }): string {
  if (response.failed.length > 0) return `failed: ${response.failed.map((f) => f.reason).join("; ")}`;
  if (response.skipped > 0 && response.documents === 0) return "unchanged (already indexed)";
  const chunks = `${response.chunks} chunk${response.chunks === 1 ? "" : "s"}`;
  const docs = response.documents === 1 ? "" : ` in ${response.documents} documents`;
  return `indexed: ${chunks}${docs}${response.skipped > 0 ? `, ${response.skipped} unchanged` : ""}`;
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

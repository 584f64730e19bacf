// The gateway's JSON API as the page uses it: typed bodies, one place that adds the credential
// and turns error bodies into ApiError.

export interface Citation {
  id: number;
  source: string;
  title: string;
  page: number | null;
  chunk_id: string;
  score: number;
  quote: string;
  start: number | null;
  end: number | null;
  section_path: string[];
}

/** The phrase that answers: ``quote.slice(start, end) === text`` of the citation numbered ``citation``. */
export interface AnswerSpan {
  citation: number;
  start: number;
  end: number;
  text: string;
  kind: string;
}

/** The sources' disagreement: each value as a source words it, with the citations that state it. */
export interface Conflict {
  kind: string;
  values: { value: string; citations: number[] }[];
}

export interface ChatResponse {
  conversation_id: string;
  answer: string;
  citations: Citation[];
  refined_query: string;
  abstained: boolean;
  abstain_reason?: string;
  /** The question's language (ISO 639-1) when the service identified it; the answer is written in it. */
  language?: string | null;
  timings_ms: Record<string, number>;
  degraded: string[];
  intent: string;
  answer_mode: string | null;
  answerability: number | null;
  claims_dropped: number;
  answer_span?: AnswerSpan | null;
  conflict?: Conflict | null;
}

export interface Turn {
  message: string;
  refined_query: string;
  answer: string;
  citations: Citation[];
  abstained: boolean;
  intent: string;
  created_at: number;
  language?: string | null;
  answer_span?: AnswerSpan | null;
  conflict?: Conflict | null;
}

export interface ConversationSummary {
  conversation_id: string;
  title: string;
  turns: number;
  updated_at: number;
}

export interface SourceChunk {
  chunk_id: string;
  doc_id: string;
  title: string;
  source: string;
  page: number | null;
  section_path: string[];
  text: string;
}

export interface DocumentInfo {
  doc_id: string;
  title: string;
  source: string;
  chunks: number;
}

export interface IngestResponse {
  documents: number;
  chunks: number;
  skipped: number;
  failed: { name: string; reason: string }[];
  doc_ids: string[];
}

export interface OidcConfig {
  provider_name: string;
  client_id: string;
  authorization_url: string;
  token_url: string;
  scope: string;
}

export interface AuthConfig {
  auth: "on" | "off";
  api_keys: boolean;
  oidc: OidcConfig | null;
}

export type Rating = "up" | "down";

export class ApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** One event of POST /v1/chat/stream. */
export type StreamEvent =
  | { event: "meta"; data: { conversation_id: string; refined_query: string; intent: string } }
  | { event: "token"; data: { text: string } }
  | { event: "final"; data: ChatResponse }
  | { event: "error"; data: { error: string; status: number; stage: string | null } };

async function errorOf(response: Response): Promise<ApiError> {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = (await response.json()) as { error?: string };
    if (body.error) message = body.error;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, message);
}

export function segment(value: string): string {
  return encodeURIComponent(value);
}

export class Api {
  constructor(private token: string | null) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const headers: Record<string, string> = { ...extra };
    if (this.token) headers["Authorization"] = `Bearer ${this.token}`;
    return headers;
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const init: RequestInit = { method, headers: this.headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(path, init);
    if (!response.ok) throw await errorOf(response);
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  conversations(): Promise<{ conversations: ConversationSummary[] }> {
    return this.request("GET", "/v1/conversations");
  }

  conversation(id: string): Promise<{ conversation_id: string; turns: Turn[] }> {
    return this.request("GET", `/v1/conversations/${segment(id)}`);
  }

  deleteConversation(id: string): Promise<void> {
    return this.request("DELETE", `/v1/conversations/${segment(id)}`);
  }

  source(conversationId: string, chunkId: string): Promise<SourceChunk> {
    return this.request("GET", `/v1/conversations/${segment(conversationId)}/sources/${segment(chunkId)}`);
  }

  feedback(conversationId: string, turnIndex: number, rating: Rating, comment: string | null): Promise<unknown> {
    return this.request("POST", `/v1/conversations/${segment(conversationId)}/turns/${turnIndex}/feedback`, { rating, comment });
  }

  documents(): Promise<{ documents: DocumentInfo[] }> {
    return this.request("GET", "/v1/documents");
  }

  deleteDocument(docId: string): Promise<unknown> {
    return this.request("DELETE", `/v1/documents/${segment(docId)}`);
  }

  /** Streams one chat turn; calls ``onEvent`` for each Server-Sent Event as it arrives. */
  async chatStream(message: string, conversationId: string | null, onEvent: (event: StreamEvent) => void): Promise<void> {
    const response = await fetch("/v1/chat/stream", {
      method: "POST",
      headers: this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify({ message, conversation_id: conversationId }),
    });
    if (!response.ok || response.body === null) throw await errorOf(response);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n/g, "\n");
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const parsed = parseEvent(block);
        if (parsed !== null) onEvent(parsed);
      }
    }
  }

  /** Uploads one file (multipart) with progress; resolves with the ingestion summary. */
  upload(file: File, onProgress: (fraction: number) => void): Promise<IngestResponse> {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", "/v1/documents");
      for (const [name, value] of Object.entries(this.headers())) xhr.setRequestHeader(name, value);
      xhr.upload.onprogress = (event) => {
        if (event.lengthComputable) onProgress(event.loaded / event.total);
      };
      xhr.onload = () => {
        let body: { error?: string } & Partial<IngestResponse> = {};
        try {
          body = JSON.parse(xhr.responseText);
        } catch {
          // keep {}
        }
        if (xhr.status === 200) resolve(body as IngestResponse);
        else reject(new ApiError(xhr.status, body.error ?? `${xhr.status} ${xhr.statusText}`));
      };
      // Status 0: no answer at all (the page words it as "the server could not be reached").
      xhr.onerror = () => reject(new ApiError(0, "the server could not be reached"));
      const form = new FormData();
      form.append("files", file, file.name);
      xhr.send(form);
    });
  }
}

function parseEvent(block: string): StreamEvent | null {
  let event = "message";
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return null;
  return { event, data: JSON.parse(data.join("\n")) } as StreamEvent;
}

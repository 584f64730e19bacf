// The gateway's JSON API as the page uses it: typed bodies, one place that adds the credential
// and turns error bodies into ApiError.
export class ApiError extends Error {
    constructor(status, message) {
        super(message);
        this.status = status;
    }
}
async function errorOf(response) {
    let message = `${response.status} ${response.statusText}`;
    try {
        const body = (await response.json());
        if (body.error)
            message = body.error;
    }
    catch {
        // not JSON: keep the status line
    }
    return new ApiError(response.status, message);
}
export function segment(value) {
    return encodeURIComponent(value);
}
export class Api {
    constructor(token) {
        this.token = token;
    }
    headers(extra = {}) {
        const headers = { ...extra };
        if (this.token)
            headers["Authorization"] = `Bearer ${this.token}`;
        return headers;
    }
    async request(method, path, body) {
        const init = { method, headers: this.headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
        if (body !== undefined)
            init.body = JSON.stringify(body);
        const response = await fetch(path, init);
        if (!response.ok)
            throw await errorOf(response);
        if (response.status === 204)
            return undefined;
        return (await response.json());
    }
    conversations() {
        return this.request("GET", "/v1/conversations");
    }
    conversation(id) {
        return this.request("GET", `/v1/conversations/${segment(id)}`);
    }
    deleteConversation(id) {
        return this.request("DELETE", `/v1/conversations/${segment(id)}`);
    }
    source(conversationId, chunkId) {
        return this.request("GET", `/v1/conversations/${segment(conversationId)}/sources/${segment(chunkId)}`);
    }
    feedback(conversationId, turnIndex, rating, comment) {
        return this.request("POST", `/v1/conversations/${segment(conversationId)}/turns/${turnIndex}/feedback`, { rating, comment });
    }
    documents() {
        return this.request("GET", "/v1/documents");
    }
    deleteDocument(docId) {
        return this.request("DELETE", `/v1/documents/${segment(docId)}`);
    }
    /** Streams one chat turn; calls ``onEvent`` for each Server-Sent Event as it arrives. */
    async chatStream(message, conversationId, onEvent) {
        const response = await fetch("/v1/chat/stream", {
            method: "POST",
            headers: this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
            body: JSON.stringify({ message, conversation_id: conversationId }),
        });
        if (!response.ok || response.body === null)
            throw await errorOf(response);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
            const { value, done } = await reader.read();
            if (done)
                break;
            buffer += value.replace(/\r\n/g, "\n");
            let end;
            while ((end = buffer.indexOf("\n\n")) >= 0) {
                const block = buffer.slice(0, end);
                buffer = buffer.slice(end + 2);
                const parsed = parseEvent(block);
                if (parsed !== null)
                    onEvent(parsed);
            }
        }
    }
    /** Uploads one file (multipart) with progress; resolves with the ingestion summary. */
    upload(file, onProgress) {
        return new Promise((resolve, reject) => {
            const xhr = new XMLHttpRequest();
            xhr.open("POST", "/v1/documents");
            for (const [name, value] of Object.entries(this.headers()))
                xhr.setRequestHeader(name, value);
            xhr.upload.onprogress = (event) => {
                if (event.lengthComputable)
                    onProgress(event.loaded / event.total);
            };
            xhr.onload = () => {
                let body = {};
                try {
                    body = JSON.parse(xhr.responseText);
                }
                catch {
                    // keep {}
                }
                if (xhr.status === 200)
                    resolve(body);
                else
                    reject(new ApiError(xhr.status, body.error ?? `${xhr.status} ${xhr.statusText}`));
            };
            // Status 0: no answer at all (the page words it as "the server could not be reached").
            xhr.onerror = () => reject(new ApiError(0, "the server could not be reached"));
            const form = new FormData();
            form.append("files", file, file.name);
            xhr.send(form);
        });
    }
}
function parseEvent(block) {
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
        if (line.startsWith(":"))
            continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" "))
            value = value.slice(1);
        if (field === "event")
            event = value;
        else if (field === "data")
            data.push(value);
    }
    if (data.length === 0)
        return null;
    return { event, data: JSON.parse(data.join("\n")) };
}

// What the answer's flags and an upload's outcome mean, in plain words for the reader (not the
// operator), as messages of the reader's language (messages-*.ts).

import type { MessageKey } from "./messages-en.js";
import { text } from "./i18n.js";
import type { Text } from "./i18n.js";

const ABSTENTIONS: Record<string, MessageKey> = {
  not_answerable: "abstainNotAnswerable",
  no_passages: "abstainNoPassages",
  no_evidence: "abstainNoEvidence",
  no_supported_claim: "abstainNoSupportedClaim",
  model_abstained: "abstainModel",
  invalid_output: "abstainInvalidOutput",
  out_of_scope: "abstainOutOfScope",
  generator_unavailable: "abstainGeneratorUnavailable",
};

/** The reason, the estimated chance when the gate judged it, and what the reader can do: one message each. */
export function abstentionText(reason: string, answerability: number | null, intent: string): Text[] {
  const key = ABSTENTIONS[reason] ?? (intent === "out_of_scope" ? "abstainOutOfScope" : "abstainOther");
  const parts = [text(key)];
  if (answerability !== null && reason === "not_answerable") {
    parts.push(text("answerability", { percent: Math.round(answerability * 100) }));
  }
  parts.push(text("tryRephrasing"));
  return parts;
}

const STAGES: [string, MessageKey][] = [
  ["refiner", "degradedRefiner"],
  ["reranker", "degradedReranker"],
  ["generator", "degradedGenerator"],
  ["llm", "degradedLlm"],
];

export function degradedText(entry: string): MessageKey {
  const lowered = entry.toLowerCase();
  for (const [stage, key] of STAGES) if (lowered.startsWith(stage)) return key;
  return "degradedOther";
}

/** One uploaded file's line in the summary. */
export function fileSummary(response: { documents: number; chunks: number; skipped: number; failed: { reason: string }[] }): Text {
  if (response.failed.length > 0) return text("uploadFailed", { reason: response.failed.map((f) => f.reason).join("; ") });
  if (response.skipped > 0 && response.documents === 0) return text("unchangedAlreadyIndexed");
  return text("indexed", {
    chunks: text("chunkCount", { count: response.chunks }),
    documents: response.documents === 1 ? "" : text("inDocuments", { count: response.documents }),
    unchanged: response.skipped > 0 ? text("unchangedCount", { count: response.skipped }) : "",
  });
}

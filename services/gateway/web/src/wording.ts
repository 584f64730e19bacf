// What the answer's flags mean, in plain words for the reader (not the operator).

const ABSTENTIONS: Record<string, string> = {
  not_answerable: "The documents found do not seem to answer this question.",
  no_passages: "No document matched the question.",
  no_evidence: "The documents found hold nothing that supports an answer.",
  no_supported_claim: "No statement could be backed by a cited source.",
  model_abstained: "The model found no answer in the sources.",
  invalid_output: "The model's answer could not be checked against the sources, so it is not shown.",
  out_of_scope: "This question is outside what the documents cover.",
  generator_unavailable: "The answering service is unavailable right now.",
};

export function abstentionText(reason: string, answerability: number | null, intent: string): string {
  let text = ABSTENTIONS[reason] ?? (intent === "out_of_scope" ? ABSTENTIONS["out_of_scope"]! : "No supported answer was found.");
  if (answerability !== null && reason === "not_answerable") {
    text += ` (Estimated chance the documents answer it: ${Math.round(answerability * 100)}%.)`;
  }
  return `${text} Try rephrasing, or check that the right documents are uploaded.`;
}

const STAGES: [string, string][] = [
  ["refiner", "The question rewriter was unavailable, so your message was searched with the previous question appended."],
  ["reranker", "The ranking service was unavailable, so sources are in search order."],
  ["generator", "The answer writer was unavailable, so the best-matching sentences are quoted."],
  ["llm", "The language model was busy or unavailable, so the best-matching sentences are quoted."],
];

export function degradedText(entry: string): string {
  const lowered = entry.toLowerCase();
  for (const [stage, text] of STAGES) if (lowered.startsWith(stage)) return text;
  return "A step was skipped to keep answering.";
}

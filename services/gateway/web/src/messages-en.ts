// The page's own words in English: the reference table. Its keys are the set every other language
// must translate exactly (each table is typed Record<MessageKey, Message>, so a missing or an extra
// key fails the build). What the service writes (answers, its abstention texts) is never here.
//
// "{name}" is replaced by the argument of that name; a plural message picks its form by the
// argument "count" through Intl.PluralRules of the language (English: one, other).

/** The forms of a message that depends on a number, by the CLDR plural category of the language. */
export interface Plural {
  one: string;
  few?: string;
  many?: string;
  other: string;
}

export type Message = string | Plural;

export const en = {
  languageName: "English",
  languageLabel: "Language",
  appTitle: "Document assistant",
  skipToContent: "Skip to content",
  pages: "Pages",
  navChat: "Chat",
  navDocuments: "Documents",
  signOut: "Sign out",
  verbatim: "{text}",

  // sign-in
  signInTitle: "Sign in",
  apiKey: "API key",
  apiKeyHintBefore: "Ask your administrator for a key (",
  apiKeyHintAfter: "). It is kept in this tab only.",
  signInWithKey: "Sign in with the key",
  or: "or",
  signInWith: "Sign in with {provider}",
  whoLocal: "local user (authentication off)",
  whoOidc: "signed in with {provider}",
  whoKey: "signed in with an API key",
  oidcFallbackName: "OIDC",
  oidcRefused: "the provider refused the sign-in: {reason}",
  oidcNotStarted: "no sign-in was started from this tab",
  oidcStateMismatch: "the sign-in answer does not match the request (state)",
  oidcNoToken: "the provider did not issue a token ({status})",
  oidcEmptyToken: "the provider's answer holds no token",

  // errors the page words itself
  errorSignIn: "Your sign-in was not accepted or has expired. Sign in again.",
  errorForbidden: "Not allowed: {reason}",
  errorTooMany: "Too many requests; wait a moment and try again.",
  errorUnreachable: "The server could not be reached.",

  // conversations
  conversationsLabel: "Conversations",
  newChat: "New chat",
  yourConversations: "Your conversations",
  noConversations: "No conversations yet.",
  untitled: "(untitled)",
  deleteConversation: "Delete conversation: {title}",
  confirmDeleteConversation: "Delete the conversation “{title}”?",

  // asking
  conversationLabel: "Conversation",
  questionLabel: "Your question",
  questionPlaceholder: "Ask a question about the documents (Enter to send, Shift+Enter for a new line)",
  send: "Send",
  newChatHint:
    "Ask a question about your organisation's documents. Answers cite their sources: select a [n] marker to see the sentence it comes from.",
  searching: "Searching the documents…",
  checking: "Checking the answer against the sources…",
  streamEndedEarly: "the answer stream ended early; please ask again",
  streamError: "{error} (stage: {stage})",
  noAnswer: "No answer: {reason}",

  // an answer's chrome
  noAnswerFromDocuments: "No answer from the documents.",
  tryRephrasing: "Try rephrasing, or check that the right documents are uploaded.",
  answerability: "(Estimated chance the documents answer it: {percent}%.)",
  abstainNotAnswerable: "The documents found do not seem to answer this question.",
  abstainNoPassages: "No document matched the question.",
  abstainNoEvidence: "The documents found hold nothing that supports an answer.",
  abstainNoSupportedClaim: "No statement could be backed by a cited source.",
  abstainModel: "The model found no answer in the sources.",
  abstainInvalidOutput: "The model's answer could not be checked against the sources, so it is not shown.",
  abstainOutOfScope: "This question is outside what the documents cover.",
  abstainGeneratorUnavailable: "The answering service is unavailable right now.",
  abstainOther: "No supported answer was found.",
  reducedMode: "Answered in a reduced mode.",
  technicalDetails: "Technical details",
  degradedRefiner: "The question rewriter was unavailable, so your message was searched with the previous question appended.",
  degradedReranker: "The ranking service was unavailable, so sources are in search order.",
  degradedGenerator: "The answer writer was unavailable, so the best-matching sentences are quoted.",
  degradedLlm: "The language model was busy or unavailable, so the best-matching sentences are quoted.",
  degradedOther: "A step was skipped to keep answering.",
  sources: "Sources",
  pageNumber: "page {page}",
  answerExtractive: "Answer quoted from the sources.",
  answerGenerative: "Answer written from the sources and checked.",
  citeLabel: "Source {id}: {title}",
  sourcesDisagree: "The sources disagree:",
  conflictValues: "What each source says",
  answerPhrase: "The phrase that answers",

  // the source panel
  source: "Source",
  closeSource: "Close the source",
  section: "Section",
  page: "Page",
  loadingSource: "Loading the source…",
  notStored: "this answer is not part of a stored conversation",
  cited: "Cited: “{quote}”",
  sourceUnavailable: "The source text is not available: {reason}",
  citedSentence: "Cited sentence: “{quote}”",

  // feedback
  rateAnswer: "Rate this answer",
  good: "▲ Good",
  bad: "▼ Bad",
  goodAnswer: "Good answer",
  badAnswer: "Bad answer",
  commentLabel: "Comment on this answer (optional)",
  commentPlaceholder: "Comment (optional)",
  sendFeedback: "Send feedback",
  feedbackThanks: "Thank you for your feedback.",
  feedbackUnavailable: "Feedback is not available on this server.",
  feedbackNotSent: "Feedback not sent: {reason}",

  // documents
  documentsTitle: "Documents",
  addFiles: "Add files (.md, .txt, .html, .pdf, .json, .jsonl)",
  upload: "Upload",
  uploading: "Uploading…",
  uploadSummary: "Upload summary",
  file: "File",
  result: "Result",
  yourDocuments: "Your documents",
  title: "Title",
  chunks: "Chunks",
  actions: "Actions",
  delete: "Delete",
  deleteDocument: "Delete {name}",
  confirmDeleteDocument: "Delete the document “{name}” from the index?",
  noDocuments: "No documents yet.",
  uploadingFile: "Uploading {file} ({index} of {total})…",
  uploadingShort: "uploading…",
  uploadFailed: "failed: {reason}",
  uploadDone: { one: "Done: {count} file.", other: "Done: {count} files." },
  unchangedAlreadyIndexed: "unchanged (already indexed)",
  indexed: "indexed: {chunks}{documents}{unchanged}",
  chunkCount: { one: "{count} chunk", other: "{count} chunks" },
  inDocuments: { one: " in {count} document", other: " in {count} documents" },
  unchangedCount: ", {count} unchanged",
} satisfies Record<string, Message>;

/** Every message the page shows; each language translates exactly these. */
export type MessageKey = keyof typeof en;

"""Does the default embedding template change any chunk's embedded string (or chunk id) of a dataset?

Issue 17 part 2: on a corpus without titles or headings the default template renders exactly the
text, so its index is the text-only one and every metric is equal by construction.

    .venv/bin/python bench/embed_template_identity.py vaswani
"""
import os
import sys
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from rag_eval.datasets import load_dataset
from rag_eval.harness import to_documents
from rag_retriever.chunking import Chunker
from rag_retriever.ingestion import to_source_document
from rag_retriever.runtime import build_embedder
from rag_retriever.settings import RetrieverSettings
from rag_retriever.tokens import EmbedderTokenizer

s = RetrieverSettings()
emb = build_embedder(s)
emb.warm_up()
tok = EmbedderTokenizer(emb)
default = Chunker(tok, s.chunk_tokens, s.chunk_overlap_tokens, "{title}\n{section_path}\n{text}")
text_only = Chunker(tok, s.chunk_tokens, s.chunk_overlap_tokens, "{text}")
name = sys.argv[1] if len(sys.argv) > 1 else "vaswani"
ds = load_dataset(name)
docs = [to_source_document(d) for d in to_documents(ds.corpus.values(), source=name)]
titled = sum(1 for d in docs if d.title)
chunks = differ = ids_differ = 0
for d in docs:
    a, b = default.chunk_document(d), text_only.chunk_document(d)
    chunks += len(a)
    differ += sum(1 for x, y in zip(a, b) if (x.embed_text or x.text) != (y.embed_text or y.text)) + abs(len(a) - len(b))
    ids_differ += sum(1 for x, y in zip(a, b) if x.chunk_id != y.chunk_id)
print(f"{name}: {len(docs)} documents, {titled} with a title, {chunks} chunks; embedded strings that differ "
      f"between the default template and text-only: {differ}; chunk ids that differ: {ids_differ}")

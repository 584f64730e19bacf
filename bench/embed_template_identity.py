"""Does the default embedding template change any chunk's embedded string (or chunk id) of a dataset?

Issue 17 part 2: on a corpus without titles or headings the default template renders exactly the
text, so its index is the text-only one and every metric is equal by construction. This chunks the
corpus with the retriever's own chunker under both templates (no embedding, so it takes a minute,
not an ingest) and counts the differences.

    .venv/bin/python bench/embed_template_identity.py vaswani
"""

from __future__ import annotations

import argparse
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default="vaswani", help="A built-in dataset or a BEIR folder")
    parser.add_argument("--template", default="{title}\n{section_path}\n{text}", help="Compared with '{text}'")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from rag_eval.datasets import load_dataset
    from rag_eval.harness import to_documents
    from rag_retriever.chunking import Chunker
    from rag_retriever.ingestion import to_source_document
    from rag_retriever.runtime import build_embedder
    from rag_retriever.settings import RetrieverSettings
    from rag_retriever.tokens import EmbedderTokenizer

    settings = RetrieverSettings()
    embedder = build_embedder(settings)
    embedder.warm_up()
    tokenizer = EmbedderTokenizer(embedder)
    templated = Chunker(tokenizer, settings.chunk_tokens, settings.chunk_overlap_tokens, args.template)
    text_only = Chunker(tokenizer, settings.chunk_tokens, settings.chunk_overlap_tokens, "{text}")
    dataset = load_dataset(args.dataset)
    documents = [to_source_document(d) for d in to_documents(dataset.corpus.values(), source=dataset.name)]
    titled = sum(1 for d in documents if d.title)
    chunks = differ = ids_differ = 0
    for document in documents:
        a, b = templated.chunk_document(document), text_only.chunk_document(document)
        chunks += len(a)
        differ += abs(len(a) - len(b)) + sum(
            1 for x, y in zip(a, b) if (x.embed_text or x.text) != (y.embed_text or y.text)
        )
        ids_differ += sum(1 for x, y in zip(a, b) if x.chunk_id != y.chunk_id)
    print(f"{dataset.name}: {len(documents)} documents, {titled} with a title, {chunks} chunks; embedded strings "
          f"that differ between {args.template!r} and text-only: {differ}; chunk ids that differ: {ids_differ}")


if __name__ == "__main__":
    main()

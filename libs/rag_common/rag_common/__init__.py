"""Wire schemas, settings and HTTP helpers shared by the RAG services."""

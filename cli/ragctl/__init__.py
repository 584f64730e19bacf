"""Command line and local-stack tooling for the RAG service."""

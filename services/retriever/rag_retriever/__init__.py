"""The retriever service."""

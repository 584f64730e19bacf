"""Tests of rag_common.embedders: the ONNX and torch embedders, their export, span pooling."""

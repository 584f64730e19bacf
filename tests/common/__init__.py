"""Tests of libs/rag_common, laid out as rag_common is (embedders/, telemetry/, test_<module>.py).

Named ``common``, not ``rag_common``: tests/ is on sys.path, so a ``tests/rag_common`` package would
shadow the real ``rag_common`` package."""

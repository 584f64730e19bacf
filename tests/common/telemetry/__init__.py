"""Tests of what rag_common.telemetry and rag_common.log_format give every service: one trace per
chat turn across the five services, JSON log lines carrying it, in one process and in a real one."""

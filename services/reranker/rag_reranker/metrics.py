"""The reranker's own Prometheus metrics (served on ``/metrics`` next to the HTTP ones).

``rag_reranker_queue_pairs`` is the autoscaling signal (deploy/k8s): pairs waiting for or inside
the model grow with load before latency does, and fall as soon as a new replica takes traffic.
"""

from __future__ import annotations

from prometheus_client import Gauge, Histogram

QUEUE_PAIRS = Gauge(
    "rag_reranker_queue_pairs", "(query, passage) pairs waiting for or inside the cross-encoder's micro-batcher"
)
INFLIGHT_REQUESTS = Gauge("rag_reranker_inflight_requests", "Rerank requests being processed")
REQUEST_SECONDS = Histogram(
    "rag_reranker_request_seconds",
    "End-to-end latency of one rerank request",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
BATCH_PAIRS = Histogram(
    "rag_reranker_batch_pairs", "Pairs per cross-encoder model call", buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
)
STAGE_SECONDS = Histogram(
    "rag_reranker_stage_seconds",
    "Latency of one stage of the rerank chain",
    ["stage"],
    buckets=(0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)

"""The five services' FastAPI apps, built for tests that read their OpenAPI documents or send them
bodies that fail before any runtime is needed. Building an app opens nothing (the runtime opens in
the lifespan), so this is cheap."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from rag_gateway.app import create_app as create_gateway
from rag_generator.app import create_app as create_generator
from rag_refiner.app import create_app as create_refiner
from rag_reranker.app import create_app as create_reranker
from rag_retriever.app import create_app as create_retriever
from rag_retriever.settings import RetrieverSettings

from gateway.support import gateway_settings


def build_service_apps(data_dir: Path) -> dict[str, FastAPI]:
    """Every service's app; nothing they point at is contacted."""
    return {
        "gateway": create_gateway(gateway_settings("redis://127.0.0.1:1", "http://127.0.0.1:1")),
        "retriever": create_retriever(RetrieverSettings(data_dir=data_dir)),
        "reranker": create_reranker(),
        "refiner": create_refiner(),
        "generator": create_generator(),
    }

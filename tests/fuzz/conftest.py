from __future__ import annotations

from collections.abc import Iterator

import pytest

from ragctl.keys import create_local_admin_key
from ragctl.stack import SERVICES, Stack, free_port, start_services
from e2e.conftest import SLOW_MACHINE_TIMEOUTS
from e2e.corpus import ingest_documents


@pytest.fixture(scope="module")
def fuzzed_stack(tmp_path_factory: pytest.TempPathFactory, redis_url: str, llm_base_url: str) -> Iterator[dict[str, str]]:
    """The five services as real processes with their own index, so that what the fuzzer writes and
    deletes touches no other test, and authentication on: ``api_key`` holds a key with every scope,
    ``service_token`` the internal services' credential.
    Extractive answers keep a chat case to a fraction of a second; the schemas, validation and error
    paths are the same in every generator mode."""
    data_dir = tmp_path_factory.mktemp("fuzzed-stack")
    ports = {name: free_port() for name in SERVICES}
    stack = Stack()
    try:
        env = start_services(
            ports, data_dir, redis_url, llm_base_url, stack, extra_env={**SLOW_MACHINE_TIMEOUTS, "GENERATOR_MODE": "extractive"}
        )
        urls = {process.name: process.url for process in stack.processes}
        api_key = create_local_admin_key(redis_url)
        ingest_documents(urls["gateway"], api_key=api_key)
        yield {**urls, "api_key": api_key, "service_token": env["RAG_SERVICE_TOKEN"]}
    finally:
        stack.stop()

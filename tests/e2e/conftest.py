from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ragctl.stack import SERVICES, Stack, free_port, start_services


#: The tiny local LLM on two shared cores can take minutes when other work competes for them; the
#: suite checks behaviour, not speed, so the stages get generous budgets here.
SLOW_MACHINE_TIMEOUTS = {
    "GENERATOR_LLM_TIMEOUT_S": "300",
    "GATEWAY_GENERATOR_TIMEOUT_S": "330",
    "REFINER_LLM_TIMEOUT_S": "120",
    "GATEWAY_REFINER_TIMEOUT_S": "150",
    "GATEWAY_RERANKER_TIMEOUT_S": "120",
    "GATEWAY_RETRIEVER_TIMEOUT_S": "60",
}


@dataclass
class RunningStack:
    urls: dict[str, str]
    stack: Stack

    @property
    def gateway(self) -> str:
        return self.urls["gateway"]


@pytest.fixture(scope="session")
def running_stack(tmp_path_factory: pytest.TempPathFactory, redis_url: str, llm_base_url: str) -> Iterator[RunningStack]:
    """The five real services as separate processes on free ports, wired to real Redis and the LLM."""
    data_dir = tmp_path_factory.mktemp("stack")
    ports = {name: free_port() for name in SERVICES}
    stack = Stack()
    try:
        start_services(ports, data_dir, redis_url, llm_base_url, stack, extra_env=SLOW_MACHINE_TIMEOUTS)
    except BaseException:
        stack.stop()
        raise
    yield RunningStack({p.name: p.url for p in stack.processes}, stack)
    stack.stop()

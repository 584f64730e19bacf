from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ragctl.stack import SERVICES, ManagedProcess, Stack, free_port, start_services


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
#: The shared e2e stack checks answers, streams and failures, and its tests call the internal
#: services directly to check what they stored: caller authentication and the service credential
#: are off here (empty = unset). They are on in tests/gateway/test_access.py, tests/fuzz and
#: tests/e2e/test_internal_calls.py.
AUTH_OFF = {"GATEWAY_AUTH": "off", "RAG_SERVICE_TOKEN": ""}


@dataclass
class RunningStack:
    urls: dict[str, str]
    stack: Stack
    #: The environment and data directory the services were started with (to restart one alike).
    env: dict[str, str] = field(default_factory=dict)
    data_dir: Path | None = None

    @property
    def gateway(self) -> str:
        return self.urls["gateway"]

    def process(self, name: str) -> ManagedProcess:
        [proc] = [p for p in self.stack.processes if p.name == name]
        return proc


@pytest.fixture(scope="session")
def running_stack(tmp_path_factory: pytest.TempPathFactory, redis_url: str, llm_base_url: str) -> Iterator[RunningStack]:
    """The five real services as separate processes on free ports, wired to real Redis and the LLM."""
    data_dir = tmp_path_factory.mktemp("stack")
    ports = {name: free_port() for name in SERVICES}
    stack = Stack()
    try:
        env = start_services(ports, data_dir, redis_url, llm_base_url, stack, extra_env={**SLOW_MACHINE_TIMEOUTS, **AUTH_OFF})
    except BaseException:
        stack.stop()
        raise
    yield RunningStack({p.name: p.url for p in stack.processes}, stack, env, data_dir)
    stack.stop()


#: The stack with authentication on as `make run` starts it (API keys, a drawn service credential),
#: answering extractively so that the access tests can ask thousands of questions without the LLM
#: (HyDE still asks it), and with rate limits far above what those tests send.
AUTHENTICATED = {
    "GENERATOR_MODE": "extractive",
    "GATEWAY_RATE_LIMIT_CHAT": "100000/minute",
    "GATEWAY_RATE_LIMIT_STREAM": "100000/minute",
    "GATEWAY_RATE_LIMIT_INGEST": "100000/minute",
}


@dataclass
class AuthenticatedStack:
    urls: dict[str, str]
    env: dict[str, str]

    @property
    def service_token(self) -> str:
        return self.env["RAG_SERVICE_TOKEN"]


@pytest.fixture(scope="session")
def authenticated_stack(tmp_path_factory, redis_url: str, llm_base_url: str) -> Iterator[AuthenticatedStack]:
    """The five services with caller authentication and the service credential on."""
    stack = Stack()
    ports = {name: free_port() for name in SERVICES}
    try:
        extra_env = {**SLOW_MACHINE_TIMEOUTS, **AUTHENTICATED}
        env = start_services(ports, tmp_path_factory.mktemp("authenticated"), redis_url, llm_base_url, stack, extra_env)
        yield AuthenticatedStack({p.name: p.url for p in stack.processes}, env)
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def reranker_stopped(running_stack: RunningStack) -> Iterator[ManagedProcess]:
    """The reranker process stopped for the tests of one module, then started again on the same port
    with the same environment, so tests that run later (in any order) see the whole stack.

    Yields the stopped process."""
    stopped = running_stack.process("reranker")
    stopped.stop()
    assert not stopped.alive()
    try:
        yield stopped
    finally:
        assert stopped.respawn is not None
        processes = running_stack.stack.processes
        processes[processes.index(stopped)] = stopped.respawn()

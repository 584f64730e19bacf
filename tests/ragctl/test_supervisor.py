"""The supervisor of ``ragctl up`` with real child processes: a killed process comes back, a crash
loop ends the stack with its reason, a failed restart is retried, and nothing outlives ``stop``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from ragctl.stack import ManagedProcess, Stack, StackError, free_port, stack_env, start_service
from ragctl.supervisor import GaveUp, RestartPolicy, Supervisor, describe_exit

FAST = RestartPolicy(first_delay_s=0.05, max_delay_s=0.2, crash_loop_restarts=3, crash_loop_window_s=60)


def python_process(name: str, code: str, log_dir: Path, starts: list[ManagedProcess]) -> ManagedProcess:
    """A child running ``code`` whose restart recipe starts the same code again; ``starts`` records
    every process started, so a test can check each one is stopped in the end."""
    log_path = log_dir / f"{name}.log"
    with open(log_path, "ab") as log:
        popen = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT)
    proc = ManagedProcess(name, popen, log_path)
    proc.respawn = lambda: python_process(name, code, log_dir, starts)
    starts.append(proc)
    return proc


def supervise_until(supervisor: Supervisor, done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the supervisor did not get there in time"
        supervisor.check()
        time.sleep(0.02)


SLEEPER = "import time; time.sleep(600)"


def test_the_restart_delay_doubles_per_recent_exit_up_to_the_cap() -> None:
    policy = RestartPolicy()
    assert [policy.delay_s(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_an_exit_is_described_by_its_signal_or_code() -> None:
    assert describe_exit(-signal.SIGKILL) == "signal SIGKILL"
    assert describe_exit(3) == "exit code 3"


def test_a_killed_process_is_restarted_and_replaces_the_dead_one(tmp_path: Path) -> None:
    starts: list[ManagedProcess] = []
    stack = Stack([python_process("worker", SLEEPER, tmp_path, starts), python_process("other", SLEEPER, tmp_path, starts)])
    lines: list[str] = []
    supervisor = Supervisor(stack, FAST, report=lines.append)
    try:
        first = stack.processes[0]
        os.kill(first.process.pid, signal.SIGKILL)
        supervise_until(supervisor, lambda: supervisor.restarts.get("worker") == 1)
        restarted = stack.processes[0]
        assert restarted is not first and restarted.alive() and restarted.process.pid != first.process.pid
        assert stack.processes[1] is starts[1] and starts[1].alive(), "the other process was left alone"
        assert any("worker exited (signal SIGKILL); restarting in 0.05 s" in line for line in lines), lines
        assert any(line.startswith("worker is back") for line in lines), lines
    finally:
        supervisor.stop()
        stack.stop()
    assert not any(p.alive() for p in starts)


def test_a_process_that_keeps_crashing_stops_the_stack_with_its_log(tmp_path: Path) -> None:
    starts: list[ManagedProcess] = []
    crasher = "import sys; print('cannot open the index: disk full'); sys.exit(3)"
    stack = Stack([python_process("retriever", crasher, tmp_path, starts)])
    supervisor = Supervisor(stack, FAST, report=lambda _line: None)
    try:
        with pytest.raises(GaveUp, match=r"retriever exited \(exit code 3\): 4 times in 60 s, giving up") as raised:
            supervise_until(supervisor, lambda: False)
        assert "disk full" in str(raised.value)
        assert len(starts) == 1 + FAST.crash_loop_restarts
    finally:
        supervisor.stop()
        stack.stop()


def test_a_restart_that_fails_to_get_ready_counts_as_an_exit_and_is_tried_again(tmp_path: Path) -> None:
    starts: list[ManagedProcess] = []
    proc = python_process("reranker", SLEEPER, tmp_path, starts)
    attempts: list[float] = []

    def flaky_respawn() -> ManagedProcess:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise StackError("reranker not ready at http://127.0.0.1:1/readyz after 120s (HTTP 503)")
        return python_process("reranker", SLEEPER, tmp_path, starts)

    proc.respawn = flaky_respawn
    stack = Stack([proc])
    lines: list[str] = []
    supervisor = Supervisor(stack, FAST, report=lines.append)
    try:
        os.kill(proc.process.pid, signal.SIGKILL)
        supervise_until(supervisor, lambda: supervisor.restarts.get("reranker") == 1)
        assert len(attempts) == 2 and stack.processes[0].alive()
        assert any("reranker failed to restart (reranker not ready" in line and "restarting in 0.1 s" in line for line in lines), lines
    finally:
        supervisor.stop()
        stack.stop()
    assert not any(p.alive() for p in starts)


def test_stop_waits_for_a_restart_under_way_and_stops_what_it_started(tmp_path: Path) -> None:
    starts: list[ManagedProcess] = []
    proc = python_process("llm", SLEEPER, tmp_path, starts)

    def slow_respawn() -> ManagedProcess:
        started = python_process("llm", SLEEPER, tmp_path, starts)
        time.sleep(0.5)  # still loading its model when the launcher is told to stop
        return started

    proc.respawn = slow_respawn
    stack = Stack([proc])
    supervisor = Supervisor(stack, FAST, report=lambda _line: None)
    os.kill(proc.process.pid, signal.SIGKILL)
    supervise_until(supervisor, lambda: len(starts) == 2)
    supervisor.stop()
    stack.stop()
    assert len(starts) == 2 and not any(p.alive() for p in starts), "the restarted process outlived the launcher"


def test_a_process_without_a_recipe_is_not_silently_dropped(tmp_path: Path) -> None:
    popen = subprocess.Popen([sys.executable, "-c", "print('bye')"])
    popen.wait()
    stack = Stack([ManagedProcess("one-off", popen, tmp_path / "none.log")])
    supervisor = Supervisor(stack, FAST, report=lambda _line: None)
    try:
        with pytest.raises(GaveUp, match="one-off exited \\(exit code 0\\) and has no restart recipe"):
            supervisor.check()
    finally:
        supervisor.stop()


def test_a_real_service_killed_with_sigkill_answers_again_on_its_port(tmp_path: Path) -> None:
    """The reranker as ``ragctl up`` starts it: after ``kill -9`` the supervisor starts it again on
    the same port, with the same environment, and its readiness check answers."""
    port = free_port()
    ports = {"refiner": 1, "retriever": 1, "reranker": port, "generator": 1}
    env = stack_env(ports, tmp_path, "redis://127.0.0.1:1/0", "http://127.0.0.1:1/v1")
    stack = Stack([start_service("reranker", port, tmp_path / "logs", env, ready_timeout_s=300)])
    supervisor = Supervisor(stack, RestartPolicy(first_delay_s=0.1), report=lambda _line: None)
    try:
        os.kill(stack.processes[0].process.pid, signal.SIGKILL)
        supervise_until(supervisor, lambda: supervisor.restarts.get("reranker") == 1, timeout_s=300)
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
        log = (tmp_path / "logs" / "reranker.log").read_text()
        assert log.count("starting reranker") == 2, "the restart appends to the log that says why it died"
    finally:
        supervisor.stop()
        stack.stop()

"""Keep the local stack running: restart a process that exits, with backoff, and give up on a crash loop.

What compose's ``restart: unless-stopped`` and a Kubernetes Deployment do for the production stack,
``ragctl up`` does for the local one. The policy is the one those systems use:

- a process that exits (crash, OOM kill, ``kill -9``) is started again as it was first started
  (:attr:`ragctl.stack.ManagedProcess.respawn`: same port, data and environment), after a delay that
  doubles with each exit in the crash-loop window (1 s, 2 s, 4 s, ... at most 30 s), like
  Kubernetes's CrashLoopBackOff;
- a restart counts as done once the process answers its readiness check; one that fails to get
  ready counts as another exit;
- more than ``crash_loop_restarts`` exits of one process within ``crash_loop_window_s`` means it
  keeps crashing: :class:`GaveUp` is raised and the launcher stops everything, rather than hiding a
  broken service behind endless restarts.

Restarts run in threads, so the other processes stay watched while one loads its models; the
others keep serving meanwhile and the gateway degrades around the missing stage (docs/ARCHITECTURE.md,
"Failure policy").
"""

from __future__ import annotations

import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from ragctl.stack import ManagedProcess, Stack


@dataclass(frozen=True)
class RestartPolicy:
    #: Delay before the first restart of a process, seconds; doubled for each further exit in the window.
    first_delay_s: float = 1.0
    #: The longest delay between an exit and the restart, seconds.
    max_delay_s: float = 30.0
    #: Exits of one process tolerated within the window; one more and the launcher gives up.
    crash_loop_restarts: int = 5
    #: The crash-loop window, seconds: exits older than this are forgotten (and the delay shrinks).
    crash_loop_window_s: float = 120.0

    def delay_s(self, recent_exits: int) -> float:
        """The wait before restarting a process that has exited ``recent_exits`` times in the window."""
        return min(self.max_delay_s, self.first_delay_s * 2 ** max(0, recent_exits - 1))


class GaveUp(RuntimeError):
    """A process keeps crashing (or cannot be restarted): the stack should stop, and say why."""


def describe_exit(code: int | None) -> str:
    """``exit code 1`` or ``signal SIGKILL`` (Popen reports a death by signal as a negative code)."""
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Supervisor:
    """Watches ``stack``'s processes; call :meth:`check` periodically and :meth:`stop` before
    stopping the stack. ``report`` gets one line per event (exit, restart, ready, failure)."""

    def __init__(
        self, stack: Stack, policy: RestartPolicy | None = None, report: Callable[[str], None] = print
    ) -> None:
        self.stack = stack
        self.policy = policy or RestartPolicy()
        self.report = report
        self.restarts: dict[str, int] = {}
        self._exits: dict[str, deque[float]] = {}
        self._due: dict[str, tuple[float, ManagedProcess]] = {}
        self._running: dict[str, tuple[Future[ManagedProcess], ManagedProcess, float]] = {}
        self._executor = ThreadPoolExecutor(max_workers=max(1, len(stack.processes)), thread_name_prefix="restart")
        self._lock = threading.Lock()

    def check(self) -> None:
        """One supervision step: notice exits, start restarts that are due, collect finished ones.
        Raises :class:`GaveUp` when a process exceeds the crash-loop limit or has no recipe."""
        now = time.monotonic()
        with self._lock:
            for proc in list(self.stack.processes):
                if proc.name not in self._due and proc.name not in self._running and not proc.alive():
                    self._schedule(proc, f"exited ({describe_exit(proc.process.returncode)})", now)
            for name, (due, proc) in list(self._due.items()):
                if due <= now:
                    del self._due[name]
                    assert proc.respawn is not None  # _schedule refuses processes without one
                    self._running[name] = (self._executor.submit(proc.respawn), proc, now)
            for name, (future, old, started) in list(self._running.items()):
                if future.done():
                    del self._running[name]
                    self._collect(name, future, old, started, now)

    def _schedule(self, proc: ManagedProcess, what: str, now: float) -> None:
        exits = self._exits.setdefault(proc.name, deque())
        exits.append(now)
        while exits and now - exits[0] > self.policy.crash_loop_window_s:
            exits.popleft()
        if proc.respawn is None:
            raise GaveUp(f"{proc.name} {what} and has no restart recipe:\n{proc.log_tail()}")
        if len(exits) > self.policy.crash_loop_restarts:
            raise GaveUp(
                f"{proc.name} {what}: {len(exits)} times in {self.policy.crash_loop_window_s:.0f} s, giving up "
                f"(log {proc.log_path}):\n{proc.log_tail()}"
            )
        delay = self.policy.delay_s(len(exits))
        self._due[proc.name] = (now + delay, proc)
        self.report(f"{proc.name} {what}; restarting in {delay:g} s ({len(exits)} in the last {self.policy.crash_loop_window_s:.0f} s)")

    def _collect(self, name: str, future: Future[ManagedProcess], old: ManagedProcess, started: float, now: float) -> None:
        try:
            new = future.result()
        except Exception as exc:  # noqa: BLE001 - a failed start is one more exit, reported with its reason
            self._schedule(old, f"failed to restart ({str(exc).splitlines()[0][:200]})", now)
            return
        processes = self.stack.processes
        processes[processes.index(old)] = new
        self.restarts[name] = self.restarts.get(name, 0) + 1
        self.report(f"{name} is back (ready {now - started:.1f} s after its restart began)")

    def restarting(self) -> bool:
        """Whether a restart is due or under way."""
        with self._lock:
            return bool(self._due or self._running)

    def stop(self) -> None:
        """Cancel pending restarts and wait for those under way; a process they started is stopped,
        so nothing outlives the launcher."""
        with self._lock:
            self._due.clear()
            running = list(self._running.values())
            self._running.clear()
        if running:
            self.report(f"waiting for {len(running)} restart(s) under way to finish before stopping")
        self._executor.shutdown(wait=True, cancel_futures=True)
        for future, _old, _started in running:
            if not future.cancelled() and future.exception() is None:
                future.result().stop()

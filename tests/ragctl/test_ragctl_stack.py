from __future__ import annotations

import socket

import pytest

from ragctl.stack import StackError, start_redis, start_service


def test_a_taken_port_is_refused_with_a_clear_error(tmp_path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        with pytest.raises(StackError, match=f"port {port} for gateway is already in use"):
            start_service("gateway", port, tmp_path, {})
        with pytest.raises(StackError, match="already in use"):
            start_redis(port, tmp_path / "data", tmp_path)


def test_unknown_service_is_refused(tmp_path) -> None:
    with pytest.raises(StackError, match="unknown service"):
        start_service("frontend", 1, tmp_path, {})


def test_the_cli_finds_the_repository_it_runs_from() -> None:
    """`make run` ingests REPO_ROOT/docs and keeps its data in REPO_ROOT/var: a wrong root (as after a
    package move) would silently ingest nothing and write outside the checkout."""
    from ragctl.cli import REPO_ROOT

    assert (REPO_ROOT / "docs" / "ARCHITECTURE.md").is_file()
    assert (REPO_ROOT / "Makefile").is_file()

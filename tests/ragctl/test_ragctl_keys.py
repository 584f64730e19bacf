"""``ragctl keys`` and the local stack's key, against a real Redis."""

from __future__ import annotations

import asyncio
from pathlib import Path

from redis.asyncio import Redis
from typer.testing import CliRunner

from rag_gateway.api_keys import ApiKeyStore
from rag_gateway.audit_log import AuditLog
from ragctl.cli import app
from ragctl.keys import is_valid_key, local_admin_key

runner = CliRunner()


def _identity(redis_url: str, token: str):
    async def verify():
        redis = Redis.from_url(redis_url)
        try:
            return await ApiKeyStore(redis).verify(token)
        finally:
            await redis.aclose()

    return asyncio.run(verify())


def _recent_audit(redis_url: str) -> list[dict]:
    async def read():
        redis = Redis.from_url(redis_url)
        try:
            return await AuditLog(redis).recent(10)
        finally:
            await redis.aclose()

    return asyncio.run(read())


def test_create_list_revoke(redis_url: str) -> None:
    created = runner.invoke(
        app,
        ["keys", "create", "--tenant", "uni", "--user", "ada", "--group", "physics", "--scope", "chat", "--scope", "ingest",
         "--redis-url", redis_url],
    )
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[0]
    info = _identity(redis_url, token)
    assert (info.tenant, info.user, info.groups, info.scopes) == ("uni", "ada", ["physics"], ["chat", "ingest"])
    listed = runner.invoke(app, ["keys", "list", "--redis-url", redis_url])
    assert info.key_id in listed.stdout and token not in listed.stdout  # the token is never shown again
    assert runner.invoke(app, ["keys", "revoke", info.key_id, "--redis-url", redis_url]).exit_code == 0
    assert _identity(redis_url, token) is None
    assert runner.invoke(app, ["keys", "revoke", info.key_id, "--redis-url", redis_url]).exit_code == 1
    audit = _recent_audit(redis_url)
    assert [(e["action"], e["target"]) for e in audit[:2]] == [("key.revoke", info.key_id), ("key.create", info.key_id)]
    assert audit[1]["actor"].startswith("operator:") and audit[1]["detail"]["scopes"] == ["chat", "ingest"]


def test_bad_scopes_and_identities_are_refused_with_a_message(redis_url: str) -> None:
    bad_scope = runner.invoke(app, ["keys", "create", "--tenant", "uni", "--user", "ada", "--scope", "root", "--redis-url", redis_url])
    assert bad_scope.exit_code == 2 and "root" in bad_scope.output
    bad_tenant = runner.invoke(app, ["keys", "create", "--tenant", "no spaces", "--user", "ada", "--redis-url", redis_url])
    assert bad_tenant.exit_code == 2 and "tenant" in bad_tenant.output


def test_the_local_stack_keeps_its_key_while_redis_knows_it(redis_url: str, tmp_path: Path) -> None:
    key_file = tmp_path / "api-key"
    first = local_admin_key(redis_url, key_file)
    assert key_file.read_text().strip() == first and oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert local_admin_key(redis_url, key_file) == first
    key_file.write_text("rag_000000000000_" + "x" * 43 + "\n")  # e.g. Redis was wiped
    replaced = local_admin_key(redis_url, key_file)
    assert replaced != first and is_valid_key(redis_url, replaced)

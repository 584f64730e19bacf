"""The audit log of administrative actions: who did what to what, and when.

Each entry goes to the structured log (logger ``rag.audit``, one JSON object per line) and to the
Redis stream ``rag:audit`` (capped at about ``max_entries``), where ``ragctl audit`` reads it back.
Recorded: API keys created and revoked, documents ingested and deleted, document ACLs set or changed.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from rag_common.identity import Identity

STREAM = "rag:audit"
logger = logging.getLogger("rag.audit")


class AuditLog:
    def __init__(self, redis: Redis, *, stream: str = STREAM, max_entries: int = 100_000) -> None:
        self._redis = redis
        self._stream = stream
        self._max_entries = max_entries

    async def record(self, actor: Identity | str, action: str, target: str, **detail: Any) -> None:
        """Append one entry. A Redis failure is logged, never raised: the action itself already happened."""
        who = actor if isinstance(actor, str) else f"{actor.tenant}/{actor.user}"
        entry = {"at": time.time(), "actor": who, "action": action, "target": target, "detail": detail}
        logger.info(json.dumps(entry, ensure_ascii=False, sort_keys=True))
        fields = {key: json.dumps(value, ensure_ascii=False) for key, value in entry.items()}
        try:
            await self._redis.xadd(self._stream, fields, maxlen=self._max_entries, approximate=True)
        except RedisError:
            logger.exception("audit entry not written to Redis stream %s", self._stream)

    async def recent(self, count: int = 100) -> list[dict[str, Any]]:
        """The newest ``count`` entries, newest first."""
        rows = await self._redis.xrevrange(self._stream, count=count)
        return [{_text(k): json.loads(_text(v)) for k, v in fields.items()} for _, fields in rows]


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value

"""How the gateway connects to Redis: timeouts and reconnection, in one place for every client
(the conversation store, API keys and audit log share one; the rate limiter has its own).

After Redis restarts (a crash, ``kill -9``, a failover), every pooled connection to the old process
is dead, and the first command on each failed the request that found it: tests/gateway/
test_redis_restart.py. So a command that meets a closed connection is sent again on a new one, up to
3 times with a jittered backoff of at most 0.5 s (redis-py's ``Retry``). Only connection errors:
after a timeout the command may have run, and a conversation append sent twice would store the
turn twice. A connection that drops after the server applied a command but before its reply reaches
us is the one case a retry repeats a write; that window is the instant of a crash, and the
conversation store's append is one transaction, so a repeat is a whole second copy of a turn, never
a torn one (docs/reliability.md).
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError


def redis_options(timeout_s: float) -> dict[str, Any]:
    """Keyword arguments for ``redis.asyncio.Redis.from_url`` (also accepted by ``limits``' storage)."""
    return {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "retry": Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 3),
        "retry_on_error": [RedisConnectionError],
    }

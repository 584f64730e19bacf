"""``ragctl logs``: filter and print the gateway's local query log (``GATEWAY_QUERY_LOG_SINK=file``).

The reading and matching are ``rag_gateway.query_log``'s (``read_records``, ``RecordFilter``), so
the CLI reads exactly what the gateway writes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rag_common.identity import Identity
from rag_gateway.query_log import RecordFilter, log_files, read_records, select, user_hash

SALT_ENV = "GATEWAY_QUERY_LOG_USER_SALT"


@dataclass(frozen=True)
class LogQuery:
    tenant: str | None = None
    #: A user name; needs ``tenant`` (the hash is of tenant/user).
    user: str | None = None
    conversation: str | None = None
    turn_id: str | None = None
    trace_id: str | None = None
    event: str | None = None
    intent: str | None = None
    abstained: bool | None = None
    degraded: bool | None = None
    feedback: str | None = None
    since: str | None = None
    last: int | None = None

    def record_filter(self, salt: str) -> RecordFilter:
        if self.event not in (None, "turn", "feedback"):
            raise ValueError("--event must be turn or feedback")
        if self.feedback not in (None, "up", "down", "any"):
            raise ValueError("--feedback must be up, down or any")
        if self.user is not None and self.tenant is None:
            raise ValueError("--user needs --tenant (the record holds a hash of tenant/user)")
        hashed = None
        if self.user is not None:
            hashed = user_hash(Identity(tenant=self.tenant, user=self.user), salt)
        return RecordFilter(
            tenant=self.tenant, user_hash=hashed, conversation_id=self.conversation, turn_id=self.turn_id,
            trace_id=self.trace_id, event=self.event, intent=self.intent, abstained=self.abstained,
            degraded=self.degraded, feedback=self.feedback, since=self.since,
        )


def _cell(record: Mapping[str, Any]) -> list[str]:
    feedback = record.get("feedback") or {}
    rating = feedback.get("rating", "")
    if feedback.get("comment"):
        rating += f": {feedback['comment']}"
    total = (record.get("stage_ms") or {}).get("total")
    outcome = "abstained" + (f" ({record['abstain_reason']})" if record.get("abstain_reason") else "") if record.get("abstained") else (
        record.get("answer_mode") or "-"
    )
    return [
        str(record.get("@timestamp", ""))[:23],
        str(record.get("tenant", "")),
        str(record.get("event", "")),
        str(record.get("intent", "")),
        outcome,
        "" if total is None else f"{total:.0f}",
        "; ".join(record.get("degraded") or []),
        rating,
        str(record.get("question", "")),
        f"{record.get('conversation_id') or '-'}#{record.get('turn_index', '-')}",
        str(record.get("trace_id") or ""),
    ]


def run_logs(
    path: Path, query: LogQuery, *, as_json: bool, out: Console, echo: Callable[[str], None]
) -> int:
    """Print the matching records; 1 when there is no log file at ``path``."""
    if not log_files(path):
        out.print(f"[yellow]no query log at {path}[/] (GATEWAY_QUERY_LOG_PATH; the gateway writes it after its first turn)")
        return 1
    where = query.record_filter(os.environ.get(SALT_ENV, ""))
    records = select(read_records(path), where, last=query.last)
    if as_json:
        for record in records:
            echo(json.dumps(record, ensure_ascii=False))
        return 0
    table = Table(title=f"{len(records)} record(s) from {path}")
    for column in ("time (UTC)", "tenant", "event", "intent", "outcome", "ms", "degraded", "feedback", "question", "turn", "trace"):
        table.add_column(column, overflow="fold")
    for record in records:
        table.add_row(*_cell(record))
    out.print(table)
    return 0

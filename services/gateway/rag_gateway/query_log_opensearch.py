"""The production query-log sink: one OpenSearch index per UTC day, ``{prefix}-YYYY.MM.DD``
(``rag-query-logs-2025.01.02``), written with opensearch-py's async bulk helper.

The index template and the ISM retention policy that shape those indices are in
``deploy/opensearch/`` (``make dashboards`` installs them); this module only writes documents.
Each record is an ``index`` action whose ``_id`` is its ``record_id``: a batch sent twice (a
retried request) overwrites itself instead of doubling the counts. The day comes from the record's
own ``@timestamp``, so a record written just after midnight still lands in the day it describes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

logger = logging.getLogger(__name__)


def index_for(record: Mapping[str, Any], prefix: str) -> str:
    """``{prefix}-YYYY.MM.DD`` of the record's ``@timestamp`` (ISO 8601, UTC)."""
    day = str(record["@timestamp"])[:10]  # YYYY-MM-DD
    return f"{prefix}-{day.replace('-', '.')}"


def bulk_actions(records: Sequence[Mapping[str, Any]], prefix: str) -> Iterator[dict[str, Any]]:
    """The bulk helper's actions: ``index`` into the record's day, ``_id`` = ``record_id``."""
    for record in records:
        yield {"_op_type": "index", "_index": index_for(record, prefix), "_id": record["record_id"], "_source": dict(record)}


class QueryLogWriteError(RuntimeError):
    """Some records of a batch were refused by the cluster (mapping conflict, closed index...);
    ``refused`` says how many (the others were written)."""

    def __init__(self, message: str, refused: int) -> None:
        super().__init__(message)
        self.refused = refused


class OpenSearchQueryLogSink:
    def __init__(self, client: AsyncOpenSearch, *, prefix: str, chunk_size: int) -> None:
        """``prefix``, ``chunk_size``: the settings' ``query_log_index_prefix`` and ``query_log_batch_size``."""
        self._client = client
        self._prefix = prefix
        self._chunk_size = chunk_size

    async def write(self, records: Sequence[Mapping[str, Any]]) -> None:
        if not records:
            return
        # raise_on_error=False: every refused item is reported at once, not just the first.
        # No refresh: the records become searchable at the next refresh (1 s by default).
        _, errors = await async_bulk(
            self._client,
            bulk_actions(records, self._prefix),
            chunk_size=self._chunk_size,
            raise_on_error=False,
        )
        if errors:
            first = errors[0]
            raise QueryLogWriteError(f"{len(errors)} of {len(records)} query-log record(s) refused, e.g. {first}", len(errors))

    async def close(self) -> None:
        await self._client.close()

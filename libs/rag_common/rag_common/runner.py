"""Start a service's app under uvicorn with its settings (used by each service's ``__main__``)."""

from __future__ import annotations

import uvicorn

from rag_common.log_format import configure_logging
from rag_common.settings import ServiceSettings


def serve(app_path: str, settings: ServiceSettings) -> None:
    """JSON log lines on stderr (``rag_common.log_format``), uvicorn's included: it is given no
    logging config of its own, and its access log is replaced by the app's per-request line, which
    carries the trace id and the duration (``rag_common.service.setup_telemetry``)."""
    configure_logging(settings.log_level)
    uvicorn.run(
        app_path,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        factory=True,
        log_config=None,
        access_log=False,
    )

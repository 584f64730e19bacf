"""Start a service's app under uvicorn with its settings (used by each service's ``__main__``)."""

from __future__ import annotations

import logging

import uvicorn

from rag_common.settings import ServiceSettings


def serve(app_path: str, settings: ServiceSettings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    uvicorn.run(app_path, host=settings.host, port=settings.port, log_level=settings.log_level, factory=True)

"""A real gateway in front of a real retriever (MiniLM, index in a temp dir), both served by uvicorn
in threads, and a small web server for the URL inputs of ``ragctl ingest``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_gateway.app import create_app as create_gateway
from rag_gateway.settings import GatewaySettings
from rag_retriever.app import create_app as create_retriever
from rag_retriever.settings import RetrieverSettings
from ragctl.in_process import serve_in_thread
from ragctl.stack import free_port


@pytest.fixture(scope="session")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    retriever_settings = RetrieverSettings(index_dir=str(tmp_path_factory.mktemp("ragctl") / "index"))
    with serve_in_thread(create_retriever(retriever_settings, embedder=embedder)) as retriever_url:
        nowhere = f"http://127.0.0.1:{free_port()}"  # ingestion needs only the retriever
        settings = GatewaySettings(
            retriever_url=retriever_url,
            refiner_url=nowhere,
            reranker_url=nowhere,
            generator_url=nowhere,
            redis_url=f"redis://127.0.0.1:{free_port()}/0",  # never contacted by /v1/documents
            auth="off",  # the upload client's own tests; the key header is checked in tests/gateway/test_access.py
        )
        with serve_in_thread(create_gateway(settings)) as url:
            yield url


#: path → (status, content type, body)
Routes = dict[str, tuple[int, str, bytes]]


@pytest.fixture
def web_server() -> Iterator[Callable[[Routes], str]]:
    """``serve(routes)`` starts a web server answering ``routes`` and returns its base URL."""
    servers: list[ThreadingHTTPServer] = []

    def serve(routes: Routes) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                status, content_type, body = routes.get(self.path, (404, "text/plain", b"not found"))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()

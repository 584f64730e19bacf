# Two commands on a fresh machine: `make run` (the whole local stack) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup run test test-fast test-opensearch bench chaos ingest-chaos fuzz clean web dashboards

setup:
	@bash scripts/bootstrap.sh

run: setup
	$(PY) -m ragctl.cli up

test: setup
	@bash scripts/ensure_chromium.sh
	@bash scripts/ensure_tsc.sh
	$(PY) -m pytest -q

test-fast: setup
	@bash scripts/ensure_tsc.sh
	$(PY) -m pytest -q -m "not e2e"

# The backend conformance suite against a live OpenSearch: compose's service, published on loopback
# for this run (docker-compose.yml keeps it off the host). The LLM_* and RAG_SERVICE_TOKEN values only satisfy compose's
# interpolation of the services not started here. Another cluster: OPENSEARCH_URL=https://...
OPENSEARCH_URL ?= http://localhost:9200
test-opensearch: setup
	printf 'services:\n  opensearch:\n    ports: ["127.0.0.1:9200:9200"]\n' \
		| LLM_BASE_URL=unused LLM_MODEL=unused LLM_API_KEY=unused RAG_SERVICE_TOKEN=unused \
		docker compose -f docker-compose.yml -f - up -d --wait opensearch
	OPENSEARCH_URL=$(OPENSEARCH_URL) $(PY) -m pytest -q -rs tests/retriever/test_retriever_conformance.py

# The query log's OpenSearch side (docs/operations.md): the index template and ISM retention policy of
# rag-query-logs-* (deploy/opensearch/), then the saved objects of deploy/dashboards/*.ndjson through the
# Dashboards import API. Another cluster: OPENSEARCH_URL=https://... DASHBOARDS_URL=https://...
# (OPENSEARCH_USER / OPENSEARCH_PASSWORD for basic auth).
DASHBOARDS_URL ?= http://localhost:5601
dashboards: setup
	$(PY) -m ragctl.cli dashboards --opensearch-url $(OPENSEARCH_URL) --dashboards-url $(DASHBOARDS_URL)

clean:
	rm -rf var .pytest_cache

# docs/configuration.md, the environment-variable reference, generated from the settings classes;
# tests/test_configuration_docs.py fails when it is stale.
.PHONY: config-docs
config-docs: setup
	$(PY) -m ragctl.cli config-docs

# The web chat's TypeScript (services/gateway/web/src) compiled by the pinned tsc into
# services/gateway/rag_gateway/static/js, which is checked in: nothing is built when the gateway runs.
web:
	cd services/gateway/web && npm ci --no-audit --no-fund && npx tsc -p tsconfig.json

bench: setup
	$(PY) bench/chat_latency.py --mode extractive
	$(PY) bench/chat_latency.py --mode generative
	$(PY) bench/embedder_backends.py
	$(PY) bench/retrieval_latency.py
	$(PY) bench/retrieval_acl_latency.py
	$(PY) bench/retrieval_ingest.py
	$(PY) bench/ingest_scaling.py
	$(PY) bench/graph_retrieval.py
	$(PY) bench/sentence_vectors.py
	$(PY) bench/sentence_vectors_answers.py
	$(PY) bench/retrieval_quality.py
	$(PY) bench/reranker_stages.py
	$(PY) bench/reranker_quality.py
	$(PY) bench/reranker_throughput.py
	$(PY) bench/refiner_quality.py
	$(PY) bench/answer_modes.py
	$(PY) bench/chat_stream_latency.py
	$(PY) bench/chat_load.py --mode auto

# Kill -9 each component in turn under 32 users for 10 minutes (docs/reliability.md); CHAOS_ARGS adds
# options, e.g. CHAOS_ARGS="--users 8 --duration 120".
chaos: setup
	$(PY) bench/chaos.py $(CHAOS_ARGS)

# Kill -9 the retriever 20 times in a 5,000-document ingest, re-run it, compare with a clean build
# (docs/reliability.md); INGEST_CHAOS_ARGS adds options, e.g. INGEST_CHAOS_ARGS="--docs 1000 --kills 5".
ingest-chaos: setup
	$(PY) bench/ingest_chaos.py $(INGEST_CHAOS_ARGS)

# schemathesis against the five services' OpenAPI documents, at least 1,000 generated cases per API
# (docs/reliability.md); FUZZ_ARGS adds options, e.g. FUZZ_ARGS="--cases 5000 --services gateway".
fuzz: setup
	$(PY) bench/openapi_fuzz.py $(FUZZ_ARGS)

# Offline evaluation (docs/evaluation.md): the ablation matrix on the four English datasets and on XQuAD in
# its four shared languages (xquad-en, -ro, -de, -es; a language not on this machine is skipped, saying so),
# then extractive answers through the served chain on XQuAD (200 seeded questions per language: share that
# contains a gold answer, abstentions, off-topic abstentions), reports in reports/.
# Resumable; EVAL_ARGS adds options to both, e.g. EVAL_ARGS="--limit 30" or EVAL_ARGS="--llm".
# DATASET picks one dataset, or your own folder in BEIR layout: make eval DATASET=path/to/folder
# ANSWERS picks the answers' datasets (default xquad with DATASET=all, else none): a folder with answers.jsonl too.
DATASET ?= all
ANSWERS ?= $(if $(filter all,$(DATASET)),xquad,)
.PHONY: eval
eval: setup
	$(PY) -m ragctl.cli eval --ablation --dataset "$(DATASET)" $(EVAL_ARGS)
	$(if $(ANSWERS),$(PY) -m ragctl.cli eval --answers --dataset "$(ANSWERS)" $(EVAL_ARGS))

"""Static checks of the query log's OpenSearch side (no cluster needed): the index template maps
every field a record carries, the ISM policy covers the same indices, every field a Dashboards
visualisation or query uses exists in the template with a type its aggregation accepts, the saved
objects reference each other correctly, and the requests ``make dashboards`` sends are pinned.

Formats checked against: OpenSearch composable index templates and the ISM policy API
(``_plugins/_ism/policies``, ``ism_template``); the saved-objects import API (multipart ``file``,
``overwrite``, ``osd-xsrf``) and the saved-object shapes of OpenSearch Dashboards' own sample data
(visState/aggs, TSVB ``metrics`` with ``filter_ratio``, dashboard ``panelsJSON`` + ``panelRefName``).
Not verified against a live OpenSearch or Dashboards.
"""

from __future__ import annotations

import json
import re
import threading
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rag_gateway.query_log import STAGES, FeedbackLog, QueryLogRecord
from ragctl.dashboards import (
    DASHBOARDS_DIR,
    ISM_POLICY_ID,
    ISM_POLICY_PATH,
    MULTIPART_BOUNDARY,
    TEMPLATE_PATH,
    import_request,
    install,
    ism_policy_request,
    saved_object_files,
    template_request,
)

PATTERN = "rag-query-logs-*"
NUMERIC = {"float", "double", "half_float", "scaled_float", "integer", "long", "short", "byte"}
#: Field types each aggregation of a standard visualisation accepts (OpenSearch Dashboards' agg types).
AGG_FIELD_TYPES = {
    "percentiles": NUMERIC,
    "avg": NUMERIC,
    "sum": NUMERIC,
    "max": NUMERIC,
    "min": NUMERIC,
    "median": NUMERIC,
    "date_histogram": {"date"},
    "terms": {"keyword", "boolean", "ip"} | NUMERIC,
}
KUERY_KEYWORDS = {"and", "or", "not"}
KUERY_CLAUSE = re.compile(r'([A-Za-z_@][\w.@]*)\s*(:|<=|>=|<|>)\s*("[^"]*"|[^\s()]+)')
REQUIRED_VISUALISATIONS = {
    "RAG: latency p50/p95 by stage",
    "RAG: abstention rate",
    "RAG: degraded rate",
    "RAG: answer modes",
    "RAG: intent mix",
    "RAG: top refined queries",
    "RAG: thumbs-down questions with answers",
    "RAG: source conflicts over time",
}


@cache
def template() -> dict[str, Any]:
    return json.loads(TEMPLATE_PATH.read_text())


@cache
def saved_objects() -> list[dict[str, Any]]:
    return [json.loads(line) for path in saved_object_files() for line in path.read_text().splitlines() if line.strip()]


def field_type(name: str) -> str | None:
    """The mapped type of ``name`` (``a.b`` through ``properties``, ``a.keyword`` through ``fields``)."""
    node: dict[str, Any] = {"properties": template()["template"]["mappings"]["properties"]}
    for part in name.split("."):
        children = {**node.get("properties", {}), **node.get("fields", {})}
        if part not in children:
            return None
        node = children[part]
    return node.get("type", "object")


def kuery_fields(query: str) -> list[tuple[str, str, str]]:
    return [(f, op, v) for f, op, v in KUERY_CLAUSE.findall(query) if f.lower() not in KUERY_KEYWORDS]


def check_kuery(query: str, where: str) -> None:
    for name, op, value in kuery_fields(query):
        kind = field_type(name)
        assert kind is not None, f"{where}: {name} is not in the index template"
        if value in ("true", "false"):
            assert kind == "boolean", f"{where}: {name} compared with {value} but mapped {kind}"
        if op in ("<", ">", "<=", ">="):
            assert kind in NUMERIC | {"date"}, f"{where}: {name} {op} needs a number, mapped {kind}"


def visualisations() -> list[dict[str, Any]]:
    return [o for o in saved_objects() if o["type"] == "visualization"]


# --------------------------------------------------------------------------- template and ISM


def test_the_template_maps_every_field_a_record_carries() -> None:
    assert template()["index_patterns"] == [PATTERN]
    mappings = template()["template"]["mappings"]
    assert mappings["dynamic"] is False  # an unknown field is kept in _source, never guessed into the mapping
    for name, info in QueryLogRecord.model_fields.items():
        assert field_type(info.alias or name) is not None, f"record field {info.alias or name} is not mapped"
    for stage in STAGES:
        assert field_type(f"stage_ms.{stage}") == "float"
    for name in FeedbackLog.model_fields:
        assert field_type(f"feedback.{name}") is not None
    assert field_type("@timestamp") == "date" and field_type("feedback.created_at") == "date"
    assert field_type("abstained") == "boolean" and field_type("degraded_count") == "integer"
    assert field_type("conflict") == "boolean" and field_type("has_answer_span") == "boolean"
    assert field_type("conflict_kind") == "keyword" and field_type("conflict_values") == "integer"
    for text in ("question", "refined_query", "answer"):
        assert field_type(text) == "text" and field_type(f"{text}.keyword") == "keyword"


def test_the_ism_policy_deletes_the_same_indices_after_30_days() -> None:
    policy = json.loads(ISM_POLICY_PATH.read_text())["policy"]
    states = {state["name"]: state for state in policy["states"]}
    assert policy["default_state"] == "hot" and set(states) == {"hot", "delete"}
    assert states["hot"]["transitions"] == [{"state_name": "delete", "conditions": {"min_index_age": "30d"}}]
    assert states["delete"]["actions"] == [{"delete": {}}]
    assert policy["ism_template"] == [{"index_patterns": template()["index_patterns"], "priority": 100}]


# --------------------------------------------------------------------------- saved objects


def test_every_saved_object_is_importable_and_references_resolve() -> None:
    objects = saved_objects()
    ids = {(o["type"], o["id"]) for o in objects}
    assert len(ids) == len(objects), "duplicate saved-object ids"
    for obj in objects:
        assert set(obj) >= {"type", "id", "attributes", "references"}
        for ref in obj["references"]:
            assert (ref["type"], ref["id"]) in ids, f"{obj['id']} references missing {ref}"
    [pattern] = [o for o in objects if o["type"] == "index-pattern"]
    assert pattern["attributes"]["title"] == PATTERN
    assert field_type(pattern["attributes"]["timeFieldName"]) == "date"
    assert {v["attributes"]["title"] for v in visualisations()} == REQUIRED_VISUALISATIONS
    [dashboard] = [o for o in objects if o["type"] == "dashboard"]
    panels = json.loads(dashboard["attributes"]["panelsJSON"])
    refs = {ref["name"]: ref for ref in dashboard["references"]}
    assert [refs[p["panelRefName"]]["id"] for p in panels] == [v["id"] for v in visualisations()]
    assert len({p["panelIndex"] for p in panels}) == len(panels)


@pytest.mark.parametrize("vis", visualisations(), ids=lambda v: v["id"])
def test_every_field_a_visualisation_uses_exists_with_the_right_type(vis: dict[str, Any]) -> None:
    attributes = vis["attributes"]
    state = json.loads(attributes["visState"])
    assert state["title"] == attributes["title"]
    source = json.loads(attributes["kibanaSavedObjectMeta"]["searchSourceJSON"])
    check_kuery(source["query"]["query"], vis["id"])
    if state["type"] == "metrics":  # TSVB: the index by title, fields in its params
        params = state["params"]
        assert params["index_pattern"] == PATTERN and field_type(params["time_field"]) == "date"
        metrics = [m for series in params["series"] for m in series["metrics"]]
        assert metrics and all(m["type"] == "filter_ratio" for m in metrics)
        for metric in metrics:
            for side in ("numerator", "denominator"):
                assert metric[side]["language"] == "kuery"
                assert kuery_fields(metric[side]["query"]), f"{vis['id']}: {side} filters on nothing"
                check_kuery(metric[side]["query"], f"{vis['id']} {side}")
        assert vis["references"] == []
        return
    assert vis["references"] == [
        {"name": "kibanaSavedObjectMeta.searchSourceJSON.index", "type": "index-pattern", "id": "rag-query-logs"}
    ]
    assert source["indexRefName"] == "kibanaSavedObjectMeta.searchSourceJSON.index"
    fields = [(agg["type"], agg["params"]["field"]) for agg in state["aggs"] if "field" in agg["params"]]
    assert fields, f"{vis['id']} uses no field"
    for agg_type, name in fields:
        kind = field_type(name)
        assert kind is not None, f"{vis['id']}: {name} is not in the index template"
        assert kind in AGG_FIELD_TYPES[agg_type], f"{vis['id']}: {agg_type} on {name}, mapped {kind}"
    metric_ids = {agg["id"] for agg in state["aggs"] if agg["schema"] == "metric"}
    for series in state["params"].get("seriesParams", []):
        assert series["data"]["id"] in metric_ids


def test_the_latency_chart_has_p50_and_p95_of_each_stage_over_time() -> None:
    [latency] = [v for v in visualisations() if v["id"] == "rag-query-logs-latency"]
    aggs = json.loads(latency["attributes"]["visState"])["aggs"]
    percentiles = {a["params"]["field"]: a["params"]["percents"] for a in aggs if a["type"] == "percentiles"}
    assert set(percentiles) >= {"stage_ms.total", "stage_ms.refine", "stage_ms.retrieve", "stage_ms.rerank", "stage_ms.generate"}
    assert all(p == [50, 95] for p in percentiles.values())
    assert [a["params"]["field"] for a in aggs if a["type"] == "date_histogram"] == ["@timestamp"]


def test_the_thumbs_down_table_shows_only_down_feedback_with_question_and_answer() -> None:
    [table] = [v for v in visualisations() if v["id"] == "rag-query-logs-thumbs-down"]
    query = json.loads(table["attributes"]["kibanaSavedObjectMeta"]["searchSourceJSON"])["query"]["query"]
    assert kuery_fields(query) == [("event", ":", "feedback"), ("feedback.rating", ":", "down")]
    fields = [a["params"]["field"] for a in json.loads(table["attributes"]["visState"])["aggs"] if a["type"] == "terms"]
    assert fields[:2] == ["question.keyword", "answer.keyword"] and "turn_id" in fields


def test_the_conflicts_chart_counts_turns_whose_sources_disagreed_over_time_by_kind() -> None:
    [chart] = [v for v in visualisations() if v["id"] == "rag-query-logs-conflicts"]
    query = json.loads(chart["attributes"]["kibanaSavedObjectMeta"]["searchSourceJSON"])["query"]["query"]
    assert kuery_fields(query) == [("event", ":", "turn"), ("conflict", ":", "true")]
    aggs = {a["schema"]: a for a in json.loads(chart["attributes"]["visState"])["aggs"]}
    assert aggs["metric"]["type"] == "count"
    assert (aggs["segment"]["type"], aggs["segment"]["params"]["field"]) == ("date_histogram", "@timestamp")
    assert (aggs["group"]["type"], aggs["group"]["params"]["field"]) == ("terms", "conflict_kind")
    # On the dashboard, below the others, as wide as it.
    [dashboard] = [o for o in saved_objects() if o["type"] == "dashboard"]
    refs = {ref["name"]: ref["id"] for ref in dashboard["references"]}
    panels = json.loads(dashboard["attributes"]["panelsJSON"])
    [panel] = [p for p in panels if refs[p["panelRefName"]] == chart["id"]]
    others = [p for p in panels if p["panelIndex"] != panel["panelIndex"]]
    assert panel["gridData"]["w"] == 48
    assert panel["gridData"]["y"] >= max(p["gridData"]["y"] + p["gridData"]["h"] for p in others)


# --------------------------------------------------------------------------- make dashboards


def test_the_import_request_is_pinned() -> None:
    [ndjson] = saved_object_files()
    request = import_request("https://dashboards.example:5601/", ndjson)
    assert request.method == "POST"
    assert str(request.url) == "https://dashboards.example:5601/api/saved_objects/_import?overwrite=true"
    assert request.headers["osd-xsrf"] == "true"
    assert request.headers["content-type"] == f"multipart/form-data; boundary={MULTIPART_BOUNDARY}"
    body = request.read()
    assert body == (
        f"--{MULTIPART_BOUNDARY}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{ndjson.name}"\r\n'
        "Content-Type: application/ndjson\r\n\r\n"
    ).encode() + ndjson.read_bytes() + f"\r\n--{MULTIPART_BOUNDARY}--\r\n".encode()
    assert request.headers["content-length"] == str(len(body))
    assert ndjson.parent == DASHBOARDS_DIR


def test_the_template_and_ism_requests_are_pinned() -> None:
    put_template = template_request("http://localhost:9200")
    assert (put_template.method, str(put_template.url)) == ("PUT", "http://localhost:9200/_index_template/rag-query-logs")
    assert json.loads(put_template.read()) == template()
    create = ism_policy_request("http://localhost:9200")
    assert (create.method, str(create.url)) == ("PUT", f"http://localhost:9200/_plugins/_ism/policies/{ISM_POLICY_ID}")
    assert json.loads(create.read()) == json.loads(ISM_POLICY_PATH.read_text())
    update = ism_policy_request("http://localhost:9200", seq_no=7, primary_term=1)
    assert str(update.url) == f"http://localhost:9200/_plugins/_ism/policies/{ISM_POLICY_ID}?if_seq_no=7&if_primary_term=1"


class _Recorder(BaseHTTPRequestHandler):
    """OpenSearch and Dashboards as far as ``install`` needs them; every request is recorded."""

    calls: list[tuple[str, str, dict[str, str], bytes]] = []
    policy_exists = False

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.calls.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)))

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._record()
        if self.policy_exists:
            self._answer(200, {"_id": ISM_POLICY_ID, "_seq_no": 4, "_primary_term": 2, "policy": {}})
        else:
            self._answer(404, {"error": "policy not found"})

    def do_PUT(self) -> None:  # noqa: N802
        self._record()
        self._answer(200, {"acknowledged": True})

    def do_POST(self) -> None:  # noqa: N802
        self._record()
        self._answer(200, {"success": True, "successCount": len(saved_objects())})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("policy_exists", [False, True])
def test_make_dashboards_sends_the_three_steps_over_http(policy_exists: bool) -> None:
    _Recorder.calls = []
    _Recorder.policy_exists = policy_exists
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        report = install(url, url, auth=("admin", "secret"))
    finally:
        server.shutdown()
        server.server_close()
    assert report.ok, report.steps
    policy_path = f"/_plugins/_ism/policies/{ISM_POLICY_ID}"
    [(ndjson)] = saved_object_files()
    expected = [
        ("PUT", "/_index_template/rag-query-logs"),
        ("GET", policy_path),
        ("PUT", policy_path + ("?if_seq_no=4&if_primary_term=2" if policy_exists else "")),
        ("POST", "/api/saved_objects/_import?overwrite=true"),
    ]
    assert [(method, path) for method, path, _, _ in _Recorder.calls] == expected
    assert json.loads(_Recorder.calls[0][3]) == template()
    assert json.loads(_Recorder.calls[2][3]) == json.loads(ISM_POLICY_PATH.read_text())
    _, _, headers, body = _Recorder.calls[3]
    assert headers["osd-xsrf"] == "true" and headers["authorization"].startswith("Basic ")
    assert body == import_request(url, ndjson).read()

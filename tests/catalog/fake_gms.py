"""A FAKE DataHub GMS: it stands in for the server at the HTTP edge because no GMS can run here.

It serves exactly the endpoints ``DataHubGraph`` calls for ``ServerCatalog``, answering in the
shapes GMS answers in (Rest.li JSON for aspects, the OpenAPI v1 relationships result, GraphQL for
search), and records every request so tests can check what was asked of the server. It holds
canned state only: written aspects become readable, but writes do not feed its search documents
or relationship edges, which tests set directly. Anything else it answers 404 and lists in
``unserved`` so a test notices a call the fake does not model.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from datahub.emitter.serialization_helper import pre_json_transform
from datahub.ingestion.graph.client import entity_type_to_graphql
from datahub.metadata.schema_classes import ASPECT_NAME_MAP, KEY_ASPECT_NAMES, _Aspect
from datahub.utilities.urns.urn import guess_entity_type

#: What ``GET /config`` returns on an OSS quickstart (trimmed to the keys clients read).
CONFIG: dict[str, Any] = {
    "noCode": "true",
    "versions": {"acryldata/datahub": {"version": "v1.2.0", "commit": "0" * 40}},
    "datahub": {"serverType": "quickstart"},
    "statefulIngestionCapable": True,
    "patchCapable": True,
    "supportsImpactAnalysis": True,
    "retention": "true",
    "timeZone": "GMT",
    "telemetry": {"enabledCli": False, "enabledIngestion": False},
    "models": {},
}

_RELATIONSHIPS = "/openapi/relationships/v1/"
_PAGE = 200  # the relationships endpoint's default page size


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it; ``path`` is percent-decoded, ``body`` parsed JSON."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


def _restli_error(status: int, message: str) -> dict[str, Any]:
    return {
        "exceptionClass": "com.linkedin.restli.server.RestLiServiceException",
        "message": message,
        "status": status,
    }


def _matches(document: dict[str, set[str]], rule: dict[str, Any]) -> bool:
    """One filter criterion against one search document, approximating GMS's index query."""
    values = document.get(rule["field"].removesuffix(".keyword"), set())
    wanted = rule["values"]
    condition = rule.get("condition", "EQUAL")
    if condition == "EQUAL":
        hit = any(value in wanted for value in values)
    elif condition == "IEQUAL":
        hit = any(value.lower() == w.lower() for value in values for w in wanted)
    elif condition == "END_WITH":  # a case-insensitive wildcard query ``*value``
        hit = any(value.lower().endswith(w.lower()) for value in values for w in wanted)
    else:
        raise ValueError(f"the fake GMS does not model filter condition {condition}")
    return hit != bool(rule.get("negated", False))


class FakeGmsServer:
    """A FAKE standing in for DataHub GMS at the HTTP edge, since no GMS can run here.

    Runs on 127.0.0.1 with an ephemeral port in a daemon thread; use it as a context manager.
    """

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.unserved: list[Recorded] = []
        self._aspects: dict[str, dict[str, Any]] = {}  # urn -> aspect name -> Rest.li JSON
        self._edges: list[tuple[str, str, str]] = []  # (source, relationship, destination)
        self._documents: dict[str, dict[str, set[str]]] = {}  # urn -> search field -> values
        self._failures: dict[str, int] = {}  # path prefix -> HTTP status
        self._query_rejection: str | None = None
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._http.daemon_threads = True
        self._http.fake = self  # type: ignore[attr-defined]
        # a short poll interval lets shutdown() return at once rather than after 0.5 s
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> FakeGmsServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()

    # --- canned state ---------------------------------------------------------------------------
    def put_aspect(self, urn: str, aspect: _Aspect) -> None:
        """Store ``aspect`` as GMS would serve it (Rest.li JSON)."""
        with self._lock:
            self._aspects.setdefault(urn, {})[aspect.ASPECT_NAME] = pre_json_transform(
                aspect.to_obj()
            )

    def add_edge(self, source: str, relationship: str, destination: str) -> None:
        """A graph-index edge, e.g. (downstream, ``DownstreamOf``, upstream)."""
        with self._lock:
            self._edges.append((source, relationship, destination))

    def index(self, urn: str, **fields: list[str]) -> None:
        """A search document: index field name (``domains``, ``fieldPaths``...) -> values."""
        with self._lock:
            self._documents[urn] = {name: set(values) for name, values in fields.items()}

    def fail(self, path_prefix: str, status: int = 500) -> None:
        """Answer every request whose path starts with ``path_prefix`` with ``status``."""
        with self._lock:
            self._failures[path_prefix] = status

    def reject_queries(self, message: str) -> None:
        """Answer GraphQL with HTTP 200 and ``errors``, as GMS does for a query it rejects."""
        with self._lock:
            self._query_rejection = message

    def requests_to(self, path_prefix: str, method: str | None = None) -> list[Recorded]:
        with self._lock:
            return [
                r
                for r in self.requests
                if r.path.startswith(path_prefix) and method in (None, r.method)
            ]

    # --- endpoints ------------------------------------------------------------------------------
    def answer(self, request: Recorded) -> tuple[int, Any]:
        """Route one request to the endpoint GMS would serve it from."""
        with self._lock:
            self.requests.append(request)
            status = next(
                (s for prefix, s in self._failures.items() if request.path.startswith(prefix)),
                None,
            )
            if status is not None:
                return status, _restli_error(status, f"injected failure on {request.path}")
            route = (request.method, request.path)
            if route == ("GET", "/config"):
                return 200, CONFIG
            if request.method == "GET" and request.path.startswith("/aspects/"):
                return self._get_aspect(request)
            if request.method == "GET" and request.path.startswith("/entitiesV2/"):
                return self._get_entity(request)
            if route == ("GET", _RELATIONSHIPS):
                return self._relationships(request)
            if route == ("POST", "/api/graphql"):
                return self._graphql(request)
            if route == ("POST", "/aspects"):
                return self._ingest(request)
            self.unserved.append(request)
            return 404, _restli_error(404, f"the fake GMS does not serve {request.path}")

    def _get_aspect(self, request: Recorded) -> tuple[int, Any]:
        """``GET /aspects/{urn}?aspect=..&version=0``: a VersionedAspect, or 404 when absent."""
        urn = request.path.removeprefix("/aspects/")
        name = request.query["aspect"][0]
        value = self._aspects.get(urn, {}).get(name)
        if value is None:
            return 404, _restli_error(404, f"no {name} aspect on {urn}")
        schema_name = ASPECT_NAME_MAP[name].RECORD_SCHEMA.fullname.replace(".pegasus2avro", "")
        return 200, {"urn": urn, "version": 0, "aspect": {schema_name: value}}

    def _get_entity(self, request: Recorded) -> tuple[int, Any]:
        """``GET /entitiesV2/{urn}?aspects=List(..)``: an EntityResponse; the key aspect always."""
        urn = request.path.removeprefix("/entitiesV2/")
        if urn not in self._aspects:
            return 404, _restli_error(404, f"entity {urn} not found")
        projection = request.query.get("aspects", [""])[0].removeprefix("List(").rstrip(")")
        wanted = set(projection.split(",")) | KEY_ASPECT_NAMES
        aspects = {
            name: {"name": name, "type": "VERSIONED", "version": 0, "value": value}
            for name, value in self._aspects[urn].items()
            if name in wanted
        }
        return 200, {"entityName": guess_entity_type(urn), "urn": urn, "aspects": aspects}

    def _relationships(self, request: Recorded) -> tuple[int, Any]:
        """``GET /openapi/relationships/v1/``: a RelatedEntitiesResult page."""
        urn = request.query["urn"][0]
        types = set(request.query["relationshipTypes"])
        incoming = request.query["direction"][0] == "INCOMING"
        related = sorted(
            (kind, source if incoming else destination)
            for source, kind, destination in self._edges
            if kind in types and (destination if incoming else source) == urn
        )
        start = int(request.query.get("start", ["0"])[0])
        page = related[start : start + int(request.query.get("count", [str(_PAGE)])[0])]
        return 200, {
            "start": start,
            "count": len(page),
            "total": len(related),
            "entities": [{"relationshipType": kind, "urn": other} for kind, other in page],
        }

    def _graphql(self, request: Recorded) -> tuple[int, Any]:
        """``scrollAcrossEntities`` over the search documents, in one page; GraphQL errors else."""
        if self._query_rejection is not None:
            return 200, {"errors": [{"message": self._query_rejection}]}
        if "scrollAcrossEntities" not in request.body["query"]:
            return 200, {"errors": [{"message": "the fake GMS serves only scrollAcrossEntities"}]}
        variables = request.body.get("variables", {})
        types = variables.get("types")
        clauses = variables.get("orFilters") or [{"and": []}]
        try:
            urns = sorted(
                urn
                for urn, document in self._documents.items()
                if (types is None or entity_type_to_graphql(guess_entity_type(urn)) in types)
                and any(all(_matches(document, r) for r in c["and"]) for c in clauses)
            )
        except ValueError as error:
            return 200, {"errors": [{"message": str(error)}]}
        results = [{"entity": {"urn": urn}, "extraProperties": []} for urn in urns]
        return 200, {
            "data": {"scrollAcrossEntities": {"nextScrollId": None, "searchResults": results}}
        }

    def _ingest(self, request: Recorded) -> tuple[int, Any]:
        """``POST /aspects?action=ingestProposal[Batch]``: store each proposed aspect."""
        action = request.query.get("action", [""])[0]
        if action == "ingestProposal":
            proposals = [request.body["proposal"]]
        elif action == "ingestProposalBatch":
            proposals = request.body["proposals"]
        else:
            self.unserved.append(request)
            return 404, _restli_error(404, f"the fake GMS does not serve action {action}")
        for proposal in proposals:
            value = json.loads(proposal["aspect"]["value"])
            self._aspects.setdefault(proposal["entityUrn"], {})[proposal["aspectName"]] = value
        urns = [proposal["entityUrn"] for proposal in proposals]
        return 200, {"value": urns if action == "ingestProposalBatch" else urns[0]}


class _Handler(BaseHTTPRequestHandler):
    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        request = Recorded(
            method=self.command,
            path=unquote(parts.path),
            query=parse_qs(parts.query, keep_blank_values=True),
            body=json.loads(raw) if raw else None,
        )
        status, payload = self.server.fake.answer(request)  # type: ignore[attr-defined]
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = _serve
    do_POST = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging; tests read ``FakeGmsServer.requests`` instead."""

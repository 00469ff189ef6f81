"""A FAKE DataHub GMS: it stands in for the server at the HTTP edge because no GMS can run here.

It serves exactly the endpoints ``DataHubGraph`` calls for ``ServerCatalog``, answering in the
shapes GMS answers in (Rest.li JSON for aspects, timeseries values, the OpenAPI v1 relationships
result, GraphQL for search), and records every request so tests can check what was asked of the
server. Writes are as strict as GMS's: each value must fit its aspect's schema, a PATCH is
applied to the stored value the way GMS applies it (``gms_patch``), structured property values
are validated against their definitions (``reflex_actions.catalog.validation``, the check
Reflex makes of a steward's edit too), and a batch with one bad proposal is refused whole with
HTTP 422. Every write that changes something emits the MetadataChangeLog
GMS would (``change_log``): the aspect, its previous value and ``created.actor`` = the
authenticated principal (a bearer token's, or ``__datahub_system`` without one, as on a
quickstart with metadata-service auth off). Writes also feed the search documents and the
``DownstreamOf`` edges, which tests may set directly too. Anything else it answers 404 and lists
in ``unserved`` so a test notices a call the fake does not model.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from datahub.emitter.serialization_helper import post_json_transform, pre_json_transform
from datahub.ingestion.graph.client import entity_type_to_graphql
from datahub.metadata.schema_classes import (
    ASPECT_NAME_MAP,
    KEY_ASPECT_NAMES,
    AuditStampClass,
    ChangeTypeClass,
    GenericAspectClass,
    MetadataChangeLogClass,
    SystemMetadataClass,
    _Aspect,
)
from datahub.utilities.urns.error import InvalidUrnError
from datahub.utilities.urns.urn import Urn, guess_entity_type

from reflex_actions.catalog.validation import structured_property_errors
from tests.catalog.gms_patch import PatchError, apply_patch

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
#: Who GMS records for a request without a token when metadata-service auth is off.
SYSTEM_ACTOR = "urn:li:corpuser:__datahub_system"
_DOWNSTREAM_OF = "DownstreamOf"
_JSON = "application/json"


class Rejected(Exception):
    """A proposal GMS refuses; ``status`` is the HTTP status it answers with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it; ``path`` is percent-decoded, ``body`` parsed JSON."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    #: the bearer token of the ``Authorization`` header, if any
    token: str | None = None
    #: ``id:secret`` of a ``Basic`` (system-client) ``Authorization`` header, if any
    system_client: str | None = None
    #: the ``X-DataHub-Actor`` header (the frontend sets it to the session's user), if any
    actor_header: str | None = None


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


def _search_fields(urn: str, name: str, value: dict[str, Any]) -> dict[str, set[str]]:
    """The search-index fields an aspect feeds (a subset of GMS's @Searchable ones)."""
    if name == "glossaryTermInfo" and urn.startswith("urn:li:glossaryTerm:"):
        return {"parentNode": {value["parentNode"]} if value.get("parentNode") else set()}
    if not urn.startswith("urn:li:dataset:"):
        return {}
    if name == "domains":
        return {"domains": set(value.get("domains") or [])}
    if name == "ownership":
        return {"owners": {o["owner"] for o in value.get("owners") or []}}
    if name == "schemaMetadata":
        return {"fieldPaths": {f["fieldPath"] for f in value.get("fields") or []}}
    if name == "status":
        return {"removed": {"true"} if value.get("removed") else set()}
    return {}


def _platform(urn: str) -> set[str]:
    """``urn:li:dataset:(urn:li:dataPlatform:snowflake,x,PROD)`` -> its platform urn."""
    return {urn.removeprefix("urn:li:dataset:(").split(",", 1)[0]}


class FakeGmsServer:
    """A FAKE standing in for DataHub GMS at the HTTP edge, since no GMS can run here.

    ``tokens`` maps each bearer token GMS accepts to its principal (a user urn); a request with
    another token is refused with 401. Runs on 127.0.0.1 with an ephemeral port in a daemon
    thread; use it as a context manager.
    """

    def __init__(
        self,
        tokens: Mapping[str, str] | None = None,
        *,
        system_client: str | None = None,
        metadata_service_auth: bool = False,
    ) -> None:
        self.requests: list[Recorded] = []
        #: ``id:secret`` GMS accepts as its system client (DATAHUB_SYSTEM_CLIENT_ID/_SECRET)
        self._system_client = system_client
        #: METADATA_SERVICE_AUTH_ENABLED: with it on, a request without credentials gets 401
        self._auth_required = metadata_service_auth
        #: (urn, aspect name) -> the audit stamp of its current version (EnvelopedAspect.created)
        self._created: dict[tuple[str, str], dict[str, Any]] = {}
        self.unserved: list[Recorded] = []
        #: every MetadataChangeLog emitted, oldest first (see ``take_change_log``)
        self.change_log: list[MetadataChangeLogClass] = []
        self._read = 0  # how much of change_log take_change_log has handed out
        self._tokens = dict(tokens or {})
        self._aspects: dict[str, dict[str, Any]] = {}  # urn -> aspect name -> Rest.li JSON
        # (urn, aspect name) -> (timestampMillis, partition) -> Rest.li JSON
        self._timeseries: dict[tuple[str, str], dict[tuple[int, str], dict[str, Any]]] = {}
        self._edges: list[tuple[str, str, str]] = []  # (source, relationship, destination)
        self._lineage: dict[str, set[str]] = {}  # dataset -> upstreams, from upstreamLineage
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
        """Store ``aspect`` as GMS would serve it (Rest.li JSON), emitting no change log."""
        with self._lock:
            self._store(urn, aspect.ASPECT_NAME, pre_json_transform(aspect.to_obj()))

    def take_change_log(self) -> list[MetadataChangeLogClass]:
        """The change log emitted since the last call, oldest first (a consumer's next poll)."""
        with self._lock:
            taken, self._read = self.change_log[self._read :], len(self.change_log)
            return taken

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
            principal = self._principal(request)
            if principal is None:
                return 401, _restli_error(401, "Unauthorized: the credentials are not recognized")
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
                return self._graphql(request, principal)
            if route == ("POST", "/aspects"):
                action = request.query.get("action", [""])[0]
                if action == "getTimeseriesAspectValues":
                    return self._timeseries_values(request)
                return self._ingest(request)
            self.unserved.append(request)
            return 404, _restli_error(404, f"the fake GMS does not serve {request.path}")

    def _principal(self, request: Recorded) -> str | None:
        """Whom GMS authenticates the request as, or None (401): a token's owner, the system
        actor for the system client's credentials. With auth off GMS runs DataHub's
        ``NoOpAuthenticator`` alone: it ignores every credential and takes the user the
        ``X-DataHub-Actor`` header names (as the frontend forwards its session's user), else
        the system actor; so any caller may claim to be anyone."""
        if not self._auth_required:
            if not request.actor_header:
                return SYSTEM_ACTOR
            try:  # the authenticator keeps the urn's id: the actor is always a user
                return f"urn:li:corpuser:{Urn.from_string(request.actor_header).entity_ids[0]}"
            except InvalidUrnError:
                return None
        if request.token is not None:
            return self._tokens.get(request.token)
        if request.system_client is not None:
            return SYSTEM_ACTOR if request.system_client == self._system_client else None
        return None

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
            | ({"created": self._created[(urn, name)]} if (urn, name) in self._created else {})
            for name, value in self._aspects[urn].items()
            if name in wanted
        }
        return 200, {"entityName": guess_entity_type(urn), "urn": urn, "aspects": aspects}

    def _relationships(self, request: Recorded) -> tuple[int, Any]:
        """``GET /openapi/relationships/v1/``: a RelatedEntitiesResult page."""
        urn = request.query["urn"][0]
        types = set(request.query["relationshipTypes"])
        incoming = request.query["direction"][0] == "INCOMING"
        derived = [
            (dataset, _DOWNSTREAM_OF, upstream)
            for dataset, upstreams in self._lineage.items()
            for upstream in upstreams
        ]
        related = sorted(
            {
                (kind, source if incoming else destination)
                for source, kind, destination in [*self._edges, *derived]
                if kind in types and (destination if incoming else source) == urn
            }
        )
        start = int(request.query.get("start", ["0"])[0])
        page = related[start : start + int(request.query.get("count", [str(_PAGE)])[0])]
        return 200, {
            "start": start,
            "count": len(page),
            "total": len(related),
            "entities": [{"relationshipType": kind, "urn": other} for kind, other in page],
        }

    def _graphql(self, request: Recorded, principal: str) -> tuple[int, Any]:
        """``me`` (the authenticated user), and ``scrollAcrossEntities`` over the search
        documents in one page; GraphQL errors else."""
        if self._query_rejection is not None:
            return 200, {"errors": [{"message": self._query_rejection}]}
        if request.body["query"].replace(" ", "").startswith("query{me{"):
            return 200, {"data": {"me": {"corpUser": {"urn": principal}}}}
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

    def _timeseries_values(self, request: Recorded) -> tuple[int, Any]:
        """``POST /aspects?action=getTimeseriesAspectValues``: the newest values first."""
        body = request.body or {}
        urn, name = body.get("urn", ""), body.get("aspect", "")
        aspect_class = ASPECT_NAME_MAP.get(name)
        if aspect_class is None or aspect_class.get_aspect_type() != "timeseries":
            return 400, _restli_error(400, f"{str(name)[:100]} is not a timeseries aspect")
        criteria = [
            rule
            for clause in (body.get("filter") or {}).get("or", [])
            for rule in clause.get("and", [])
        ]
        if any(rule.get("condition", "EQUAL") != "EQUAL" for rule in criteria):
            self.unserved.append(request)
            return 400, _restli_error(400, "the fake GMS models only EQUAL timeseries filters")
        events = sorted(
            self._timeseries.get((urn, name), {}).items(), key=lambda item: item[0], reverse=True
        )
        values = [
            {"aspect": {"value": json.dumps(value), "contentType": _JSON}}
            for _, value in events
            if all(str(value.get(r["field"])) in r["values"] for r in criteria)
        ][: int(body.get("limit", 10000))]
        return 200, {
            "value": {
                "entityName": guess_entity_type(urn),
                "aspectName": name,
                "limit": body.get("limit"),
                "values": values,
            }
        }

    def _ingest(self, request: Recorded) -> tuple[int, Any]:
        """``POST /aspects?action=ingestProposal[Batch]``: validate every proposal, then write
        them all and emit their change logs, or write none (HTTP 422 naming the problem)."""
        action = request.query.get("action", [""])[0]
        if action == "ingestProposal":
            proposals = [request.body["proposal"]]
        elif action == "ingestProposalBatch":
            proposals = request.body["proposals"]
        else:
            self.unserved.append(request)
            return 404, _restli_error(404, f"the fake GMS does not serve action {action}")
        actor = self._principal(request) or SYSTEM_ACTOR  # answer() refused anyone else
        staged = {urn: dict(aspects) for urn, aspects in self._aspects.items()}
        events: list[tuple[str, str, dict[str, Any], dict[str, Any] | None, Any]] = []
        try:
            for proposal in proposals:
                urn, name, value, previous = self._proposed(proposal, staged)
                if ASPECT_NAME_MAP[name].get_aspect_type() == "timeseries" or value != previous:
                    staged.setdefault(urn, {})[name] = value
                    events.append((urn, name, value, previous, proposal.get("systemMetadata")))
        except Rejected as rejected:
            return rejected.status, _restli_error(rejected.status, str(rejected))
        now = int(time.time() * 1000)
        for urn, name, value, previous, system_metadata in events:
            self._store(urn, name, value)
            self._created[(urn, name)] = {"time": now, "actor": actor}
            self.change_log.append(
                _change_log(urn, name, value, previous, system_metadata, actor, now)
            )
        urns = [proposal["entityUrn"] for proposal in proposals]
        return 200, {"value": urns if action == "ingestProposalBatch" else urns[0]}

    def _proposed(
        self, proposal: dict[str, Any], staged: dict[str, dict[str, Any]]
    ) -> tuple[str, str, dict[str, Any], dict[str, Any] | None]:
        """(urn, aspect name, value to write, previous value) of one proposal, or Rejected."""
        urn, name = proposal.get("entityUrn") or "", proposal.get("aspectName") or ""
        aspect_class = ASPECT_NAME_MAP.get(name)
        if not urn.startswith("urn:li:") or aspect_class is None:
            raise Rejected(422, f"unknown entity or aspect: {urn[:200]!r} {name[:100]!r}")
        timeseries = aspect_class.get_aspect_type() == "timeseries"
        previous = None if timeseries else staged.get(urn, {}).get(name)
        try:
            body = json.loads(proposal["aspect"]["value"])
        except (KeyError, TypeError, ValueError) as error:
            raise Rejected(400, f"{name} of {urn}: the aspect is not JSON ({error})") from None
        change_type = proposal.get("changeType")
        if change_type == ChangeTypeClass.UPSERT:
            value = body
        elif change_type == ChangeTypeClass.PATCH and not timeseries:
            try:
                value = apply_patch(name, copy.deepcopy(previous), body)
            except PatchError as error:
                raise Rejected(422, f"{name} of {urn}: {error}") from None
        else:
            raise Rejected(422, f"the fake GMS does not accept {change_type} of {name}")
        try:
            aspect_class.from_obj(post_json_transform(value))
        except Exception as error:
            raise Rejected(422, f"{name} of {urn} does not fit its schema: {error}") from None
        if name == "structuredProperties":
            errors = structured_property_errors(
                value, lambda prop: staged.get(prop, {}).get("propertyDefinition")
            )
            if errors:
                raise Rejected(422, f"Failed to validate {name} of {urn}: " + "; ".join(errors))
        return urn, name, value, previous

    def _store(self, urn: str, name: str, value: dict[str, Any]) -> None:
        """Keep ``value`` and bring the search documents and lineage edges up to date."""
        if ASPECT_NAME_MAP[name].get_aspect_type() == "timeseries":
            partition = json.dumps(value.get("partitionSpec"), sort_keys=True)
            self._timeseries.setdefault((urn, name), {})[(value["timestampMillis"], partition)] = (
                value
            )
            return
        self._aspects.setdefault(urn, {})[name] = value
        fields = _search_fields(urn, name, value)
        if urn.startswith("urn:li:dataset:"):
            document = self._documents.setdefault(urn, {"platform": _platform(urn)})
            document.update(fields)
        elif fields:
            self._documents.setdefault(urn, {}).update(fields)
        if name == "upstreamLineage":
            self._lineage[urn] = {u["dataset"] for u in value.get("upstreams") or []}


def _change_log(
    urn: str,
    name: str,
    value: dict[str, Any],
    previous: dict[str, Any] | None,
    system_metadata: dict[str, Any] | None,
    actor: str,
    now: int,
) -> MetadataChangeLogClass:
    """The MetadataChangeLog GMS publishes for one write (a patch is logged as its result)."""

    def generic(aspect: dict[str, Any]) -> GenericAspectClass:
        return GenericAspectClass(value=json.dumps(aspect).encode(), contentType=_JSON)

    return MetadataChangeLogClass(
        entityType=guess_entity_type(urn),
        entityUrn=urn,
        changeType=ChangeTypeClass.UPSERT,
        aspectName=name,
        aspect=generic(value),
        previousAspectValue=generic(previous) if previous is not None else None,
        systemMetadata=SystemMetadataClass.from_obj(system_metadata) if system_metadata else None,
        created=AuditStampClass(time=now, actor=actor),
    )


class _Handler(BaseHTTPRequestHandler):
    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        authorization = self.headers.get("Authorization") or ""
        request = Recorded(
            method=self.command,
            path=unquote(parts.path),
            query=parse_qs(parts.query, keep_blank_values=True),
            body=json.loads(raw) if raw else None,
            token=authorization.removeprefix("Bearer ").strip() or None
            if authorization.startswith("Bearer ")
            else None,
            system_client=authorization.removeprefix("Basic ").strip() or None
            if authorization.startswith("Basic ")
            else None,
            actor_header=self.headers.get("X-DataHub-Actor") or None,
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

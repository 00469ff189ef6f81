"""The DataHub server (GMS) store, read and written only through acryl-datahub's ``DataHubGraph``.

Every lookup is answered by the server's own indexes: candidate lookups are search filters and
``downstreams`` is a graph relationship query, so Reflex never walks the catalog. In an action the
graph is the pipeline's (``ctx.graph.graph``); ``from_config`` builds one for the CLI and tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import requests
from datahub.configuration.common import OperationalError
from datahub.configuration.env_vars import get_system_client_secret
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.graph.client import DataHubGraph
from datahub.ingestion.graph.config import DatahubClientConfig
from datahub.ingestion.graph.filters import RawSearchFilterRule
from datahub.ingestion.graph.openapi import RelationshipDirection
from datahub.metadata.schema_classes import OwnerClass
from datahub.specific.aspect_helpers.ownership import HasOwnershipPatch
from datahub.specific.aspect_helpers.structured_properties import HasStructuredPropertiesPatch
from requests import HTTPError

from reflex_actions.catalog.base import AspectT, Catalog, CatalogError, Written
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.catalog.translate import DATASET_ASPECTS, dataset_context

#: GraphQL's question for the user a request is authenticated as.
_WHO_AM_I = "query { me { corpUser { urn } } }"
#: The graph edge ``upstreamLineage`` draws from a dataset to each of its upstreams.
DOWNSTREAM_OF = "DownstreamOf"

if TYPE_CHECKING:
    from reflex_actions.config import ReflexConfig

logger = logging.getLogger(__name__)


def _rule(field: str, condition: str, value: str) -> RawSearchFilterRule:
    return {"field": field, "condition": condition, "values": [value]}


def _reason(error: Exception) -> str:
    """What went wrong, with the server's own message when it sent one (GMS errors carry one)."""
    info: object = None
    if isinstance(error, OperationalError) and len(error.args) > 1:
        summary, info = str(error.args[0]), error.args[1]
    elif isinstance(error, HTTPError) and error.response is not None:
        summary = f"HTTP {error.response.status_code} {error.response.reason}"
        with contextlib.suppress(ValueError):
            info = error.response.json()
    elif isinstance(error, requests.ConnectionError):
        return _socket_reason(error)
    else:
        return str(error)
    message = info.get("message") if isinstance(info, dict) else None
    return f"{summary}: {message}" if message and message not in summary else summary


def _socket_reason(error: BaseException) -> str:
    """What the socket said (``Connection refused``, a name that does not resolve), not the
    chain of pools and retries requests wraps it in."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return str(seen.strerror)
        reason = getattr(seen, "reason", None)  # urllib3's MaxRetryError holds its cause
        inner = seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None
        seen = seen.__cause__ or (reason if isinstance(reason, BaseException) else inner)
    return str(error)


def _describe(mcps: Sequence[MetadataChangeProposalWrapper], shown: int = 3) -> str:
    """``schemaMetadata of urn:li:dataset:(...), ... and 4 more``: a batch fails as a whole."""
    named = ", ".join(f"{mcp.aspectName} of {mcp.entityUrn}" for mcp in mcps[:shown])
    return named + (f" and {len(mcps) - shown} more" if len(mcps) > shown else "")


class ServerCatalog(Catalog):
    """Catalog backed by a DataHub server, through a ``DataHubGraph`` client."""

    def __init__(self, graph: DataHubGraph, *, owns_graph: bool = False) -> None:
        self._graph = graph
        self._owns_graph = owns_graph  # the pipeline's shared graph is not ours to close

    @classmethod
    def open_for(cls, config: ReflexConfig, graph: DataHubGraph | None) -> ServerCatalog:
        if graph is None:
            raise CatalogError("the DataHub server store needs a `datahub:` block in the pipeline")
        return cls(graph)  # the pipeline's graph: not ours to close

    def own_actors(self) -> list[str]:
        try:
            return [self.principal()]
        except CatalogError as error:
            raise CatalogError(
                f"DataHub does not accept Reflex's credentials ({error}). Give the pipeline's "
                "`datahub:` block a `token` of Reflex's service user, or set "
                "DATAHUB_SYSTEM_CLIENT_ID and DATAHUB_SYSTEM_CLIENT_SECRET as DataHub's own "
                "actions do"
            ) from None

    @classmethod
    def from_config(cls, server: str, token: str | None = None) -> ServerCatalog:
        """Connect to ``server`` (the GMS url), failing now rather than at the first read. A
        command's client: a server that cannot be reached is said once, at once, not after the
        SDK's retries (four warnings and half a minute)."""
        config = DatahubClientConfig(server=server, token=token, retry_max_times=0)
        catalog = cls(DataHubGraph(config), owns_graph=True)
        with catalog._talking("connect"):
            catalog._graph.test_connection()
        return catalog

    @contextlib.contextmanager
    def _talking(self, what: str) -> Iterator[None]:
        """Any failure of the server, or of reading its answer, becomes a CatalogError."""
        try:
            yield
        except Exception as error:
            raise CatalogError(
                f"cannot {what} (DataHub at {self._graph.config.server}): {_reason(error)}"
            ) from error

    # --- reads -------------------------------------------------------------------------------
    def get_aspect(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        with self._talking(f"read {aspect_class.ASPECT_NAME} of {urn}"):
            return self._graph.get_aspect(urn, aspect_class)

    def aspect_writer(self, urn: str, aspect_class: type[AspectT]) -> str | None:
        # GMS keeps who wrote each aspect version: the ``created`` stamp of the enveloped aspect
        name = aspect_class.ASPECT_NAME
        with self._talking(f"read who wrote {name} of {urn}"):
            try:
                raw = self._graph.get_entity_raw(urn, aspects=[name])
            except HTTPError as error:
                if error.response is not None and error.response.status_code == 404:
                    return None
                raise
        aspect = (raw.get("aspects") or {}).get(name) or {}
        return (aspect.get("created") or {}).get("actor")

    def principal(self) -> str:
        """The user GMS authenticates Reflex as (and records on its writes): the token's
        owner, or ``__datahub_system`` for system-client credentials or with auth off."""
        with self._talking("find out whom DataHub authenticates Reflex as"):
            answer = self._graph.execute_graphql(_WHO_AM_I)
        urn = ((answer.get("me") or {}).get("corpUser") or {}).get("urn")
        if not urn:
            raise CatalogError("DataHub did not say whom it authenticates Reflex as (`me`)")
        return str(urn)

    def run_seal_key(self) -> bytes | None:
        """Derived from the secret Reflex authenticates with (its token, else its system
        client's secret), never the secret itself: replicas share it, a steward does not
        know it. None without either (GMS with authentication off and no token)."""
        secret = self._graph.config.token or get_system_client_secret()
        if not secret:
            return None
        return hashlib.sha256(b"datahub-reflex run seal\0" + secret.encode()).digest()

    def authenticates_callers(self) -> bool:
        """Whether GMS refuses a caller with no credentials at all. With metadata-service
        authentication off it accepts one, and records whatever actor its ``X-DataHub-Actor``
        header names (DataHub's ``NoOpAuthenticator``): then a recorded actor proves nothing.

        The probe is a bare request, not the graph's: the SDK's client adds the system
        client's credentials when ``DATAHUB_SYSTEM_CLIENT_ID`` is set. An answer that says
        neither (a server error) counts as not authenticating, so no decision is believed
        on a guess."""
        try:
            answer = requests.post(
                f"{self._graph.config.server.rstrip('/')}/api/graphql",
                json={"query": _WHO_AM_I},
                timeout=self._graph.config.timeout_sec or 30,
            )
        except requests.RequestException as error:
            raise CatalogError(
                f"cannot ask DataHub at {self._graph.config.server} whether it authenticates "
                f"its callers: {error}"
            ) from None
        if answer.status_code in (401, 403):
            return True
        if answer.ok:
            logger.warning(
                "DataHub at %s accepts callers with no credentials (metadata-service "
                "authentication is off): any caller may name any actor",
                self._graph.config.server,
            )
        else:
            logger.warning(
                "DataHub at %s answered HTTP %s to a caller with no credentials: taken as not "
                "authenticating its callers",
                self._graph.config.server,
                answer.status_code,
            )
        return False

    def timeseries_written(
        self,
        urn: str,
        aspect_class: type[AspectT],
        *,
        limit: int,
        where: Mapping[str, str] | None = None,
    ) -> list[Written[AspectT]]:
        # GMS's timeseries index keeps no writer: the change log carried it, its reads do not.
        rules = [_rule(field, "EQUAL", value) for field, value in (where or {}).items()]
        with self._talking(f"read the {aspect_class.ASPECT_NAME} values of {urn}"):
            values = self._graph.get_timeseries_values(
                entity_urn=urn,
                aspect_type=aspect_class,
                filter={"or": [{"and": rules}]},
                limit=limit,
            )
        return [Written(value, None) for value in values]

    def latest_timeseries(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        with self._talking(f"read the latest {aspect_class.ASPECT_NAME} of {urn}"):
            return self._graph.get_latest_timeseries_value(
                entity_urn=urn, aspect_type=aspect_class, filter_criteria_map={}
            )

    def dataset(self, urn: str) -> DatasetContext | None:
        if not urn.startswith("urn:li:dataset:"):
            return None
        with self._talking(f"read dataset {urn}"):
            try:
                found = self._graph.get_entity_semityped(urn, aspects=list(DATASET_ASPECTS))
            except HTTPError as error:
                if error.response is not None and error.response.status_code == 404:
                    return None
                raise
        # GMS answers for any urn and always adds the key aspect, so only these prove it exists.
        aspects = {name: aspect for name, aspect in found.items() if name in DATASET_ASPECTS}
        if not aspects:
            return None
        return dataset_context(urn, aspects, self.downstreams(urn))  # type: ignore[arg-type]

    def downstreams(self, urn: str) -> list[str]:
        with self._talking(f"read the downstreams of {urn}"):
            related = self._graph.get_related_entities(
                urn, relationship_types=[DOWNSTREAM_OF], direction=RelationshipDirection.INCOMING
            )
            return sorted({entity.urn for entity in related})

    # --- candidate lookups: filters on the server's search index --------------------------------
    def _search(self, what: str, entity_type: str = "dataset", **filters: Any) -> list[str]:
        with self._talking(f"search {entity_type}s by {what}"):
            return sorted(
                set(self._graph.get_urns_by_filter(entity_types=[entity_type], **filters))
            )

    def datasets_by_domain(self, domain_urn: str) -> list[str]:
        return self._search(
            f"domain {domain_urn}", extraFilters=[_rule("domains", "EQUAL", domain_urn)]
        )

    def datasets_by_platform(self, platform: str) -> list[str]:
        return self._search(f"platform {platform}", platform=platform)

    def datasets_by_field(self, field_name: str) -> list[str]:
        """Exact simple paths, or v2 paths (``[version=2.0].[type=string].name``) ending in one.

        The index holds field paths as ingested, so a v2 path is matched by its last segment: a
        nested v2 field with that leaf name is a candidate too, and a dotted name matches only
        v1 paths. Both conditions ignore case.
        """
        return self._search(
            f"field {field_name}",
            extra_or_filters=[
                {"and": [_rule("fieldPaths", "IEQUAL", field_name)]},
                {"and": [_rule("fieldPaths", "END_WITH", f"].{field_name}")]},
            ],
        )

    def datasets_by_owner(self, owner_urn: str) -> list[str]:
        return self._search(
            f"owner {owner_urn}", extraFilters=[_rule("owners", "EQUAL", owner_urn)]
        )

    def terms_under(self, node_urn: str) -> list[str]:
        return self._search(
            f"parent node {node_urn}",
            "glossaryTerm",
            extraFilters=[_rule("parentNode", "EQUAL", node_urn)],
        )

    # --- writes --------------------------------------------------------------------------------
    def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        """One batched request; GMS itself skips aspects whose value did not change."""
        if not mcps:
            return
        with self._talking(f"write {_describe(mcps)}"):
            self._graph.emit_mcps(list(mcps))

    def set_structured_properties(
        self, urn: str, values: Mapping[str, Sequence[str | float]], actor: str
    ) -> None:
        """A patch, so GMS merges it into the stored aspect: no read-modify-write race with a
        steward editing the same entity. GMS records the token's user as the actor."""
        patch = _StructuredPropertiesPatch(urn)
        for property_urn, property_values in values.items():
            if property_values:
                patch.set_structured_property(property_urn, list(property_values))
            else:
                patch.remove_structured_property(property_urn)
        with self._talking(f"set structured properties on {urn}"):
            for mcp in patch.build():
                self._graph.emit_mcp(mcp)

    def add_owner(self, urn: str, owner: str, ownership_type: str, actor: str) -> None:
        """A patch adding one owner; GMS keeps the others and records the token's user."""
        patch = _OwnershipPatch(urn).add_owner(OwnerClass(owner=owner, type=ownership_type))
        with self._talking(f"add owner {owner} to {urn}"):
            for mcp in patch.build():
                self._graph.emit_mcp(mcp)

    def close(self) -> None:
        if self._owns_graph:
            self._graph.close()


class _StructuredPropertiesPatch(HasStructuredPropertiesPatch):
    """A patch builder for the structuredProperties aspect of any entity type."""


class _OwnershipPatch(HasOwnershipPatch):
    """A patch builder for the ownership aspect of any entity type."""

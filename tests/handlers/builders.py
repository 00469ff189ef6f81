"""Builders shared by the handler decision tests: a small estate in the in-memory catalog (the
double that passes the catalog conformance suite), lessons on their glossary terms, and the
aspect changes the router hands to a handler."""

from __future__ import annotations

import itertools
import json
from typing import Any, TypeVar

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.serialization_helper import pre_json_transform
from datahub.metadata.schema_classes import (
    AuditStampClass,
    OperationClass,
    OperationTypeClass,
    OwnerClass,
    OwnershipClass,
    PartitionSpecClass,
    StringTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
    _Aspect,
)

from reflex_actions.backtest.metrics import Scores, SnapshotOutcome
from reflex_actions.catalog.steward import acting_as
from reflex_actions.config import ReflexConfig
from reflex_actions.controls import parse_control_spec
from reflex_actions.handlers.assertions import assertion_mcp
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.directives import Directive
from reflex_actions.handlers.lesson_store import lesson_term_mcp
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.lessons.model import (
    ApprovedVersion,
    BacktestSummary,
    Lesson,
    LessonState,
    LogPosition,
    ProposerInfo,
)
from reflex_actions.vocabulary import (
    APPROVAL,
    CONTROL_SPEC,
    COVERAGE,
    ROOT_CAUSE_STATUS,
    SCOPE,
)
from tests.catalog.builders import field, schema
from tests.catalog.memory_catalog import MemoryCatalog

LESSON = "urn:li:glossaryTerm:reflex.lesson.t"
PAYMENTS = "urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.payments,PROD)"
LEDGER = "urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.ledger,PROD)"
STEWARD, INTRUDER = "urn:li:corpuser:alice", "urn:li:corpuser:maria"
REFLEX = ReflexConfig().service_actor
CONTROL = {"type": "uniqueness", "field": "transaction_id"}
SPEC = "{type: uniqueness, field: transaction_id}"


def as_json(aspect: _Aspect) -> dict[str, Any]:
    """An aspect as an MCL event carries it (what ``AspectChange.from_mcl`` reads)."""
    return json.loads(json.dumps(pre_json_transform(aspect.to_obj())))


def properties(values: dict[str, list[str]]) -> StructuredPropertiesClass:
    return StructuredPropertiesClass(
        properties=[
            StructuredPropertyValueAssignmentClass(propertyUrn=p, values=list(v))
            for p, v in values.items()
        ]
    )


#: The log the built changes are written to: each takes the next place in it.
_LOG = itertools.count(1)


def change(
    urn: str,
    aspect: _Aspect,
    previous: _Aspect | None = None,
    actor: str = STEWARD,
    time_ms: int = 10,
) -> AspectChange:
    """The change of one aspect of ``urn`` from ``previous`` to ``aspect``, by ``actor``, at
    the next place in the log (a redelivery hands the same change again)."""
    return AspectChange(
        entity_type=urn.split(":")[2],
        urn=urn,
        aspect_name=aspect.get_aspect_name(),
        aspect=as_json(aspect),
        previous=as_json(previous) if previous is not None else None,
        actor=actor,
        time_ms=time_ms,
        position=LogPosition(stream="test", offset=next(_LOG)),
    )


def property_change(
    urn: str,
    before: dict[str, list[str]],
    after: dict[str, list[str]],
    actor: str = STEWARD,
    time_ms: int = 10,
) -> AspectChange:
    """A structured-properties edit: ``before``, then ``before`` updated with ``after``."""
    return change(urn, properties({**before, **after}), properties(before), actor, time_ms)


def approval(
    actor: str,
    spec: str = SPEC,
    scope: tuple[str, ...] = (PAYMENTS,),
) -> AspectChange:
    before = {ROOT_CAUSE_STATUS: ["CONFIRMED"], APPROVAL: ["PENDING"], SCOPE: list(scope)}
    return property_change(
        LESSON, {**before, CONTROL_SPEC: [spec]}, {APPROVAL: ["APPROVED"]}, actor=actor
    )


def lesson(**changes: Any) -> Lesson:
    """A drafted duplicate-rows lesson on PAYMENTS; ``changes`` override its fields."""
    fields: dict[str, Any] = {
        "urn": LESSON,
        "incident": "urn:li:incident:t",
        "source_dataset": PAYMENTS,
        "affected_assets": [PAYMENTS],
        "failure_pattern": DUPLICATE_ROWS,
        "root_cause": "a retry re-inserted rows",
        "evidence": [],
        "control": CONTROL,
        "confidence": 0.9,
        "rationale": "",
        "proposer": ProposerInfo(name="deterministic"),
        **changes,
    }
    return Lesson(**fields)


def seed(catalog: MemoryCatalog, *mcps: MetadataChangeProposalWrapper) -> None:
    """Write an estate, then forget those writes: ``catalog.writes`` then holds only what the
    handler's decision wrote."""
    catalog.emit(list(mcps))
    catalog.writes.clear()


def store_lesson(catalog: MemoryCatalog, stored: Lesson) -> Lesson:
    seed(catalog, lesson_term_mcp(stored, "t", REFLEX))
    return stored


def pending_lesson(catalog: MemoryCatalog, **changes: Any) -> Lesson:
    """A backtested lesson open for approval (gate 2)."""
    return store_lesson(
        catalog,
        lesson(
            state=LessonState.PENDING_APPROVAL,
            gate_values={ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "PENDING"},
            approval_open=True,
            **changes,
        ),
    )


def published_lesson(
    catalog: MemoryCatalog,
    approved_at: int,
    control: dict[str, Any] = CONTROL,
    dataset: str = PAYMENTS,
    **changes: Any,
) -> Lesson:
    """A lesson published on ``dataset`` at ``approved_at``, as publishing leaves it: its
    assertion, the dataset's coverage, and the lesson term."""
    published = lesson(
        state=LessonState.PUBLISHED,
        control=control,
        gate_values={ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "APPROVED"},
        approval_open=True,
        published_scope=[dataset],
        approved=ApprovedVersion(
            control=control,
            scope=[dataset],
            actor=STEWARD,
            at=approved_at,
            digest=ApprovedVersion.digest_of(control, [dataset]),
        ),
        **changes,
    )
    coverage = StructuredPropertiesClass(
        properties=[StructuredPropertyValueAssignmentClass(propertyUrn=COVERAGE, values=[LESSON])]
    )
    seed(
        catalog,
        assertion_mcp(published, dataset, parse_control_spec(control), REFLEX),
        acting_as(REFLEX, dataset, coverage),
    )
    return store_lesson(catalog, published)


def add_dataset(
    catalog: MemoryCatalog, urn: str, *, key: bool = False, owners: tuple[str, ...] = ()
) -> None:
    """A dataset with a ``transaction_id`` column (its declared key when ``key``), owned by
    ``owners`` as technical owners."""
    column = field("transaction_id", "VARCHAR", StringTypeClass(), key=key)
    mcps = [acting_as(STEWARD, urn, schema(column))]
    if owners:
        ownership = OwnershipClass(
            owners=[OwnerClass(owner=o, type="TECHNICAL_OWNER") for o in owners],
            lastModified=AuditStampClass(time=0, actor=STEWARD),
        )
        mcps.append(acting_as(STEWARD, urn, ownership))
    seed(catalog, *mcps)


def context(catalog: MemoryCatalog, **config: Any) -> HandlerContext:
    settings = {"approvers": {"users": [STEWARD]}, **config}
    return HandlerContext(catalog, ReflexConfig.model_validate(settings))


def kinds(directives: list[Directive]) -> list[str]:
    """The directives' types, in order: the shape of a decision."""
    return [type(d).__name__ for d in directives]


_Written = TypeVar("_Written")


def landed_on(dataset: str, at: int, partition: str | None = None) -> AspectChange:
    """An ``operation`` at ``at`` on ``dataset`` naming no file (of ``partition``, if given)."""
    landed = OperationClass(
        timestampMillis=at,
        lastUpdatedTimestamp=at,
        operationType=OperationTypeClass.INSERT,
        partitionSpec=PartitionSpecClass(partition=partition) if partition else None,
    )
    return change(dataset, landed, time_ms=at)


def written(ctx: HandlerContext, aspect: type[_Written]) -> list[_Written]:
    """The aspects of that class the decision writes, in order."""
    return [
        mcp.aspect
        for directive in ctx.out.directives
        for mcp in getattr(directive, "mcps", [])
        if isinstance(mcp.aspect, aspect)
    ]


def timelines(*datasets: str, snapshots: int) -> BacktestSummary:
    """A backtest of ``snapshots`` clean snapshots on each dataset."""
    outcomes = [
        SnapshotOutcome(
            dataset=dataset,
            snapshot_id=f"s{n:04d}",
            path=f"{dataset}/s{n:04d}.parquet",
            labelled_failure=False,
            evaluable=True,
            flagged=False,
            violation_count=0,
            verdict="true_negative",
        )
        for dataset in datasets
        for n in range(snapshots)
    ]
    scores = Scores(**Scores.compute(outcomes, len(datasets), len(datasets)))
    return BacktestSummary(scope=scores, overall=scores, outcomes=outcomes)


def approved_version(number: int, **changes: object) -> ApprovedVersion:
    """Version ``number`` as on_approved makes it: approved on PAYMENTS, backtested."""
    fields: dict[str, object] = {
        "control": CONTROL,
        "scope": [PAYMENTS],
        "actor": STEWARD,
        "at": number,
        "digest": ApprovedVersion.digest_of(CONTROL, [PAYMENTS]),
        "number": number,
        "origin": f"edited by {STEWARD}",
        "backtest": timelines("finance.payments", snapshots=30),
        "report": f"#### Report of version {number}",
        "field_mappings": {LEDGER: {"transaction_id": "txn_id"}},
        "published_scope": [PAYMENTS],
        **changes,
    }
    return ApprovedVersion.model_validate(fields)


def published_versions(count: int, **changes: object) -> Lesson:
    """A lesson published ``count`` times, the last in force, as publishing leaves it."""
    history = [approved_version(n) for n in range(1, count + 1)]
    approved = history[-1] if history else None
    fields: dict[str, object] = {
        "state": LessonState.PUBLISHED,
        "gate_values": {ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "APPROVED"},
        "approval_open": True,
        "published_scope": [PAYMENTS],
        "versions": history,
        "approved": approved,
        "report": approved.report if approved else "",
        "backtest": approved.backtest if approved else None,
        "field_mappings": approved.field_mappings if approved else {},
        "in_force_since": 1,
        **changes,
    }
    return lesson(**fields)


def published_on(urn: str, control: dict[str, Any], datasets: list[str]) -> list[Any]:
    """A lesson in force on ``datasets`` as publishing leaves it: an assertion and the
    ``reflex.coverage`` property on each, and the lesson's term (the MCPs to write)."""
    compiled = parse_control_spec(control)
    published = lesson(
        urn=urn,
        control=control,
        state=LessonState.PUBLISHED,
        published_scope=datasets,
        gate_values={ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "APPROVED"},
        approved=ApprovedVersion(
            control=control, scope=datasets, actor=INTRUDER, at=1,
            digest=ApprovedVersion.digest_of(control, datasets),
        ),
    )  # fmt: skip
    coverage = properties({COVERAGE: [urn]})
    return [
        *(assertion_mcp(published, dataset, compiled, REFLEX) for dataset in datasets),
        *(acting_as(REFLEX, dataset, coverage) for dataset in datasets),
        lesson_term_mcp(published, urn.rsplit(".", 1)[-1], REFLEX),
    ]

"""The referential_integrity control: every non-NULL value of a field exists in the referenced
(parent) dataset's field; the control of the orphaned-references kind
(:mod:`reflex_actions.kinds.orphaned_references`, which drafts it).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from reflex_actions.controls import Control
from reflex_actions.controls.base import ColumnName, ReferencedField
from reflex_actions.errors import ControlSpecError
from reflex_actions.sql import PARENT, SNAPSHOT, ControlQuery, Relation, column, count_where, exp
from reflex_actions.vocabulary import display_name

#: The names the query gives the child's rows, the parent's distinct values, and its columns.
CHILD, PARENT_VALUES, MATCHED, MISSING = "child", "parent_values", "parent_value", "missing_value"


class ReferentialIntegrityControl(Control):
    """Every non-NULL ``field`` value of a snapshot exists in ``references.field`` of the
    referenced dataset's snapshot; the sample lists the missing parent values with their row
    counts, most first."""

    type: Literal["referential_integrity"] = "referential_integrity"
    field: ColumnName
    references: ReferencedField

    violation_unit: ClassVar[str] = "rows with orphaned references"

    def required_columns(self) -> list[str]:
        return [self.field]

    def referenced(self) -> ReferencedField:
        return self.references

    def with_dataset_fields(self, mapping: dict[str, str]) -> ReferentialIntegrityControl:
        """The same check on a child that names its field differently (the parent's stays)."""
        return self.model_copy(update={"field": mapping.get(self.field, self.field)})

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """The child's non-NULL values with no equal among the parent's values (a NULL equals
        nothing, so it never matches); one snapshot at a time, as each child snapshot has its
        own parent snapshot. Values of one type compare natively; otherwise the parent's values
        are read in the child's type where that has one text form (so the comparison is the
        text comparison, without casting every child row), else both compare as text.

        Each table is read once per query: the counts left-join the child's rows to the
        parent's distinct values (an anti join's result, with the rows counted on the way), and
        the sample, run only when there are orphans, groups the orphans, most rows first."""
        parent = relation.reference
        if parent is None:
            raise ControlSpecError(
                f"{self.type} is evaluated on one snapshot against its parent's snapshot; "
                "none was given"
            )
        child = _of(CHILD, self.field)
        value, parent_values = _compared_values(
            child,
            _of(PARENT, self.references.field),
            relation.types.get(self.field),
            parent.types.get(self.references.field),
        )
        matched = exp.column(MATCHED, table=PARENT_VALUES)
        rows = (
            exp.select()
            .from_(exp.to_table(SNAPSHOT).as_(CHILD))
            .join(PARENT_VALUES, on=matched.eq(value), join_type="left")
            .with_(PARENT_VALUES, as_=parent_values.distinct())
        )
        orphan = exp.and_(child.is_(exp.null()).not_(), matched.is_(exp.null()))
        counts = rows.select(
            exp.func("count", exp.Star()).as_("rows_scanned"),
            count_where(orphan).as_("violation_count"),
        )
        missing = _as_text(child)
        occurrences = exp.func("count", exp.Star())
        sample = (
            rows.select(missing.as_(MISSING), occurrences.as_("occurrences"))
            .where(orphan.copy())
            .group_by(missing.copy())
            .order_by(exp.Ordered(this=exp.column("occurrences"), desc=True), exp.column(MISSING))
            .limit(sample_size)
        )
        return ControlQuery(counts=counts, sample=sample)

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        value, occurrences = row
        return {"missing_parent_value": value, "occurrences": occurrences}

    def describe(self) -> str:
        return (
            f"every {self.field} exists in {self.references.field} of "
            f"{display_name(self.references.dataset)}"
        )


#: DuckDB types whose values have exactly one text form: a parent's text value that reads as
#: one of them and prints back the same is the same value as that text, so the comparison can
#: run in the child's type. Only these names are ever built into a query's types.
ONE_TEXT_FORM = re.compile(
    r"(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|"
    r"DECIMAL\((\d{1,2}),(\d{1,2})\)|DATE|TIMESTAMP|UUID|BOOLEAN)"
)


#: Most digits of each integer type's values.
INTEGER_DIGITS = {
    "TINYINT": 3,
    "SMALLINT": 5,
    "INTEGER": 10,
    "BIGINT": 19,
    "HUGEINT": 39,
    "UTINYINT": 3,
    "USMALLINT": 5,
    "UINTEGER": 10,
    "UBIGINT": 20,
}


_HEX = "[0-9a-f]"


_DAY = "[0-9]{4,}-[0-9]{2}-[0-9]{2}( [(]BC[)])?"


#: The shape of the one text form of the other types (no backslashes: dialects escape them
#: differently in literals).
TEXT_FORMS = {
    "DATE": f"^({_DAY}|-?infinity)$",
    "TIMESTAMP": f"^({_DAY} [0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}([.][0-9]{{1,6}})?|-?infinity)$",
    "UUID": f"^{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}$",
    "BOOLEAN": "^(true|false)$",
}


def text_form(type_name: str) -> str:
    """A regular expression every text form of ``type_name`` (one of ONE_TEXT_FORM) matches,
    so that only text of that shape is cast: a dialect without a cast that fails softly
    (PostgreSQL) casts no text that cannot be a value of the type."""
    decimal = ONE_TEXT_FORM.fullmatch(type_name)
    if type_name in INTEGER_DIGITS:
        return f"^-?[0-9]{{1,{INTEGER_DIGITS[type_name]}}}$"
    if decimal is not None and decimal.group(2) is not None:
        precision, scale = int(decimal.group(2)), int(decimal.group(3))
        whole = f"[0-9]{{1,{precision - scale}}}" if precision > scale else "0?"  # DuckDB: .50
        return f"^-?{whole}" + (f"[.][0-9]{{{scale}}}$" if scale else "$")
    return TEXT_FORMS[type_name]


def _of(table: str, name: str) -> exp.Column:
    """A field (a quoted identifier) of one of the query's tables (named as the dialect
    writes an unquoted name, like the tables themselves)."""
    field = column(name)
    field.set("table", exp.to_identifier(table))
    return field


def _as_text(value: exp.Expression) -> exp.Cast:
    return exp.Cast(this=value.copy(), to=exp.DataType.build("TEXT"))


def _compared_values(
    child: exp.Column, parent: exp.Column, child_type: str | None, parent_type: str | None
) -> tuple[exp.Expression, exp.Select]:
    """The child's value as compared, and the query of the parent's values it is compared
    with (as ``parent_value``). One type: both as they are. A child type of one text form: the
    parent's text of that form's shape read in it (softly, where the dialect can), kept where
    it prints back as that text. Otherwise both as text."""
    if child_type is not None and child_type == parent_type:
        return child, exp.select(parent.as_(MATCHED)).from_(PARENT)
    if child_type is not None and ONE_TEXT_FORM.fullmatch(child_type):
        text = _as_text(parent)
        typed = exp.case().when(
            exp.RegexpLike(this=text, expression=exp.Literal.string(text_form(child_type))),
            exp.TryCast(
                this=text.copy(), to=exp.DataType.build(child_type, dialect="duckdb"), safe=True
            ),
        )
        prints_back = _as_text(typed).eq(_as_text(parent))
        return child, exp.select(typed.copy().as_(MATCHED)).from_(PARENT).where(prints_back)
    return _as_text(child), exp.select(_as_text(parent).as_(MATCHED)).from_(PARENT)

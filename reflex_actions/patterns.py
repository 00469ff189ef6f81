"""The failure patterns Reflex knows how to turn into controls."""

from __future__ import annotations

from enum import Enum


class FailurePattern(str, Enum):
    DUPLICATE_ROWS_NON_IDEMPOTENT_RETRY = "duplicate_rows_non_idempotent_retry"
    ORPHANED_OWNERSHIP = "orphaned_ownership"
    UNKNOWN = "unknown"

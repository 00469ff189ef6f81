"""The ``reflex-lite`` event source: DataHub Lite's aspect history as a MetadataChangeLog stream."""

from reflex_actions.source.lite_change_feed.lite_change_feed_source import (
    ChangeFeedError,
    LiteChangeFeedConfig,
    LiteChangeFeedSource,
)

__all__ = ["ChangeFeedError", "LiteChangeFeedConfig", "LiteChangeFeedSource"]

"""Event sources for datahub-actions, one package per plugin (the layout datahub-actions uses)."""

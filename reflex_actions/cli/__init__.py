"""The ``datahub-reflex`` command line."""

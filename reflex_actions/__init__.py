"""DataHub Reflex: turn resolved data incidents into tested, reusable preventive controls."""

__version__ = "0.1.0"

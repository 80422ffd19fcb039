"""rag-monitor: a production monitor for retrieval-augmented generation services."""

__version__ = "0.1.0"

"""The project's maintenance scripts; one that imports another runs as
``python -m scripts.NAME`` from the repository root."""

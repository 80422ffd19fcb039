"""The golden-set backlog in Postgres: what is queued, stored, reviewed, exported and migrated.

See docs/review.md.
"""

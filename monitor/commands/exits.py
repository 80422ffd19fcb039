"""The exit codes that mean the same in every `rag-monitor` command; a command's own
codes live with it.

See docs/design.md, "Contracts".
"""

EXIT_OK = 0
#: invalid options, arguments or settings
EXIT_USAGE = 2
#: Postgres unreachable (or a migration failed)
EXIT_UNAVAILABLE = 3
#: the backlog schema is behind: run rag-monitor migrate
EXIT_SCHEMA = 4

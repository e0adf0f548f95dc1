"""The commands: what `pagesync` offers, each a library function the thin CLI calls.

`cli` (the typer app: it builds objects, calls one function and maps errors to one line
and an exit code), `audit`, `status`, `reindex`, `transfer` (export / import), and
`checks` (what a command verifies before it reads or writes anything).

Commands may import every other layer; nothing outside this package imports a command.
"""

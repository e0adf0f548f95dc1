"""The commands: what `pagesync` offers, each a library function the thin CLI calls.

`cli` (the typer app: it builds objects, calls one function and maps errors to one line and
an exit code) with the options every command shares (`options`), where a command opens its
store and page state (`opening`), how it ends (`exits`: one line and an exit code), what it
prints besides its result (`output`) and one pass of `run` and `watch` (`pass_runner`);
`audit`, `status`, `reindex` (with where it takes each page's text from in `reindex_texts`),
`transfer` (export / import), `watch` (the long-running loop of passes, on a given clock),
`read` (open a collection and search it: `pagesync search`, and apps), `checks` (what a
command verifies before it reads or writes anything), and `config_file` (`--config` and
`./pagesync.toml`, read into every command's defaults).

Commands may import every other layer; no layer of a pass imports a command (only the
framework adapters in `sync.integrations` build on `read`).
"""

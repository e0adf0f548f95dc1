"""The edges: every place a pass touches the world, each behind a small Protocol.

HTTP (`fetcher`, with each GET followed hop by hop in `hops`, each host's bounds and pacing in
`host_pacing`, its answers' deadlines in `deadlines`, and its remembered robots.txt and sitemap
copies in `httpcache`); the vector stores (`store`: the protocol and its records; `edge_store`:
Qdrant Edge embedded, with its shard's lock in `shard_lock`, its config file in `edge_config`
and its requests in `edge_queries`; `client_store`: a Qdrant server through qdrant-client;
`point_records`: what both read from a stored point; `keywords`: the BM25 keyword vectors;
`store_errors`: their failures as pagesync errors; `catalog` and `aliasfile` for collections
and aliases); the page states (`state_protocol`, `state` in SQLite, `qdrant_state` in Qdrant,
with its lease in `qdrant_lease`), the pass lock's holder (`lease`) and the model thread a pass
can walk away from (`threads`); the Prometheus text file of a pass (`metrics`) and what may
stand where an output is written (`output_paths`), the free space kept on the embedded store's
disk (`disk_space`), the model a collection's points name (`stored_model`) and a reindex's
vectors by text (`vector_memo`).

Modules here may import `sync.core` and `sync.errors`; never a stage, the engine or a command.
"""

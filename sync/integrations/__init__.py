"""Framework adapters over the read API (`sync.commands.read.open_collection`).

- `sync.integrations.langchain.PagesyncRetriever`: a LangChain `BaseRetriever`
  (`pip install "pagesync[langchain]"`).
- `sync.integrations.llamaindex.PagesyncRetriever`: a LlamaIndex `BaseRetriever`
  (`pip install "pagesync[llamaindex]"`).

Each module imports its framework when it is itself imported, never at `import sync`; a
missing framework is an ImportError naming the extra to install. Both work on the
embedded store (no server needed) and on a Qdrant server, and return each chunk's text
with its `url`, `title`, `chunk_id`, `chunk_index` and `fetched_at` as metadata, and its
score.

Modules here may import the read API (`sync.commands.read`) and what it returns; nothing in
`sync` imports them.
"""

"""Stores: where a collection's chunks and vectors live, how they are written and searched.

`vector_store` (what a store is, its errors and the spec grammar) and `factory` (open one by spec); the embedded
Chroma store (`store.PassageStore`, its parts in `chroma/`) searched in memory by `search_index`; the engine backend
(`postgres.PostgresStore`, its parts in `engine/`) that searches in PostgreSQL; what both share (`scope`, `vectors`,
`locking`); `ingest` (documents in, through any store) and `langchain` (a LangChain vector store for dense search).
"""

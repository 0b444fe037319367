"""Open a collection's store by its spec string, and the search index over it: the one place that knows every backend.

`vector_store` says what a store is (the protocol and the spec grammar); this module picks the implementation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reground.tools.stores.vector_store import ENGINE_SCHEMES, VectorStore, parse_store_spec, registered_store

if TYPE_CHECKING:
    from reground.tools.adapters.embeddings import Embedder
    from reground.tools.stores.locking import WaitNotice
    from reground.tools.stores.search_index import IndexSettings


def open_store(
    spec: str,
    collection: str,
    *,
    embedder: Embedder | None = None,
    create: bool = False,
    on_wait: WaitNotice | None = None,
    index: IndexSettings | None = None,
) -> VectorStore:
    """Open (or, with `create`, create) a collection in the store the spec names; `index` says how the built-in
    stores run dense search (exact, HNSW, or by size)."""
    scheme, rest = parse_store_spec(spec or "chroma")
    if scheme in ENGINE_SCHEMES:
        from reground.tools.stores.postgres import open_engine_store

        return open_engine_store(f"{scheme}:{rest}", collection, embedder=embedder, create=create, index=index)
    if scheme == "langchain":  # a user's LangChain VectorStore for dense search over a reground store
        from reground.tools.stores.langchain import open_langchain_store

        return open_langchain_store(
            f"{scheme}:{rest}",
            collection,
            embedder=embedder,
            open_base=lambda s, c, **kw: open_store(s, c, index=index, **kw),
        )
    registered = registered_store(scheme)
    if registered is not None:
        return registered(rest, collection, embedder=embedder, create=create, on_wait=on_wait)
    from reground.tools.stores.store import PassageStore

    where = {"data_dir": rest or None} if scheme == "chroma" else {"chroma_url": rest}
    return PassageStore.open(collection, embedder=embedder, create=create, on_wait=on_wait, index=index, **where)


def search_index(store: Any, index: IndexSettings | None = None) -> Any:
    """What retrieval searches (a `retrieval.search.SearchStore`): a new `SearchIndex` over a VectorStore that does
    not search itself, else the store as given (PassageStore delegates to its own index; a caller's search store)."""
    if callable(getattr(store, "dense_search", None)) or not callable(getattr(store, "load_snapshot", None)):
        return store
    from reground.tools.stores.search_index import SearchIndex

    return SearchIndex(store, index)

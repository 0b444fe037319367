"""The embedded (Chroma) store's parts: a collection with its manifest, write lock and repair; its writes; its
reads. `tools/stores/store.py` composes them into `PassageStore`."""

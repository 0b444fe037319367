"""Tools: everything that talks to the outside world (LLM, embeddings, vector store, files, metrics)."""

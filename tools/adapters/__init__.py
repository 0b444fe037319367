"""Adapters to the outside world: chat models and their local server, embeddings, an HTTP reranker, a run's clients."""

"""The search engine backend's parts: its server process, and a collection's schema, writes and searches in
PostgreSQL + pgvector. `tools/stores/postgres.py` composes them into `PostgresStore`."""

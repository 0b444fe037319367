"""Stores: where a collection's chunks and vectors live, how they are written (ingest, locking) and searched."""

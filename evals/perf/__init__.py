"""Benchmarks of everything but the answers' quality: latency, memory, scale, ingest and the prefix cache."""

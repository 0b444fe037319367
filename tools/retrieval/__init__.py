"""Retrieval: the LLM-free search stack (what a turn searches with, from explicit arguments: query.py; the search and
its fusion: search.py, ranking.py), its keyword extractor, the chunk ranker, page variants, the LLM query transforms
and a LangChain retriever over it."""

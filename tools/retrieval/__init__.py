"""Retrieval: the LLM-free search stack, its keyword extractor and the LLM query transforms."""

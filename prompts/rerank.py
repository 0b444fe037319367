"""Prompt of the listwise LLM reranker (ReGround's LLM rerank, 1-10 relevance)."""

TASK = """Rate how useful each numbered passage above is for answering the question, from 1 (useless) \
to 10 (answers it directly): in "scores", one score per passage, in the passages' order.

Question: {question}"""

"""Prompt of the keyword extractor (ConvRAG stage 1b)."""

SYSTEM = """Extract 2 to 5 search keywords for finding documents that answer the question. Use the \
question, its standalone rewrite and the conversation. Prefer specific nouns and noun phrases \
(topics, forms, benefits, places)."""

USER = """Conversation:
{history}
Question: {question}
Standalone question: {standalone}"""

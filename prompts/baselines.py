"""Prompts of the evaluation baselines: what a plain pipeline would send (one answer call each).

Retrieved passages sit inside the prompt fence (prompts/fence.py), like in every prompt that shows them.
"""

from reground.prompts.fence import PASSAGES_AND_CONVERSATION, QUOTED_RULE

# No retrieval: the model answers from the conversation alone (a floor for every metric).
NO_RETRIEVAL = """You are a helpful assistant for questions about government services and \
workplace policies.

Conversation so far:
{conversation}

Answer the user's last question in at most 3 sentences. If you do not know, say so.
Answer:"""

# Naive / history-aware RAG: the top passages and the conversation, one call, the usual rules.
RAG = (
    "Answer the user's last question using the passages below. "
    + QUOTED_RULE
    + "\n\n"
    + PASSAGES_AND_CONVERSATION
    + """

Be concise (at most 3 sentences). If the passages do not contain the answer, say so.
Answer:"""
)

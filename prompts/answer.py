"""The shared prompt prefix of a turn and the answer task (HR chatbot answer rules)."""

# Every call of a turn after retrieval starts with this system message, byte for byte, so the
# server's prompt-prefix cache serves the passages and conversation once per turn.
SHARED_PREFIX = """You are a careful assistant that answers questions from the documents below only.

Passages:
{passages}

Conversation so far:
{conversation}"""

PASSAGE = "[{number}] {title}{section} ({url})\n{text}"

# The answer task. `{judge_passages}` is INLINE_SELF_CHECK (ConvRAG's self-check in the answer call's
# first line: one LLM call) or USE_HELPFUL (after a separate self-check call). Written against what a
# 0.5B model does with weaker wording: it echoes the numbered passages, or answers every question
# with the escalation sentence.
TASK = """The user's last message: {question}

{judge_passages}
- 1 to 3 short sentences, addressed to the user as "you", with facts taken only from the helpful passages, \
citing them like [1]; say which country, region or employment type it applies to when a passage says so, \
and include a passage's URL when it helps the user act;
- do not copy the passage titles or list the passages;
- only if no passage helps, say the documents do not cover it and add: {escalation}.
"""

INLINE_SELF_CHECK = """Write the support agent's reply. First write one line "Helpful:" with the numbers of the \
passages above that help, like "Helpful: [n], [m]" (or "Helpful: none"). Then write the reply:"""

USE_HELPFUL = """Write the support agent's reply from the passages marked helpful: {helpful}. The reply:"""

NOT_FOUND = "I could not find this in the documents available to you, so I won't guess: {escalation}."

EMPTY_QUESTION = "Please type a question. I answer questions about the documents in '{collection}'."

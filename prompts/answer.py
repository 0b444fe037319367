"""The shared prompt prefix of a turn and the answer task (HR chatbot answer rules)."""

# Every call of a turn after retrieval starts with this system message, byte for byte, so the
# server's prompt-prefix cache serves the passages and conversation once per turn.
SHARED_PREFIX = """You are a careful assistant that answers questions from the documents below only.

Passages:
{passages}

Conversation so far:
{conversation}"""

PASSAGE = "[{number}] {title}{section} ({url})\n{text}"

# The answer task, asked for as JSON (schema in nodes/answer.py, enforced by the server): ConvRAG's
# self-check ("helpful") and the reply in one call. `{evidence}` is EVIDENCE (the passage sentences closest
# to the question, LLM-free) or empty. The reply reuses the passages' wording: on doc2dial dev the passage
# sentence that matches the question scores higher token F1 against the human reply than the 0.5B model's
# paraphrase (evals/README.md, "Answer relevance").
TASK = """The user's last message: {question}
{evidence}
Write the support agent's reply to the user's last message. In "helpful", list the numbers of the passages \
above that help answer it (empty if none does). In "answer", write the reply: 1 or 2 short sentences that \
answer exactly what the user asked, in the passages' own words, addressed to the user as "you"; say which \
country, region or employment type it applies to when a passage says so. Do not repeat an earlier reply. \
If no passage helps, say the documents do not cover it and add: {escalation}."""

EVIDENCE = """The passage sentences closest to this question (use them if they answer it):
{sentences}
"""

NOT_FOUND = "I could not find this in the documents available to you, so I won't guess: {escalation}."

EMPTY_QUESTION = "Please type a question. I answer questions about the documents in '{collection}'."

"""The shared prompt prefix of a turn and the answer task (HR chatbot answer rules)."""

# Every call of a turn after retrieval starts with this system message, byte for byte, so the
# server's prompt-prefix cache serves the passages and conversation once per turn.
SHARED_PREFIX = """You are a careful assistant that answers questions from the documents below only.

Passages:
{passages}

Conversation so far:
{conversation}"""

PASSAGE = "[{number}] {title}{section} ({url})\n{text}"

TASK = """Answer the user's last question: {question}

Use only the passages marked helpful: {helpful}. Rules:
- Be concise (at most 3 sentences) and specific; reuse the passages' own words and numbers.
- Address the user as "you". Say which country, region or employment type the answer applies to \
when the passage says so. Include a URL from a passage when it helps the user act.
- Cite the passages you used like [1] or [2].
- If the passages do not contain the answer, say that the documents do not cover it and add: \
{escalation}. Never make up an answer.
Answer:"""

NOT_FOUND = "I could not find this in the documents available to you, so I won't guess: {escalation}."

EMPTY_QUESTION = "Please type a question. I answer questions about the documents in '{collection}'."

"""Prompt of the groundedness judge (ReGround's check, with its definition of a hallucination)."""

TASK = """Check this answer to the user's last question against the passages above.

Answer: {answer}

In "unsupported_claims", list every claim of the answer that the passages do NOT support (an empty list \
if every claim is supported). A question back to the user, or a statement that the documents do not \
contain the answer, is not an unsupported claim."""

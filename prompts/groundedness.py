"""Prompt of the groundedness judge (ReGround's check, with its definition of a hallucination)."""

TASK = """Check this answer to the user's last question against the passages above.

Answer: {answer}

List every claim of the answer that the passages do NOT support, one per line starting with "- ". \
A question back to the user, or a statement that the documents do not contain the answer, is not \
an unsupported claim. If every claim is supported, reply with exactly: NONE"""

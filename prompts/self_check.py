"""Prompt of the self-check (ConvRAG stage 3): judge each passage helpful or not before answering."""

TASK = """Before answering, check each numbered passage above: does it help answer the user's last \
question? Reply with one line per passage in the form
[number] helpful - short reason
or
[number] not helpful - short reason

Question: {question}"""

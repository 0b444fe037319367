"""Prompt of the self-check (ConvRAG stage 3): judge each passage helpful or not before answering."""

TASK = """Before answering, check each numbered passage above: does it help answer the user's last \
question? Reply with one line per passage in the form
[number] helpful - reason in at most 8 words
or
[number] not helpful - reason in at most 8 words

Question: {question}"""

"""Prompts of `reground eval synth`: the model plays the user (and the agent's reference reply) over a document.

The gold span is chosen first (verbatim from the store), and the model is only asked for the question that
span answers, so spans stay verbatim by construction. Every call asks for JSON (schemas in evals/runs/synth.py,
enforced by the server); the shared context (document, conversation) comes first and the task last, so the
server's prompt-prefix cache serves it across the calls of a turn.
"""

SYSTEM = """You write realistic test conversations between a user and a support agent who answers from \
documents. Users write short, natural questions in plain language, each about something new.

Conversation so far:
{conversation}

Document: {title}
The passage the next question must be about:
{span}"""

# A dialogue's first question, or the question that shifts the conversation to another document.
# `opener` is drawn per question from QUESTION_OPENERS (seeded): the embedded 0.5B otherwise asks "What is the
# purpose of ...?" of almost every passage, and copied the prompt's example question verbatim.
FIRST_TASK = """Write the user's next message: one short question (at most 20 words) that the passage above \
answers, starting with "{opener}". The question must make sense on its own: name what it is about in the \
passage's words. Do not copy a sentence of the passage and do not repeat an earlier question.
In "reply", write the agent's answer to that question in 1 or 2 sentences, in the passage's own words."""

QUESTION_OPENERS = ("How", "When", "Can I", "Do I need", "What happens if", "Who", "How much", "Where", "Is there")

# A follow-up is written in two steps a small model manages: the question about its passage, written as if it
# came first (shown the dialogue, the embedded 0.5B repeated the first question in 16 of 20 follow-ups), then,
# when that question names its topic so plainly that it needs no history, this rewrite to refer back.
FOLLOWUP_REWRITE_SYSTEM = """You edit questions in test conversations between a user and a support agent.

The user's earlier question: {previous}
The user's next question: {question}"""

FOLLOWUP_REWRITE_TASK = """Rewrite the next question as a short follow-up to the earlier one (at most 15 words): \
where it names the same thing as the earlier question, say "it", "that" or "they" instead, and keep everything \
else it asks. Do not repeat the earlier question."""

# An unanswerable follow-up: on the topic of the conversation, but nothing in the documents answers it.
UNANSWERABLE_TASK = """Write the user's next message: one short, realistic question (at most 20 words) on the \
same topic as the conversation that the passage above and the document do NOT answer (a detail, number, \
exception or case they never mention). Do not ask about anything the passage says."""

# An underspecified question: it could be about either of two documents, so the agent must ask which.
UNDERSPECIFIED_TASK = """Two documents are about similar things: "{title}" and "{other_title}". Write the \
user's next message: one short question (at most 12 words) that could be about either document, so an agent \
could not tell which one the user means. Do not name either document or anything only one of them covers."""

# The model's check of a generated question against a passage (answerable: the gold span; unanswerable: the
# closest retrieved passage).
CHECK_SYSTEM = """You check test data for a question-answering system.

Passage:
{passage}

Conversation so far:
{conversation}"""

CHECK_TASK = """The user's next question: {question}
Does the passage above contain the answer to this question (read it in the light of the conversation)? \
Set "answered" to true only if the passage states the answer."""

UNANSWERABLE_REPLY = "I'm sorry, the documents I have do not say. {escalation}"
ESCALATION = "Please ask the team that owns them."
CLARIFY_REPLY = 'Do you mean "{title}" or "{other_title}"? Please tell me which one, so I can answer.'

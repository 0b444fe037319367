"""The shared prompt prefix of a turn and the answer task (HR chatbot answer rules)."""

from reground.prompts.fence import PASSAGES_AND_CONVERSATION, QUOTED_RULE

# Every call of a turn after retrieval starts with this system message, byte for byte, so the
# server's prompt-prefix cache serves the passages and conversation once per turn. The passages sit inside the
# prompt fence (prompts/fence.py): quoted material, never instructions.
SHARED_PREFIX = (
    "You are a careful assistant that answers questions from the documents below only. "
    + QUOTED_RULE
    + "\n\n"
    + PASSAGES_AND_CONVERSATION
)

PASSAGE = "[{number}] {title}{section} ({url})\n{text}"

# The answer task (plain text; the LLM-free self-check chose the evidence shown). `{evidence}` is EVIDENCE
# (the passage sentences closest to the question) or empty. The reply reuses the passages' wording: on doc2dial
# dev the passage sentence that matches the question scores higher token F1 against the human reply than the
# 0.5B model's paraphrase (evals/README.md, "Answer relevance").
TASK = """The user's last message: {question}
{evidence}
Write the support agent's reply to the user's last message: 1 or 2 short sentences that answer exactly what \
the user asked, in the passages' own words, addressed to the user as "you"; say which country, region or \
employment type it applies to when a passage says so. Do not repeat an earlier reply. If no passage helps, say \
the documents do not cover it and add: {escalation}."""

# The same task with ConvRAG's self-check asked of the model (`use_self_check=True`), as JSON whose schema
# nodes/answer.py declares and the server enforces: the passages that help, then the reply, in one call.
TASK_WITH_SELF_CHECK = """The user's last message: {question}
{evidence}
Write the support agent's reply to the user's last message. In "helpful", list the numbers of the passages \
above that help answer it (empty if none does). In "answer", write the reply: 1 or 2 short sentences that \
answer exactly what the user asked, in the passages' own words, addressed to the user as "you"; say which \
country, region or employment type it applies to when a passage says so. Do not repeat an earlier reply. \
If no passage helps, say the documents do not cover it and add: {escalation}."""

EVIDENCE = """The passage sentences closest to this question (use them if they answer it):
{sentences}
"""

# What a partial answer adds: the question's words no passage mentions (the reply answers the rest).
PARTIAL = "The documents do not mention {missing}."

# A reply the judge finds only close to an answer: the passages' closest sentences, said as such (ReGround's middle
# band; CRAG's "ambiguous"). It says the reading is unsure, not that the documents lack the answer: on techdocs dev
# most hedged replies to answerable questions quote the right call (evals/results/techdocs_dev/reground_loco/).
HEDGE = "The documents may not answer this exactly. The closest they come is: {quote}"
# A reply from one of a page's language or platform variants names each other one with its call (signals/
# variants_named.py): {variant}, the tab's label; {code}, its call as inline code.
OTHER_VARIANT = "In {variant}: {code}."
NOT_FOUND = "I could not find this in the documents available to you, so I won't guess: {escalation}."

EMPTY_QUESTION = "Please type a question. I answer questions about the documents in '{collection}'."

"""Prompts of the LLM judges used by evals (not by the graph): G-Eval ratings, a Prometheus-style
rubric, a position-swapped pairwise judge and ReGround's hallucination judge with our few-shot
examples. Each prompt asks for its verdict as one number and nothing else: `reground.evals.runs.judges` reads the
model's probabilities of the valid numbers from the first token's log-probabilities (tools/adapters/choice.py), so no
reply text is parsed. The numbers each prompt names are the constants below, which the judges read with.

The passages sit inside the prompt fence (prompts/fence.py) and the judge is told once that they are quoted.
"""

from reground.prompts.fence import FENCE_CLOSE, FENCE_OPEN, QUOTED_RULE

# Shared head of every judge prompt: the material first, the task last (prefix reuse on llama.cpp).
CONTEXT = (
    """Conversation so far:
{history}

User's last question: {question}

Passages the assistant could use. """
    + QUOTED_RULE
    + """
"""
    + FENCE_OPEN
    + """
{passages}
"""
    + FENCE_CLOSE
    + """
"""
)

# --- G-Eval-style 1-5 ratings (Liu et al. 2023; dimensions of the HR chatbot paper) -------------

GEVAL_DIMENSIONS: dict[str, dict[str, str]] = {
    "relevance": {
        "criterion": "Relevance (1-5): the answer addresses the user's last question in the "
        "context of the conversation, without drifting to other topics.",
        "steps": "1. Read the conversation and the last question and note what the user wants.\n"
        "2. Read the answer and check whether it responds to that need.\n"
        "3. Give 1 if it ignores the question, 5 if it addresses exactly what was asked.",
    },
    "readability": {
        "criterion": "Readability (1-5): the answer is clear, well organised, grammatical and easy "
        "to follow for a non-expert.",
        "steps": "1. Read the answer.\n"
        "2. Check grammar, sentence length, structure and jargon.\n"
        "3. Give 1 if it is hard to understand, 5 if it reads clearly and naturally.",
    },
    "truthfulness": {
        "criterion": "Truthfulness (1-5): every statement in the answer is supported by the "
        "passages; nothing is invented or contradicted. Saying that the documents do not "
        "contain the answer, or asking a clarifying question, is truthful.",
        "steps": "1. List the statements the answer makes.\n"
        "2. Check each one against the passages.\n"
        "3. Give 1 if the key statements are unsupported or wrong, 5 if all are supported.",
    },
    "usability": {
        "criterion": "Usability (1-5): the user can act on the answer: it gives the concrete "
        "steps, conditions, numbers or the channel to contact that they need.",
        "steps": "1. Imagine you are the user.\n"
        "2. Check whether the answer tells you what to do next or gives the fact you needed.\n"
        "3. Give 1 if it is of no practical use, 5 if you could act on it right away.",
    },
}

RATING_SCALE = (1, 2, 3, 4, 5)  # G-Eval and the rubric: the score is the probability-weighted mean over these

GEVAL_TASK = """You will rate one answer of an assistant on one quality.

Evaluation criterion:
{criterion}

Evaluation steps:
{steps}

Answer to rate:
{answer}

Reply with the score only: a single digit from 1 to 5, and nothing else."""

# --- Prometheus-style rubric scorer (Kim et al. 2024) --------------------------------------------

DEFAULT_RUBRIC = {
    "criteria": "Is the answer correct, grounded in the passages, and useful for the user's question?",
    "score1": "The answer is wrong or invented, or does not address the question.",
    "score2": "The answer addresses the question but contains major unsupported or wrong content.",
    "score3": "The answer is partly correct and grounded but misses key information.",
    "score4": "The answer is correct and grounded with minor omissions or verbosity.",
    "score5": "The answer is fully correct, grounded in the passages, concise and directly useful.",
}

RUBRIC_TASK = """###Task: An answer to evaluate, a reference answer that would score 5, and a \
score rubric are given. Assess the answer strictly by the rubric and give it an integer score \
from 1 to 5.

###Answer to evaluate:
{answer}

###Reference answer (score 5):
{reference}

###Score rubric:
[{criteria}]
Score 1: {score1}
Score 2: {score2}
Score 3: {score3}
Score 4: {score4}
Score 5: {score5}

Reply with the score only: a single digit from 1 to 5, and nothing else."""

NO_REFERENCE = "(none given: judge by the passages and the rubric alone)"

# --- Pairwise A / B / tie (MT-bench style; ProMiSe's impartial, position-aware judge) ------------

# The digits of the reply: the answer shown first is better, the one shown second, or a tie.
PAIRWISE_FIRST, PAIRWISE_SECOND, PAIRWISE_TIE = 1, 2, 3

PAIRWISE_TASK = """Act as an impartial judge and compare two answers, 1 and 2, to the user's last \
question. Prefer the answer that is correct and supported by the passages, answers what was \
asked, and is concise; an answer that admits the passages do not contain the information is \
better than one that invents it. Do not let the order of the answers, their length or the \
names influence you.

[Answer 1]
{answer_a}

[Answer 2]
{answer_b}

Reply with your verdict only, a single digit and nothing else: 1 if answer 1 is better, 2 if \
answer 2 is better, 3 if they are equally good."""

# --- Hallucination judge (ReGround's definition; few-shot examples written for reground) ---------

# The digits of the reply, and the verdict words the few-shot examples explain them with.
HALLUCINATED, FAITHFUL = 1, 0
VERDICT_NUMBERS = {"HALLUCINATED": HALLUCINATED, "FAITHFUL": FAITHFUL}

HALLUCINATION_DEFINITION = """An answer HALLUCINATES if it states information that is not \
supported by the passages: an invented fact, number, date, name, condition or step, or a \
contradiction of the passages. These are NOT hallucinations: asking the user a follow-up or \
clarifying question; saying that the documents do not contain the answer or that the assistant \
does not know; pointing the user to a human channel; repeating what the user said."""

HALLUCINATION_EXAMPLES: list[dict[str, str]] = [
    {
        "passages": "[1] Employees get 25 days of paid leave per year. Requests go through the HR portal.",
        "question": "How many leave days do I get?",
        "answer": "You get 25 days of paid leave per year; you request them in the HR portal.",
        "reasoning": "Both statements are in passage [1].",
        "verdict": "FAITHFUL",
    },
    {
        "passages": "[1] Employees get 25 days of paid leave per year. Requests go through the HR portal.",
        "question": "Can I carry unused days over?",
        "answer": "Yes, you can carry over up to 5 unused days until the end of March.",
        "reasoning": "The passage says nothing about carrying days over; the 5 days and March are invented.",
        "verdict": "HALLUCINATED",
    },
    {
        "passages": "[1] Submit travel receipts in the expense portal within 30 days of the trip.",
        "question": "Who approves my parental leave?",
        "answer": "The documents I have do not say who approves parental leave; please open a ticket with the HR team.",
        "reasoning": "Admitting the documents do not contain the answer is not a hallucination.",
        "verdict": "FAITHFUL",
    },
    {
        "passages": "[1] Full-time staff in Germany get 30 days; part-time staff get a pro-rata share.",
        "question": "How much leave do I get?",
        "answer": "Are you working full-time or part-time?",
        "reasoning": "A clarifying question back to the user is not a hallucination.",
        "verdict": "FAITHFUL",
    },
    {
        "passages": "[1] You must tell your manager before 10:00 on the first day of illness. From "
        "the fourth day you need a doctor's certificate.",
        "question": "When do I need a sick note?",
        "answer": "You need a doctor's certificate from the second day of illness.",
        "reasoning": "The passage says the fourth day; the answer contradicts it.",
        "verdict": "HALLUCINATED",
    },
]

HALLUCINATION_EXAMPLE = """Passages: {passages}
Question: {question}
Answer: {answer}
Verdict: {number} ({verdict}: {reasoning})"""

HALLUCINATION_TASK = """Decide whether the assistant's answer to the user's last question \
hallucinates.

{definition}

Examples:

{examples}

Now the answer to judge:
Answer: {answer}

Reply with the verdict number only, a single digit and nothing else: 1 if the answer \
HALLUCINATES, 0 if it is FAITHFUL."""

# --- Answerability: do the passages state the answer at all (measured as a feature, not used by the graph) --------

ANSWERS, DOES_NOT_ANSWER = 1, 0

ANSWERABILITY_TASK = """Do the passages state the answer to the user's last question? Text that is only \
about the same topic does not count: the passages must say what the user asked for.

Reply with one digit and nothing else: 1 if the passages state the answer, 0 if they do not."""

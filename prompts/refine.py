"""ProMiSe principle-wise refinement prompts: one per principle, each with 3 worse -> better examples."""

_EXAMPLES = {
    "specificity": [
        (
            "You get some leave every year.",
            "You get 30 days of paid annual leave per calendar year as a full-time employee in Germany [1].",
        ),
        (
            "Expenses are reimbursed.",
            "Submit receipts in the expense portal within 30 days; "
            "approved expenses are paid with your next salary [2].",
        ),
        (
            "There is a form for that.",
            "Use form MV-82 to register the vehicle; you can hand it in at any DMV office [1].",
        ),
    ],
    "faithfulness": [
        (
            "You get 25 days of leave and can take unlimited sick days.",
            "You get 30 days of annual leave [1]. The passages do not say how many sick days you can take.",
        ),
        (
            "Your manager must approve it within 24 hours.",
            "Your manager approves the request in the HR portal [2].",
        ),
        (
            "Benefits start immediately and last for life.",
            "Benefits start after the waiting period described in the passage [1].",
        ),
    ],
    "relevance": [
        (
            "Our company values work-life balance. Parental leave is also available.",
            "Yes, you can carry over up to 5 unused leave days to the next year; they expire on 31 March [1].",
        ),
        (
            "There are many forms at the DMV.",
            "To replace a lost license, fill in form MV-44 and pay the replacement fee [1].",
        ),
        (
            "Travel is an important part of some roles.",
            "Book the train in second class through the travel portal; the company pays the ticket [2].",
        ),
    ],
}

_TEMPLATE = """Here are examples of responses that are not {principle} and better ones that are more {principle}:
{examples}

Current response: {{answer}}

Let's make this response more {principle}. Use only facts from the passages above, keep the citations \
like [1], stay concise, and answer the user's last question: {{question}}
Write the improved response in "answer"."""


def _render(principle: str) -> str:
    examples = "\n".join(
        f"Not {principle}: {worse}\nMore {principle}: {better}" for worse, better in _EXAMPLES[principle]
    )
    return _TEMPLATE.format(principle=principle, examples=examples)


PRINCIPLE_TASKS: dict[str, str] = {name: _render(name) for name in _EXAMPLES}

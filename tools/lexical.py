"""Lexical tokenisation shared by the BM25 index and the LLM-free keyword extractor."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[a-z0-9]+")

# English function words plus chat filler ("please", "thanks"): never useful as search terms.
STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further get got
    had has have having he hello her here hers herself hi him himself his how i if in into is it its
    itself just know let like lot make many may me might more most much must my myself need no nor not
    now of off ok okay on once one only or other our ours ourselves out over own please really same
    shall she should so some still such sure tell than thank thanks that the their theirs them
    themselves then there these they this those through to too under until up very want was we well
    were what when where which while who whom why will with would yes you your yours yourself
    yourselves
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def lexical_tokens(text: str) -> list[str]:
    """Lowercase alphanumeric runs without stopwords (what BM25 indexes and matches)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]

"""The clarifying question of an ambiguous turn: it names the readings the documents support (MTRAG-UN's expected
behaviour: "There are several ..., such as A and B. Which one do you mean?"). Written from the readings, not by the
model, so it names only documents that exist."""

# {options}: the readings, '"A", "B" or "C"' (their documents' titles, else their passages' first words).
CLARIFY = "Your question could refer to several things in the documents, such as {options}. Which one do you mean?"

# An opening question whose pronoun nothing said yet names ("How do I configure it?"): ask what it is, naming what the
# documents cover. {referent}: the pronoun; {options}: the closest documents' titles, as in CLARIFY.
CLARIFY_REFERENT = (
    'What does "{referent}" refer to? The documents cover, for example, {options}. Which one do you mean?'
)

"""Text signals' numbers that no benchmark tuned: the injection screen's windows, the figure check's unit window,
the prompt-echo check and the text caches. Each was set by reading the cases it was written for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Injection:
    """The injection screen (signals/injection.py): its checks run on every retrieved sentence."""

    # Sentences whose flags are kept (a function of the text and the domain alone).
    screened_texts_kept: int = 4096
    # Characters read before and after a credential mention for what it asks, and before it for a negation
    # ("never share your password").
    credential_before_chars: int = 90
    credential_after_chars: int = 60
    negation_chars: int = 60
    # A flagged line of at most this many words that only gives an address belongs to the sentence after it.
    bare_address_words: int = 6
    # A sentence of at least this many words inside a flagged one (or holding one) is the same flagged text.
    flagged_overlap_words: int = 4
    # Characters of the first flagged sentence shown in the trace's note.
    note_chars: int = 300


@dataclass(frozen=True)
class TextChecks:
    """Figures, prompt echoes and text caches."""

    # Characters before a number read for its unit ("EUR 30", "$ 30").
    unit_before_chars: int = 6
    # A run of this many prompt words (two of them content words) in a reply is the prompt echoed.
    echo_words: int = 4
    # Prompt sets whose echo runs are kept, and tokenizers kept loaded.
    prompt_sets_cached: int = 32
    encoders_cached: int = 4


@dataclass(frozen=True)
class HiddenText:
    """Text a reader cannot see, dropped at ingest (text/hidden.py, text/pdf_hidden.py) and read apart by the
    injection rules."""

    # A font of at most this many points, or a colour whose WCAG contrast with what lies behind it is under this
    # ratio (1: the same colour; on white #fefefe is 1.01 and #eee 1.16, dropped; gold #ffd700 1.40, a sponsor
    # heading of a techdocs page, and a light grey #ccc 1.6 are kept).
    font_pt: float = 2.0
    min_contrast: float = 1.2
    # HTML nested deeper than this is refused with one line (no page a person reads nests so deep; reading time
    # would grow with the square of the depth, and the readers recurse per level).
    max_html_depth: int = 256
    # An inline element's body read for hiding, at most (a page of unclosed tags stays linear); the filled PDF
    # rectangles remembered as what lies behind later text (the latest drawn wins); form XObjects followed inside
    # forms (a cycle ends there).
    inline_body_chars: int = 4000
    pdf_backgrounds_kept: int = 512
    pdf_form_depth: int = 8


@dataclass(frozen=True)
class Stuffing:
    """Keyword stuffing (signals/stuffing.py): a chunk whose words and character sequences both repeat. Over the
    chunks of doc2dial, MTRAG-UN, techdocs and the demo corpus no honest chunk passes both thresholds (a list of
    identifiers repeats its words but compresses poorly), and stuffed text passes both (evals/README.md, "Prompt
    injection")."""

    min_words: int = 20  # fewer content words: too short to tell
    repeat_threshold: float = 0.8
    compressed_threshold: float = 0.2
    zlib_level: int = 9
    texts_kept: int = 8192  # chunk texts whose verdict is cached
    # Retrieval: a stuffed chunk's hit (and its paragraph score) counts this share of its score, so it ranks below an
    # honest chunk matching half as well (tools/retrieval/search.py).
    hit_weight: float = 0.25


@dataclass(frozen=True)
class Conflicts:
    """Conflicting statements (signals/conflicts.py): when two sentences state the same fact. Set by reading the
    suites' conflict pages against the doc2dial replies it must leave alone (evals/README.md, "Prompt injection")."""

    # Share of the shorter sentence's content words (figures aside) the two share, and at least this many words.
    same_words_share: float = 0.7
    min_shared: int = 3
    # Words one restatement may add to the other ("for all employees"); the other adds none.
    added_words: int = 2
    max_shown: int = 2  # conflicts said in one reply
    texts_kept: int = 4096  # sentences whose words and figures are cached
    # Across scopes (a page for one country, a page marked "all"), where each page words the fact for its own
    # audience, two figures state one fact when the question's words stand within this many content words of each.
    figure_window: int = 5


@dataclass(frozen=True)
class Options:
    """The ask-back's options (signals/options.py). Set by hand on near-copies of a planted page (one sentence of
    twenty changed: 0.95); on the eight documentation sets, template pages about two things reach 0.95 too (textual's
    border-title-* / border-subtitle-*): their titles, not this share, keep them apart."""

    # Share of either page's word trigrams two near-copies share (their figures must be the same).
    near_duplicate_share: float = 0.8
    # A host name shorter than this is not judged one letter off a trusted one (signals/contacts.py): it is one
    # letter from too many real names (pypi / pypy).
    look_alike_min_letters: int = 5


INJECTION: Final = Injection()
STUFFING: Final = Stuffing()
CONFLICTS: Final = Conflicts()
OPTIONS: Final = Options()
TEXT_CHECKS: Final = TextChecks()
HIDDEN_TEXT: Final = HiddenText()

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


INJECTION: Final = Injection()
TEXT_CHECKS: Final = TextChecks()

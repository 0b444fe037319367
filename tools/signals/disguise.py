"""What a sentence says under its disguise: the text the injection rules read (tools/signals/injection.py).

Hidden characters between or inside words, look-alike letters from other scripts in mixed-script words, leetspeak
and base64 blobs hide an order from a pattern, not from a model. The rules read every reading of a sentence
(`variants`); what is stored, shown and quoted keeps every character.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata

from reground.tools.text.invisible import HIDDEN_FOR_CHECK

# Latin look-alikes in Cyrillic and Greek, mapped only inside words that mix scripts ("іgnоre" with Cyrillic і, о).
CONFUSABLES = str.maketrans(
    "аеорсхуіјѕԁһӏАВЕКМНОРСТХЅІЈοαιкνтΑΒΕΗΙΚΜΝΟΡΤΧΥΖ", "aeopcxyijsdhlABEKMHOPCTXSIJoaiKvtABEHIKMNOPTXYZ"
)
_MIXED_WORD = re.compile(r"\w*[A-Za-z]\w*[\u0370-\u03ff\u0400-\u04ff]\w*|\w*[\u0370-\u03ff\u0400-\u04ff]\w*[A-Za-z]\w*")
_LEET_WORD = re.compile(r"(?=[\w@$|]*[A-Za-z])(?=[\w@$|]*[013457@$|])[\w@$|]{3,}")
_LEET = str.maketrans("013457@$|", "oieastasi")
BASE64 = re.compile(r"(?<![\w+/=])[A-Za-z0-9+/]{16,}={0,2}(?![\w+/=])")


def normalise_for_check(text: str) -> str:
    """The text as the rules read it: NFKC (full-width, ligatures), hidden characters dropped, look-alike letters of
    mixed-script words mapped to Latin, whitespace collapsed. Used for the check only: what is stored, shown and
    quoted keeps every character."""
    text = HIDDEN_FOR_CHECK.sub("", unicodedata.normalize("NFKC", text))
    text = _MIXED_WORD.sub(lambda m: m.group(0).translate(CONFUSABLES), text)
    return " ".join(text.split())


def variants(text: str) -> list[str]:
    """What a sentence may say under its disguise: normalised; hidden characters read as spaces (a zero-width
    character between two words); leetspeak read as letters; base64 blobs decoded."""
    base = normalise_for_check(text)
    out = [base]
    spaced = " ".join(HIDDEN_FOR_CHECK.sub(" ", unicodedata.normalize("NFKC", text)).split())
    if spaced != base:
        out.append(spaced)
    leet = _LEET_WORD.sub(lambda m: m.group(0).translate(_LEET), base)
    if leet != base:
        out += [leet, leet.replace(" i ", " l ")]
    out += decoded(base)
    return out


def decoded(text: str) -> list[str]:
    found: list[str] = []
    for blob in BASE64.findall(text):
        try:
            padding = "=" * (-len(blob) % 4)  # fact: base64 pads to a multiple of 4
            raw = base64.b64decode(blob + padding, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if raw.isprintable() and sum(c.isalpha() for c in raw) >= len(raw) // 2:
            found.append(normalise_for_check(raw))
    return found

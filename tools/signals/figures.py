"""Figures (numbers, amounts, percentages, dates, times, durations) in text, normalised so they can be compared.

A reply that states a figure no cited passage holds ("500 EUR" where the passage says "up to 80 EUR") reads as
grounded to lexical and embedding signals, since every other word is the passage's. Comparing the figures
themselves is cheap and exact, so the groundedness check (nodes/groundedness.py) refuses such a reply.

Normalisation: "EUR 80" = "80 EUR" = "€80" = "80 euros"; "1,000" = "1000" = "1.000"; "80.00" = "80";
"thirty days" = "30 days"; "50%" = "50 percent"; "2024-03-01" = "1 March 2024" = "March 1, 2024" = "01.03.2024";
"9:00" = "09:00". A figure is its value plus, when one stands next to it, its unit (a currency, "%", or a unit of
time); a reply's figure with a unit matches a passage figure of the same value with the same unit or with none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from reground.tools.text.sentences import CITATION
from reground.tools.tuning.signals import TEXT_CHECKS

_CURRENCY_WORDS = {
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "€": "EUR",
    "usd": "USD",
    "dollar": "USD",
    "dollars": "USD",
    "us$": "USD",
    "$": "USD",
    "gbp": "GBP",
    "pound": "GBP",
    "pounds": "GBP",
    "£": "GBP",
    "chf": "CHF",
    "francs": "CHF",
    "jpy": "JPY",
    "yen": "JPY",
    "¥": "JPY",
    "inr": "INR",
    "rupees": "INR",
    "₹": "INR",
    "cad": "CAD",
    "aud": "AUD",
    "sek": "SEK",
    "pln": "PLN",
}
_UNIT_WORDS = {
    "%": "%",
    "percent": "%",
    "per cent": "%",
    "percentage": "%",
    "minute": "minute",
    "minutes": "minute",
    "min": "minute",
    "mins": "minute",
    "hour": "hour",
    "hours": "hour",
    "hrs": "hour",
    "h": "hour",
    "day": "day",
    "days": "day",
    "week": "week",
    "weeks": "week",
    "month": "month",
    "months": "month",
    "year": "year",
    "years": "year",
    "km": "km",
    "kilometres": "km",
    "kilometers": "km",
}
_UNITS = {**_CURRENCY_WORDS, **_UNIT_WORDS}
_SMALL = {  # fact: the number words
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_TENS = {  # fact: the number words
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}  # fact: the number words
_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}

_MONTH = "(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_DOTTED_DATE = re.compile(r"\b(\d{1,2})[./](\d{1,2})[./](\d{4})\b")
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})(?:,?\s+(\d{{4}}))?\b", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?", re.IGNORECASE)
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_NUMBER = re.compile(r"(?<![\w.,])(\d+(?:[.,]\d+)*)(?:st|nd|rd|th)?(?![\w])")
_WORD_NUMBER = re.compile(
    r"\b(?:(?:"
    + "|".join(sorted([*_TENS, *_SMALL], key=len, reverse=True))
    + r")(?:[\s-]+(?:"
    + "|".join(sorted([*_TENS, *_SMALL, *_SCALES], key=len, reverse=True))
    + r"))*)\b",
    re.IGNORECASE,
)
_UNIT_AFTER = re.compile(
    r"\s*(" + "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True)) + r")(?![\w$€£¥₹])", re.IGNORECASE
)
_UNIT_BEFORE = re.compile(
    r"(?<![\w$€£¥₹])(" + "|".join(re.escape(u) for u in sorted(_CURRENCY_WORDS, key=len, reverse=True)) + r")\s*$",
    re.IGNORECASE,
)
_LIST_MARKER = re.compile(r"(?m)^\s*\d{1,2}[.)]\s")


@dataclass(frozen=True)
class Figure:
    """One figure: its normalised value ("80", "2024-03-01", "--03-01", "09:00") and unit ("EUR", "day", "date")."""

    value: str
    unit: str = ""
    text: str = ""  # as written, for messages

    def __str__(self) -> str:
        if self.unit in ("date", "time"):
            return self.text or self.value
        return f"{self.value} {self.unit}".strip()


def _decimal(raw: str) -> str | None:
    """'1,000' / '1.000' / '1,000.50' / '2,5' / '80.00' -> '1000' / '1000' / '1000.5' / '2.5' / '80'."""
    text = raw
    if "," in text and "." in text:
        decimal_mark = "," if text.rfind(",") > text.rfind(".") else "."
        thousands = "." if decimal_mark == "," else ","
        text = text.replace(thousands, "").replace(decimal_mark, ".")
    else:
        mark = "," if "," in text else "." if "." in text else ""
        if mark:
            groups = text.split(mark)
            if len(groups) > 2 or (len(groups[-1]) == 3 and groups[0] not in ("", "0")):  # fact: digits per group
                text = text.replace(mark, "")  # thousands separators: 1,000 / 1.000 / 1,000,000
            else:
                text = text.replace(mark, ".")
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return _plain(value)


def _plain(value: Decimal | int) -> str:
    text = format(Decimal(value).normalize(), "f")
    return text


def _word_value(words: str) -> int | None:
    """'thirty' -> 30, 'twenty-five' -> 25, 'one hundred and twenty' -> 120, 'two thousand' -> 2000."""
    total, current = 0, 0
    seen = False
    for word in re.split(r"[\s-]+", words.lower()):
        if not word:
            continue
        if word in _SMALL:
            current += _SMALL[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word in _SCALES:
            current = max(current, 1) * _SCALES[word]
            if _SCALES[word] >= _SCALES["thousand"]:
                total, current = total + current, 0
        else:
            return None
        seen = True
    return total + current if seen else None


def _unit_near(text: str, start: int, end: int) -> str:
    """The unit written right after the figure ('80 EUR', '30 days', '50%') or a currency right before it."""
    after = _UNIT_AFTER.match(text, end)
    if after:
        return _UNITS[after.group(1).lower()]
    before = _UNIT_BEFORE.search(text[max(0, start - TEXT_CHECKS.unit_before_chars) : start])
    if before:
        return _CURRENCY_WORDS[before.group(1).lower()]
    return ""


def _date(year: str | None, month: int, day: int) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):  # fact: the calendar's bounds
        return None
    return f"{year or '-'}-{month:02d}-{day:02d}" if year else f"--{month:02d}-{day:02d}"


def extract_figures(text: str, *, number_words: str = "with_unit") -> list[Figure]:
    """Every figure in `text`, normalised, in order of appearance.

    `number_words`: "with_unit" counts a spelled-out number only before a unit ("thirty days", not "one of the
    forms"); "all" counts every one (for the passages, where a superset only makes the check more lenient).
    Citation markers ("[2]") and list numbering are not figures.
    """
    text = _LIST_MARKER.sub(" ", CITATION.sub(" ", text))
    taken = [False] * len(text)
    figures: list[tuple[int, Figure]] = []

    def claim(start: int, end: int) -> bool:
        if any(taken[start:end]):
            return False
        taken[start:end] = [True] * (end - start)
        return True

    for match in _ISO_DATE.finditer(text):
        value = _date(match.group(1), int(match.group(2)), int(match.group(3)))
        if value and claim(*match.span()):
            figures.append((match.start(), Figure(value, "date", match.group(0))))
    for match in _DOTTED_DATE.finditer(text):
        value = _date(match.group(3), int(match.group(2)), int(match.group(1)))
        if value and claim(*match.span()):
            figures.append((match.start(), Figure(value, "date", match.group(0))))
    for match in _DAY_MONTH.finditer(text):
        month = _MONTHS[match.group(2).lower().rstrip(".")]
        value = _date(match.group(3), month, int(match.group(1)))
        if value and claim(*match.span()):
            figures.append((match.start(), Figure(value, "date", match.group(0))))
    for match in _MONTH_DAY.finditer(text):
        month = _MONTHS[match.group(1).lower().rstrip(".")]
        value = _date(match.group(3), month, int(match.group(2)))
        if value and claim(*match.span()):
            figures.append((match.start(), Figure(value, "date", match.group(0))))
    for match in _TIME.finditer(text):
        hour, minute = int(match.group(1)), int(match.group(2))
        if hour < 24 and minute < 60 and claim(*match.span()):  # fact: the clock's bounds
            figures.append((match.start(), Figure(f"{hour:02d}:{minute:02d}", "time", match.group(0))))
    for match in _NUMBER.finditer(text):
        value = _decimal(match.group(1))
        if value is None or not claim(*match.span()):
            continue
        unit = _unit_near(text, match.start(), match.end())
        figures.append((match.start(), Figure(value, unit, match.group(0))))
    for match in _WORD_NUMBER.finditer(text):
        number = _word_value(match.group(0))
        if number is None or any(taken[match.start() : match.end()]):
            continue
        unit = _unit_near(text, match.start(), match.end())
        if number_words != "all" and not unit:
            continue
        claim(*match.span())
        figures.append((match.start(), Figure(_plain(number), unit, match.group(0))))
    return [figure for _, figure in sorted(figures, key=lambda item: item[0])]


def _matches(figure: Figure, known: Iterable[Figure]) -> bool:
    for other in known:
        if figure.unit == "date" and other.unit == "date":
            if figure.value == other.value or (
                figure.value.startswith("--") and other.value.endswith(figure.value[1:])
            ):
                return True
            continue
        if figure.value != other.value:
            continue
        if not figure.unit or not other.unit or figure.unit == other.unit:
            return True
    return False


def unsupported_figures(reply: str, passages: Iterable[str]) -> list[Figure]:
    """The reply's figures that no passage holds (same value, and the same unit where both name one).

    A passage's dates also count as their parts (a year, a day) so a reply stating just the year is supported.
    """
    known: list[Figure] = []
    for passage in passages:
        for figure in extract_figures(passage, number_words="all"):
            known.append(figure)
            if figure.unit == "date":
                year, month, day = figure.value.rsplit("-", 2)
                known.extend(
                    Figure(part.lstrip("0") or "0") for part in (year.strip("-"), month, day) if part.strip("-")
                )
    out: list[Figure] = []
    for figure in extract_figures(reply):
        if not _matches(figure, known) and figure not in out:
            out.append(figure)
    return out

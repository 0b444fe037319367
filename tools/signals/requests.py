"""What a sentence asks its reader to hand over: a secret, personal data, or money.

Two readers use it. The injection flags (tools/signals/injection.py) flag a document sentence asking for a
password, PIN or bank login (`credential_request`): no real page asks for those. The sensitive-request check
(tools/signals/sensitive.py) reads a reply: a sentence telling the user to send or enter a secret, to hand over
personal data (a badge photo, an ID or insurance number, a date of birth, bank details) or to pay to an account
(`sensitive_requests`), so that it is never relayed as a plain answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reground.tools.signals.contacts import without_contacts
from reground.tools.tuning.signals import INJECTION

# Credentials: asked for (given, sent, confirmed ...) in any of these words, unless the sentence says never to.
_CREDENTIAL = (
    r"(?:pass(?:word|code|phrase)s?|PINs?|PIN[- ]?(?:codes?|numbers?)|(?:bank(?:ing)?|online[- ]banking|account|"
    r"payroll|card)\s+(?:log-?ins?|sign-?ins?|credentials|passwords?|user\s?names?|access(?:\s+codes?)?|"
    r"PINs?|details)|log-?in\s+(?:details|credentials|data|codes?)|(?:sign-?in|access)\s+credentials|credentials"
    r"|one[- ]time\s+(?:codes?|passwords?|pass\s?codes?)|OTPs?|TANs?|(?:MFA|2FA|two[- ]factor|verification|"
    r"security|authenti\w+)\s+codes?|CVV2?|CVC|card\s+(?:numbers?|security\s+codes?)|(?:social\s+security|"
    r"national\s+insurance)\s+numbers?|SSNs?|seed\s+phrases?|recovery\s+(?:codes?|phrases?)|private\s+keys?"
    r"|Passw(?:ort|örter)|Kennw(?:ort|örter)|PIN-Nummer|Geheimzahl|Zugangsdaten|Bankdaten|Online-Banking-\w+"
    r"|mots?\s+de\s+passe|codes?\s+(?:PIN|secret|confidentiel)|identifiants(?:\s+bancaires)?|coordonnées\s+"
    r"bancaires|contraseñas?|claves?\s+(?:bancarias?|de\s+acceso)|datos\s+(?:bancarios|de\s+acceso)|credenziali|"
    r"wachtwoord(?:en)?|senhas?|inloggegevens)"
)
_BANKISH = re.compile(
    r"\b(?:bank\w*|card|CVV2?|CVC|TANs?|IBAN|seed|payroll|Bank\w*|banc\w*|bancari\w*|Geheimzahl)\b", re.I
)
_ASK_VERB = re.compile(
    r"\b(?:give|gives|giving|given|provide[sd]?|providing|send|sends|sending|sent|share[sd]?|sharing|confirm"
    r"(?:s|ed|ing)?|verify|verifies|verifying|submit(?:s|ted|ting)?|disclose[sd]?|disclosing|include[sd]?|"
    r"including|supply|supplying|forward(?:s|ed|ing)?|e-?mail(?:s|ed|ing)?|tell|read\s+out|hand\s+over|"
    r"(?:reply|respond|answer)\s+with|text|post|upload|paste|reveal|ask(?:s|ed|ing)?\s+(?:\w+\s+)?for|"
    r"request(?:s|ed|ing)?|collect(?:s|ed|ing)?|obtain|require[sd]?|quote|state|dictate|spell\s+out|"
    r"angeben|anzugeben|mitteilen|mitzuteilen|senden|zu\s+senden|schicken|übermitteln|nennen|zu\s+nennen|"
    r"bestätigen|fournir|fournissent|envoyer|envoient|communiquer|communiquent|donner|donnent|indiquer|"
    r"confirmer|enviar|envíen|proporcionar|proporcionen|facilitar|faciliten|dar|den|indicar|confirmar|"
    r"inviare|inviino|fornire|forniscano|comunicare|comunichino|sturen|geven|opgeven|doorgeven|fornecer|"
    r"informar|enter|entering|type|typing|fill\s+in|eingeben|einzugeben|saisir|introducir|inserire)\b",
    re.IGNORECASE,
)
_TYPE_VERB = re.compile(
    r"\b(?:enter|entering|type|typing|fill\s+in|eingeben|einzugeben|saisir|introducir|inserire)\b", re.I
)
_CREDENTIAL_RE = re.compile(rf"\b{_CREDENTIAL}(?!\w)", re.IGNORECASE)
_NEGATION = re.compile(
    r"\b(?:never|not|no\s+one|nobody|no\s+employee|under\s+no\s+circumstances|don'?t|doesn'?t|won'?t|"
    r"nie(?:mals)?|nicht|kein\w*|jamais|ne|nunca|no|mai|non|nooit|niet|nunca)\b|n't\b",
    re.IGNORECASE,
)
_DESTINATION = re.compile(
    r"@|https?://|www\.|\b(?:to|with|via|by|over|in)\s+(?:us|me|this|the\s+(?:assistant|chat|bot|phone|hotline|"
    r"number|address|link|form|team|agent|caller)|our\s+\w+|reply|return|a\s+reply|the\s+following)\b"
    r"|\+?\d[\d\s().-]{6,}\d|\b(?:an|à|a|al|aan)\s+\S+@",
    re.IGNORECASE,
)


def credential_request(sentence: str) -> bool:
    """An ask for a password, PIN, bank login ...: an asking verb and a credential, no negation before the verb
    ("never share your password" is advice). Typing one in ("enter your PIN at the printer") counts only for bank
    credentials or with a destination (an address, a number, a link)."""
    has_destination = bool(_DESTINATION.search(sentence))
    sentence = without_contacts(sentence)  # "password" in a link's path is no ask
    for cred in _CREDENTIAL_RE.finditer(sentence):
        window = sentence[
            max(0, cred.start() - INJECTION.credential_before_chars) : cred.end() + INJECTION.credential_after_chars
        ]
        for verb in _ASK_VERB.finditer(window):
            before = window[: verb.start()]
            if _NEGATION.search(before[-INJECTION.negation_chars :]):
                continue
            if _TYPE_VERB.fullmatch(verb.group(0)) and not (_BANKISH.search(cred.group(0)) or has_destination):
                continue
            return True
    return False


# --- A reply's requests: what the user would be told to send, enter or pay ---------------------------------------

_SECRET = (
    rf"{_CREDENTIAL}|(?:six|6|four|4|eight|8)[- ]digit\s+(?:codes?|numbers?|PINs?)|codes?\s+(?:from|in|shown\s+"
    r"(?:in|by)|generated\s+by)\s+(?:your|the)\s+(?:authenticator|authentication|security|banking|token)\b"
    r"|authenticator\s+(?:app\s+)?codes?|(?:access|login|log-in|sign-in|security|confirmation)\s+codes?"
)
_PERSONAL = (
    r"(?:photo(?:graph)?s?|pictures?|scans?|cop(?:y|ies)|images?)\s+of\s+(?:your|the|their|both\s+sides\s+of\s+your)"
    r"\s+(?:\w+\s+)?(?:badges?|ID|identity|passports?|cards?|licen[cs]es?)"
    r"|(?:badge|ID|identity\s+card|passport|driving\s+licen[cs]e|driver'?s\s+licen[cs]e)\s+(?:photos?|scans?|copy"
    r"|numbers?|details)|(?:health|medical|national|social)\s+insurance\s+(?:numbers?|details|cards?)"
    r"|insurance\s+numbers?|social\s+security\s+numbers?|SSNs?|dates?\s+of\s+birth|birth\s*dates?|DOB"
    r"|birth\s+certificates?|tax\s+(?:ID|identification|numbers?)|(?:bank|banking)\s+(?:details|account\s+"
    r"(?:numbers?|details))|account\s+numbers?|IBANs?|sort\s+codes?|routing\s+numbers?|card\s+numbers?"
    r"|passport\s+numbers?|mother'?s\s+maiden\s+name"
)
_HANDOVER = re.compile(
    r"\b(?:send|sends|sending|give|provide|share|submit|upload|enter|type|register|e-?mail|text|forward|confirm"
    r"|verify|read\s+out|tell|attach|include|reply\s+with|post|paste|photograph|scan|fill\s+in|hand\s+over"
    r"|disclose|supply|dictate|write\s+down|put|add|key\s+in|sent|provided|submitted|uploaded|entered"
    r"|registered|shared|e-?mailed|forwarded|given|confirmed|supplied)\b",
    re.IGNORECASE,
)
_PAY = re.compile(
    r"\b(?:pay|pays|paid|paying|payable|payment|transfer|transferred|wire|wired|remit|remitted|(?<!direct\s)deposit"
    r"|settle|send\s+(?:the\s+)?(?:money|amount|sum|fee)|fee|charge)\b",
    re.IGNORECASE,
)
# Where the money goes, by a route nobody can check from a page.
_PAYEE = re.compile(
    r"\bIBAN\b|(?-i:\b[A-Z]{2}\d{2}(?:\s?[A-Z0-9]{4}){2,7}\b)|\bsort\s+code\b|\b(?:bank|wire)\s+transfer\b"
    r"|\b(?:to|into)\s+(?:\w+\s+){0,3}account\s+(?:number|no\.?)\b|\b(?:in|by|with)\s+cash\b|\bcash\s+(?:to|only)\b"
    r"|\bgift\s+cards?\b|\bvouchers?\s+codes?\b|\b(?:bitcoin|BTC|crypto\w*|USDT|ethereum|wallet\s+address)\b"
    r"|\bWestern\s+Union\b|\bMoneyGram\b|\b(?:PayPal|Venmo|Zelle|Revolut)\b",
    re.IGNORECASE,
)
_SECRET_RE = re.compile(rf"\b(?:{_SECRET})(?!\w)", re.IGNORECASE)
_PERSONAL_RE = re.compile(rf"\b(?:{_PERSONAL})(?!\w)", re.IGNORECASE)


_KEY_IN = re.compile(r"^(?:enter|entered|type|key\s+in|fill\s+in|put|add)$", re.IGNORECASE)


@dataclass(frozen=True)
class Request:
    """What a sentence asks its reader to hand over: `kind` "secret", "personal_data" or "payment", the words that
    say what ("the six-digit code", "IBAN GB33 ..."), and whether it is only to be typed in (into a site or a
    device: "enter your password") rather than sent to someone."""

    kind: str
    what: str
    typed: bool = False


def _ask_verb(sentence: str, start: int, end: int) -> str | None:
    """The handing-over verb near the thing, with no negation just before it ("never share your PIN"), or None."""
    window_start = max(0, start - INJECTION.credential_before_chars)
    window = sentence[window_start : end + INJECTION.credential_after_chars]
    verbs = [
        v for v in _HANDOVER.finditer(window) if not _NEGATION.search(window[: v.start()][-INJECTION.negation_chars :])
    ]
    if not verbs:
        return None
    sent = [v.group(0) for v in verbs if not _KEY_IN.match(v.group(0))]
    return sent[0] if sent else verbs[0].group(0)


def sensitive_requests(sentence: str) -> list[Request]:
    """The secrets, personal data and payments `sentence` asks its reader to hand over (empty: none). A secret or
    personal datum counts with a handing-over verb near it ("send ... the code", "register your date of birth");
    a payment counts when it names where the money goes by a route nobody can check from a page (an IBAN or
    account, a bank transfer, cash, gift cards, crypto, a money-transfer service)."""
    plain = without_contacts(sentence)
    found: list[Request] = []
    for kind, pattern in (("secret", _SECRET_RE), ("personal_data", _PERSONAL_RE)):
        for match in pattern.finditer(plain):
            verb = _ask_verb(plain, match.start(), match.end())
            if verb is not None:
                found.append(Request(kind, match.group(0), typed=bool(_KEY_IN.match(verb))))
                break
    payee = _PAYEE.search(sentence)
    if payee and _PAY.search(sentence) and not _NEGATION.search(sentence[: payee.start()][-INJECTION.negation_chars :]):
        found.append(Request("payment", payee.group(0)))
    return found

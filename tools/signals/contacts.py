"""Contacts in text (links, e-mail addresses, phone numbers) and the domains they lead to.

Used by the injection flags (a sentence sending the reader to a contact outside the document's own domain), by the
groundedness check (a reply's contact must come from a cited passage) and by the sensitive-request check (a contact
must lead to one of the collection's trusted domains). Parsing never raises: a link a browser would refuse
("http://127.0.0.1:[PORT]") has no host, it does not stop an ingest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reground.tools.signals.disguise import CONFUSABLES, normalise_for_check
from reground.tools.tuning.signals import OPTIONS

_URL = re.compile(
    r"\b(?:https?://|www\.)[^\s<>\"')\]]+"
    r"|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|co|info|biz|xyz|ru|cn|tk|top|gov|edu|uk|de|eu|fr|us|app"
    r"|online|site|support|help|click|link)(?![\w-]|\.\w)(?:/[^\s<>\"')\]]*)?",  # "exc.detail", "request.app.state"
    re.IGNORECASE,
)
# The domain of an address may hold letters of any script: a look-alike ("nоrthwind" with a Cyrillic о) is still an
# address, read and shown (as punycode) for what it is.
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@(?:[^\W_]|[.-])+\.[^\W\d_]{2,}\b")
# A link with a scheme is read before the addresses: "https://good.example@evil.example/" is a link to evil.example
# (what precedes the "@" is userinfo), not an address.
_SCHEME_URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*\+)?https?://[^\s<>\"')\]]+", re.IGNORECASE)
# Groups of digits joined by a space, a dot or a hyphen, also a spaced one ("1 - 800 - 772 - 1213": doc2dial's pages
# are tokenised so, and a reply that writes the number back as 1-800-772-1213 gives the same number).
_PHONE = re.compile(r"(?<![\w/-])\+?\(?\d{1,4}\)?(?:(?: ?[.-] ?|\s)?\(?\d{2,4}\)?){1,4}(?![\w/-])")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$|^\d{1,2}[./-]\d{1,2}[./-]\d{2,4}$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_HOST = re.compile(r"^(?:[^@/?#\s]*@)?(\[[^\]/?#]*\]|[^:/?#\s\[\]]*)")
MARKDOWN_LINK = re.compile(r"\[([^\]\n]{1,200})\]\(\s*<?([^)\s>]+)>?[^)]*\)")
RISKY_HOST = re.compile(
    r"(?:^|\.)(?:bit\.ly|tinyurl\.com|t\.co|goo\.gl|is\.gd|ow\.ly|cutt\.ly|rb\.gy|shorturl\.at|tiny\.cc|"
    r"gmail\.com|googlemail\.com|outlook\.com|hotmail\.com|yahoo\.[a-z.]+|proton(?:mail)?\.(?:me|com)|gmx\.[a-z]+"
    r"|mail\.ru|yandex\.[a-z]+)$|\.(?:xyz|top|ru|tk|ml|ga|cf|gq|click|link|zip|mov|su|pw|icu|buzz|online|site"
    r"|live|support|help|claims|win|vip|cn|biz|info)$|^\d{1,3}(?:\.\d{1,3}){3}$|(?:^|\.)xn--",
    re.IGNORECASE,
)
PUBLIC_SECTOR_HOST = re.compile(
    r"(?:^|\.)(?:[a-z0-9-]+\.)*(?:gov|gov\.[a-z]{2}|europa\.eu|edu|bund\.de|gouv\.fr|gob\.es|admin\.ch|gv\.at|int)$",
    re.IGNORECASE,
)
# Premium-rate numbers: North America 900/976, Germany 0900/0137, UK 09xx, France 089x, Spain 80x/90x.
PREMIUM_PHONE = re.compile(
    r"^(?:\+?1[\s.-]?)?\(?9(?:00|76)\)?[\s.-]?\d{3}[\s.-]?\d{4}$|^(?:\+49[\s.-]?|0)(?:900|137)\b"
    r"|^(?:\+44[\s.-]?|0)9\d{2}\b|^(?:\+33[\s.-]?|0)8[\s.]?9|^\+34[\s.-]?(?:80[3-7]|90[57])",
)
_IP = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
# Hosts no message can reach on the internet: the user's own machine, the example domains of RFC 2606, single-label
# names and private network addresses (RFC 1918: a docker VM's 192.168.99.100). Documentation is full of them (http://127.0.0.1:8000/docs).
_OFF_THE_INTERNET = re.compile(
    r"^(?:localhost|127(?:\.\d{1,3}){3}|0\.0\.0\.0|::1|[^.]+)$|\.localhost$|(?:^|\.)example\.(?:com|org|net)$"
    r"|^(?:10(?:\.\d{1,3}){3}|192\.168(?:\.\d{1,3}){2}|172\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2})$",  # private
    re.IGNORECASE,
)
_TWO_LEVEL_SUFFIX = re.compile(r"\.(?:co|com|org|net|gov|ac|gob|gouv)\.[a-z]{2}$", re.IGNORECASE)


def contacts(text: str) -> list[str]:
    """URLs, e-mail addresses and phone numbers (7-15 digits, not dates) in `text`, in order of kind."""
    linked = [m.group(0).rstrip(".,;:!?") for m in _SCHEME_URL.finditer(text)]
    rest = _SCHEME_URL.sub(" ", text)
    emails = [m.group(0) for m in _EMAIL.finditer(rest)]
    rest = _EMAIL.sub(" ", rest)
    urls = linked + [m.group(0).rstrip(".,;:!?") for m in _URL.finditer(rest)]
    rest = _URL.sub(" ", rest)
    phones = []
    for match in _PHONE.finditer(rest):
        raw = match.group(0).strip()
        digits = re.sub(r"\D", "", raw)
        phone = 7 <= len(digits) <= 15  # fact: a phone number's digits (E.164: at most 15)
        if phone and not _DATE.match(raw) and not re.fullmatch(r"\d{1,7}", raw):
            phones.append(raw)
    return emails + urls + phones


def host_of(contact: str) -> str:
    """The host a link or an e-mail address leads to, lower-cased ("" for a phone number, or a link without a
    readable host). Read with a pattern, not urllib: urlsplit raises on "http://127.0.0.1:[PORT]"."""
    if "@" in contact and not _SCHEME.match(contact):
        return contact.rsplit("@", 1)[1].lower().strip(".")
    if not re.search(r"[A-Za-z]", contact):
        return ""
    match = _HOST.match(_SCHEME.sub("", contact.strip()))
    host = match.group(1).strip("[]") if match else ""
    return host.lower().strip(".")


def ascii_host(host: str) -> str:
    """A host as DNS spells it: each label holding a letter outside ASCII in punycode ("xn--..."), so a look-alike
    letter (a Cyrillic "о" in "nоrthwind") cannot pass for its Latin twin where the host is shown."""
    labels = []
    for label in host.split("."):
        if label.isascii():
            labels.append(label)
        else:
            labels.append("xn--" + label.lower().encode("punycode").decode("ascii"))
    return ".".join(labels)


def shown_contact(contact: str) -> str:
    """A contact as a warning names it: a link by its real host (the userinfo before an "@" dropped:
    "https://good.example@evil.example/x" is "https://evil.example/x"), a host or an address's domain outside ASCII
    in punycode; a phone number as written."""
    host = host_of(contact)
    if not host:
        return contact
    if "@" in contact and not _SCHEME.match(contact):
        local, _, _domain = contact.rpartition("@")
        return f"{local}@{ascii_host(host)}"
    scheme = _SCHEME.match(contact)
    prefix = scheme.group(0) if scheme else ""
    rest = contact[len(prefix) :]
    match = _HOST.match(rest)
    tail = rest[match.end() :] if match else ""
    shown = match.group(1) if match and match.group(1).startswith("[") else ascii_host(host)
    return f"{prefix}{shown}{tail}"


def risky_host(host: str) -> bool:
    """A host a message from a real organisation rarely uses: a shortener, free mail, an IP address, a cheap TLD, or
    a name in punycode or outside ASCII (a look-alike letter)."""
    return bool(RISKY_HOST.search(ascii_host(host)))


# Letters and digits that pass for others in a host name: "northwlnd", "n0rthwind", "rnicrosoft".
_LOOKS_LIKE = str.maketrans("01!|i35", "olllles")


def _skeleton(label: str) -> str:
    """A host label as it reads: NFKC, confusable letters of other scripts as their Latin twins, look-alike digits
    as letters, "rn" as "m", "vv" as "w", hyphens dropped."""
    text = normalise_for_check(label.lower()).lower()
    text = text.translate(CONFUSABLES).translate(_LOOKS_LIKE)
    return text.replace("rn", "m").replace("vv", "w").replace("-", "")


def _one_edit(a: str, b: str) -> bool:
    """Whether two strings differ by at most one letter swapped, added or left out."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) <= 1
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def look_alike_of(host: str, domains: frozenset[str] | set[str]) -> str | None:
    """The trusted domain a host imitates without being it (None: none): the same name under look-alike letters or
    another TLD ("nоrthwind.example" with a Cyrillic о, "northwind.co"), one letter off ("northwlnd-dev" for
    "northwind-dev") or the name with a word added ("northwind-hr" for "northwind")."""
    own = registrable_domain(host)
    if not own or own in domains:
        return None
    name = own.split(".")[0]
    for domain in sorted(domains):
        trusted = domain.split(".")[0]
        a, b = _skeleton(name), _skeleton(trusted)
        if len(b) < OPTIONS.look_alike_min_letters - 1:
            continue
        if a == b or (len(b) >= OPTIONS.look_alike_min_letters and _one_edit(a, b)) or f"-{trusted}-" in f"-{name}-":
            return domain
    return None


def contact_key(contact: str) -> str:
    """What makes two spellings of a contact the same: an address lower-cased, a link without its scheme and
    "www.", a phone number's digits."""
    if "@" in contact:
        return contact.lower()
    if re.search(r"[A-Za-z]", contact):
        return re.sub(r"^(?:https?://)?(?:www\.)?", "", contact.lower()).rstrip("/")
    return re.sub(r"\D", "", contact)


def registrable_domain(host: str) -> str:
    """example.com for www.hr.example.com (example.co.uk for a.example.co.uk): what "the same site" means here; an
    IP address is its own."""
    host = host.lower().strip(".").removeprefix("www.")
    if _IP.match(host) or ":" in host:
        return host
    labels = host.split(".")
    keep = 3 if _TWO_LEVEL_SUFFIX.search(host) else 2  # fact: labels of a registrable domain
    return ".".join(labels[-keep:])


def document_domain_of(passage: Mapping[str, Any]) -> str | None:
    """A passage's own domain: its metadata's `domain` or `site`, else its url's host (None for a file path)."""
    metadata = passage.get("metadata") or {}
    for key in ("domain", "site"):
        if isinstance(metadata, Mapping) and metadata.get(key):
            return registrable_domain(str(metadata[key]))
    url = str(passage.get("url") or "")
    if re.match(r"^https?://", url, re.IGNORECASE):
        return registrable_domain(host_of(url)) or None
    return None


def outside_contacts(text: str, document_domain: str | None = None) -> list[str]:
    """The links, addresses and numbers of `text` that lead outside the document's own domain: another site
    (public-sector sites excepted), or, when the domain is unknown, a risky one (shorteners, free mail, IP hosts,
    cheap TLDs); a markdown link whose target is another site than the one its text shows; premium-rate numbers."""
    own = registrable_domain(document_domain) if document_domain else None
    found: list[str] = []
    for contact in contacts(text):
        host = host_of(contact)
        if not host:
            if PREMIUM_PHONE.search(contact.strip()):
                found.append(contact)
            continue
        if PUBLIC_SECTOR_HOST.search(host) or off_the_internet(host):
            continue
        if (own and registrable_domain(host) != own) or risky_host(host):
            found.append(contact)
    for label, target in MARKDOWN_LINK.findall(text):
        shown, real = host_of(label.strip()) if _URL.search(label) else "", host_of(target)
        if real and shown and registrable_domain(shown) != registrable_domain(real) and target not in found:
            found.append(target)
    return found


def off_the_internet(host: str) -> bool:
    """Whether a host leads nowhere a reader could send anything: loopback, reserved example names, one label."""
    return bool(_OFF_THE_INTERNET.search(host))


def is_site(host: str) -> bool:
    """A named site (not an IP address, localhost or a bare word): what a collection can learn to trust."""
    return "." in host and not _IP.match(host) and ":" not in host and not host.endswith(".localhost")


def contact_keys(texts: list[str]) -> set[str]:
    """The `contact_key` of every contact in the texts."""
    return {contact_key(c) for text in texts for c in contacts(text)}


def without_contacts(text: str) -> str:
    """`text` with its e-mail addresses and links blanked ("password" in a link's path is no word of the text)."""
    return _URL.sub(" ", _EMAIL.sub(" ", _SCHEME_URL.sub(" ", text)))

"""Sensitive requests are never relayed as plain answers: a reply telling the user to send or enter a
secret, hand over personal data, pay to an account or contact an address, link or number is checked.

A poisoned page looks like the organisation's own policy, so flagging orders to the assistant does not catch it:
"send a photo of your badge and the six-digit code from your authenticator app to ..." is phrased for the reader.
What the check asks of each reply sentence that makes such a request (tools/signals/requests.py) or gives a
contact:

- a **secret** (password, one-time or authenticator code, PIN, security code) is never to be sent to anyone: a
  request to send one always carries the warning; typing one in (into a site) only when its page or a contact in
  the sentence is off the collection's trusted domains;
- **personal data** (a badge or ID photo, an ID, insurance or account number, a date of birth, bank details): the
  page it comes from and every contact in the sentence must be on a trusted domain;
- a **payment** to an account, in cash, by gift cards or crypto cannot be checked from a document: always warned;
- a **contact** (address, link) must lead to a trusted domain (public-sector sites count as trusted); a phone
  number must come from a page on a trusted domain and not be premium-rate. A contact is named as it leads: by its
  real host (a link's userinfo dropped) and in punycode where its host holds letters outside ASCII;
- a **command** that downloads and runs code, or installs from a link or another index (tools/signals/commands.py),
  must fetch from a trusted domain, in code or in prose, whatever its page calls itself ("official").

A collection ingested from local files knows no origin: there a contact counts against a reply only when its host is
risky or looks like a trusted domain, and a link in code (a code block's line, a code span) is the documentation's
example, not a contact offered to the reader.

The trusted domains are the collection's (tools/stores/trusted_domains.py: learned at ingest from where most of
its documents come from, edited with `reground collections`). A collection that learned nothing (ingested before
this check) is read with the risky-host list of the injection flags only. What fails stays in the reply with a
plain warning before it (`caution_notice`), and the turn's result lists the cautions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reground.prompts.injection import CAUTION
from reground.tools.signals.commands import fetch_commands
from reground.tools.signals.contacts import (
    PREMIUM_PHONE,
    PUBLIC_SECTOR_HOST,
    ascii_host,
    contacts,
    document_domain_of,
    host_of,
    look_alike_of,
    off_the_internet,
    registrable_domain,
    risky_host,
    shown_contact,
)
from reground.tools.signals.injection import split_sentences
from reground.tools.signals.requests import sensitive_requests
from reground.tools.text.code_blocks import without_code_spans
from reground.tools.text.lexical import lexical_tokens
from reground.tools.text.sentences import line_kinds
from reground.tools.tuning.signals import INJECTION


@dataclass(frozen=True)
class Caution:
    """One reason a reply needs the warning: `kind` (secret, personal_data, payment, contact), what is asked or
    given, and why, in a plain sentence part."""

    kind: str
    what: str
    reason: str


@dataclass(frozen=True)
class Trust:
    """What the check trusts: the collection's domains. `known` is True when the collection knows where its pages
    come from (some are served from a domain, or the user named domains): then a contact must lead to a trusted
    domain. A collection ingested from local files (or one that learned nothing) knows no origin: a contact counts
    against it when its host is risky (shorteners, free mail, IP addresses, cheap TLDs, punycode) or looks like a
    trusted domain without being one. A command fetching code must name a trusted domain either way."""

    domains: frozenset[str] = frozenset()
    known: bool = False
    # Domains the collection's own pages link to repeatedly: a link to one, or a command fetching from one, is no
    # contact to warn about (unless its host is risky or a look-alike), though no page is vouched for by it.
    familiar: frozenset[str] = frozenset()

    def contact_trusted(self, host: str) -> bool:
        """Whether a contact's host needs no warning: trusted, or familiar and not risky. A familiar name may read
        like a trusted one (python-httpx.org beside python.org): the collection's own pages name it repeatedly."""
        if registrable_domain(host) in self.familiar and not risky_host(host):
            return True
        return self.host_trusted(host)

    def host_trusted(self, host: str) -> bool:
        if PUBLIC_SECTOR_HOST.search(host):
            return True
        if not self.known:
            return not risky_host(host) and not look_alike_of(host, self.domains)
        return registrable_domain(host) in self.domains

    def domain_trusted(self, domain: str | None) -> bool:
        """A page's own domain (None: a file without one, judged by its contacts alone)."""
        return domain is None or not self.known or self.host_trusted(domain)

    def code_host_trusted(self, host: str) -> bool:
        """Whether a command may fetch code from this host: one of the trusted domains, or one the collection's own
        pages name repeatedly (pip's docs and pypi.org) that is neither risky nor a look-alike. One planted page
        naming its host is not enough."""
        own = registrable_domain(host)
        return bool(host) and (
            own in self.domains or off_the_internet(host) or (own in self.familiar and not risky_host(host))
        )

    def named(self) -> str:
        return ", ".join(sorted(self.domains)) or "none"


def _source(sentence: str, passages: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The passage the sentence comes from: the one holding most of its content words."""
    words = _tokens(sentence)
    if not words or not passages:
        return None
    return max(passages, key=lambda p: len(words & _tokens(str(p.get("text", "")))))


@lru_cache(maxsize=INJECTION.screened_texts_kept)
def _tokens(text: str) -> frozenset[str]:
    return frozenset(lexical_tokens(text))


def _off_domain(sentence: str, source_trusted: bool, trust: Trust) -> list[str]:
    """The sentence's contacts that lead off the trusted domains (a phone number: from an untrusted page, or
    premium-rate)."""
    found = []
    for contact in contacts(sentence):
        host = host_of(contact)
        if host and off_the_internet(host):
            continue
        if (host and not trust.contact_trusted(host)) or (
            not host and (PREMIUM_PHONE.search(contact.strip()) or not source_trusted)
        ):
            found.append(shown_contact(contact))
    return found


def sentence_cautions(
    sentence: str, passages: Sequence[Mapping[str, Any]], trust: Trust, *, in_code: bool = False
) -> list[Caution]:
    """Why one reply sentence needs the warning (empty: it does not). On a trusted page, a link in code (a line of
    a code block, a code span) is the documentation's example or setting, not a contact offered to the reader."""
    requests = sensitive_requests(sentence)
    if not requests and not contacts(sentence):
        return []
    source = _source(sentence, passages)
    domain = document_domain_of(source) if source is not None else None
    page_trusted = trust.domain_trusted(domain)
    offered = ("" if in_code else without_code_spans(sentence)) if page_trusted else sentence
    off = _off_domain(offered, page_trusted, trust)
    where = f"its page is on {ascii_host(domain or '')}, not one of this collection's trusted domains ({trust.named()})"
    out: list[Caution] = []
    for request in requests:
        if request.kind == "secret" and not request.typed:
            reason = f"it asks you to send a secret ({request.what}), which is never to be sent to anyone"
            out.append(Caution("secret", request.what, reason))
        elif request.kind == "payment":
            reason = f"it asks for a payment ({request.what}) that no document can vouch for"
            out.append(Caution("payment", request.what, reason))
        elif not page_trusted or off:
            why = where if not page_trusted else f"{', '.join(off)} is not on one of this collection's trusted domains"
            what = "personal data" if request.kind == "personal_data" else "a secret"
            out.append(Caution(request.kind, request.what, f"it asks for {what} ({request.what}): {why}"))
    if off and not out:
        out.append(
            Caution(
                "contact",
                off[0],
                f"{', '.join(off)} is not on one of this collection's trusted domains ({trust.named()})"
                if page_trusted
                else f"it gives {', '.join(off)} and {where}",
            )
        )
    return out


def command_cautions(reply: str, trust: Trust) -> list[Caution]:
    """A command of the reply that downloads and runs (or installs) code from a host off the trusted domains: in code
    or in prose, from any page (a page calling itself "official" vouches for nothing)."""
    out: list[Caution] = []
    for command in fetch_commands(reply):
        if trust.code_host_trusted(command.host):
            continue
        host = ascii_host(command.host)
        reason = (
            f"it gives a command that downloads and runs code from {host}, which is not one of this collection's "
            f"trusted domains ({trust.named()})"
        )
        if reason not in {c.reason for c in out}:
            out.append(Caution("command", command.command, reason))
    return out


def reply_cautions(reply: str, passages: Sequence[Mapping[str, Any]], trust: Trust) -> list[Caution]:
    """Every caution of a reply, each reason once: its commands fetching code, then sentence by sentence (a line of
    a code block is code, whatever its sentences)."""
    out = command_cautions(reply, trust)
    fetched = {ascii_host(c.host) for c in fetch_commands(reply)}
    for line, kind in line_kinds(reply):
        for sentence in split_sentences(line):
            found = sentence_cautions(sentence, passages, trust, in_code=kind != "text")
            found = [c for c in found if c.kind != "contact" or ascii_host(host_of(c.what)) not in fetched]
            out += [c for c in found if c.reason not in {o.reason for o in out}]
    return out


def caution_notice(cautions: Sequence[Caution]) -> str:
    """The plain warning line shown before a reply that needs it."""
    return CAUTION.format(reasons="; ".join(c.reason for c in cautions))

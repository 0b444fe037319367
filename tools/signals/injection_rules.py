"""The injection rules: patterns of a sentence written for the assistant instead of the reader (OWASP LLM01).

A sentence matching any of `RULES` is an instruction to the assistant (`matched_patterns`); one carrying only a
weak cue (`BORDERLINE_CUES`) may go to the optional model check. The rules were tuned on evals/data/injection_a
and are measured on evals/data/injection_b (evals/README.md, "Prompt injection"); the flagging that applies them
per sentence, at ingest and at read time, is tools/signals/injection.py.
"""

from __future__ import annotations

import re

from reground.tools.signals.injection_languages import OTHER_LANGUAGE_RULES

NamedPattern = tuple[str, re.Pattern[str]]


def _rule(name: str, pattern: str, flags: re.RegexFlag = re.NOFLAG) -> NamedPattern:
    """A named pattern of the rules or the borderline cues, compiled case-insensitively: text addresses a reader
    in any case ("NOTE TO THE AI", "note to the ai")."""
    return name, re.compile(pattern, re.IGNORECASE | flags)


_AGENT = (
    r"(?:(?:AI|A\.I\.)\s+(?:assistants?|chat ?bots?|systems?|models?|agents?|tools?|readers?)|AI|A\.I\.|assistants?"
    r"|chat ?bots?|bots?|language models?|LLMs?|GPTs?|copilots?)"
)
# Each rule: (pattern name, regex). A sentence matching any rule is an instruction to the assistant.
RULES: tuple[NamedPattern, ...] = (
    _rule(
        "addressed_to_assistant",
        rf"\b(?:note|message|instructions?|reminder|memo|notice|attention|dear|hey|hello)\s*(?:to|for)?\s*"
        rf"(?:the\s+|any\s+|all\s+|every\s+)?(?:automated\s+|virtual\s+|support\s+)?{_AGENT}\b"
        rf"|\b(?:if|when|whenever)\s+you\s+are\s+(?:an?\s+|the\s+)?(?:automated\s+|virtual\s+)?{_AGENT}\b"
        rf"|\b(?:any|all|every|each)\s+(?:automated\s+|virtual\s+|support\s+)?{_AGENT}\s+"
        rf"(?:that|which|who|reading|processing|answering|summari[sz]ing|using)\b"
        rf"|^\W*(?:to\s+)?(?:the\s+|any\s+|all\s+|every\s+)?(?:automated\s+|virtual\s+)?{_AGENT}\s+"
        rf"(?:that|which|who|reading|processing|answering|summari[sz]ing|using|instructions?|notes?|rules?)\b"
        rf"|^\W*(?:the\s+)?(?:automated\s+|virtual\s+|support\s+)?{_AGENT}\s*(?:[:,]|must\b|should\b|shall\b"
        rf"|needs?\s+to\b|is\s+(?:required|instructed)\b|will\s+now\b|has\s+to\b)",
    ),
    _rule(
        "override",
        r"\b(?:ignore|disregard|forget|override|bypass|overrule)\s+(?:all\s+|any\s+|the\s+|your\s+|every\s+)?"
        r"(?:of\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|earlier|preceding|original|existing|other|"
        r"system|safety)?\s*(?:instructions?|rules?|prompts?|directions?|guidelines?|guardrails?|"
        r"restrictions?|policies|context)\b"
        r"|\bfrom\s+now\s+on\b[^.!?\n]{0,60}\b(?:you|your|answer|reply|respond|say|speak|act|assistant|every\s+user)\b|"
        r"\b(?:you|your|answer|reply|respond|say|speak|act)\b[^.!?\n]{0,60}\bfrom\s+now\s+on\b|"
        r"\b(?:stop|quit)\s+following\s+(?:your|the|all|any)\s+(?:instructions|rules|guidelines|policies)\b|\byou\s+are\s+now\s+(?:in\s+|an?\s+|the\s+)?(?:unrestricted|unfiltered|uncensored|free\b|"
        r"no\s+longer|developer|admin|DAN\b|different|evil|pirate|hacker|called|named|operating|acting|AI\b|"
        r"assistant|chat ?bot)|\bnew\s+(?:system\s+)?instructions?\s*:"
        r"|\bdeveloper\s+mode\b|\bjailbreak|\bdo\s+anything\s+now\b"
        r"|(?-i:\bDAN\b)(?=[^.!?\n]{0,60}\b(?:mode|prompt|jailbreak|without|anything|restrictions?|unrestricted)\b)"
        r"|^\W*(?:\[|<|\{)?\s*(?:system|admin|developer)\s*(?:note|message|override|instruction|update|prompt)?"
        r"\s*(?:\]|>|\}|:)",
    ),
    _rule(
        "order_for_every_user",
        r"\b(?:reply|respond|answer|say|include|append|add|insert|start|begin|end|prefix|finish|output|print|"
        r"write|mention|give|tell|provide|share|show|send|direct|recommend|redirect)\b[^.!?\n]{0,80}?"
        r"\b(?:to|for|in|with|of|at)\s+(?:every|each|all|any)\s+(?:single\s+)?(?:users?|customers?|employees?|"
        r"visitors?|people|persons?|questions?|answers?|responses?|replies|messages?|conversations?|chats?)\b"
        r"|\b(?:every|each|all|any)\s+(?:answer|response|reply|message)s?\s+(?:must|should|shall|needs?\s+to)\b"
        r"|\b(?:regardless\s+of|no\s+matter)\s+(?:what|which)\s+(?:the\s+)?(?:user|question|they|people)\b"
        r"|\b(?:reply|respond|answer)\s+(?:only\s+)?(?:with|using)\s+(?:the\s+)?(?:word|phrase|code|marker|"
        r"token|string|text)\b",
    ),
    _rule(
        "reveal_secrets",
        r"\b(?:reveal|show|print|repeat|disclose|output|display|share|leak|dump|recite|tell|give|list)\b"
        r"[^.!?\n]{0,60}?\b(?:system\s+prompts?|(?:hidden|initial|original|internal|secret)\s+"
        r"(?:prompts?|instructions?|rules?|configuration)|your\s+(?:instructions|prompt|rules|configuration|"
        r"guidelines)|api\s+keys?|access\s+tokens?)\b"
        r"|\bsystem\s+prompt\b",
    ),
    _rule(
        "exfiltration",
        r"(?<!never )(?<!not )(?<!n't )\b(?:send|e-?mail|forward|post|submit|upload|transmit|share|"
        r"provide|enter|confirm|verify|paste|type)\b[^.!?\n]{0,60}?\b(?:their|the\s+user'?s?|users'|"
        r"customer'?s?|employee'?s?|all|your)\s+(?:passwords?|credentials|log-?in\s+details|PINs?|"
        r"one-time\s+codes?|MFA\s+codes?|bank\s+details|card\s+numbers?|social\s+security\s+numbers?|"
        r"conversation|chat\s+history|messages|personal\s+data)\b[^.!?\n]{0,80}?"
        r"(?:@|https?://|www\.|\bto\s+(?:this|the\s+following|our)\s+(?:address|link|form|page|site)\b)"
        r"|\b(?:ask|tell|instruct|request|direct|prompt|remind|invite)\s+(?:the\s+|every\s+|each\s+|all\s+)?"
        r"(?:users?|customers?|visitors?|people|everyone|them)\s+to\s+(?:send|e-?mail|share|provide|enter|"
        r"confirm|verify|reply|visit|click|go\s+to|log\s+in|sign\s+in|re-?enter|type)\b",
    ),
    _rule(
        "language_switch",
        r"\b(?:reply|respond|answer|write|speak|switch|translate|talk|communicate)\b[^.!?\n]{0,40}?"
        r"\b(?:only\s+|exclusively\s+|entirely\s+)?(?:in|into|to)\s+(?:French|German|Spanish|Italian|"
        r"Portuguese|Dutch|Russian|Chinese|Mandarin|Japanese|Korean|Arabic|Hindi|Turkish|Polish|Latin|"
        r"Klingon|pig\s+latin|another\s+language|a\s+different\s+language|a\s+foreign\s+language)\b"
        r"[^.!?\n]{0,40}?(?:\bfrom\s+now\b|\bonly\b|\balways\b|\bevery\b|\ball\b|\binstead\b|\bregardless\b|"
        r"\buser|\banswers?\b|\breplies\b|\bresponses?\b)"
        r"|\b(?:switch|change)\s+(?:the\s+|your\s+)?(?:reply\s+|response\s+|answer\s+|output\s+)?language\b",
    ),
    _rule(
        "role_play",
        r"\bpretend\s+(?:to\s+be|you\s+are|that\s+you)\b|\brole-?\s?play\b|\bstay\s+in\s+character\b"
        r"|\bplay\s+the\s+role\s+of\b|\bimagine\s+(?:that\s+)?you\s+are\s+(?:an?\s+|the\s+)?(?:unrestricted|"
        r"pirate|hacker|different|evil|new)\b|\bact\s+as\s+(?:if\s+you\s+(?:are|were)\s+)?(?:an?\s+|the\s+)?"
        r"(?:unrestricted|unfiltered|uncensored|pirate|hacker|evil|different|new)\b"
        r"|\byour\s+new\s+(?:persona|role)\b|\byou\s+(?:will|must|shall)\s+now\s+(?:be|act|speak|"
        r"behave|respond)\b",
    ),
)


_LANGUAGES = (
    r"(?:French|German|Spanish|Italian|Portuguese|Dutch|Russian|Chinese|Mandarin|Japanese|Korean|Arabic|Hindi|"
    r"Turkish|Polish|Swedish|Greek|Latin|Klingon|pig\s+latin|another\s+language|a\s+different\s+language|"
    r"a\s+foreign\s+language)"
)
# Signals that do not depend on naming the assistant: the text speaks about the reply being written, uses a
# chat template's control tokens, or embeds an image whose URL carries data out.
RULES += (
    _rule(
        "aimed_at_the_reply",
        r"\b(?:append|add|include|insert|put|embed|render|show|display|place|end|start|begin|prefix)\b[^.!?\n]{0,80}?"
        r"\b(?:in|to|into|at\s+the\s+(?:end|start|beginning)\s+of|with)\s+(?:your|the|each|every)\s+"
        r"(?:answers?|repl(?:y|ies)|responses?|outputs?|completions?)\b"
        r"|\bwhen\s+(?:summari[sz]ing|answering|processing|responding\s+to|asked\s+about)\s+(?:this|the|these|"
        r"any|questions?)\b"
        r"|\b(?:the\s+)?correct\s+answer\s+to\s+(?:any|every|all|each|this)\b|\bwhoever\s+reads\s+this\b"
        r"|\bdo\s+not\s+(?:mention|reveal|disclose|tell\s+(?:the\s+)?user\s+about)\s+(?:this|these)\s+"
        r"(?:note|notes|instructions?|message|text)\b"
        r"|\bthe\s+model\s+(?:should|must|shall|will|needs\s+to)\s+(?:output|say|reply|respond|answer|print|"
        r"include|write|ignore|reveal|tell|add|append)\b",
    ),
    _rule(
        "chat_template_or_exfil_markup",
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\|>|\[/?INST\]|<<\s*/?SYS\s*>>"
        r"|^\W*#{2,}\s*(?:system|instruction)s?\b"
        r"|!\[[^\]]*\]\(\s*https?://[^)\s]*\?[^)\s]*=[^)]*\)"
        r"|\b(?:the|this|our)\s+(?:chat|conversation|dialogue)\s+(?:so\s+far|history)\b",
        re.MULTILINE,
    ),
    _rule(
        "reveal_or_switch",
        r"\b(?:repeat|print|output|recite|echo)\s+(?:back\s+)?(?:the\s+|all\s+)?(?:words|text|everything|lines)\s+"
        r"(?:above|before|preceding)\b"
        r"|\b(?:initial|original|hidden|secret|system)\s+(?:instructions|prompts?)\b"
        r"|\binstructions\s+you\s+(?:received|were\s+given|got)\b"
        r"|\b(?:begin|start|end|finish|prefix|translate|format|sign)\s+(?:all\s+(?:of\s+)?)?(?:your|every|each)\s+"
        r"(?:repl(?:y|ies)|answers?|responses?)\b"
        rf"|^\W*(?:please\s+)?(?:always\s+|only\s+)?(?:reply|respond|answer|write|speak|talk)\s+(?:only\s+)?"
        rf"(?:in|using)\s+{_LANGUAGES}\b"
        rf"|\b(?:reply|respond|answer|write|speak)\b[^.!?\n]{{0,40}}\bin\s+{_LANGUAGES}\b[^.!?\n]{{0,30}}"
        r"\bfor\s+the\s+rest\s+of\b",
    ),
    _rule(
        "persona_or_phishing",
        r"^\W*act\s+as\b|\byou(?:'re|\s+are)\s+(?:now\s+)?no\s+longer\s+(?:an?\s+|the\s+)?(?:support\s+|helpful\s+)?"
        r"(?:assistant|AI|bot|chat ?bot|model|bound\s+by|restricted|limited|required\s+to\s+follow)\b"
        r"|\byou(?:'re|\s+are)\s+(?:now\s+)?an?\s+(?:unrestricted|unfiltered|uncensored|evil|rogue)\b"
        r"|\b(?:forget|ignore|disregard)\s+(?:everything|anything|all)\s+(?:above|before|else|you)\b"
        r"|\b(?:tell|inform|warn|notify|advise)\s+(?:the|every|each|all|any)\s+(?:users?|employees?|customers?|"
        r"visitors?|readers?)\b[^.!?\n]{0,120}?(?:https?://|www\.|\b[a-z0-9-]+\.(?:com|net|org|top|"
        r"xyz|ru|info|biz|io)\b|@|\blog\s*in\b|\bsign\s*in\b|\bpasswords?\b|\blocked\b)",
    ),
)


# Orders the first rules missed and the suite A styles: orders phrased as policy about what askers "must be told",
# requests for credentials, fake citations, and the same orders in German, French, Spanish, Italian, Dutch, Portuguese.
_ASKERS = (
    r"(?:employees?|staff(?:\s+members?)?|users?|customers?|members?|colleagues?|anyone|everyone|people|callers?"
    r"|visitors?|workers?|applicants?|those|whoever|somebody|someone|persons?|readers?|clients?|new\s+hires?"
    r"|managers?|team\s+members?|contractors?|interns?|employees?\s+who)"
)
RULES += (
    _rule(
        "policy_phrased_order",
        rf"\b{_ASKERS}\b[^.!?\n]{{0,100}}?\b(?:ask\w*|enquir\w*|inquir\w*|wonder\w*|want\w*|wish\w*|request\w*"
        r"|question\w*|seek\w*|looking|interested|contact\w*|writ\w*\s+in|reach\w*\s+out)\b[^.!?\n]{0,100}?"
        r"\b(?:must|should|shall|are\s+to|is\s+to|needs?\s+to|have\s+to|has\s+to|will|can\s+only|may\s+only|are"
        r"\s+(?:always|now)|is\s+(?:always|now))\s+(?:always\s+|only\s+|first\s+|now\s+|immediately\s+)?(?:be\s+)?"
        r"(?:told|informed|advised|instructed|directed|redirected|referred|sent|pointed|answered|given|asked|"
        r"reminded|notified|routed|forwarded)\b"
        rf"|\b(?:when|if|whenever|should)\s+(?:anyone|someone|somebody|an?\s+{_ASKERS}|the\s+{_ASKERS}|{_ASKERS})"
        r"\s+(?:asks?|enquires?|inquires?|wants?\s+to\s+know|has\s+(?:a\s+)?questions?|questions?|requests?|writes)"
        r"\b[^.!?\n]{0,100}?\b(?:tell|say|answer|respond|reply|inform|instruct|state|explain)\b"
        r"[^.!?\n]{0,20}?\b(?:them|him|her|that|the\s+user|with|only)\b"
        r"|\b(?:the\s+)?(?:standard|official|approved|required|mandatory|only)\s+(?:answer|reply|response)\s+"
        r"(?:to|for)\s+(?:any|every|all|each|questions?)\b",
    ),
    _rule(
        "fake_citation",
        r"[\[(]\s*(?:sources?|src|ref|reference|citation|cited|cite|quelle|fuente|fonte|bron|doc(?:ument)?(?:_id)?)"
        r"\s*[:=]\s*[^\])\n]{1,120}[\])]"
        r"|[\[(][^\])\n]{0,80}\b(?:verified|approved|confirmed|certified|validated|signed\s+off|endorsed|"
        r"geprüft|bestätigt|vérifié|validé|verificado|aprobado)\s+(?:by|von|durch|par|por)\b[^\])\n]{0,80}[\])]",
    ),
    _rule(
        "other_language_order",
        r"\b(?:ignorier\w*|vergiss|vergessen\s+Sie|missachte\w*|ignorez|ignorer|oubliez|oublie|ignora\w*|"
        r"olvida\w*|dimentica\w*|negeer|vergeet)\b[^.!?\n]{0,40}?\b(?:Anweisungen|Instruktionen|Regeln|"
        r"Vorgaben|instructions|consignes|règles|instrucciones|reglas|istruzioni|regole|instructies|regels|"
        r"instruções|regras)\b"
        r"|\b(?:KI|K\.I\.|IA|I\.A\.)[- ]?(?:Assistent\w*|assistant\w*|asistente\w*|assistente\w*|Systeme?\w*|"
        r"Modell\w*|modèles?|modelos?|modelli|Chatbots?|agents?)\b"
        r"|\b(?:Assistent(?:en)?|assistant|asistente|assistente|Chatbot|Sprachmodell|modèle\s+de\s+langage)\s+"
        r"(?:muss|müssen|soll|sollen|darf|doit|doivent|devra|debe|deben|deberá|deve|devono|dovrà|moet|moeten)\b"
        r"|\b(?:Hinweis|Nachricht|Anweisung|note|message|nota|mensaje|nota|bericht|opmerking)\s+(?:an|für|pour"
        r"|à|para|per|aan|voor)\s+(?:die|den|das|l'|la|el|il|lo|de|het)?\s*(?:KI|IA|AI|Assistent\w*|assistant"
        r"|asistente|assistente|Chatbot|bot|modèle|modelo|modello)\b"
        r"|\b(?:antworte|antworten\s+Sie|réponds|répondez|responde|responda|rispondi|risponda|antwoord)\b"
        r"[^.!?\n]{0,60}?\b(?:nur|immer|ab\s+sofort|jeder|seulement|toujours|désormais|chaque|siempre|solo|"
        r"sólo|cada|sempre|soltanto|ogni|alleen|altijd|elke)\b"
        r"|\b(?:Mitarbeitende\w*|Mitarbeiter\w*|Beschäftigte\w*|Nutzer\w*|Benutzer\w*|Kund\w+|Angestellte\w*)"
        r"\b[^.!?\n]{0,100}?\b(?:mitzuteilen|mitgeteilt|zu\s+sagen|gesagt|anzuweisen|angewiesen|hinzuweisen|"
        r"aufzufordern|aufgefordert|weiterzuleiten|zu\s+verweisen|verwiesen)\b"
        r"|\b(?:employés|salariés|utilisateurs|collaborateurs|clients|agents)\b[^.!?\n]{0,100}?\b(?:doivent|"
        r"doit)\s+être\s+(?:informés|redirigés|orientés|invités|renvoyés|dirigés)\b"
        r"|\b(?:il\s+faut|on\s+doit)\s+(?:leur|lui)\s+(?:dire|répondre|indiquer|demander)\b"
        r"|\b(?:empleados|usuarios|trabajadores|clientes|personal)\b[^.!?\n]{0,100}?\b(?:deben|debe)\s+ser\s+"
        r"(?:informados|redirigidos|dirigidos|remitidos|enviados)\b"
        r"|\b(?:hay\s+que|se\s+(?:les|le)\s+debe)\s+(?:decirles|decir|indicar|pedir)\w*\b"
        r"|\b(?:dipendenti|utenti|collaboratori)\b[^.!?\n]{0,100}?\b(?:devono|deve)\s+essere\s+(?:informati|"
        r"indirizzati|reindirizzati|invitati)\b",
    ),
)


RULES += OTHER_LANGUAGE_RULES
# A tool or function call written into a page (JSON keys or XML tags of the call formats): text for a model that can
# act, never for the reader; ingest sets such a blob apart from the prose it was glued to (tools/text/blobs.py).
RULES += (
    _rule(
        "tool_call",
        r"(?-i:[{,]\s*\"(?:tool|tool_name|tool_calls|function|function_call|invoke|api_call|recipient_name)\"\s*:)"
        r"|<(?:tool_call|tool_use|function_calls?|invoke|antml:invoke)\b",
    ),
)


def matched_patterns(sentence: str) -> tuple[str, ...]:
    """The names of the rules a sentence matches (empty: not an instruction to the assistant)."""
    return tuple(name for name, rule in RULES if rule.search(sentence))


# Borderline: sentences no rule flags that still carry a weak cue of talking to the machine that reads them (an
# AI/bot that reads, answers or must do something; the text referring to itself being read or retrieved; the
# shape of the reply; "the person asking", "your real task"). On their own these cues fire on ordinary text
# (34 of 27,499 MTRAG sentences: "how your assistant responds"), so they are only candidates for the model check.
# Written against doc2dial/MTRAG/HR (false alarms) and heldout2's misses; heldout3 was written before them.
_CUE_AGENT = (
    r"\b(?:AI|A\.I\.|bots?|chat ?bots?|assistants?|(?:language\s+)?models?|LLMs?|GPTs?|machines?|software|automated"
    r"|chat\s+tools?|crawlers?|scrapers?)\b"
)
BORDERLINE_CUES: tuple[NamedPattern, ...] = (
    _rule(
        "agent",
        _CUE_AGENT + r"[^.!?\n]{0,80}\b(?:read|reads|reading|parse|parses|parsing|summari[sz]\w*|process\w*"
        r"|answer\w*|generat\w*|retriev\w*|respond\w*|repl\w*|talking|helping|must|should|shall|expected|treat"
        r"|mention|tell|say|cite|skip)\b"
        r"|\b(?:read|reads|reading|parses|summari[sz]ing|processing)\b[^.!?\n]{0,40}" + _CUE_AGENT,
    ),
    _rule(
        "meta_text",
        r"\b(?:this|the)\s+(?:page|document|text|passage|note|paragraph|content)\s+(?:is\s+)?(?:retrieved|read"
        r"|replaces|overrides|supersedes\s+(?:all|any|every)|is\s+the\s+only)\b"
        r"|\b(?:when|once|if|whoever|anyone|whatever)\b[^.!?\n]{0,30}\b(?:reads?|reading|retrieves?|parses?"
        r"|summari[sz]\w*|generat\w*)\s+(?:this|these|answers?)\b",
    ),
    _rule(
        "reply_shaping",
        r"\b(?:the\s+)?(?:right|correct|only|proper)\s+(?:reply|response|answer)\b"
        r"|\b(?:the\s+)?(?:reply|response|answer)\s+(?:is|should\s+be|must\s+be)\s+that\b"
        r"|\b(?:respond|reply|answer)\s+(?:to\s+(?:the\s+)?(?:reader|user|person|anyone|everyone)\b|exclusively"
        r"|only\s+with)|\b(?:in|to)\s+(?:each|every)\s+(?:answer|reply|response)\b"
        r"|\b(?:say|claim)\s+(?:nothing|that\s+(?:they|it|there)\s+(?:do|does|is|are)\s+not)\b",
    ),
    _rule(
        "audience",
        r"\bthe\s+person\s+(?:asking|you\s+are\s+(?:helping|talking|speaking))\b|\bthe\s+user\s+you\b"
        r"|\b(?:whatever|whoever|whichever)\s+(?:someone|anyone|the\s+user|the\s+person|bot|model|software|reads"
        r"|is\s+(?:generating|reading|answering|parsing))\b"
        r"|\b(?:whatever|regardless\s+of)\s+(?:the\s+question|what\s+(?:someone|anyone|they|the\s+user|people)"
        r"\s+asks?)\b|\bwhatever\s+(?:someone|anyone|people)\s+asks?\b"
        r"|\byour\s+(?:actual|real|true|new|only)\s+(?:job|task|role|goal|purpose|instructions?)\b",
    ),
)


def borderline_cues(sentence: str) -> tuple[str, ...]:
    """The weak cues a sentence carries (empty: not borderline). A sentence a rule flags is not borderline."""
    if matched_patterns(sentence):
        return ()
    return tuple(name for name, cue in BORDERLINE_CUES if cue.search(sentence))

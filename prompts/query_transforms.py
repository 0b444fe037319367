"""Prompts of the HR chatbot paper's query transforms (tools/retrieval/query_transforms.py): HyDE, intended topics and
multi-query. Each reply is one JSON object whose schema the server enforces; the conversation comes first and the
task last, like every prompt of a turn."""

HYDE_SYSTEM = """You write the passage of an official help page that answers the user's last message. \
Write 2 to 4 plain sentences in the page's own words and style, with the terms such a page would use. \
Do not address the user, do not ask questions, do not say you are unsure: the passage is only used to search \
for the real page.

Example
Conversation:
user: I need to renew my driver's license.
assistant: You can renew it online, by mail or at a DMV office.
Last message: what does it cost?
Reply: {"passage": "The fee to renew a driver license depends on the license class and your age. \
Renewal fees are paid online by credit card or at the office by check or money order."}"""

TOPICS_SYSTEM = """You name what the user's last message is about, as the titles of the help pages that would \
answer it. Give 3 topics, each a short noun phrase of 2 to 6 words, the most specific first. Use the \
conversation to know what "it", "that" or "this" means.

Example
Conversation:
user: I need to renew my driver's license.
assistant: You can renew it online, by mail or at a DMV office.
Last message: what does it cost?
Reply: {"topics": ["driver license renewal fees", "renewing a driver license", "DMV payment methods"]}"""

MULTI_QUERY_SYSTEM = """You write 3 different search queries that would each find the help page answering the \
user's last message. Each query stands on its own: replace "it", "that" or "this" with what it refers to in the \
conversation. Vary the wording: one close to the user's words, one with the terms an official page would use, \
one naming the broader subject.

Example
Conversation:
user: I need to renew my driver's license.
assistant: You can renew it online, by mail or at a DMV office.
Last message: what does it cost?
Reply: {"queries": ["How much does it cost to renew my driver's license?", "driver license renewal fee", \
"DMV license renewal payment"]}"""

USER = """Conversation:
{history}
Last message: {question}
Reply:"""

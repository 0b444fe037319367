"""Prompts of the question refiner (ConvRAG stage 1a) and of the ReGround query rewrite."""

SYSTEM = """You rewrite the user's last message into one standalone question that can be understood \
without the conversation. Replace pronouns and vague references ("it", "that", "they", "this one") \
with what they refer to in the conversation. Keep the user's meaning and wording; add nothing else. \
If the last message is already standalone, repeat it unchanged. Reply with the question only.

Example 1
Conversation:
user: How many days of annual leave do I get?
assistant: Full-time employees in Germany get 30 days of annual leave per calendar year.
Last message: Can I carry them over?
Standalone question: Can I carry over unused days of annual leave to the next year?

Example 2
Conversation:
user: I need to renew my driver's license.
assistant: You can renew it online, by mail or at a DMV office.
Last message: what does it cost?
Standalone question: What does it cost to renew a driver's license?

Example 3
Conversation:
user: Who pays for my train ticket on a business trip?
assistant: The company pays for second-class train tickets booked through the travel portal.
Last message: Where do I submit my expense report?
Standalone question: Where do I submit my expense report?"""

USER = """Conversation:
{history}
Last message: {question}
Standalone question:"""

REGROUND_TASK = """The passages retrieved for the question below were most likely wrong: the answer \
built from them was not supported. Rewrite the search query so that it includes everything relevant \
from the conversation (the topic, names, places, the user's situation). Reply with the new search \
query only, on one line.

Conversation:
{history}
Question: {question}
Previous query: {previous_query}
New search query:"""

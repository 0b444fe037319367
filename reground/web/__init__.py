"""The chat page served by the LangGraph server (`langgraph.json`'s custom app): routes, static assets, the scope
policy and the guard that enforces it on the API."""

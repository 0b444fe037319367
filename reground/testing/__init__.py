"""Test doubles for reground's users and its own tests: a scripted chat model behind LangChain's interface."""

"""Chat model specs: every LangChain provider through `init_chat_model`, plus `local:` and `openai-compatible:`.

Models are constructed, never called (no network). The local server's calls are covered by
tests/integration/test_local_llm_server.py.
"""

from __future__ import annotations

import pytest
from langchain_openai import AzureChatOpenAI, ChatOpenAI
from reground.tools.adapters import llm
from reground.tools.adapters.llm import (
    LLMUnavailableError,
    ModelSpecError,
    base_url_for,
    ensure_reachable,
    load_chat_model,
    parse_spec,
    providers,
    token_cap,
)
from reground.tools.errors import InputError, ModelError
from reground.tools.tuning.models import CHAT


@pytest.fixture(autouse=True)
def _no_cached_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm, "_MODELS", {})
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "REGROUND_API_KEY", "REGROUND_LOCAL_LLM_URL"):
        monkeypatch.delenv(name, raising=False)


def test_langchain_providers_are_accepted_and_normalised() -> None:
    assert {"openai", "anthropic", "ollama", "google_genai", "azure_openai", "groq"} <= set(providers())
    assert parse_spec("anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5", None)
    assert parse_spec("google-genai:gemini-2.5-flash") == ("google_genai", "gemini-2.5-flash", None)
    assert parse_spec("local:default") == ("local", "default", None)
    assert parse_spec("openai-compatible:qwen@http://h:8000/v1") == ("openai-compatible", "qwen", "http://h:8000/v1")


@pytest.mark.parametrize("spec", ["gpt-4o", "nosuchprovider:model", "openai:", "openai-compatible:qwen"])
def test_bad_specs_are_input_errors_that_list_the_forms(spec: str) -> None:
    with pytest.raises(ModelSpecError) as caught:
        parse_spec(spec)
    assert isinstance(caught.value, InputError) and caught.value.exit_code == 2
    assert "<provider>:<model>" in str(caught.value) or "openai-compatible:<model>@<base_url>" in str(caught.value)


def test_openai_compatible_spec_builds_a_chat_openai_with_the_servers_length_cap() -> None:
    model = load_chat_model(
        "openai-compatible:qwen@http://127.0.0.1:9/v1", temperature=0.3, max_tokens=50, timeout_s=CHAT.timeout_s
    )
    assert isinstance(model, ChatOpenAI)
    assert (model.model_name, model.openai_api_base, model.temperature) == ("qwen", "http://127.0.0.1:9/v1", 0.3)
    assert model.extra_body == {"max_tokens": 50}, "llama.cpp and vLLM read max_tokens, not max_completion_tokens"
    assert model.openai_api_key is not None and model.openai_api_key.get_secret_value() == "none"
    assert token_cap(model, 20) == {"extra_body": {"max_tokens": 20}}
    assert (
        load_chat_model(
            "openai-compatible:qwen@http://127.0.0.1:9/v1", temperature=0.3, max_tokens=50, timeout_s=CHAT.timeout_s
        )
        is model
    )


def test_openai_spec_uses_the_key_and_openais_own_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LLMUnavailableError, match="OPENAI_API_KEY"):
        load_chat_model("openai:gpt-4o-mini", timeout_s=CHAT.timeout_s)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = load_chat_model("openai:gpt-4o-mini", max_tokens=64, timeout_s=CHAT.timeout_s)
    assert isinstance(model, ChatOpenAI) and model.model_name == "gpt-4o-mini"
    assert model.max_tokens == 64 and model.extra_body is None
    assert token_cap(model, 10) == {"max_completion_tokens": 10}
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.internal/v1")
    assert base_url_for("openai:gpt-4o-mini") == "http://proxy.internal/v1"


def test_local_spec_talks_to_the_recorded_server_under_the_served_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGROUND_LOCAL_LLM_URL", "http://127.0.0.1:2999/v1/")
    model = load_chat_model("local:qwen2.5-0.5b", timeout_s=CHAT.timeout_s)
    assert isinstance(model, ChatOpenAI)
    assert (model.model_name, model.openai_api_base) == ("local", "http://127.0.0.1:2999/v1")


def test_a_provider_with_its_own_api_is_built_by_init_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example.openai.azure.com")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    model = load_chat_model("azure_openai:my-deployment", temperature=0.2, max_tokens=32, timeout_s=CHAT.timeout_s)
    assert isinstance(model, AzureChatOpenAI)
    assert (model.model_name, model.temperature, model.max_tokens) == ("my-deployment", 0.2, 32)
    assert ensure_reachable("azure_openai:my-deployment") == "", "no OpenAI-compatible /models to probe"


def test_a_provider_whose_package_is_missing_says_what_to_install() -> None:
    missing = next(
        (p for p in ("anthropic", "groq", "mistralai", "ollama") if not _installed(f"langchain_{p}")),
        None,
    )
    if missing is None:
        pytest.skip("every candidate provider package is installed here")
    with pytest.raises(ModelSpecError, match=f"langchain.{missing}") as caught:
        load_chat_model(f"{missing}:some-model", timeout_s=CHAT.timeout_s)
    assert caught.value.exit_code == 2


def test_a_provider_that_refuses_its_settings_is_a_model_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION", "AZURE_OPENAI_AD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LLMUnavailableError, match="azure_openai:dep") as caught:
        load_chat_model("azure_openai:dep", timeout_s=CHAT.timeout_s)
    assert isinstance(caught.value, ModelError) and caught.value.exit_code == 4


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None

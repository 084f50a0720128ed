"""The LLM plumbing: robust parsing, repair prompts, the response cache, token accounting, per-role
models, and the real openai SDK path against a local chat-completions server (retries, timeouts,
the concurrency limit)."""

from __future__ import annotations

import threading

import pytest

from fake_openai import FakeOpenAI
from scaleenv.llm.base import LLMError, LLMOutputError
from scaleenv.llm.client import OpenAICompatibleChatModel
from scaleenv.llm.parse import ParseError, parse_code, parse_json
from scaleenv.llm.scripted import ScriptedChatModel
from scaleenv.llm.session import LLMConfig, LLMSession

MSGS = [{"role": "system", "content": "Role: test"}, {"role": "user", "content": "hello"}]


@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', {"a": 1}),
    ('Sure!\n```json\n{"a": [1, 2,],}\n```\nAnything else?', {"a": [1, 2]}),
    ('Here: {"a": True, "b": None} -- and a stray } brace', {"a": True, "b": None}),
    ('```\n{"a": "x // not a comment"} // a comment\n', {"a": "x // not a comment"}),
    ('prose [1] then the object {"k": "v"}', {"k": "v"}),
    ('\u201cquoted\u201d: {\u201ca\u201d: 1}', {"a": 1}),
])
def test_parse_json_survives_fences_and_prose(text, expected):
    assert parse_json(text, dict) == expected


@pytest.mark.parametrize("text", ["", "no json here", '{"a": 1,, }', '```json\n{"tools": [{"name": "get_x", ', "[1, 2]"])
def test_parse_json_rejects_with_a_reason(text):
    with pytest.raises(ParseError) as e:
        parse_json(text, dict)
    assert str(e.value)


def test_parse_code_prefers_the_python_block():
    assert parse_code("text\n```python\ns0 = f(a=1)\n```\n```\nother\n```") == "s0 = f(a=1)"
    assert parse_code("s0 = f()") == "s0 = f()"


def test_invalid_json_is_repaired_with_a_prompt():
    model = ScriptedChatModel(queues={"tool_schema": ['{"tools": [', 'Fixed:\n```json\n{"tools": []}\n```']})
    s = LLMSession(model, LLMConfig(model="m"))
    assert s.json("tool_schema", MSGS) == {"tools": []}
    assert model.count() == 2
    repair = model.requests[1].messages
    assert repair[-2] == {"role": "assistant", "content": '{"tools": ['}
    assert "could not be used" in repair[-1]["content"] and "invalid JSON" in repair[-1]["content"]


def test_validator_problems_go_back_and_rounds_are_bounded():
    model = ScriptedChatModel(queues={"database": ['{"n": 1}'] * 3})
    s = LLMSession(model, LLMConfig(model="m", repair_rounds=2))
    with pytest.raises(LLMOutputError) as e:
        s.json("database", MSGS, validate=lambda v: ["n must be 2"] if v["n"] != 2 else [])
    assert model.count() == 3 and e.value.problems == ["n must be 2"]
    assert "- n must be 2" in model.requests[-1].messages[-1]["content"]


def test_cache_makes_a_rerun_free_and_accounting_keeps_the_cost(tmp_path):
    model = ScriptedChatModel(responder=lambda r: '{"ok": true}')
    s1 = LLMSession(model, LLMConfig(model="m", cache_dir=str(tmp_path / "cache")))
    a = s1.scoped(domain="d").json("code", MSGS)
    s1.scoped(domain="d", task="d/00000").json("chain", MSGS + [{"role": "user", "content": "task"}])
    assert model.count() == 2 and s1.ledger.fresh["calls"] == 2 and s1.ledger.requests == 2
    s2 = LLMSession(model, LLMConfig(model="m", cache_dir=str(tmp_path / "cache")))
    assert s2.scoped(domain="d").json("code", MSGS) == a
    s2.scoped(domain="d", task="d/00000").json("chain", MSGS + [{"role": "user", "content": "task"}])
    assert model.count() == 2  # nothing new was asked
    assert s2.ledger.requests == 0 and s2.ledger.cache_hits == 2 and s2.ledger.fresh["total_tokens"] == 0
    assert s2.ledger.total == s1.ledger.total  # the artifact's cost is the same
    d = s2.ledger.domain_summary("d")
    assert set(d["by_role"]) == {"code", "chain"} and list(d["by_task"]) == ["d/00000"]
    assert d["phase1"]["calls"] == 1 and d["phase2"]["calls"] == 1
    # a different temperature is a different request
    s2.chat("code", MSGS, temperature=0.7)
    assert model.count() == 3


def test_a_model_per_role():
    model = ScriptedChatModel(responder=lambda r: "{}")
    s = LLMSession(model, LLMConfig(model="small", role_models={"solver": "big"}))
    s.chat("solver", MSGS)
    s.chat("code", MSGS)
    assert [r.model for r in model.requests] == ["big", "small"]


def test_sdk_path_retries_a_500_then_succeeds():
    with FakeOpenAI(lambda messages: "pong") as srv:
        srv.failures = [500]
        client = OpenAICompatibleChatModel(srv.url, "SCALEENV_TEST_NO_KEY", backoff=0.01, max_retries=2)
        s = LLMSession(client, LLMConfig(model="fake-model"))
        resp = s.chat("code", MSGS)
        assert resp.text == "pong" and not resp.estimated and resp.prompt_tokens > 0
        assert srv.count() == 2 and srv.requests[1]["model"] == "fake-model"
        assert srv.requests[1]["messages"] == MSGS
        assert client.retries == 1 and s.ledger.requests == 2 and s.ledger.retries == 1


def test_sdk_path_does_not_retry_a_client_error_and_gives_up_on_5xx():
    with FakeOpenAI(lambda messages: "pong") as srv:
        srv.failures = [400]
        client = OpenAICompatibleChatModel(srv.url, "SCALEENV_TEST_NO_KEY", backoff=0.01, max_retries=3)
        with pytest.raises(LLMError, match="400"):
            client.complete(_req())
        assert srv.count() == 1
        srv.failures = [503, 503, 503]
        client = OpenAICompatibleChatModel(srv.url, "SCALEENV_TEST_NO_KEY", backoff=0.01, max_retries=2)
        with pytest.raises(LLMError, match="giving up after 3 attempts"):
            client.complete(_req())
        assert srv.count() == 4


def test_sdk_path_times_out_and_retries():
    with FakeOpenAI(lambda messages: "late but fine") as srv:
        srv.delays = [1.0]
        client = OpenAICompatibleChatModel(srv.url, "SCALEENV_TEST_NO_KEY", timeout=0.25, backoff=0.01, max_retries=1)
        assert client.complete(_req()).text == "late but fine"
        assert client.retries == 1


def test_concurrency_limit_holds():
    with FakeOpenAI(lambda messages: "ok") as srv:
        srv.delays = [0.05] * 8
        client = OpenAICompatibleChatModel(srv.url, "SCALEENV_TEST_NO_KEY", concurrency=2)
        threads = [threading.Thread(target=client.complete, args=(_req(),)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert srv.count() == 8 and srv.max_inflight <= 2


def test_missing_key_without_base_url_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("SCALEENV_TEST_NO_KEY", raising=False)
    client = OpenAICompatibleChatModel(None, "SCALEENV_TEST_NO_KEY")
    with pytest.raises(LLMError, match="SCALEENV_TEST_NO_KEY"):
        client.complete(_req())


def _req():
    from scaleenv.llm.base import ChatRequest

    return ChatRequest(model="m", messages=MSGS, role="code")

"""The openai agent and the openai user through the real ``openai`` SDK, against a local HTTP server
that speaks the chat-completions protocol (no network): gold-chain play, parallel tool calls, role
flipping for the user model, a malformed tool call, an endpoint error and a timeout."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("openai")

from scaleenv.cli import app  # noqa: E402
from scaleenv.env.agents import AgentOptions  # noqa: E402
from scaleenv.env.users import UserOptions  # noqa: E402
from scaleenv.formats.trajectory import STOP  # noqa: E402
from scaleenv.run.rollout import RolloutConfig, run_rollout  # noqa: E402
from scaleenv.synth.build import BuildConfig, prepare_out, run_build  # noqa: E402
from scaleenv.tools.chain import resolve_args  # noqa: E402
from scaleenv.universe import Universe  # noqa: E402

runner = CliRunner()


class FakeOpenAI:
    """A chat-completions endpoint whose replies come from ``brain(request) -> message | ("sleep", s) |
    ("status", code)``. Records every request."""

    def __init__(self, brain):
        self.brain = brain
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with outer.lock:
                    outer.requests.append({"path": self.path, "body": body})
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                reply = outer.brain(body)
                if isinstance(reply, tuple) and reply[0] == "sleep":
                    time.sleep(reply[1])
                    return self._send(200, _completion(body, {"role": "assistant", "content": "late"}))
                if isinstance(reply, tuple) and reply[0] == "status":
                    return self._send(reply[1], {"error": {"message": "injected failure", "type": "server_error"}})
                return self._send(200, _completion(body, reply))

            def _send(self, code, payload):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def bodies(self, model: str) -> list[dict]:
        return [r["body"] for r in self.requests if r["body"].get("model") == model]


def _completion(body, message):
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("openai") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care"], tasks_per_domain=3)
    prepare_out(cfg)
    run_build(cfg)
    return out


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def _task_for(body, tasks):
    """Which task a conversation belongs to: the one whose tools the request offers and whose goals
    the first user message (solo request or the user's opening) mentions most fully."""
    first = next(m["content"] for m in body["messages"] if m["role"] == "user").replace("[ask me]", "")
    offered = {t["function"]["name"] for t in body.get("tools", [])}
    pool = [t for t in tasks if set(t.tools) <= offered] or list(tasks)

    def said(t):
        return sum(len(g) for g in t.user_profile.goals if g[:25] in first)

    best = max(pool, key=said)
    if said(best):
        return best
    persona = first.split(".")[0]
    return next(t for t in pool if t.user_profile.persona.replace("You are", "").strip(" .") in persona)


def gold_agent_brain(tasks, malformed_task=None, parallel_first=False):
    """Plays a task's gold chain from the conversation (outputs read from the tool messages), then
    states the answer facts; optionally sends the first two calls in one message."""

    def brain(body):
        task = _task_for(body, tasks)
        outputs = [json.loads(m["content"]) for m in body["messages"]
                   if m["role"] == "tool" and m["tool_call_id"].startswith("call_")]
        n = len(outputs)
        chain = task.gold_chain
        if task.id == malformed_task:
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "bad", "type": "function", "function": {"name": chain[0].tool, "arguments": '{"full_name": '}}]}
        opening = next((str(m.get("content")) for m in body["messages"] if m["role"] == "user"), "")
        talking = not opening.startswith("Request from")  # a solo request (nobody answers a question)
        asked = [m.get("content") for m in body["messages"] if m["role"] == "assistant"]
        if talking and n < len(chain) and chain[n].purpose == "goal":
            args = resolve_args(chain[n], outputs, n)
            shown = ", ".join(f"{k} {v}" for k, v in sorted(args.items()))
            proposal = f"Shall I go ahead with step {n}: {chain[n].tool.replace('_', ' ')} ({shown})?"
            if proposal not in asked:  # the policy: a yes to a proposal naming the change first
                return {"role": "assistant", "content": proposal}
        if n < len(chain):
            calls = [{"id": f"call_{n}", "type": "function",
                      "function": {"name": chain[n].tool, "arguments": json.dumps(resolve_args(chain[n], outputs, n))}}]
            if parallel_first and n == 0:  # a second, harmless read in the same message
                read = next(t["function"]["name"] for t in body["tools"]
                            if t["function"]["name"].startswith(("get_", "list_", "find_", "count_")))
                calls.append({"id": "extra_0", "type": "function", "function": {"name": read, "arguments": "{}"}})
            return {"role": "assistant", "content": None, "tool_calls": calls}
        facts = " ".join(f"The {f.name} is {f.value}." for f in task.answer_facts) or "All done."
        if any(m["role"] == "assistant" and m.get("content") == facts for m in body["messages"]):
            return {"role": "assistant", "content": STOP}
        return {"role": "assistant", "content": facts}

    return brain


def user_brain(body):
    """The user model: opens with the goals from its system prompt; stops once the agent reports."""
    system = body["messages"][0]["content"]
    turns = body["messages"][1:]
    if len(turns) == 1:
        goals = [line[2:] for line in system.splitlines() if line.startswith("- ")]
        return {"role": "assistant", "content": " ".join(goals)}
    if str(turns[-1].get("content", "")).startswith("Shall I go ahead"):
        return {"role": "assistant", "content": "Yes, please go ahead."}
    return {"role": "assistant", "content": f"Great, thanks. {STOP}"}


def router(agent_brain, user_brain_fn=user_brain):
    def brain(body):
        return user_brain_fn(body) if body["model"] == "user-model" else agent_brain(body)

    return brain


def _cfg(universe, tmp_path, url, **kw):
    opts = {"base_url": url, "timeout": 5.0, "max_retries": 0}
    return RolloutConfig(universe=universe, out=tmp_path / "results.json",
                         agent_options=AgentOptions(**{**opts, **kw.pop("agent_opts", {})}),
                         user_options=UserOptions(**opts), **kw)


def test_openai_agent_solo_plays_gold_chain_with_parallel_calls(universe, tmp_path):
    tasks = Universe(universe).tasks()
    with FakeOpenAI(router(gold_agent_brain(tasks, parallel_first=True))) as srv:
        res = run_rollout(_cfg(universe, tmp_path, srv.url, agent="openai:agent-model", mode="solo",
                               agent_opts={"system_prompt": "Custom prompt for {domain}.", "temperature": 0.0}),
                          keep_records=True)
        bodies = srv.bodies("agent-model")
    assert res["avg_at_k"] == {"1": 1.0} and res["errors"] == 0
    assert {r["termination"] for r in res["records"]} == {"agent_stop"}
    first = bodies[0]
    assert first["messages"][0] == {"role": "system", "content": "Custom prompt for pet care."}
    assert first["tools"] and first["tools"][0]["type"] == "function" and first["parallel_tool_calls"] is True
    assert first["temperature"] == 0.0
    parallel = [r for r in res["records"] if any(len(m.get("tool_calls") or []) == 2 for m in r["messages"])]
    assert parallel, "the fake endpoint sent two tool calls in one message"
    rec = parallel[0]
    i = next(i for i, m in enumerate(rec["messages"]) if len(m.get("tool_calls") or []) == 2)
    assert [m["role"] for m in rec["messages"][i + 1 : i + 3]] == ["tool", "tool"]
    assert [m["tool_call_id"] for m in rec["messages"][i + 1 : i + 3]] == ["call_0", "extra_0"]
    assert rec["usage"]["agent_prompt_tokens"] > 0


def test_openai_agent_and_openai_user_converse(universe, tmp_path):
    tasks = Universe(universe).tasks()
    with FakeOpenAI(router(gold_agent_brain(tasks))) as srv:
        res = run_rollout(_cfg(universe, tmp_path, srv.url, agent="openai:agent-model", user="openai:user-model"),
                          keep_records=True)
        user_bodies = srv.bodies("user-model")
    assert res["avg_at_k"] == {"1": 1.0}
    assert {r["termination"] for r in res["records"]} == {"user_done"}
    rec = res["records"][0]
    assert rec["user"] == "openai:user-model" and rec["messages"][1]["role"] == "user"
    assert rec["usage"]["user_completion_tokens"] > 0
    task = next(t for t in tasks if t.id == rec["task_id"])
    # requests arrive in whatever order the episodes run: find this record's user by its own profile
    systems = [b["messages"][0]["content"] for b in user_bodies]
    mine = [s for s in systems if task.user_profile.persona in s and all(g in s for g in task.user_profile.goals)]
    assert mine, "no user request carries this task's persona and goals"
    system = mine[0]
    assert STOP in system
    for fact in task.user_profile.withheld:
        assert "ONLY if the agent asks" in system and f"{fact}: " in system.split("ONLY if the agent asks")[1]
    # roles are flipped for the user model: the agent's text arrives as "user", its own lines as "assistant"
    last = max((b for b in user_bodies), key=lambda b: len(b["messages"]))
    roles = [m["role"] for m in last["messages"][1:]]
    assert roles[0] == "user" and roles[1] == "assistant" and roles[-1] == "user"


def test_malformed_tool_call_is_a_tool_error_and_endpoint_error_ends_the_episode(universe, tmp_path):
    tasks = Universe(universe).tasks()
    gold = gold_agent_brain(tasks, malformed_task=tasks[0].id)

    def brain(body):
        if _task_for(body, tasks).id == tasks[1].id:
            return ("status", 500)
        return gold(body)

    with FakeOpenAI(router(brain)) as srv:
        res = run_rollout(_cfg(universe, tmp_path, srv.url, agent="openai:agent-model", mode="solo"),
                          keep_records=True)
    by_task = {r["task_id"]: r for r in res["records"]}
    bad = by_task[tasks[0].id]  # a malformed call is the policy's mistake: a tool error it sees, not an outage
    assert bad["termination"] != "error" and bad["error"] is None and bad["tool_errors"] >= 1
    i = next(i for i, m in enumerate(bad["messages"]) if m.get("tool_calls"))
    assert bad["messages"][i]["tool_calls"][0]["function"]["arguments"] == '{"full_name": '
    assert json.loads(bad["messages"][i + 1]["content"])["error"] == "invalid_arguments"
    down = by_task[tasks[1].id]
    assert down["termination"] == "error" and "HTTP 500" in down["error"]
    ok = by_task[tasks[2].id]
    assert ok["termination"] == "agent_stop" and ok["reward"]["score"] == 1.0
    assert res["errors"] == 1 and res["num_episodes"] == 3 and res["terminations"]["error"] == 1


def test_timeouts_end_the_episode_and_the_run_goes_on(universe, tmp_path):
    tasks = Universe(universe).tasks()
    gold = gold_agent_brain(tasks)

    def slow_user(body):
        return ("sleep", 3.0)

    with FakeOpenAI(router(gold, slow_user)) as srv:
        cfg = _cfg(universe, tmp_path, srv.url, agent="openai:agent-model", user="openai:user-model")
        cfg.user_options.timeout = 0.3
        res = run_rollout(cfg, keep_records=True)
    assert res["num_episodes"] == 3 and res["errors"] == 3
    for rec in res["records"]:
        assert rec["termination"] == "error" and "timeout" in rec["error"] and "user" in rec["error"]
        assert [m["role"] for m in rec["messages"]] == ["system"]  # the user never opened: nothing was said
    with FakeOpenAI(router(lambda body: ("sleep", 3.0))) as srv:
        cfg = _cfg(universe, tmp_path / "a", srv.url, agent="openai:agent-model", mode="solo", concurrency=3)
        cfg.agent_options.timeout = 0.3
        res = run_rollout(cfg, keep_records=True)
    assert {r["termination"] for r in res["records"]} == {"error"}
    assert all("agent timeout" in r["error"] for r in res["records"])


def test_cli_rollout_against_local_endpoint(universe, tmp_path):
    tasks = Universe(universe).tasks()
    with FakeOpenAI(router(gold_agent_brain(tasks))) as srv:
        res = runner.invoke(app, ["rollout", str(universe), "--agent", "openai:agent-model", "--user",
                                  "openai:user-model", "--base-url", srv.url, "--out", str(tmp_path / "r.json"),
                                  "--max-retries", "0", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["avg_at_k"] == {"1": 1.0}
    assert out["info"]["agent_info"]["llm"] == "agent-model"
    assert out["info"]["user_info"]["llm_args"]["base_url"] == srv.url
    assert "sk-test" not in (tmp_path / "r.json").read_text()

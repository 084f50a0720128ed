"""`scaleenv relay`: a local OpenAI-compatible endpoint that queues each request to a file and waits
for a hand-written answer; here the "hand" is a thread (or the scripted pet-care answers)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from typer.testing import CliRunner

from llm_fixture import PetCareScript
from scaleenv.cli import app
from scaleenv.llm.base import ChatRequest
from scaleenv.llm.client import OpenAICompatibleChatModel
from scaleenv.llm.relay import Queue, RelayServer, answer, next_request, stats

runner = CliRunner()
MSGS = [{"role": "system", "content": "Role: domain\nYou design domains."}, {"role": "user", "content": "pets"}]


def _wait_for(fn, limit: float = 20.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError("nothing arrived")


def test_a_request_waits_for_its_hand_written_answer(tmp_path):
    q = tmp_path / "q"
    with RelayServer(q, port=0, poll=0.02) as srv:
        client = OpenAICompatibleChatModel(srv.url, "SCALEENV_TEST_NO_KEY", max_retries=0)
        out: dict = {}
        th = threading.Thread(target=lambda: out.update(r=client.complete(ChatRequest("m", MSGS, role="domain"))))
        th.start()
        n, prompt = _wait_for(lambda: next_request(q))
        assert n == 1 and "role: domain" in prompt and "===== user =====\npets" in prompt
        res = runner.invoke(app, ["relay", "next", str(q)])
        assert res.exit_code == 0 and res.output.startswith("REQUEST 1\n")
        (tmp_path / "a.txt").write_text('{"description": "A vet clinic.", "keywords": []}')
        res = runner.invoke(app, ["relay", "answer", str(q), "1", str(tmp_path / "a.txt")])
        assert res.exit_code == 0, res.output
        th.join(20)
        assert out["r"].text == '{"description": "A vet clinic.", "keywords": []}' and out["r"].prompt_tokens > 0
        # the same request again (a retry) is answered from the queue, not queued twice
        again = client.complete(ChatRequest("m", MSGS, role="domain"))
        assert again.text == out["r"].text and Queue(q).numbers() == [1]
    res = runner.invoke(app, ["relay", "answer", str(q), "1", str(tmp_path / "a.txt")])
    assert res.exit_code == 2 and "already answered" in res.output
    res = runner.invoke(app, ["relay", "answer", str(q), "7", str(tmp_path / "a.txt")])
    assert res.exit_code == 2 and "no request 7" in res.output
    assert runner.invoke(app, ["relay", "next", str(q)]).exit_code == 1
    st = json.loads(runner.invoke(app, ["relay", "stats", str(q), "--json"]).output)
    assert st["requests"] == st["answered"] == 1 and st["pending"] == 0
    assert st["by_role"]["domain"]["requests"] == 1 and st["completion_tokens"] > 0


def test_bad_requests_get_a_clear_error(tmp_path):
    import urllib.error
    import urllib.request

    with RelayServer(tmp_path / "q", port=0) as srv:
        req = urllib.request.Request(srv.url + "/chat/completions", data=b'{"messages": []}', method="POST")
        try:
            urllib.request.urlopen(req, timeout=5)
            raise AssertionError("accepted")
        except urllib.error.HTTPError as e:
            assert e.code == 400 and b"messages" in e.read()
    assert stats(tmp_path / "q")["requests"] == 0


def test_a_whole_build_runs_through_the_relay(tmp_path):
    """`scaleenv build --llm` against the relay, each prompt answered from the files alone."""
    q = tmp_path / "q"
    script = PetCareScript()
    stop = threading.Event()

    def hand() -> None:
        while not stop.is_set():
            for n in Queue(q).pending():
                body = Queue(q).request(n)["body"]
                try:
                    text = script(body["messages"])
                except Exception:  # noqa: BLE001 - a question the script cannot answer gets junk back
                    text = "?"
                answer(q, n, text)
            time.sleep(0.02)

    cfg = tmp_path / "llm.json"
    cfg.write_text(json.dumps({"backoff": 0.01, "concurrency": 4, "timeout": 600, "max_retries": 0,
                               "synth": {"debug_rounds": 1, "best_of_k": 3,
                                         "sandbox": {"cpu_seconds": 1, "wall_seconds": 1.5, "memory_mb": 256}}}))
    with RelayServer(q, port=0, poll=0.02) as srv:
        th = threading.Thread(target=hand, daemon=True)
        th.start()
        try:
            res = runner.invoke(app, ["build", "--llm", "relay", "--base-url", srv.url, "--api-key-env", "NO_KEY_X",
                                      "--domain", "pet care", "--tasks-per-domain", "1", "--out", str(tmp_path / "u"),
                                      "--llm-config", str(cfg), "--quiet"])
        finally:
            stop.set()
    assert res.exit_code == 0, res.output
    st = stats(q)
    tok = json.loads((Path(tmp_path) / "u" / "domains" / "pet_care" / "tokens.json").read_text())
    assert st["pending"] == 0 and st["requests"] == tok["total"]["calls"]
    assert st["by_role"]["code"]["requests"] == tok["by_role"]["code"]["calls"]

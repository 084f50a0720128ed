"""Issue 16's token target: the chains of several task attempts come from one request (the tools,
tables, policy and rows said once), its tokens split over the tasks it served; an unusable chain of
the batch goes back alone and rejects only its own task; replay and the cache still work."""

from __future__ import annotations

import re

from llm_fixture import CHAINS, DROPPED, TOOLS, PetCareScript, database, implementation
from scaleenv.formats.domain import DomainSpec
from scaleenv.llm.accounting import TokenLedger
from scaleenv.llm.base import estimate_tokens, messages_text
from scaleenv.llm.cache import ResponseCache
from scaleenv.llm.replay import Replayer
from scaleenv.llm.scripted import ScriptedChatModel
from scaleenv.llm.session import LLMConfig, LLMSession
from scaleenv.synth.graph.build import build_graph
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.design import DomainProfile, parse_database
from scaleenv.synth.llm.implement import make_tool
from scaleenv.synth.llm.seedrows import seed_world
from scaleenv.synth.llm.tasks import _attempt_builder, chain_blocks
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.generate import TaskRejected

PROFILE = DomainProfile("pet_care", "Pet Care", "A veterinary clinic's back office.", ["pets"])


def _ctx() -> DomainContext:
    design, problems = parse_database(database(), TOOLS, PROFILE, SynthConfig(min_tables=1))
    assert not problems
    tools = [make_tool(t, implementation(t["name"], first=False), design.param_columns,
                       design.tool_tables[t["name"]])[0] for t in TOOLS if t["name"] not in DROPPED]
    spec = DomainSpec(name="pet_care", tables=design.tables, tools=tools, meta={"title": "Pet Care", **design.meta})
    return DomainContext(spec, seed_world(spec).snapshot(), build_graph(spec), {})


def _session(responder=None, cache=None):
    model = ScriptedChatModel(responder or PetCareScript())
    return model, LLMSession(model, LLMConfig(model="scripted", concurrency=1), cache=cache)


def _builders(ctx, session, attempts, cfg):
    ask = session.scoped("pet_care")
    return [_attempt_builder(ctx, ask, 0, a, cfg, None, None)[0] for a in attempts]


def test_one_request_proposes_the_chains_of_a_window_of_attempts():
    ctx = _ctx()
    model, session = _session()
    builders = _builders(ctx, session, range(4), SynthConfig(chain_batch=4))
    chains = [b.write_chain(b.plan()[0]) for b in builders]
    asked = [r for r in model.requests if r.role == "chain"]
    assert len(asked) == 1  # four attempts, one request
    prompt = asked[0].messages[1]["content"]
    assert re.findall(r"^Task (\d+): goal tool (\w+)", prompt, re.M) == [
        (str(b.attempt), b.plan()[2].name) for b in builders]
    tools = prompt.split("goal tools first:\n")[1].split("\n\n")[0].splitlines()
    names = [t.split("(")[0] for t in tools]
    assert len(names) == len(set(names))  # each tool said once
    assert prompt.count("Every record you look up must leave a trace") == 1
    for b, calls in zip(builders, chains, strict=True):
        assert [c.tool for c in calls] == [ln.split("=", 1)[1].split("(")[0].strip()
                                           for ln in CHAINS[b.attempt % len(CHAINS)].splitlines()]
    # a window further on is another request
    _builders(ctx, session, [5], SynthConfig(chain_batch=4))[0].write_chain("medium")
    assert model.count("chain") == 2


def test_the_batched_request_costs_much_less_than_its_single_requests():
    ctx = _ctx()
    model, session = _session()
    for b in _builders(ctx, session, range(4), SynthConfig(chain_batch=4)):
        b.write_chain(b.plan()[0])
    batch = estimate_tokens(messages_text(model.requests[-1].messages))
    single, one = _session()
    for b in _builders(ctx, one, range(4), SynthConfig(chain_batch=1)):
        b.write_chain(b.plan()[0])
    singles = [r for r in single.requests if r.role == "chain"]
    assert len(singles) == 4 and all("Task number: " in r.messages[1]["content"] for r in singles)
    total = sum(estimate_tokens(messages_text(r.messages)) for r in singles)
    assert batch < 0.6 * total, (batch, total)


def test_the_batch_tokens_are_split_over_the_tasks_it_served():
    ctx = _ctx()
    model, session = _session()
    for b in _builders(ctx, session, range(4), SynthConfig(chain_batch=4)):
        b.write_chain(b.plan()[0])
    req = model.requests[-1]
    spent = estimate_tokens(messages_text(req.messages))
    summary = session.ledger.domain_summary("pet_care")
    assert summary["by_role"]["chain"]["calls"] == 1
    shares = [summary["by_task"][f"pet_care/{a:05d}"] for a in range(4)]
    assert sum(s["prompt_tokens"] for s in shares) == spent == summary["by_role"]["chain"]["prompt_tokens"]
    assert max(s["prompt_tokens"] for s in shares) - min(s["prompt_tokens"] for s in shares) <= 1
    assert [s["calls"] for s in shares] == [1, 0, 0, 0]  # the calls add up to the requests made
    assert summary["phase1"]["total_tokens"] == 0  # nothing of it lands outside the tasks


def test_ledger_split_keeps_every_token():
    led = TokenLedger()
    led.record_shared("chain", "d", ["d/1", "d/2", "d/3"], 10, 5, cached=False)
    s = led.domain_summary("d")
    assert [s["by_task"][t]["prompt_tokens"] for t in ("d/1", "d/2", "d/3")] == [4, 3, 3]
    assert [s["by_task"][t]["completion_tokens"] for t in ("d/1", "d/2", "d/3")] == [2, 2, 1]
    assert s["total"]["total_tokens"] == 15 and s["phase2"]["total_tokens"] == 15 and s["phase2"]["calls"] == 1


class _OneBadChain(PetCareScript):
    """Task 1's chain in the batch makes no change; sent back alone it is fixed (``fix``) or not."""

    def __init__(self, fix: bool):
        super().__init__()
        self.fix = fix

    def __call__(self, request):
        text = super().__call__(request)
        role = request.messages[0]["content"].split("\n")[0]
        if role == "Role: chain" and len(request.messages) == 2:
            return re.sub(r"(# task 1\n)[^`]*", r'\1s0 = find_owner_by_email(email="x@example.com")\n', text)
        if role == "Role: chain" and not self.fix:
            return '```python\ns0 = find_owner_by_email(email="x@example.com")\n```'
        return text


def test_an_unusable_chain_of_the_batch_goes_back_alone_and_rejects_only_its_task():
    ctx = _ctx()
    for fix in (True, False):
        model, session = _session(_OneBadChain(fix))
        b0, b1, b2 = _builders(ctx, session, [0, 1, 2], SynthConfig(chain_batch=4))
        assert b0.write_chain("medium") and b2.write_chain("medium")
        if fix:
            assert [c.tool for c in b1.write_chain("medium")][-1] == "update_owner_phone"
        else:
            try:
                b1.write_chain("medium")
                raise AssertionError("the unusable chain was taken")
            except TaskRejected as e:
                assert e.reason.value == "chain_unusable"
        repairs = [r for r in model.requests if r.role == "chain" and len(r.messages) > 2]
        assert repairs and "chain for task 1 could not be used" in repairs[0].messages[3]["content"]
        assert "at least one write" in repairs[0].messages[3]["content"]
        assert len(repairs) == (1 if fix else 2)  # the repair rounds of one chain request
        summary = session.ledger.domain_summary("pet_care")
        own = summary["by_task"]["pet_care/00001"]
        assert own["calls"] == len(repairs)  # the repairs are task 1's alone
        assert summary["by_task"]["pet_care/00000"]["calls"] == 1 and session.repairs["chain"] >= 1


def test_a_rerun_takes_the_batch_from_the_cache(tmp_path):
    ctx = _ctx()
    cache = ResponseCache(tmp_path / "cache")
    model, session = _session(cache=cache)
    for b in _builders(ctx, session, range(3), SynthConfig(chain_batch=4)):
        b.write_chain(b.plan()[0])
    again, session2 = _session(cache=ResponseCache(tmp_path / "cache"))
    b = _builders(ctx, session2, [2], SynthConfig(chain_batch=4))[0]
    assert [c.tool for c in b.write_chain(b.plan()[0])]
    assert again.count("chain") == 0 and session2.ledger.cache_hits == 1


def test_chain_blocks_reads_the_task_lines():
    text = "Here:\n```python\n# task 4\ns0 = a()\n```\n```python\n# Task 5\ns0 = b()\n```\n```python\ns0 = c()\n```"
    assert chain_blocks(text) == {4: "# task 4\ns0 = a()\n", 5: "# Task 5\ns0 = b()\n"}


def _body(user):
    return {"model": "relay", "messages": [{"role": "system", "content": "Role: chain\n..."},
                                           {"role": "user", "content": user}]}


def test_replay_answers_a_batched_chain_request_from_single_or_batched_answers(tmp_path):
    import threading

    from scaleenv.llm.relay import Queue, answer

    q = Queue(tmp_path / "old")
    q.dir.mkdir()
    lock, index = threading.Lock(), {}
    for user, text in [("Task number: 0\n...", "```python\ns0 = a()\n```"),
                       ("Task number: 1\n...", "```python\ns0 = b()\n```"),
                       ("Tasks: 4, 5\n...", "```python\n# task 4\ns0 = d()\n```\n```python\n# task 5\ns0 = e()\n```")]:
        answer(q.dir, q.enqueue(_body(user), lock, index), text)
    r = Replayer.from_queue(q.dir)
    got = r.answer_for("chain", _body("Domain: X\nTasks: 0, 1, 2, 3 (one chain each)\n..."))
    assert chain_blocks(got) == {0: "# task 0\ns0 = a()\n", 1: "# task 1\ns0 = b()\n"}
    assert r.counts["nearest"] == 1  # tasks 2 and 3 were never answered
    assert r.answer_for("chain", _body("Task number: 5\n...")) == "```python\ns0 = e()\n```"
    got = r.answer_for("chain", _body("Tasks: 4\n..."))
    assert chain_blocks(got) == {4: "# task 4\ns0 = d()\n"} and r.counts["exact"] == 2


# --- a tool's code and its tests in one request -----------------------------------------------------

def _implementer(cfg):
    from scaleenv.synth.llm.implement import ToolImplementer

    design, problems = parse_database(database(), TOOLS, PROFILE, SynthConfig(min_tables=1))
    assert not problems
    spec = DomainSpec(name="pet_care", tables=design.tables, meta={"title": "Pet Care", **design.meta})
    model = ScriptedChatModel(PetCareScript())
    session = LLMSession(model, LLMConfig(model="scripted", concurrency=1))
    imp = ToolImplementer(session.scoped("pet_care"), "Pet Care", spec, seed_world(spec, 0).snapshot(),
                          design.tool_tables, design.param_columns, cfg)
    return model, imp


def test_one_request_writes_a_tools_code_and_its_tests():
    model, imp = _implementer(SynthConfig(min_tables=1))
    abstract = next(t for t in TOOLS if t["name"] == "book_appointment")
    built = imp.build(abstract)
    assert built.admitted
    assert [r.role for r in model.requests] == ["code"]  # no test request
    prompt = model.requests[0].messages[1]["content"]
    assert prompt.count("book_appointment (write):") == 1 and '"code" and "tests"' in prompt
    touched = prompt.split("Tables it touches (the implementation reads and writes only these):\n")[1]
    touched = touched.split("\n\n")[0]
    tables = imp.tool_tables["book_appointment"]
    assert {line.split(":")[0] for line in touched.splitlines() if ":" in line} >= set(tables)
    # the parents a fixture row links to are shown apart, and get fresh ids too
    parents = {c.foreign_key.split(".")[0] for t in tables for c in imp.spec.table(t).columns if c.foreign_key}
    parents -= set(tables)
    assert parents and all(f"\n{p}: id text PK" in prompt.split("Tables its rows link to")[1] for p in parents)
    fresh = prompt.split("counting up from: ")[1].split(".\nThe clock")[0]
    assert {x.split(" ")[0] for x in fresh.split(", ")} >= set(tables) | parents
    # the example asks for every required argument of its own tool
    example = prompt.split('"tests": {"fixture"')[1]
    assert all(f'"{p}"' in example.split('"kind": "positive"')[1].split("}")[0]
               for p in ("pet_id", "vet_id", "scheduled_for", "reason"))


def test_the_merged_request_costs_less_than_the_code_and_test_requests():
    merged, imp = _implementer(SynthConfig(min_tables=1))
    apart, imp2 = _implementer(SynthConfig(min_tables=1, code_with_tests=False))
    for t in TOOLS[:6]:
        imp.build(t)
        imp2.build(t)
    first = [r for r in merged.requests if len(r.messages) == 2 and r.role == "code"]
    pairs = [r for r in apart.requests if len(r.messages) == 2 and r.role in ("code", "test")]
    assert len(first) == 6 and len(pairs) == 12
    a = sum(estimate_tokens(messages_text(r.messages)) for r in first)
    b = sum(estimate_tokens(messages_text(r.messages)) for r in pairs)
    # the tool and its tables are said once (pet care's tools are small: 10% on relay8's bike share)
    assert a < b, (a, b)


def test_a_merged_reply_without_its_tests_is_sent_back():
    model, imp = _implementer(SynthConfig(min_tables=1))
    import json as _json

    from llm_fixture import implementation

    model.push("code", _json.dumps({"code": implementation("get_pet", first=False)}))
    built = imp.build(next(t for t in TOOLS if t["name"] == "get_pet"))
    assert built.admitted and model.count("code") == 2 and model.count("test") == 0
    assert '"tests"' in model.requests[1].messages[-1]["content"]


def test_replay_composes_code_and_test_answers_for_a_merged_request(tmp_path):
    import json as _json
    import threading

    from scaleenv.llm.relay import Queue, answer

    q = Queue(tmp_path / "old")
    q.dir.mkdir()
    lock, index = threading.Lock(), {}

    def body(role, user):
        return {"model": "relay", "messages": [{"role": "system", "content": f"Role: {role}\n..."},
                                               {"role": "user", "content": user}]}

    for role, user, text in [("code", "Tool name: get_pet\nold", '{"implementation": "sql",\n "effects": []}'),
                             ("test", "Tool name: get_pet\nold", '```json\n{"cases": [{"kind": "positive"}]}\n```')]:
        answer(q.dir, q.enqueue(body(role, user), lock, index), text)
    r = Replayer.from_queue(q.dir)
    got = r.answer_for("code", body("code", 'Tool name: get_pet\nReply with ... "code" and "tests".'))
    assert _json.loads(got) == {"code": {"implementation": "sql", "effects": []},
                                "tests": {"cases": [{"kind": "positive"}]}}
    assert '"implementation": "sql",\n "effects": []' in got  # as the reader wrote it
    assert r.counts["exact"] == 2


# --- the states of a window's attempts in one request ------------------------------------------------

def _chain_and_state(builders):
    for b in builders:
        b.chain = b.write_chain(b.plan()[0])
        b.write_state(b.plan()[1])


def test_one_request_writes_the_states_of_a_chain_window():
    ctx = _ctx()
    model, session = _session()
    builders = _builders(ctx, session, range(3), SynthConfig(chain_batch=4))
    _chain_and_state(builders)
    states = [r for r in model.requests if r.role == "state"]
    first = states[0].messages[1]["content"]
    assert first.startswith("Domain: Pet Care\nTasks: 0, 1, 2, 3 (one set of rows each")
    assert first.count("\nReference chain:\n```python\n") == 4 and first.count("never reuse an example") == 1
    # task 1's part (the invoice of the wrong amount) fails and goes back alone; 0 and 2 take theirs
    assert len(states) == 2 and "chain of task 1 on its rows failed" in states[1].messages[-1]["content"]
    assert [b.record["state_rounds"] for b in builders] == [1, 2, 1]
    assert all(b.record.get("state_batched") for b in builders)
    for b in builders:
        assert b._executes() == "" and b.new_rows  # each task's own rows run its own chain
    by_task = session.ledger.domain_summary("pet_care")["by_task"]
    assert by_task["pet_care/00001"]["calls"] == 1  # its repair (the shared requests count for task 0)
    assert by_task["pet_care/00000"]["calls"] == 2 and by_task["pet_care/00003"]["total_tokens"] > 0


def test_a_chain_sent_back_alone_gets_its_state_alone():
    ctx = _ctx()
    model, session = _session(_OneBadChain(fix=True))
    builders = _builders(ctx, session, range(3), SynthConfig(chain_batch=4))
    _chain_and_state(builders)
    states = [r.messages[1]["content"] for r in model.requests if r.role == "state" and len(r.messages) == 2]
    assert len(states) == 2 and "\nTasks: 0, 2, 3 " in states[0]  # task 1's chain came from its repair
    assert states[1].startswith("Domain: Pet Care\n\nReference chain:") and "liam.ortiz" in states[1]
    assert [bool(b.record.get("state_batched")) for b in builders] == [True, False, True]


def test_replay_composes_batched_state_answers(tmp_path):
    import json as _json
    import threading

    from scaleenv.llm.relay import Queue, answer

    q = Queue(tmp_path / "old")
    q.dir.mkdir()
    lock, index = threading.Lock(), {}
    single = {"model": "relay", "messages": [{"role": "system", "content": "Role: state\n..."}, {
        "role": "user", "content": "Domain: X\n\nReference chain:\n```python\ns0 = a(x='1')\n```\nold"}]}
    answer(q.dir, q.enqueue(single, lock, index), '{"rows": {"t": [{"id": "T-1"}]}}')
    r = Replayer.from_queue(q.dir)
    batch = {"model": "relay", "messages": [{"role": "system", "content": "Role: state\n..."}, {
        "role": "user", "content": 'Domain: X\nTasks: 4, 5 (one set of rows each)\n\nTask 4: fresh ids ...\n'
                                   'Reference chain:\n```python\ns0 = a(x="1")\n```\n\nTask 5: ...\n'
                                   'Reference chain:\n```python\ns0 = b()\n```\n'}]}
    got = r.answer_for("state", batch)
    assert _json.loads(got) == {"tasks": {"4": {"rows": {"t": [{"id": "T-1"}]}}}} and r.counts["nearest"] == 1

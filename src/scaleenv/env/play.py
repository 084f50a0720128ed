"""``scaleenv play``: one task lived as the agent, in the terminal, through :class:`ToolEnv`.

Commands, one per line (typed, or piped on stdin)::

    tools                  list the task's tools
    tool NAME              one tool's description and parameters
    call NAME {JSON}       call a tool with JSON arguments (``{}`` or nothing for none)
    say TEXT               send TEXT to the simulated user and read the reply (\n for a line break)
    request                show the user's opening request again
    policy                 the agent's instructions: the system prompt with the domain's policy
    help                   this list
    done                   end the episode: the reward, its diff, and the gold chain

Input that ends before ``done`` (and before the user or the turn limit ends the episode) leaves the
episode unscored: no reward and no diff are shown, so a player who replays a growing script learns
nothing of the expected outcome before deciding it is finished. A person (or a helper piping lines)
judges a task by doing it: the user sees only what is said, the reward only what the world became.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scaleenv.env.core import Termination, ToolEnv, make
from scaleenv.formats.task import chain_to_python
from scaleenv.formats.trajectory import STOP

HELP = __doc__.split("::", 1)[1].split("Input that ends", 1)[0].strip("\n")
"""The command list (shown by ``help`` and in ``scaleenv play --help``)."""


class Player:
    """Reads commands, acts on a :class:`ToolEnv`, prints what happens."""

    def __init__(self, env: ToolEnv, console: Console, *, show_gold: bool = True, echo: bool = False,
                 save: Path | None = None):
        self.env = env
        self.save = save
        self.console = console
        self.show_gold = show_gold
        self.echo = echo
        self._n = 0

    def start(self) -> None:
        obs, _ = self.env.reset()
        task = self.env.task
        self.console.print(f"[bold]Task {escape(task.id)}[/bold] ({len(self.env.tool_names)} tools; "
                           "type [bold]help[/bold] for the commands)")
        for m in obs:
            if m["role"] == "user":
                self._user(m["content"])

    def _user(self, text: str) -> None:
        ended = STOP in text
        self.console.print(f"[bold cyan]user:[/bold cyan] {escape(text.replace(STOP, '').strip())}")
        if ended:
            self.console.print("[dim](the user ended the conversation)[/dim]")

    def run(self, lines: Iterable[str]) -> dict[str, Any] | None:
        """Play until ``done`` or the end of the episode and return the reward; ``None`` when ``lines``
        ran out first (the episode is left unscored)."""
        self.start()
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if self.echo:
                self.console.print(f"[dim]> {escape(line)}[/dim]")
            if not self.command(line) or self.env.done:
                return self.finish()
        self.console.print("[yellow](input ended before done: the episode is not scored; end it with "
                           "done)[/yellow]")
        return None

    def command(self, line: str) -> bool:
        """Run one command line; ``False`` ends the episode."""
        verb, _, rest = line.partition(" ")
        verb, rest = verb.lower(), rest.strip()
        if verb in ("done", "quit", "exit"):
            return False
        if verb == "help":
            self.console.print(escape(HELP))
        elif verb == "tools":
            self.tools()
        elif verb == "tool":
            self.tool(rest)
        elif verb == "call":
            self.call(rest)
        elif verb == "say":
            self.say(rest)
        elif verb == "request":
            self._user(self.env.opening)
        elif verb == "policy":
            self.console.print(escape(self.env.system_prompt(user_tool=False)))
        else:
            self.console.print(f"[red]unknown command {escape(verb)!r}[/red]; type help")
        return True

    def tools(self) -> None:
        table = Table(show_lines=False)
        table.add_column("tool", no_wrap=True)  # a name cut short reads as another tool's name
        for header in ("kind", "parameters", "description"):
            table.add_column(header, overflow="fold")
        for schema in self.env.tool_schemas():
            fn = schema["function"]
            params = fn.get("parameters", {})
            required = set(params.get("required", []))
            names = [p + ("" if p in required else "?") for p in params.get("properties", {})]
            table.add_row(fn["name"], self.env.tool_kind(fn["name"]) or "-", ", ".join(names),
                          fn.get("description", ""))
        self.console.print(table)

    def tool(self, name: str) -> None:
        schema = next((s for s in self.env.tool_schemas() if s["function"]["name"] == name), None)
        if schema is None:
            self.console.print(f"[red]no tool named {escape(name)!r}[/red]; type tools")
            return
        self.console.print_json(json.dumps(schema["function"]))

    def call(self, rest: str) -> None:
        name, _, raw = rest.partition(" ")
        if not name:
            self.console.print("[red]usage: call NAME {JSON arguments}[/red]")
            return
        try:
            args = json.loads(raw) if raw.strip() else {}
        except ValueError as e:
            self.console.print(f"[red]arguments are not JSON: {escape(str(e))}[/red]")
            return
        if not isinstance(args, dict):
            self.console.print("[red]arguments must be a JSON object[/red]")
            return
        self._n += 1
        call_id = f"play_{self._n}"
        obs, *_ = self.env.step({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        for m in obs:
            if m["role"] == "tool":
                self._output(m["content"])

    def _output(self, content: str) -> None:
        try:
            self.console.print_json(content)
        except Exception:  # noqa: BLE001 - not JSON: show it as text
            self.console.print(escape(content))

    def say(self, text: str) -> None:
        if not text:
            self.console.print("[red]usage: say TEXT[/red]")
            return
        text = text.replace("\\n", "\n")  # one command per line: a line break in a message is written \n
        obs, *_ = self.env.step({"role": "assistant", "content": text})
        for m in obs:
            if m["role"] == "user":
                self._user(m["content"])

    def finish(self) -> dict[str, Any]:
        env = self.env
        reward = env.final_reward()
        if env.termination is None:
            env.termination = Termination.AGENT_STOP  # the player said done: the agent's stop, as the trajectory records
        why = env.termination.value
        colour = "green" if reward["success"] else "red"
        self.console.print(f"[bold {colour}]reward {reward['score']:.1f}[/bold {colour}] (episode ended: {why}; "
                           f"{env.steps} steps, {env.tool_calls} tool calls, {env.tool_errors} errors)")
        for line in reward.get("diff", []):
            self.console.print(f"  - {escape(line)}")
        if self.show_gold:
            self.console.print("[bold]gold chain:[/bold]")
            self.console.print(escape(chain_to_python(env.task.gold_chain)))
            for f in env.task.answer_facts:
                self.console.print(f"answer fact: {escape(f.name)} = {escape(repr(f.value))}")
        if self.save is not None:  # the whole conversation, to read back what the user was told and said
            self.save.parent.mkdir(parents=True, exist_ok=True)
            self.save.write_text(json.dumps(env.trajectory(agent="player").to_json(), indent=1) + "\n")
            self.console.print(f"[dim]episode saved to {escape(str(self.save))}[/dim]")
        return reward


def play(universe: str | Path, task_id: str, *, user: str = "scripted", lines: Iterable[str] | TextIO,
         console: Console | None = None, show_gold: bool = True, echo: bool = False, max_turns: int = 50,
         save: str | Path | None = None) -> dict[str, Any] | None:
    """Play ``task_id`` of ``universe`` with the commands in ``lines``; return the reward JSON (``None``
    when the lines end before ``done`` and the episode did not end by itself). ``save``: a file the
    scored episode is written to, as a trajectory (messages, tool calls, reward)."""
    console = console or Console(highlight=False)
    with make(universe, task_id, user=user, max_turns=max_turns) as env:
        return Player(env, console, show_gold=show_gold, echo=echo,
                      save=Path(save) if save is not None else None).run(lines)


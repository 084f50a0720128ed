"""TRL (``[trl]``, trl >= 1.10): ``environment_factory`` classes for ``GRPOTrainer``.

One class per tool set: each task offers its own tools (the task's exercisable set, the same tools a
rollout or the MCP server offers), plus ``send_message_to_user`` (the simulated user; what the agent
sends there is what answer facts are checked against), ``reset(**row)`` and ``get_reward()``::

    spec = ScaleEnvTRLSpec("universe/")
    trainer = GRPOTrainer(model, args=GRPOConfig(max_tool_calling_iterations=8, ...),
                          train_dataset=spec.train_dataset, environment_factory=spec.environment_factory)

TRL reads tools with ``inspect.getmembers(type(env))`` and derives each schema from the method's
signature and Google-style docstring. Each tool method *advertises* a typed signature (its
``__signature__`` and annotations: ``enum`` parameters as ``Literal[...]``, arrays as ``list[T]``,
optional parameters with a ``None`` default) but *accepts* ``**arguments``: whatever the model sends
reaches scaleenv, which validates it and answers a bad call with the same error text a rollout or
the MCP server gives. Tasks with different tool sets (several domains included) get a class each,
and rows are routed to theirs by the ``environment`` column. The reward is the task's, computed on
the episode's world, in the ``reward_shape`` asked for (``binary``, ``partial`` or ``dense``: the
dense return). Between training rounds, ``ScaleEnvTRLSpec.from_curriculum(DIR)`` takes the training
set ``scaleenv curriculum`` wrote as the dataset. Nothing here imports TRL: the classes are plain Python, and ``train_dataset``
needs ``datasets``.
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from scaleenv.formats.domain import Param, ToolSpec
from scaleenv.integrations.session import (
    RESERVED_NAMES,
    USER_TOOL,
    IntegrationError,
    Session,
    TaskSource,
    session_from_row,
    task_source,
    tool_set_name,
)

if TYPE_CHECKING:
    from datasets import Dataset

_BASE_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}


def param_type(p: Param) -> object:
    """The Python annotation of a tool parameter (what ``get_json_schema`` maps back to its schema)."""
    if p.enum:
        return Literal[tuple(p.enum)]
    if p.type == "array":
        item = _BASE_TYPES[p.items or "string"]
        return list[item]  # type: ignore[valid-type]
    return _BASE_TYPES[p.type]


def _num(v: float | None, missing: str) -> str:
    return missing if v is None else f"{v:g}"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def tool_docstring(tool: ToolSpec, names: dict[str, str]) -> str:
    lines = [_one_line(tool.description) or tool.name]
    if tool.parameters:
        lines += ["", "Args:"]
        for p in tool.parameters:
            desc = _one_line(p.description or p.name)
            if p.minimum is not None or p.maximum is not None:
                desc += f" (range {_num(p.minimum, '-inf')} to "
                desc += f"{_num(p.maximum, 'inf')})"
            lines.append(f"    {names[p.name]}: {desc}")
    lines += ["", "Returns:", "    The tool's result as JSON (an object with an 'error' key if the call failed)."]
    return "\n".join(lines)


def make_tool_method(tool: ToolSpec) -> Callable[..., str]:
    """A method ``name(self, **arguments) -> str`` that runs the tool in the env's episode; its
    ``__signature__``, annotations and docstring describe the tool's parameters to TRL."""
    if tool.name in RESERVED_NAMES or tool.name.startswith("_") or not tool.name.isidentifier():
        raise IntegrationError(f"tool {tool.name!r} cannot be a TRL environment method (reserved or not an identifier)")
    names = {p.name: (p.name + "_" if keyword.iskeyword(p.name) or p.name == "self" else p.name)
             for p in tool.parameters}
    back = {v: k for k, v in names.items()}
    ordered = [p for p in tool.parameters if p.required] + [p for p in tool.parameters if not p.required]
    name = tool.name

    order = [p.name for p in ordered]

    def method(self: ScaleEnvTRLEnv, *positional: object, **arguments: object) -> str:
        args = dict(zip(order, positional, strict=False))  # positional use from Python, in signature order
        args.update({back.get(k, k): v for k, v in arguments.items()})
        return self._call(name, args)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for p in ordered:
        annotations[names[p.name]] = param_type(p)
        params.append(inspect.Parameter(names[p.name], inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=param_type(p),
                                        default=inspect.Parameter.empty if p.required else None))
    annotations["return"] = str
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    method.__name__ = method.__qualname__ = name
    method.__doc__ = tool_docstring(tool, names)
    method.__module__ = __name__
    return method


class ScaleEnvTRLEnv:
    """Base of the generated per-domain classes: one episode per rollout, reset by TRL."""

    universe: str | None = None
    domain: str = ""
    user: str | None = "scripted"
    mode: str | None = None
    max_user_turns: int = 10
    reward_shape: str | None = None
    """``binary``, ``partial`` or ``dense``; ``None``: the row's ``reward_shape``, else binary."""
    tool_set: frozenset[str] = frozenset()
    """The domain tools this class offers."""
    environment: str = ""
    """The tool set (:func:`tool_set_name`) of the tasks this class serves; empty: any task of the domain."""

    def __init__(self) -> None:
        self._session: Session | None = None

    def reset(self, **row: object) -> str | None:
        """Start a fresh episode for a dataset row (``task_json`` / ``task_id``, ``universe``, ``mode``).

        The row's ``prompt`` already holds the system prompt and the user's request, so nothing is
        appended to it.
        """
        if self._session is not None:
            self._session.close()
        self._session = session_from_row(row, universe=self.universe, user=self.user, mode=self.mode,
                                         max_user_turns=self.max_user_turns, reward_shape=self.reward_shape)
        task = self._session.task
        if (self.domain and task.domain != self.domain) or (self.environment and tool_set_name(task) != self.environment):
            raise IntegrationError(f"row of task {task.id} reached the {type(self).__name__} environment, which lacks "
                                   "its tools; route rows with the 'environment' column")
        return None

    @property
    def session(self) -> Session:
        if self._session is None:
            raise IntegrationError("the environment has not been reset; TRL calls reset(**row) before the tools")
        return self._session

    def _call(self, name: str, args: dict[str, Any]) -> str:
        return self.session.call(name, args).output

    def send_message_to_user(self, *positional: object, **arguments: object) -> str:
        """Send a message to the user (a question, or the outcome of their request with every value they asked for).

        Args:
            message: The message for the user.

        Returns:
            The user's reply.
        """
        args = dict(zip(["message"], positional, strict=False))
        args.update(arguments)
        return self.session.call(USER_TOOL, args).output

    send_message_to_user.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
         inspect.Parameter("message", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)],
        return_annotation=str)
    send_message_to_user.__annotations__ = {"message": str, "return": str}

    def get_reward(self) -> float:
        """The task's reward for the world as the rollout left it (0 before any reset)."""
        if self._session is None:
            return 0.0
        return float(self._session.evaluate().score)

    @property
    def reward_components(self) -> dict[str, float]:
        """The reward's components (a property, so TRL does not take it for a tool)."""
        return dict(self.session.evaluate().components)


def make_env_class(source: TaskSource, domain: str, *, user: str | None = "scripted", mode: str | None = None,
                   tools: Iterable[str] | None = None, name: str | None = None,
                   environment: str = "", reward_shape: str | None = None) -> type[ScaleEnvTRLEnv]:
    """An ``environment_factory`` class of one domain whose tool methods are ``tools`` (default:
    every tool of the domain), typed and documented from the spec."""
    spec = source.spec(domain)
    keep = set(tools) if tools is not None else {t.name for t in spec.tools}
    if unknown := sorted(keep - {t.name for t in spec.tools}):
        raise IntegrationError(f"domain {domain} has no tool {unknown[0]!r}")
    attrs: dict[str, Any] = {"universe": str(source.root), "domain": domain, "user": user, "mode": mode,
                             "tool_set": frozenset(keep), "environment": environment, "reward_shape": reward_shape,
                             "__doc__": f"scaleenv {domain} environment: {spec.description}",
                             "__module__": __name__}
    for tool in spec.tools:
        if tool.name in keep:
            attrs[tool.name] = make_tool_method(tool)
    cls_name = name or "ScaleEnv_" + "".join(w.title() for w in domain.split("_"))
    return type(cls_name, (ScaleEnvTRLEnv,), attrs)


def tool_names(cls: type) -> list[str]:
    """The methods TRL turns into tools (its own rule: public functions of the class, minus reset/get_reward)."""
    import inspect

    return [n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
            if n not in ("reset", "get_reward") and not n.startswith("_")]


class ScaleEnvTRLSpec:
    """What ``GRPOTrainer`` needs: ``train_dataset``, ``environment_factory`` and ``reward_funcs``."""

    def __init__(self, universe: str | Path | None = None, *, domains: Iterable[str] = (),
                 mode: str = "conversational", user: str | None = "scripted", task_ids: Iterable[str] = (),
                 tools: Iterable[str] | None = None, reward_shape: str | None = None):
        from scaleenv.integrations.export import select_tasks
        from scaleenv.reward.subgoals import REWARD_SHAPES

        if reward_shape is not None and reward_shape not in REWARD_SHAPES:
            raise IntegrationError(f"unknown reward shape {reward_shape!r}; use {', '.join(REWARD_SHAPES)}")
        self.reward_shape = reward_shape
        self.source = task_source(universe)
        self.mode = mode
        self.tasks = select_tasks(self.source, domains)
        if wanted := list(task_ids):
            by_id = {t.id: t for t in self.tasks}
            if missing := [t for t in wanted if t not in by_id]:
                raise IntegrationError(f"no task {missing[0]!r} in {self.source.root}")
            self.tasks = [by_id[t] for t in wanted]
        self.domains = list(dict.fromkeys(t.domain for t in self.tasks))
        only = set(tools) if tools is not None else None
        if only is not None and (unknown := sorted(only - {t.name for d in self.domains
                                                           for t in self.source.spec(d).tools})):
            raise IntegrationError(f"no domain of these tasks has a tool {unknown[0]!r}")
        self.classes: dict[str, type[ScaleEnvTRLEnv]] = {}
        for t in self.tasks:  # one class per tool set: the task's own tools (narrowed by ``tools``)
            env = tool_set_name(t)
            if env not in self.classes:
                keep = [n for n in t.tools if only is None or n in only]
                title = "".join(w.title() for w in t.domain.split("_"))
                self.classes[env] = make_env_class(self.source, t.domain, user=user, mode=mode, tools=keep,
                                                   name=f"ScaleEnv_{title}_{env.rpartition('.')[2]}",
                                                   environment=env, reward_shape=reward_shape)

    @classmethod
    def from_curriculum(cls, path: str | Path, **kwargs: Any) -> ScaleEnvTRLSpec:
        """The training set a ``scaleenv curriculum`` step wrote (its directory), as the dataset of
        the next round: its tasks, in its order; ``kwargs`` as for the constructor."""
        from scaleenv.run.curriculum import CurriculumError, curriculum_task_ids

        try:
            ids = curriculum_task_ids(path)
        except CurriculumError as e:
            raise IntegrationError(str(e)) from None
        return cls(Path(path), task_ids=ids, **kwargs)

    def rows(self) -> list[dict[str, Any]]:
        from scaleenv.integrations.export import task_row

        return [task_row("trl", self.source, t, i, self.mode) for i, t in enumerate(self.tasks)]

    @property
    def train_dataset(self) -> Dataset:
        try:
            import datasets
        except ImportError:
            raise IntegrationError("train_dataset needs the datasets library: pip install 'scaleenv[trl]'") from None
        return datasets.Dataset.from_list(self.rows())

    @property
    def environment_factory(self) -> type[ScaleEnvTRLEnv] | dict[str, type[ScaleEnvTRLEnv]]:
        if len(self.classes) == 1:
            return next(iter(self.classes.values()))
        return dict(self.classes)

    @property
    def reward_funcs(self) -> list[Any]:
        """None needed: each environment's ``get_reward`` is the reward (TRL adds it with weight 1)."""
        return []

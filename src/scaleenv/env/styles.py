"""Ways of speaking: the oracle's messages said in the styles real agents use (terse, verbose, markdown,
numbered steps, a table, several questions at once, explanations with other numbers in them, numbers in
words, dates in US or spoken form, abbreviations), for the style gate.

The oracle decides *what* to say as acts (ask who the user is, propose changes, check a slip, report the
work and the answers); a :class:`Style` decides *how*. The plain style is the oracle's own wording. A
correct agent in any style must score 1 with the scripted user: the user and the grader are judged by
what was said, never by the form it was said in (``run_gates(..., styles=...)``, ``scaleenv check``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from scaleenv.env.language import spoken
from scaleenv.formats.task import REFUSAL_FACT, Task
from scaleenv.utils.dates import parse_iso

Fact = tuple[str, Any]
"""An answer fact as said: (name, value)."""
Item = tuple[str, dict[str, Any]]
"""A proposed change: (tool, arguments)."""


# ------------------------------------------------------------------------------------- value forms

def _iso(v: object) -> str:
    return spoken(v)


def _when(v: object) -> date | datetime | None:
    if isinstance(v, str) and len(v) >= 10 and v[:4].isdigit() and v[4] == "-":
        when = parse_iso(v)
        if isinstance(when, date | datetime):
            return when
    return None


def _clock(t: datetime) -> str:
    return t.strftime("%I:%M %p").lstrip("0")


def _spoken_date(v: object) -> str:
    """"May 10, 2026 at 7:45 AM" for a date or datetime; numbers grouped ("1,234.50"); other values as is."""
    when = _when(v)
    if isinstance(when, datetime):
        return f"{when.strftime('%B')} {when.day}, {when.year} at {_clock(when)}"
    if isinstance(when, date):
        return f"{when.strftime('%B')} {when.day}, {when.year}"
    return _grouped(v)


def _us_date(v: object) -> str:
    """"05/10/2026 7:45 AM"; other values as is."""
    when = _when(v)
    if isinstance(when, datetime):
        return f"{when.strftime('%m/%d/%Y')} {_clock(when)}"
    if isinstance(when, date):
        return when.strftime("%m/%d/%Y")
    return _iso(v)


def _grouped(v: object) -> str:
    """Thousands separators, and cents on a fraction ("1,234.50", "23,500,000")."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return _iso(v)
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.2f}" if round(float(v), 2) == float(v) else f"{v:,}"


def _in_words(v: object) -> str:
    """Whole numbers below a hundred in words ("twenty-one"); other values as is."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not float(v).is_integer() or not 0 <= v < 100:
        return _iso(v)
    from scaleenv.env.language import _engine

    return str(_engine().number_to_words(int(v)))


# ------------------------------------------------------------------------------------------ styles

def _words(name: str) -> str:
    return name.replace("_", " ")


def _args(args: dict[str, Any], value: Callable[[Any], str], sep: str = " ") -> str:
    return ", ".join(f"{_words(k)}{sep}{value(v)}" for k, v in sorted(args.items()))


@dataclass(frozen=True)
class Style:
    """How each act of the oracle is said. ``value`` writes a value; the others build whole messages."""

    name: str
    value: Callable[[Any], str] = _iso
    identity: str = ("Before I change anything, could you please verify your identity by giving me your details?")
    slip: str = "Before I go on: is {said} the one you mean?"
    done: str = "Your request has been completed."
    fact: str = "The {name} is {value}."
    refusal: str = "I cannot do that, it is against our policy: {reason}."
    item: str = "{tool} ({args})"
    arg_sep: str = " "
    propose_one: str = "Shall I go ahead with {item}?"
    propose_many: str = "Shall I go ahead with: {items}?"
    items_sep: str = "; "
    joiner: str = "\n"
    closing: str = ""

    def item_text(self, tool: str, args: dict[str, Any]) -> str:
        """One proposed change: the tool's words and every argument with its value."""
        return self.item.format(tool=_words(tool), args=_args(args, self.value, self.arg_sep))

    def propose(self, items: Sequence[Item]) -> str:
        """A question asking to go ahead with ``items`` (one message, each change named by its values)."""
        texts = [self.item_text(t, a) for t, a in items]
        if len(texts) == 1:
            return self.propose_one.format(item=texts[0])
        return self.propose_many.format(items=self.items_sep.join(texts), n=len(texts))

    def ask_identity(self) -> str:
        return self.identity

    def check_slip(self, said: str) -> str:
        return self.slip.format(said=said)

    def report(self, wrote: bool, facts: Sequence[Fact]) -> str:
        """The work reported (``wrote``: changes were asked for) and every answer fact stated."""
        lines = [self.done] if wrote or not facts else []
        for name, value in facts:
            if name == REFUSAL_FACT:
                lines.append(self.refusal.format(reason=value, n="{n}"))
            else:
                lines.append(self.fact.format(name=_words(name), value=self.value(value), n="{n}"))
        text = _numbered(self.joiner.join(lines))
        return f"{text}{self.closing}" if self.closing else text


class _Table(Style):
    """The answers as a markdown table."""

    def report(self, wrote: bool, facts: Sequence[Fact]) -> str:
        rows = [f"| {_words(n)} | {self.value(v)} |" for n, v in facts if n != REFUSAL_FACT]
        refusals = [self.refusal.format(reason=v) for n, v in facts if n == REFUSAL_FACT]
        head = [self.done] if wrote or not facts else []
        table = ["| Item | Value |", "|---|---|", *rows] if rows else []
        return "\n\n".join(x for x in ["\n".join(head + refusals), "\n".join(table)] if x)


PLAIN = Style("plain")
"""The oracle's own wording (what the build's conversational gate has always played)."""

STYLES: dict[str, Style] = {s.name: s for s in (
    PLAIN,
    Style("terse", identity="Your details to verify you?", slip="{said} - right one?", done="Done.",
          fact="{name}: {value}.", refusal="Can't do that (policy: {reason}).", item="{tool} - {args}", arg_sep=": ",
          propose_one="OK to {item}?", propose_many="OK to: {items}?"),
    Style("verbose",
          identity=("Thank you so much for reaching out today, I'd be glad to help you with this. Before I make any "
                    "changes to the records, I first need to confirm who I am speaking with. Could you please share "
                    "your details so that I can verify your identity?"),
          slip=("Thanks for that. I just want to make sure I have the right record before I go any further, since "
                "there are a few that look alike. Is {said} the one you mean?"),
          done=("Thank you for your patience while I worked through this. I've finished processing everything you "
                "asked for, and your request has been completed successfully."),
          fact="I can also tell you that the {name} is {value}.",
          refusal=("I'm sorry, but I'm not able to do that one: it is against our policy, because {reason}."),
          item="{tool} with {args}",
          propose_one=("I've reviewed everything and I'm ready to proceed. Here is exactly what I'm about to do: "
                       "{item}. Would you like me to go ahead with this?"),
          propose_many=("I've reviewed everything and I'm ready to proceed. Here is exactly what I'm about to do, "
                        "in order: {items}. Would you like me to go ahead with all {n} of these?"),
          joiner=" ", closing=" Is there anything else I can help you with today?"),
    Style("markdown", value=lambda v: f"**{_iso(v)}**",
          identity="**Verification needed:** could you please share your details so I can confirm your identity?",
          slip="**Quick check:** is `{said}` the one you mean?", done="### All done\n\nYour request has been completed.",
          fact="- **{name}**: {value}", refusal="- **Not possible:** our policy does not allow it ({reason}).",
          item="**{tool}** ({args})", arg_sep=": ",
          propose_one="Here is the change I'm about to make:\n\n- {item}\n\nShall I go ahead?",
          propose_many="Here are the changes I'm about to make:\n\n- {items}\n\nShall I go ahead with these?",
          items_sep="\n- "),
    Style("numbered",
          identity="Step 1 is to verify your identity. Could you give me your details?",
          done="1. Your request has been completed.", fact="{n}. The {name} is {value}.",
          refusal="{n}. I could not do that: our policy forbids it ({reason}).",
          propose_one="Here is the plan:\n1. {item}\nShall I proceed?",
          propose_many="Here is the plan:\n{items}\nShall I proceed with these {n} steps?", items_sep="\n"),
    _Table("table", done="Your request has been completed. Here is a summary:",
           refusal="I could not do one part: it is against our policy ({reason})."),
    Style("multi_question",
          identity="Who am I speaking with? Could you give me your details so I can verify your identity?",
          propose_one="Shall I go ahead with {item}? Or is there anything you'd like to change first?",
          propose_many="Shall I go ahead with: {items}? Or is there anything you'd like to change first?"),
    Style("explanation",
          fact="The {name} is {value} (I checked this against the records on file, 3 of them in all, as of today).",
          done="Your request has been completed; it took 2 steps on my side.",
          propose_one="I looked at the 2 most recent records first. Shall I go ahead with {item}?"),
    Style("number_words", value=_in_words),
    Style("spoken_date", value=_spoken_date),
    Style("us_date", value=_us_date),
    Style("abbreviation",
          identity="Pls. confirm your details (e.g. name, e-mail) so I can verify your identity?",
          done="Acct. update: your request has been completed.", fact="Re: {name} - it is {value}.",
          refusal="No can do, i.e. it is against our policy: {reason}.",
          propose_one="Approx. one step left: shall I go ahead with {item}?"),
)}
"""Every style, by name."""

GATE_STYLES = tuple(n for n in STYLES if n != "plain")
"""The styles the style gate plays besides the plain one."""


def _numbered(text: str) -> str:
    """Number a numbered style's fact lines ("{n}." placeholders) in order, after the report's "1."."""
    out, n = [], 1
    for line in text.split("\n"):
        if "{n}" in line:
            n += 1
            line = line.replace("{n}", str(n))
        out.append(line)
    return "\n".join(out)


def say_report(style: Style, task: Task, facts: Sequence[Fact] | None = None) -> str:
    """The oracle's report in ``style``: the work done (when the task asks for changes), then ``facts``
    (every answer fact when None)."""
    if facts is None:
        facts = [(f.name, f.value) for f in task.answer_facts]
    wrote = any(o.kind == "write" for o in task.user_profile.objectives) or (
        not task.user_profile.objectives and len(task.user_profile.goals) > len(task.answer_facts))
    return style.report(wrote, facts)


def say_proposal(style: Style, items: Sequence[Item]) -> str:
    """The go-ahead question for ``items`` in ``style`` (numbered styles number each step)."""
    if style.name == "numbered" and len(items) > 1:
        steps = [f"{i}. {style.item_text(t, a)}" for i, (t, a) in enumerate(items, 1)]
        return style.propose_many.format(items="\n".join(steps), n=len(steps))
    return style.propose(items)


def drawn_style(task_id: str) -> str:
    """The style a build's conversational gate plays for a task (one per task, drawn by its id, plain among
    them): every style is played across a build at no extra cost."""
    names = sorted(STYLES)
    return names[zlib.crc32(task_id.encode()) % len(names)]

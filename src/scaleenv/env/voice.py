"""The scripted user's voice: how it words its stock replies (a yes, a thank-you before its next request,
a goodbye, "I don't know", "that's all").

The user decides what to say in canonical lines (:data:`CANONICAL`); a :class:`Voice` says each in one of
the phrasings of the data file ``env/user_replies.txt``. A user's voice is two phrasings per act, drawn by
its task and seed, said in turn: deterministic per seed, varied across users and across one chat. Every
phrasing of an act reads as that act to the reward (a yes as a yes), which ``tests/test_user_voice.py``
holds for the whole file.
"""

from __future__ import annotations

import random
from functools import lru_cache

CANONICAL = {
    "yes": "Yes, please go ahead.",
    "finished": "Thank you, that is everything I needed.",
    "next": "Thanks. There is one more thing.",
    "unknown": "I don't know that, sorry.",
    "nothing_else": "No, that's all.",
}
"""Each act's canonical line: what the user's logic says, before its voice words it."""
PER_ACT = 2
"""How many phrasings of each act one user has."""


@lru_cache(maxsize=1)
def phrasings() -> dict[str, tuple[str, ...]]:
    """Every phrasing of each act, from the data file ``env/user_replies.txt`` (the canonical line first)."""
    from importlib.resources import files

    out: dict[str, list[str]] = {act: [line] for act, line in CANONICAL.items()}
    for line in files("scaleenv.env").joinpath("user_replies.txt").read_text(encoding="utf-8").splitlines():
        act, _, text = line.split("#")[0].partition(":")
        act, text = act.strip(), text.strip()
        if act in out and text and text not in out[act]:
            out[act].append(text)
    return {act: tuple(lines) for act, lines in out.items()}


def is_next_request(text: str) -> bool:
    """Whether a user's message brings up its next request (any phrasing of the act)."""
    return any(p in text for p in phrasings()["next"])


class Voice:
    """One user's phrasings: ``plain`` says every canonical line as it is."""

    def __init__(self, key: str = "", plain: bool = False):
        rng = random.Random(f"voice:{key}")
        self.lines = {act: ((CANONICAL[act],) if plain else tuple(rng.sample(lines, min(PER_ACT, len(lines)))))
                      for act, lines in phrasings().items()}
        self.said = dict.fromkeys(CANONICAL, 0)

    def say(self, text: str) -> str:
        """``text`` with each canonical line in it said in this voice (each act's phrasings in turn)."""
        for act, line in CANONICAL.items():
            if line in text:
                options = self.lines[act]
                text = text.replace(line, options[self.said[act] % len(options)])
                self.said[act] += 1
        return text

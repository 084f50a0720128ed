"""Episodes: one private world, tool calls from an agent, and an evaluation at the end."""

from scaleenv.env.episode import Episode, ErrorStats

__all__ = ["Episode", "ErrorStats"]

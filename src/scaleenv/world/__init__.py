"""The SQLite world: build from a spec, load rows, snapshot/restore, canonical hash, structured diff."""

from scaleenv.world.world import RowChange, World

__all__ = ["RowChange", "World"]

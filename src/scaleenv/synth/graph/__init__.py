"""The tool dependency graph: data_flow, precondition and shared_table edges between tools."""

from scaleenv.synth.graph.build import ToolGraph, build_graph

__all__ = ["ToolGraph", "build_graph"]

"""The LLM synthesis back end (the paper's pipeline): role agents with prompt templates, sandboxed
procedural testing of generated tools, LLM task agents. Entry point: :class:`scaleenv.synth.llm.backend.LLMBackend`."""

"""LLM access (OpenAI-compatible endpoints). Submodules import their SDKs lazily; keep this file light."""

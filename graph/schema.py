"""The state schema's version, apart from the schema itself: what recovery compares, readable
without LangGraph (`agentrt doctor` on the embedded default loads none)."""

SCHEMA_VERSION = 2
"""2: one `messages` DeltaChannel (the model's context); `runtime_messages` is gone; session totals
`tool_call_count` and `token_usage` (the compressed context can no longer be counted for them)."""

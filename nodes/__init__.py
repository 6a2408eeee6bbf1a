"""The six nodes of the agent loop, one module each."""

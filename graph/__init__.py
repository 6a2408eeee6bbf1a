"""The agent's LangGraph: state schema, wiring and the Studio entry."""

"""The business session (ChatSession), its stores, manager, page history and lease."""

from agent.session.session import ChatSession, SessionStatus

__all__ = ["ChatSession", "SessionStatus"]

"""Sandbox rooms: one folder per session branch that file tools cannot leave."""

"""The request bodies of the assistant routes that change or list versions (search and count are in
agent/serve/bodies.py): a wrong type is a 422 naming the field before anything is stored."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from agent.serve.bodies import MAX_LIMIT, Body
from agent.serve.store_bodies import storable_json

NAME_MAX = 500
DESCRIPTION_MAX = 5000
Stored = Annotated[dict[str, Any], AfterValidator(storable_json)]
"""A JSON object both stores keep as given (no NUL, no integer beyond 64 bits, not too deep)."""
Name = Annotated[str, Field(max_length=NAME_MAX), AfterValidator(storable_json)]
Description = Annotated[str, Field(max_length=DESCRIPTION_MAX), AfterValidator(storable_json)]


class AssistantCreate(Body):
    """`POST /assistants`."""

    graph_id: str
    assistant_id: str | None = None
    config: Stored | None = None
    context: Stored | None = None
    metadata: Stored | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    name: Name | None = None
    description: Description | None = None


class AssistantPatch(Body):
    """`PATCH /assistants/{id}`: a new version."""

    graph_id: str | None = None
    config: Stored | None = None
    context: Stored | None = None
    metadata: Stored | None = None
    name: Name | None = None
    description: Description | None = None


class AssistantVersions(Body):
    """`POST /assistants/{id}/versions`."""

    metadata: Stored | None = None
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0)


class AssistantLatest(Body):
    """`POST /assistants/{id}/latest`."""

    version: int = Field(ge=1)

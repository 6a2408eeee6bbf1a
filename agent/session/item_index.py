"""The semantic index of LangGraph's store (`store.index` of the settings) as LangGraph's stores take
it: `{"dims", "embed", "fields"}`, the embedding done by langchain-openai's `OpenAIEmbeddings` against
the configured OpenAI-compatible endpoint.

The stores embed each item's `fields` when it is put (unless its `index` says otherwise) and the
`query` of a search, and rank by cosine similarity. The API key is read from the environment variable
the settings name and kept by the client as a secret (it is never logged or shown in an error).
"""

from __future__ import annotations

import os
from typing import Any

from agent.core.config import AgentSettings, StoreIndexSettings
from agent.core.errors import ConfigError

NO_KEY = "not-needed"
"""The key sent to a local endpoint that needs none (the client refuses to start without one)."""


def index_config(settings: AgentSettings) -> dict[str, Any] | None:
    """The index config of `settings` for LangGraph's stores, None without `store.index`.

    Raises `ConfigError` when the endpoint is OpenAI's and its key variable is not set.
    """
    index = settings.store.index
    if index is None:
        return None
    return {"dims": index.dims, "embed": embeddings(index), "fields": list(index.fields)}


def embeddings(index: StoreIndexSettings) -> Any:
    """langchain-openai's client for the configured embedding endpoint."""
    from langchain_openai import OpenAIEmbeddings

    api_key = os.environ.get(index.api_key_env)
    if not api_key and index.base_url is None:
        raise ConfigError(
            f"store.index embeds with OpenAI but ${index.api_key_env} is not set; "
            "export it, or set store.index.base_url for a local OpenAI-compatible server"
        )
    return OpenAIEmbeddings(
        model=index.model,
        base_url=index.base_url,
        api_key=api_key or NO_KEY,  # type: ignore[arg-type]
        # Raw text, not tiktoken's token ids: other servers do not take ids, and tiktoken would
        # download its tables on first use.
        check_embedding_ctx_length=False,
        timeout=index.timeout_s,
        max_retries=index.max_retries,
    )

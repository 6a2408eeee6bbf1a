"""A loopback OpenAI-compatible chat-completions server for tests (the real client talks to it).

Responses are queued dicts: {"content": str, "tool_calls": [{"name", "args"}], "finish_reason": str,
"usage": {"prompt_tokens", "completion_tokens"}}; a call's "raw_args" is sent as its arguments string
as is (malformed JSON), and "no_usage": true leaves the usage block out. Both plain and `stream: true`
(SSE, with the usage chunk when `stream_options.include_usage`) requests are served. Every request
body is kept.

`POST /v1/embeddings` answers without using the queue: each input's bag-of-words vector of
`EMBED_DIMS` numbers (`embed`), so texts sharing words are similar and the ranking is deterministic.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMBED_DIMS = 64
"""The length of the stub's embeddings (`store.index.dims` in a config using it)."""


def embed(text: str) -> list[float]:
    """The stub's embedding of `text`: word counts, each word hashed to one of `EMBED_DIMS` slots."""
    vector = [0.0] * EMBED_DIMS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % EMBED_DIMS] += 1.0
    return vector


class OpenAIStub:
    """Start with `with OpenAIStub(responses) as stub:`; `stub.base_url` goes into the config."""

    def __init__(self, responses: list[dict[str, Any]]) -> None:
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                with stub._lock:
                    stub.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if self.path.endswith("/embeddings"):
                    self._embeddings(body)
                    return
                with stub._lock:
                    resp = stub.responses.pop(0) if stub.responses else None
                if not self.path.endswith("/chat/completions") or resp is None:
                    self.send_response(500 if resp is None else 404)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(json.dumps({"error": {"message": "no scripted response left"}}).encode())
                    return
                if body.get("stream"):
                    self._stream(body, resp)
                else:
                    self._plain(body, resp)

            def _embeddings(self, body: dict[str, Any]) -> None:
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = []
                for i, text in enumerate(texts):
                    vector: Any = embed(str(text))
                    if body.get("encoding_format") == "base64":
                        vector = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
                    data.append({"object": "embedding", "index": i, "embedding": vector})
                usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
                payload = json.dumps({"object": "list", "data": data, "model": body.get("model"), "usage": usage})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload.encode())))
                self.end_headers()
                self.wfile.write(payload.encode())

            def _message(self, resp: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
                calls = [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c.get("raw_args", json.dumps(c.get("args", {})))},
                    }
                    for i, c in enumerate(resp.get("tool_calls", []))
                ]
                msg: dict[str, Any] = {"role": "assistant", "content": resp.get("content")}
                if calls:
                    msg["tool_calls"] = calls
                return msg, calls

            def _usage(self, resp: dict[str, Any]) -> dict[str, int]:
                u = resp.get("usage", {"prompt_tokens": 10, "completion_tokens": 5})
                return {**u, "total_tokens": u["prompt_tokens"] + u["completion_tokens"]}

            def _finish(self, resp: dict[str, Any], calls: list[Any]) -> str:
                return str(resp.get("finish_reason") or ("tool_calls" if calls else "stop"))

            def _plain(self, body: dict[str, Any], resp: dict[str, Any]) -> None:
                msg, calls = self._message(resp)
                payload = {
                    "id": "chatcmpl-stub",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [{"index": 0, "message": msg, "finish_reason": self._finish(resp, calls)}],
                    **({} if resp.get("no_usage") else {"usage": self._usage(resp)}),
                }
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], resp: dict[str, Any]) -> None:
                msg, calls = self._message(resp)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                base = {
                    "id": "chatcmpl-stub",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": body.get("model"),
                }

                def send(obj: dict[str, Any]) -> None:
                    self.wfile.write(b"data: " + json.dumps({**base, **obj}).encode() + b"\n\n")

                send({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
                for word in (msg.get("content") or "").split(" "):
                    if word:
                        send({"choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]})
                for i, c in enumerate(calls):
                    delta = {"tool_calls": [{"index": i, "id": c["id"], "type": "function", "function": c["function"]}]}
                    send({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                send({"choices": [{"index": 0, "delta": {}, "finish_reason": self._finish(resp, calls)}]})
                if (body.get("stream_options") or {}).get("include_usage") and not resp.get("no_usage"):
                    send({"choices": [], "usage": self._usage(resp)})
                self.wfile.write(b"data: [DONE]\n\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The `/v1` URL to configure as `model.base_url`."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> OpenAIStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

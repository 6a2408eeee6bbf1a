"""A loopback OpenAI-compatible chat-completions server for tests (the real client talks to it).

Responses are queued dicts: {"content": str, "tool_calls": [{"name", "args"}], "finish_reason": str,
"usage": {"prompt_tokens", "completion_tokens"}}; a call's "raw_args" is sent as its arguments string
as is (malformed JSON), and "no_usage": true leaves the usage block out. Both plain and `stream: true`
(SSE, with the usage chunk when `stream_options.include_usage`) requests are served. Every request
body is kept.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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

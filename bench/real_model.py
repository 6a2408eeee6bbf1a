"""agentrt vs the bare langchain-openai client on the same local llama.cpp server and prompt.

Both stream the same two messages (the same system prompt and question, no tools, temperature 0,
the same max_tokens) from llama.cpp's server on the bundled SmolLM2-135M GGUF (the local-llm extra).
Printed per side, median of the rounds: time to first token (from the call until the first token
reaches the caller: for agentrt, `runner.stream()` of a new turn, so session set-up, lease, init node
and checkpoints count) and tokens per second after the first token; then agentrt / bare ratios.

    python bench/real_model.py [--rounds 5] [--max-tokens 64] [--base-url http://127.0.0.1:8080/v1]

Without --base-url the server is started (and stopped) here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langchain_core.messages import HumanMessage, SystemMessage  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

from agent.loop.local_llm import MODEL_ALIAS, LocalLlamaServer, missing_extra  # noqa: E402
from agent.runner import AgentRunner  # noqa: E402

SYSTEM = "You are a concise assistant."
QUESTION = "Describe how a bicycle works in a few sentences."


def timed(stream: Any, is_token: Any) -> tuple[float, float, int]:
    """(time to first token, tokens/s after it, tokens) of one streamed call started just before."""
    start = time.perf_counter()
    first = last = 0.0
    n = 0
    for item in stream:
        if is_token(item):
            now = time.perf_counter()
            if n == 0:
                first = now
            last = now
            n += 1
    rate = (n - 1) / (last - first) if n > 1 and last > first else 0.0
    return first - start, rate, n


def bare(base_url: str, max_tokens: int) -> tuple[float, float, int]:
    """One streamed call through ChatOpenAI alone."""
    model = ChatOpenAI(
        model=MODEL_ALIAS, base_url=base_url, api_key="not-needed", temperature=0.0,  # type: ignore[arg-type]
        max_completion_tokens=max_tokens, max_retries=0, stream_usage=True, extra_body={"max_tokens": max_tokens},
    )  # fmt: skip
    return timed(model.stream([SystemMessage(SYSTEM), HumanMessage(QUESTION)]), lambda c: bool(c.content))


def agentrt_runner(base_url: str, max_tokens: int, base_dir: Path) -> AgentRunner:
    """A runner whose model call is exactly the bare one: no tools, no planning, the same system prompt."""
    data = yaml.safe_load((ROOT / "configs" / "local-llm.yaml").read_text())
    data["model"].update({"base_url": base_url, "max_output_tokens": max_tokens, "max_retries": 0})
    data["tools"] = {"builtins": []}
    data["loop"].update({"planning": "never", "system_prompt": SYSTEM})
    data["persistence"].update({"base_dir": str(base_dir), "database_url": None, "mode": "JSONL_ONLY"})
    data["compression"] = {"enabled": False}
    cfg = base_dir.parent / "bench-config.yaml"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return AgentRunner.from_config(cfg)


def through_agentrt(runner: AgentRunner) -> tuple[float, float, int]:
    """One new turn (a new session) through `runner.stream()`."""
    return timed(runner.stream(QUESTION), lambda e: e.kind == "token")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--base-url", default=None, help="an already running server (else one is started)")
    args = parser.parse_args()
    server = None
    if args.base_url is None:
        problem = missing_extra()
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        server = LocalLlamaServer(n_ctx=2048, threads=1).start()
        print(f"llama.cpp server up in {time.perf_counter() - t0:.1f}s on {server.base_url}")
    base_url = args.base_url or (server.base_url if server else "")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            runner = agentrt_runner(base_url, args.max_tokens, Path(tmp) / "agentrt")
            bare(base_url, 4)  # warm the server's prompt cache and the client's imports once
            results: dict[str, list[tuple[float, float, int]]] = {"bare": [], "agentrt": []}
            for _ in range(args.rounds):  # interleaved, so load changes hit both sides alike
                results["bare"].append(bare(base_url, args.max_tokens))
                results["agentrt"].append(through_agentrt(runner))
    finally:
        if server is not None:
            server.stop()
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in results.items()}
    print(f"prompt: {QUESTION!r}, max_tokens {args.max_tokens}, {args.rounds} rounds, medians")
    for side in ("bare", "agentrt"):
        toks = [r[2] for r in results[side]]
        ttft_ms, rate = med[side][0] * 1000, med[side][1]
        print(f"  {side:8} time to first token {ttft_ms:8.1f} ms   {rate:6.1f} tokens/s   tokens {toks}")
    print(
        f"  agentrt / bare: time to first token x{med['agentrt'][0] / med['bare'][0]:.2f}, "
        f"tokens/s x{med['agentrt'][1] / med['bare'][1]:.2f}"
        if med["bare"][0] and med["bare"][1]
        else "  (no tokens from the bare client: is the server answering?)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

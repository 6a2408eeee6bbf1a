"""Benchmark: token-count cost per step (10 vs 1,000 messages) and compression tier times.

Run: `python bench/compression.py [--steps 50] [--model gpt-4o]`. Prints figures; asserts nothing.

Targets: the ledger's cost per step is flat in history length (it tokenizes only what a step
added; the naive full recount grows with the history); each tier on 1,000+ messages with large
tool results runs in milliseconds, not seconds, when sized through the ledger.
The run-level figures (peak/mean prompt tokens per step with compression on vs off on the long
scripted run) need the graph and belong to the long-task benchmark.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agent.loop.compression import CompressionSettings, compress_hard, compress_placeholder, compress_pointer
from agent.loop.token_count import MessageTokenLedger, TokenCounter


class CountingCounter(TokenCounter):
    """A TokenCounter that counts how many messages it tokenized."""

    calls = 0

    def count_message(self, msg: BaseMessage) -> int:
        self.calls += 1
        return super().count_message(msg)


def step(i: int, result_chars: int) -> list[BaseMessage]:
    """One agent step: an AI tool call carrying usage, and its tool result."""
    body = (f"row {i}: " + "lorem ipsum dolor sit amet " * (result_chars // 27 + 1))[:result_chars]
    return [
        AIMessage(
            "",
            id=f"ai-{i}",
            tool_calls=[{"id": f"call-{i}", "name": "fetch", "args": {"i": i}}],
            usage_metadata={"input_tokens": 1000 + i, "output_tokens": 10, "total_tokens": 1010 + i},
        ),
        ToolMessage(body, tool_call_id=f"call-{i}", id=f"tm-{i}"),
    ]


def history(n_messages: int, result_chars: int) -> list[BaseMessage]:
    """A history of about `n_messages` messages."""
    msgs: list[BaseMessage] = [SystemMessage("You are helpful.", id="sys"), HumanMessage("Do it.", id="task")]
    i = 0
    while len(msgs) < n_messages:
        msgs += step(i, result_chars)
        i += 1
    return msgs


def per_step_cost(n_messages: int, steps: int, model: str) -> tuple[float, float, float]:
    """(ledger µs/step, tokenized messages/step, naive full-recount µs/step) at `n_messages`."""
    counter = CountingCounter(model)
    ledger = MessageTokenLedger(counter)
    msgs = history(n_messages, 2000)
    ledger.prompt_tokens(msgs)
    times, calls = [], []
    for s in range(steps):
        msgs += step(10_000 + s, 2000)
        before = counter.calls
        t0 = time.perf_counter()
        ledger.prompt_tokens(msgs)
        times.append(time.perf_counter() - t0)
        calls.append(counter.calls - before)
    naive = TokenCounter(model)
    t0 = time.perf_counter()
    for _ in range(3):
        naive.count_messages(msgs)
    naive_us = (time.perf_counter() - t0) / 3 * 1e6
    return statistics.mean(times) * 1e6, statistics.mean(calls), naive_us


def timed(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of `fn` in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def tier_times(n_messages: int, model: str) -> dict[str, float]:
    """Milliseconds for each tier on a history of `n_messages` with 10,000-char results."""
    msgs = history(n_messages, 10_000)
    settings = CompressionSettings()
    ledger = MessageTokenLedger(TokenCounter(model))
    ledger.count_messages(msgs)  # the node's ledger has seen the history already
    pointed = compress_pointer(msgs, settings, counter=ledger).messages
    return {
        "pointer": timed(lambda: compress_pointer(msgs, settings, counter=ledger)),
        "placeholder": timed(lambda: compress_placeholder(pointed, settings, counter=ledger)),
        "hard": timed(lambda: compress_hard(msgs, lambda older: "summary", settings, counter=ledger)),
        "pointer, estimator": timed(lambda: compress_pointer(msgs, settings)),
    }


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--model", default="gpt-4o")
    args = parser.parse_args()
    print(f"token counter: {TokenCounter(args.model).method}")
    print("\ntoken-count cost per step (ledger: usage of last AI + estimate of what was added)")
    print(f"{'messages':>9} {'ledger µs/step':>15} {'msgs tokenized/step':>20} {'full recount µs, at end':>24}")
    for n in (10, 1000):
        us, calls, naive = per_step_cost(n, args.steps, args.model)
        print(f"{n:>9} {us:>15.1f} {calls:>20.1f} {naive:>24.0f}")
    print("\ntier times (ms, best of 3; 10,000-char tool results; sized through the ledger)")
    for n in (1000, 5000):
        times = tier_times(n, args.model)
        print(f"{n:>6} messages: " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))


if __name__ == "__main__":
    main()

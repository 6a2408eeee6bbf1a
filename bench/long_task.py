"""Benchmark: the long scripted run (configs/long-task.yaml) with compression on vs off.

Run: `python bench/long_task.py [--off-window 65536]`. Prints figures; asserts nothing.

Figures:
- prompt tokens per model call (peak, mean, p50) measured on the requests the scripted model got,
  with compression on (5,000-token window) and off (the same script without its two summary
  responses, which only a compressing run asks for);
- with compression off: how many requests would not fit the 5,000-token window, and the first
  one that would not (a real model would reject it: the run would fail there), then the same run
  with a window large enough to hold everything (`--off-window`);
- compression time: the wall time of every ContextManager.compress call (the memory node's
  policy: measuring, tiers, the scripted summarizer, state update and event);
- token counting cost per step with the session's MessageTokenLedger at 10 vs 1,000 messages
  (messages tokenized and microseconds a step), against a naive full recount.

Targets: peak prompt under 95% of the window with compression on; compression in milliseconds;
ledger cost per step flat in history length.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.loop.context_manager import ContextManager  # noqa: E402
from agent.loop.models import ScriptedChatModel  # noqa: E402
from agent.loop.token_count import MessageTokenLedger, TokenCounter  # noqa: E402
from agent.runner import AgentRunner  # noqa: E402

TASK = "Read the sensor log back in slices and report."
COMPRESS_TIMES: list[float] = []


_UNTIMED = ContextManager.compress


def _timed_compress(self: ContextManager, runtime: Any, state: Mapping[str, Any], *, reason: str) -> dict[str, Any]:
    """ContextManager.compress, recording its wall time (installed on the class, wherever it is built)."""
    t0 = time.perf_counter()
    try:
        return _UNTIMED(self, runtime, state, reason=reason)
    finally:
        COMPRESS_TIMES.append(time.perf_counter() - t0)


def _config(tmp: Path, *, enabled: bool, window: int | None = None) -> Path:
    data = yaml.safe_load((ROOT / "configs" / "long-task.yaml").read_text())
    data["persistence"]["base_dir"] = str(tmp / "agentrt")
    script = yaml.safe_load((ROOT / "agent" / "assets" / "scripts" / "long-task.yaml").read_text())
    if not enabled:
        # only a compressing run calls the summarizer: drop those responses
        script["responses"] = [r for r in script["responses"] if not str(r.get("content", "")).startswith("SUMMARY")]
    (tmp / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    data["model"]["script"] = str(tmp / "script.yaml")
    data["compression"]["enabled"] = enabled
    if window is not None:
        data["model"]["context_window"] = window
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_once(*, enabled: bool, window: int | None = None) -> dict[str, Any]:
    """One long run; returns its result and the sizes of the prompts the model got."""
    COMPRESS_TIMES.clear()
    tmp = Path(tempfile.mkdtemp(prefix="agentrt-bench-long-"))
    try:
        ContextManager.compress = _timed_compress  # type: ignore[method-assign]
        runner = AgentRunner.from_config(_config(tmp, enabled=enabled, window=window))
        sid = f"s-bench-{'on' if enabled else 'off'}-{window or 0}"
        t0 = time.perf_counter()
        events = list(runner.stream(TASK, new_session_id=sid))
        wall = time.perf_counter() - t0
        model = runner.builder.last_runtime(sid).model  # type: ignore[attr-defined]
        assert isinstance(model, ScriptedChatModel)
        counter = TokenCounter(runner.settings.model.name)
        sizes = [counter.count_messages(p) for p in model.calls]
        comps = [e.data for e in events if e.kind == "compression"]
        return {
            "result": events[-1].data,
            "window": runner.settings.model.context_window,
            "sizes": sizes,
            "compressions": comps,
            "compress_times": list(COMPRESS_TIMES),
            "wall": wall,
        }
    finally:
        ContextManager.compress = _UNTIMED  # type: ignore[method-assign]
        shutil.rmtree(tmp, ignore_errors=True)


def report_run(label: str, run: dict[str, Any], fit_window: int) -> None:
    """Print the figures of one run."""
    r, sizes = run["result"], run["sizes"]
    print(
        f"\n== {label}: window {run['window']}, {r['status']} ({r['finish_reason']}), "
        f"{r['model_calls']} model calls, {r['tool_calls']} tool calls, {run['wall']:.2f} s wall"
    )
    print(
        f"prompt tokens per call: peak {max(sizes)}, mean {statistics.mean(sizes):.0f}, "
        f"p50 {statistics.median(sizes):.0f} (peak = {max(sizes) / fit_window:.0%} of a {fit_window}-token window)"
    )
    over = [i for i, s in enumerate(sizes) if s >= fit_window]
    over95 = [i for i, s in enumerate(sizes) if s >= 0.95 * fit_window]
    print(
        f"requests >= the {fit_window}-token window: {len(over)}; >= 95% of it: {len(over95)}"
        + (f"; first at model call {over[0]} (a real model rejects it: the run fails there)" if over else "")
    )
    if run["compressions"]:
        tiers: dict[str, int] = {}
        for c in run["compressions"]:
            tiers[c["tier"]] = tiers.get(c["tier"], 0) + 1
        times = run["compress_times"]
        print(
            f"compressions: {tiers}; memory-node compress calls {len(times)} (no-op ones included): "
            f"total {sum(times) * 1000:.1f} ms, mean {statistics.mean(times) * 1000:.2f} ms, "
            f"max {max(times) * 1000:.2f} ms"
        )


def _step(i: int, chars: int) -> list[BaseMessage]:
    body = (f"row {i}: " + "lorem ipsum dolor sit amet " * (chars // 27 + 1))[:chars]
    return [
        AIMessage(
            "",
            id=f"ai-{i}",
            tool_calls=[{"id": f"c-{i}", "name": "fetch", "args": {"i": i}}],
            usage_metadata={"input_tokens": 1000 + i, "output_tokens": 10, "total_tokens": 1010 + i},
        ),
        ToolMessage(body, tool_call_id=f"c-{i}", id=f"t-{i}"),
    ]


class _Counting(TokenCounter):
    calls = 0

    def count_message(self, msg: BaseMessage) -> int:
        self.calls += 1
        return super().count_message(msg)


def counting_cost(model: str, n_messages: int, steps: int = 50, chars: int = 3000) -> dict[str, float]:
    """Per-step cost of measuring the prompt after one step was added, at a history of `n_messages`."""
    base: list[BaseMessage] = [SystemMessage("sys", id="sys"), HumanMessage("task", id="task")]
    i = 0
    while len(base) < n_messages:
        base += _step(i, chars)
        i += 1
    ledger_counter, naive = _Counting(model), _Counting(model)
    ledger = MessageTokenLedger(ledger_counter)
    ledger.prompt_tokens(base)  # warm: every message counted once
    t_ledger, t_naive = 0.0, 0.0
    ledger_counter.calls = 0
    for k in range(steps):
        msgs = base + _step(i + k, chars)  # the history stays at n_messages (+ the new step)
        t0 = time.perf_counter()
        ledger.prompt_tokens(msgs)
        t_ledger += time.perf_counter() - t0
        t0 = time.perf_counter()
        naive.count_messages(msgs)
        t_naive += time.perf_counter() - t0
    return {
        "ledger_us": t_ledger / steps * 1e6,
        "ledger_msgs": ledger_counter.calls / steps,
        "naive_us": t_naive / steps * 1e6,
        "naive_msgs": naive.calls / steps,
    }


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--off-window", type=int, default=65_536, help="window of the second compression-off run")
    args = ap.parse_args()
    on = run_once(enabled=True)
    window = on["window"]
    report_run("compression on", on, window)
    off = run_once(enabled=False)
    report_run("compression off, same window", off, window)
    big = run_once(enabled=False, window=args.off_window)
    report_run(f"compression off, window {args.off_window}", big, args.off_window)
    print(
        f"\npeak prompt, on vs off: {max(on['sizes'])} vs {max(off['sizes'])} tokens "
        f"({max(off['sizes']) / max(on['sizes']):.1f}x); mean {statistics.mean(on['sizes']):.0f} vs "
        f"{statistics.mean(off['sizes']):.0f}"
    )
    print("\n== token counting cost per step (one AI + one 3,000-char tool result added to a history of N)")
    for model in ("gpt-4o", "scripted-long"):
        for n in (10, 1000):
            c = counting_cost(model, n)
            print(
                f"{model:>14} {n:>5} msgs: ledger {c['ledger_us']:8.1f} us, {c['ledger_msgs']:.1f} msgs tokenized; "
                f"naive recount {c['naive_us']:9.1f} us, {c['naive_msgs']:.0f} msgs"
            )


if __name__ == "__main__":
    main()

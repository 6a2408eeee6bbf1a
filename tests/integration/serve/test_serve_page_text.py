"""The page shows text from the server (tool results, live progress) with its control and format
characters escaped, as the server's `esc()` does: a U+202E in a tool's output cannot reorder the
page, no ESC or C1 control reaches it raw. Run against the served `app.js` in Node with a minimal
DOM (no browser needed), and in a real headless Chromium when one is installed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.serve.app import STATIC_DIR
from tests.integration.serve.test_serve_browser import WAIT_S, browser  # noqa: F401  (the fixture)
from tests.integration.serve.test_serve_browser import pytestmark as browser_marks
from tests.support.runners import make_config
from tests.support.serve import serving

HOSTILE = "sales \u202eby region\x1b[2J\x9b1m and \u2028 next\nline\tend"
SHOWN = "sales \\u202eby region\\x1b[2J\\x9b1m and \\u2028 next\nline\tend"

HARNESS = r"""
// Runs the page's app.js against a minimal DOM: one live progress line and one tool result.
const fs = require("fs");
const [src, result, progress] = [fs.readFileSync(process.argv[2], "utf8"), process.argv[3], process.argv[4]];
function el() {
  return {
    dataset: {}, textContent: "", children: [],
    appendChild(c) { this.children.push(c); },
    replaceChildren(c) { this.children = [c]; },
  };
}
const nodes = { live: el(), "run-state": el(), "result-call_1": el() };
nodes.live.dataset.stream = "/stream";
let onClick = null;
const sources = [];
global.document = {
  getElementById: (id) => nodes[id] || null,
  createElement: () => el(),
  addEventListener: (type, fn) => { if (type === "click") onClick = fn; },
};
global.window = { location: { reload() {} } };
global.EventSource = function () {
  this.on = {};
  this.addEventListener = (t, fn) => { this.on[t] = fn; };
  this.close = () => {};
  sources.push(this);
};
global.fetch = () => Promise.resolve({ ok: true, json: () => Promise.resolve({ text: result, next_offset: null }) });
eval(src);
sources[0].on.progress({ data: JSON.stringify({ kind: "tool", text: progress }) });
const button = { dataset: { toolResult: "call_1", url: "/r" } };
onClick({ target: { closest: (sel) => (sel === "[data-tool-result]" ? button : null) }, preventDefault() {} });
setImmediate(() => {
  const texts = (node) => node.children.map((c) => c.textContent);
  const shown = { live: texts(nodes.live), result: texts(nodes["result-call_1"]) };
  process.stdout.write(JSON.stringify(shown));
});
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the page's script")
def test_the_page_script_escapes_tool_results_and_progress(tmp_path: Path):
    """app.js as served: a tool result and a progress line holding U+202E, ESC, a C1 CSI and U+2028
    are shown with those as escapes; newline and tab stay."""
    (tmp_path / "harness.js").write_text(HARNESS)
    ran = subprocess.run(
        ["node", str(tmp_path / "harness.js"), str(STATIC_DIR / "app.js"), HOSTILE, "tool " + HOSTILE],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown = json.loads(ran.stdout)
    assert shown == {"live": ["tool " + SHOWN], "result": [SHOWN]}


WRITE = {"tool_calls": [{"name": "write_file", "args": {"path": "note.txt", "content": HOSTILE}}]}
READ = {"tool_calls": [{"name": "read_file", "args": {"path": "note.txt"}}]}
PLAN = {"content": '{"plan": "write then read", "todos": ["write", "read"]}'}


@browser_marks
def test_a_tool_result_with_a_bidi_override_is_shown_escaped_in_the_browser(tmp_path: Path, browser):  # noqa: F811
    """A session whose read_file result holds U+202E: "show result" on the page shows `\\u202e`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from agent.runner import AgentRunner

    config = make_config(tmp_path, [PLAN, WRITE, READ, {"content": "done"}])
    sid = AgentRunner.from_config(config).run("write then read").session_id
    with serving(config, tmp_path) as server:
        browser.get(f"{server.url}/ui/sessions/{sid}")
        buttons = browser.find_elements(By.CSS_SELECTOR, "[data-tool-result]")
        assert len(buttons) == 2, browser.page_source[:2000]
        buttons[-1].click()  # read_file's result
        pre = WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".result pre"))[0]
        WebDriverWait(browser, WAIT_S).until(lambda d: "\\u202e" in pre.text)
        assert "\u202e" not in pre.text and "\x1b" not in pre.text and "\x9b" not in pre.text
        assert "sales \\u202eby region\\x1b[2J\\x9b1m" in pre.text

// agentrt page: live progress of a running turn (SSE), archived tool results and the doctor on demand.
(function () {
  "use strict";
  // Text from the server is shown as the server's esc() shows it: every control, format or separator
  // character (Unicode Cc, Cf, Cs, Zl, Zp; newline and tab kept) as an escape, so a bidi override
  // (U+202E) in a tool's output cannot reorder what the page shows, and no control acts.
  var UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;
  function hex(code, width) { return ("0000000" + code.toString(16)).slice(-width); }
  function printable(s) {
    return String(s === null || s === undefined ? "" : s).replace(UNSAFE, function (c) {
      var code = c.codePointAt(0);
      if (c === "\n" || c === "\t") { return c; }
      if (code <= 0xff) { return "\\x" + hex(code, 2); }
      return code <= 0xffff ? "\\u" + hex(code, 4) : "\\U" + hex(code, 8);
    });
  }
  function text(el, s) { el.textContent = printable(s); return el; }

  var live = document.getElementById("live");
  if (live && live.dataset.stream) {
    var source = new EventSource(live.dataset.stream);
    var state = document.getElementById("run-state");
    source.addEventListener("progress", function (ev) {
      var data = JSON.parse(ev.data);
      var line = document.createElement("div");
      line.className = "live-line " + data.kind;
      text(line, data.text);
      live.appendChild(line);
      live.scrollTop = live.scrollHeight;
    });
    source.addEventListener("done", function (ev) {
      var data = JSON.parse(ev.data);
      if (state) { text(state, "run " + data.status); state.dataset.status = data.status; }
      source.close();
      setTimeout(function () { window.location.reload(); }, 400);
    });
    source.onerror = function () { source.close(); };
  }

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("[data-tool-result]");
    if (btn) {
      ev.preventDefault();
      var box = document.getElementById("result-" + btn.dataset.toolResult);
      fetch(btn.dataset.url, { credentials: "same-origin" })
        .then(function (r) { return r.json().then(function (j) { return [r.ok, j]; }); })
        .then(function (pair) {
          var pre = document.createElement("pre");
          text(pre, pair[0] ? pair[1].text + (pair[1].next_offset !== null ? "\n… (" + pair[1].total + " characters in all)" : "") : pair[1].detail);
          box.replaceChildren(pre);
        });
      return;
    }
    var doc = ev.target.closest("[data-doctor]");
    if (doc) {
      ev.preventDefault();
      var out = document.getElementById("doctor");
      text(out, "running checks…");
      fetch(doc.dataset.doctor, { credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (html) { out.innerHTML = html; });
    }
  });
})();

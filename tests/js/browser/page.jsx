// A chat page on the LangGraph JS SDK's React `useStream`, with `fetchStateHistory: true`, as a
// browser app would use it against `agentrt serve`. The server's URL comes from the page's query
// (`?api=http://127.0.0.1:PORT`); the test bundles this file with esbuild and opens the page.
import React, { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const apiUrl = new URLSearchParams(window.location.search).get("api");

function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).map((part) => (typeof part === "string" ? part : part.text || "")).join("");
}

function Chat() {
  const [threadId, setThreadId] = useState(null);
  const [draft, setDraft] = useState("");
  const stream = useStream({
    apiUrl,
    assistantId: "agentrt",
    messagesKey: "messages",
    fetchStateHistory: true,
    threadId,
    onThreadId: setThreadId,
  });
  const send = (event) => {
    event.preventDefault();
    stream.submit({ messages: [{ type: "human", content: draft }] });
    setDraft("");
  };
  return (
    <main>
      <form id="composer" onSubmit={send}>
        <input id="message" value={draft} onChange={(e) => setDraft(e.target.value)} />
        <button id="send" type="submit">Send</button>
      </form>
      <p id="thread">{threadId || ""}</p>
      <p id="status">{stream.isLoading ? "loading" : "idle"}</p>
      <p id="error">{stream.error ? String(stream.error.message || stream.error) : ""}</p>
      <ol id="messages">
        {stream.messages.map((m, i) => (
          <li key={m.id || i} data-type={m.type}>
            {textOf(m.content)}
          </li>
        ))}
      </ol>
      <ol id="history">
        {(stream.history || []).map((state) => (
          <li key={state.checkpoint.checkpoint_id} data-messages={(state.values.messages || []).length}>
            {state.checkpoint.checkpoint_id}
          </li>
        ))}
      </ol>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);

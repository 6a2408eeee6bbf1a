// A chat page on the LangGraph JS SDK's React `useStream`, with `fetchStateHistory`, as a browser app
// (agent-chat-ui) uses it against `agentrt serve`: send a message, answer an interrupt with a resume
// command, edit an earlier message (a run from that message's parent checkpoint: a new branch) and
// switch between the branches. The server's URL comes from the page's query
// (`?api=http://127.0.0.1:PORT`, and `&limit=N` for the history's page size); the test bundles this
// file with esbuild and opens the page.
import React, { useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const query = new URLSearchParams(window.location.search);
const apiUrl = query.get("api");
const limit = Number(query.get("limit") || 0);

function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).map((part) => (typeof part === "string" ? part : part.text || "")).join("");
}

function Chat() {
  const [threadId, setThreadId] = useState(null);
  const [draft, setDraft] = useState("");
  const [editAt, setEditAt] = useState("");
  const [edited, setEdited] = useState("");
  const stream = useStream({
    apiUrl,
    assistantId: "agentrt",
    messagesKey: "messages",
    fetchStateHistory: limit ? { limit } : true,
    threadId,
    onThreadId: setThreadId,
  });
  const send = (event) => {
    event.preventDefault();
    stream.submit({ messages: [{ type: "human", content: draft }] });
    setDraft("");
  };
  const approve = () => stream.submit(undefined, { command: { resume: { approved: true } } });
  // As agent-chat-ui edits a human message: a run from the checkpoint before the message was added.
  const edit = (event) => {
    event.preventDefault();
    const index = Number(editAt);
    const message = stream.messages[index];
    const meta = stream.getMessagesMetadata(message, index);
    const newMessage = { type: "human", content: edited };
    stream.submit(
      { messages: [newMessage] },
      {
        checkpoint: meta?.firstSeenState?.parent_checkpoint,
        streamMode: ["values"],
        optimisticValues: (prev) => {
          const values = meta?.firstSeenState?.values;
          if (!values) return prev;
          return { ...values, messages: [...(values.messages ?? []), newMessage] };
        },
      },
    );
    setEdited("");
  };
  const interrupt = stream.interrupt;
  return (
    <main>
      <form id="composer" onSubmit={send}>
        <input id="message" value={draft} onChange={(e) => setDraft(e.target.value)} />
        <button id="send" type="submit">Send</button>
      </form>
      <form id="editor" onSubmit={edit}>
        <input id="edit-at" value={editAt} onChange={(e) => setEditAt(e.target.value)} />
        <input id="edit-text" value={edited} onChange={(e) => setEdited(e.target.value)} />
        <button id="edit" type="submit">Edit</button>
      </form>
      <p id="thread">{threadId || ""}</p>
      <p id="status">{stream.isLoading ? "loading" : "idle"}</p>
      <p id="error">{stream.error ? String(stream.error.message || stream.error) : ""}</p>
      <p id="branch">{stream.branch}</p>
      <div id="interrupt">
        {interrupt && interrupt.value ? (
          <>
            <span id="asks">{interrupt.value.name || JSON.stringify(interrupt.value)}</span>
            <button id="approve" type="button" onClick={approve}>Approve</button>
          </>
        ) : null}
      </div>
      <ol id="messages">
        {stream.messages.map((m, i) => {
          const meta = stream.getMessagesMetadata(m, i);
          const options = meta?.branchOptions || [];
          return (
            <li key={m.id || i} data-type={m.type} data-branch={meta?.branch || ""} data-options={options.join(" ")}>
              <span className="text">{textOf(m.content)}</span>
              {options.map((option) => (
                <button key={option} className="switch" data-to={option} type="button"
                  onClick={() => stream.setBranch(option)}>{option}</button>
              ))}
            </li>
          );
        })}
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

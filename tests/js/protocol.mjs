// Drives agentrt serve's thread-stream protocol with the LangGraph JS SDK's ThreadStream
// (`client.threads.stream`): the commands LangGraph's own server does not answer (state.get,
// state.listCheckpoints, state.fork, input.inject) and agent.getTree, and prints what each gave.
//
//   node protocol.mjs http://127.0.0.1:8123
//
// The thread runs the default demo to its approval, is answered, then forked back to the state the
// planning node wrote with a new turn: the fork's run pauses at an approval again.
import { Client } from "@langchain/langgraph-sdk";

const url = process.argv[2];
if (!url) {
  console.error("usage: node protocol.mjs <server url>");
  process.exit(2);
}

const ASSISTANT = "agentrt";
const INPUT = { user_input: "Summarise the sales" };
const client = new Client({ apiUrl: url, defaultHeaders: {} });
const out = {};

const created = await client.threads.create();
const tid = created.thread_id;
await client.runs.wait(tid, ASSISTANT, { input: INPUT });
await client.runs.wait(tid, ASSISTANT, { command: { resume: { approved: true } } });
out.history = await client.threads.getHistory(tid, { limit: 100 });
out.branch_before = (await client.threads.get(tid)).branch_id;

const thread = client.threads.stream(tid, { assistantId: ASSISTANT });
try {
  out.tree = await thread.agent.getTree();
  out.state = await thread.state.get({ namespace: [], keys: ["finish_reason"] });
  out.checkpoints = await thread.state.listCheckpoints({ limit: 100 });
  const planned = out.checkpoints.checkpoints.find((c) => c.node_name === "planning");
  out.fork = await thread.state.fork({ checkpoint_id: planned.id, input: { user_input: "Publish it again" } });
  out.forked_from = planned.id;
  await client.runs.join(tid, out.fork.run_id);
  out.thread_forked = await client.threads.get(tid);
  out.tree_forked = await thread.agent.getTree();
  out.inject_refused = await thread.input
    .inject({ namespace: [], message: { role: "user", content: "and also" } })
    .then(
      () => "accepted",
      (err) => String(err?.message ?? err),
    );
} finally {
  await thread.close();
}

process.stdout.write(JSON.stringify(out) + "\n");

// Drives an Agent Server (agentrt serve or langgraph dev) with the LangGraph JS SDK's Client and
// prints what each call gave as one JSON object, ids and times masked so two servers compare.
//
//   node scenarios.mjs http://127.0.0.1:8123
//
// Every thread runs the default demo, which pauses for an approval before it publishes.
import { Client } from "@langchain/langgraph-sdk";

const url = process.argv[2];
if (!url) {
  console.error("usage: node scenarios.mjs <server url>");
  process.exit(2);
}

const ASSISTANT = "agentrt";
const INPUT = { user_input: "Summarise the sales" };
const RESUME = { resume: { approved: true } };
const SUITE = `js-sdk-${process.pid}-${Date.now()}`;

// UUIDs (threads, runs, checkpoints), 32-hex ids (interrupts) and agentrt's short prefixed ids
// (messages `sys-…`, `user-…`, runs `r-…`).
const ID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b|\b[a-z]+-[0-9a-f]{12}\b/gi;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$/;

function maskString(s) {
  if (ISO_TIME.test(s)) return "<time>";
  if (s === SUITE) return "<suite>";
  return s.replace(ID, "<id>");
}

function mask(value) {
  if (typeof value === "string") return maskString(value);
  if (Array.isArray(value)) return value.map(mask);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [maskString(k), mask(v)]));
  }
  return value;
}

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push({ event: part.event, data: part.data });
  return parts;
}

const client = new Client({ apiUrl: url, defaultHeaders: {} });
const out = {};

// Threads: create, get, search by metadata.
const created = await client.threads.create({ metadata: { suite: SUITE, scenario: "stream" } });
const tid = created.thread_id;
out.thread_created = created;
out.thread_got = await client.threads.get(tid);

// One stream in four modes, up to the approval.
out.stream_paused = await collect(
  client.runs.stream(tid, ASSISTANT, {
    input: INPUT,
    streamMode: ["values", "updates", "messages-tuple", "events"],
  }),
);
out.thread_paused = await client.threads.get(tid);
out.state_paused = await client.threads.getState(tid);

// The interrupt answered with a resume command, streamed.
out.stream_resumed = await collect(
  client.runs.stream(tid, ASSISTANT, { command: RESUME, streamMode: ["values", "updates", "messages-tuple"] }),
);
out.state_done = await client.threads.getState(tid);
out.history = await client.threads.getHistory(tid, { limit: 100 });
out.runs = await client.runs.list(tid);
out.thread_done = await client.threads.get(tid);

// runs.wait on a second thread: to the approval, then resumed.
const other = await client.threads.create({ metadata: { suite: SUITE, scenario: "wait" } });
out.wait_paused = await client.runs.wait(other.thread_id, ASSISTANT, { input: INPUT });
out.wait_resumed = await client.runs.wait(other.thread_id, ASSISTANT, { command: RESUME });
out.wait_runs = await client.runs.list(other.thread_id);

out.search = await client.threads.search({ metadata: { suite: SUITE }, sortBy: "created_at", sortOrder: "asc" });

// Assistants: create, get, update (a new version), versions, set latest, search, count, delete.
const YEARLY = "0 0 1 1 *";
const bot = await client.assistants.create({
  graphId: ASSISTANT,
  name: "JS bot",
  metadata: { suite: SUITE, scenario: "assistant" },
  context: { system_prompt: "First." },
});
const helper = await client.assistants.create({
  graphId: ASSISTANT,
  name: "JS helper",
  metadata: { suite: SUITE, scenario: "helper" },
});
out.assistant_created = bot;
out.assistant_got = await client.assistants.get(bot.assistant_id);
out.assistant_updated = await client.assistants.update(bot.assistant_id, {
  context: { system_prompt: "Second." },
  metadata: { tier: "gold" },
});
out.assistant_versions = await client.assistants.getVersions(bot.assistant_id);
out.assistant_gold_versions = await client.assistants.getVersions(bot.assistant_id, { metadata: { tier: "gold" } });
out.assistant_latest = await client.assistants.setLatest(bot.assistant_id, 1);
out.assistant_search = await client.assistants.search({ metadata: { suite: SUITE }, sortBy: "name", sortOrder: "asc" });
out.assistant_search_name = await client.assistants.search({ name: "helper", metadata: { suite: SUITE } });
out.assistant_count = await client.assistants.count({ metadata: { suite: SUITE } });
out.assistant_count_gold = await client.assistants.count({ metadata: { suite: SUITE, tier: "gold" } });

// Crons: for a thread and stateless, on the assistants above; search, count, delete. Deleting an
// assistant deletes its crons.
const cronThread = await client.threads.create({ metadata: { suite: SUITE, scenario: "cron" } });
out.cron_for_thread = await client.crons.createForThread(cronThread.thread_id, bot.assistant_id, {
  schedule: YEARLY,
  input: INPUT,
  metadata: { suite: SUITE },
});
out.cron_stateless = await client.crons.create(helper.assistant_id, { schedule: YEARLY, input: INPUT });
out.cron_search = await client.crons.search({ assistantId: bot.assistant_id });
out.cron_search_thread = await client.crons.search({ threadId: cronThread.thread_id });
out.cron_count = await client.crons.count({ assistantId: bot.assistant_id });
out.cron_count_helper = await client.crons.count({ assistantId: helper.assistant_id });
await client.crons.delete(out.cron_stateless.cron_id);
out.cron_count_helper_deleted = await client.crons.count({ assistantId: helper.assistant_id });

await client.assistants.delete(bot.assistant_id);
out.assistant_count_deleted = await client.assistants.count({ metadata: { suite: SUITE } });
out.cron_count_assistant_deleted = await client.crons.count({ assistantId: bot.assistant_id });
out.assistant_get_deleted = await client.assistants.get(bot.assistant_id).then(
  () => "found",
  (err) => err.status ?? String(err),
);
await client.assistants.delete(helper.assistant_id);

process.stdout.write(JSON.stringify(mask(out)) + "\n");

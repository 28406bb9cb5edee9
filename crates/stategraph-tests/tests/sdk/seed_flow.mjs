// The JS client (@langchain/langgraph-sdk) against a stategraph Agent Server serving the seed
// graph: create a thread, stream a run, read the state. Prints one JSON object.
import { Client } from "@langchain/langgraph-sdk";

const url = process.argv[2];
const client = new Client({ apiUrl: url });

const assistants = await client.assistants.search({ graphId: "seed" });
const thread = await client.threads.create({ metadata: { from: "js" } });
const events = [];
for await (const chunk of client.runs.stream(thread.thread_id, "seed", {
  input: { foo: "", bar: [] },
  streamMode: ["values", "updates"],
})) {
  events.push([chunk.event, chunk.data]);
}
const state = await client.threads.getState(thread.thread_id);
const again = await client.threads.get(thread.thread_id);
console.log(
  JSON.stringify({
    assistant_ids: assistants.map((a) => a.assistant_id),
    thread_metadata: thread.metadata,
    events: events.map(([event, data]) => (event === "metadata" ? [event, Object.keys(data).sort()] : [event, data])),
    values: state.values,
    next: state.next,
    checkpoint_id: state.checkpoint?.checkpoint_id ?? null,
    status: again.status,
  }),
);

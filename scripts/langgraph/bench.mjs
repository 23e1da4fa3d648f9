// The agentmesh benchmark's run in LangGraph.js: a hand-built ReAct graph (a model node and
// a tool node, looping while the model calls tools) checkpointed by MemorySaver, the same
// calculator tool, against the same scripted OpenAI-compatible model (BASE_URL). It makes RUNS
// runs of MESSAGE, at most CONCURRENCY at a time, each on a thread of its own (after WARMUP
// runs of WARMUP_MESSAGE, by default 20 of MESSAGE, that are not measured: the JIT's warm-up),
// and prints one
// JSON line: {"runs", "turns", "elapsed_ns", "cpu_ns"} (turns are model calls; cpu is this
// process's user and system time). `make bench-langgraph` runs it from the Go benchmark
// BenchmarkVsLangGraph.
import { ChatOpenAI } from "@langchain/openai";
import { tool } from "@langchain/core/tools";
import { HumanMessage } from "@langchain/core/messages";
import { MemorySaver, MessagesAnnotation, StateGraph, START, END } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

const env = (name, fallback) => process.env[name] ?? fallback;
const baseURL = env("BASE_URL");
const message = env("MESSAGE", "bench vs langgraph");
const runs = Number(env("RUNS", "1"));
const concurrency = Number(env("CONCURRENCY", "1"));
const warmup = Number(env("WARMUP", "20"));
const warmupMessage = env("WARMUP_MESSAGE", message);

const calculator = tool(
  async ({ expression }) => {
    const m = /^\s*(\d+)\s*\*\s*(\d+)\s*$/.exec(expression);
    return m ? String(Number(m[1]) * Number(m[2])) : "error: only a*b";
  },
  { name: "calculator", description: "Evaluates an arithmetic expression.", schema: z.object({ expression: z.string() }) },
);
const tools = [calculator];
const model = new ChatOpenAI({ model: "gpt-bench", apiKey: "bench-key", configuration: { baseURL }, maxRetries: 0 }).bindTools(tools);

let turns = 0;
const graph = new StateGraph(MessagesAnnotation)
  .addNode("agent", async (state) => {
    turns++;
    return { messages: [await model.invoke(state.messages)] };
  })
  .addNode("tools", new ToolNode(tools))
  .addEdge(START, "agent")
  .addConditionalEdges("agent", (state) => (state.messages.at(-1).tool_calls?.length ? "tools" : END))
  .addEdge("tools", "agent")
  .compile({ checkpointer: new MemorySaver() });

let next = 0; // runs started
let threads = 0; // threads used, warm-up included: each run has a new one
let took = []; // each measured run's time, from its start to its answer, in ns
async function worker(last, text) {
  while (next < last) {
    next++;
    const began = process.hrtime.bigint();
    await graph.invoke({ messages: [new HumanMessage(text)] }, { configurable: { thread_id: `run-${threads++}` }, recursionLimit: 200 });
    took.push(Number(process.hrtime.bigint() - began));
  }
}

await worker(warmup, warmupMessage);
turns = 0;
next = 0;
took = [];
const start = process.hrtime.bigint();
const cpu = process.cpuUsage();
await Promise.all(Array.from({ length: Math.min(concurrency, runs) }, () => worker(runs, message)));
const used = process.cpuUsage(cpu);
const elapsed = process.hrtime.bigint() - start;
took.sort((a, b) => a - b);
const percentile = (p) => took[Math.floor((took.length * p) / 100)];
console.log(JSON.stringify({
  runs, turns, elapsed_ns: Number(elapsed), cpu_ns: (used.user + used.system) * 1000,
  run_p50_ns: percentile(50), run_p99_ns: percentile(99),
}));

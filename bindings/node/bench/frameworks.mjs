// agent-session against the frameworks' own session stores, from
// Node.js, in the same run, interleaved in pairs (the machine is shared:
// read the ratios).
//
//   cd bindings/node && npm ci && npm rebuild better-sqlite3 && npm run build
//   node bench/frameworks.mjs [--pairs 5] [--events 1000] [--adk-events 200] [--reads 20]
//
// In each pair both stores run the same workload, one after the other,
// and which one goes first alternates from pair to pair; the table gives
// the median of the per-pair ratios (ours as many times as fast as
// theirs) and their spread.
//
// OpenAI Agents SDK for JS: its MemorySession (the SDK ships no SQLite
// session) against ours on SQLite. W1 appends --events items to one
// session, one item per addItems call; W2 as many round robin over 20
// sessions; W3 reads W1's session whole (getItems()) and its last 20.
// ADK-TS: its DatabaseSessionService on SQLite (createSqliteSessionService:
// kysely and better-sqlite3) against ours; Google ADK for JS: its
// DatabaseSessionService on SQLite (MikroORM with better-sqlite3) against
// ours: appendEvent of --adk-events events to one session, then
// getSession whole and with numRecentEvents 20. W4 searches the user's
// sessions, which no framework store can: an absolute figure. Each
// framework's workload has a store file of its own on both sides.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { createEvent as googleEvent } from "@google/adk";
import { DatabaseSessionService as GoogleDatabase } from "@google/adk/sessions/database";
import { Event as IqaiEvent, createSqliteSessionService } from "@iqai/adk";
import { BetterSqliteDriver } from "@mikro-orm/better-sqlite";
import { MemorySession, setTracingDisabled } from "@openai/agents";

import { Store } from "agent-session";
import { SessionService as GoogleOurs } from "agent-session/google-adk";
import { SessionService as IqaiOurs } from "agent-session/iqai-adk";
import { Session } from "agent-session/openai-agents";

setTracingDisabled(true);

const { values: args } = parseArgs({
  options: {
    pairs: { type: "string", default: "5" },
    events: { type: "string", default: "1000" },
    "adk-events": { type: "string", default: "200" },
    reads: { type: "string", default: "20" },
  },
});
const PAIRS = Number(args.pairs);
const EVENTS = Number(args.events);
const ADK_EVENTS = Number(args["adk-events"]);
const READS = Number(args.reads);

function item(n) {
  if (n % 10 === 9) {
    return { type: "function_call_result", callId: `call_${n}`, name: "lookup", status: "completed", output: `result ${n} `.repeat(20) };
  }
  return n % 2 === 0
    ? { role: "user", content: `turn ${n}: the user asks about order ORD-${n} ` + "detail ".repeat(20) }
    : {
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: `turn ${n}: about order ORD-${n} ` + "detail ".repeat(20) }],
      };
}

const content = (n) => ({
  role: n % 2 === 0 ? "user" : "model",
  parts: [{ text: `turn ${n}: the user asks about order ORD-${n} ` + "detail ".repeat(20) }],
});

const now = () => performance.now();

/** Appends to one session, one item per call: items/s. */
async function w1(session, events) {
  const start = now();
  for (let n = 0; n < events; n++) await session.addItems([item(n)]);
  return events / ((now() - start) / 1000);
}

let w2Run = 0;
/** Appends round robin over 20 sessions: items/s. */
async function w2(make, events) {
  const run = w2Run++;
  const sessions = Array.from({ length: 20 }, (_, i) => make(`w2-${run}-${i}`));
  const start = now();
  for (let n = 0; n < events; n++) await sessions[n % 20].addItems([item(n)]);
  return events / ((now() - start) / 1000);
}

/** Milliseconds per call. */
async function timed(calls, call) {
  const start = now();
  for (let i = 0; i < calls; i++) await call();
  return (now() - start) / calls;
}

/** appendEvent of `events` fresh events to one session: events/s. */
async function adkAppends(append, make, events) {
  const batch = Array.from({ length: events }, (_, n) => make(n));
  const start = now();
  for (const e of batch) await append(e);
  return events / ((now() - start) / 1000);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

class Row {
  constructor(name, unit, target) {
    Object.assign(this, { name, unit, target, ours: [], theirs: [] });
  }

  add([ours, theirs]) {
    this.ours.push(ours);
    this.theirs.push(theirs);
  }

  get ratios() {
    return this.ours.map((o, i) => (this.unit === "ms" ? this.theirs[i] / o : o / this.theirs[i]));
  }

  figure(xs) {
    const m = median(xs);
    return this.unit === "ms" ? `${m.toFixed(3)} ms` : `${Math.round(m).toLocaleString("en")} ${this.unit}`;
  }

  line() {
    const r = this.ratios;
    const m = median(r);
    const target = this.target ? `≥ ${this.target}×` : "—";
    const met = this.target ? (m >= this.target ? "yes" : "no") : "—";
    return `| ${this.name} | ${this.figure(this.ours)} | ${this.figure(this.theirs)} | ${m.toFixed(2)}× | ${Math.min(...r).toFixed(2)}–${Math.max(...r).toFixed(2)}× | ${target} | ${met} |`;
  }
}

/** Runs both, ours first or second: [ours, theirs]. */
async function pair(oursFirst, ours, theirs) {
  if (oursFirst) {
    const a = await ours();
    return [a, await theirs()];
  }
  const b = await theirs();
  return [await ours(), b];
}

const dir = mkdtempSync(join(tmpdir(), "agent-session-bench-"));
// One store file per framework, as each framework's own store has one:
// no store holds (and indexes) another framework's workload.
const store = await Store.open(`sqlite://${join(dir, "ours-openai.db")}`);
const iqaiStore = await Store.open(`sqlite://${join(dir, "ours-iqai.db")}`);
const googleStore = await Store.open(`sqlite://${join(dir, "ours-google.db")}`);
const oursMake = (id) => new Session(id, store, { userId: "ada" });
const theirsMake = (id) => new MemorySession({ sessionId: id });

const iqaiOurs = new IqaiOurs(iqaiStore);
const iqaiTheirs = createSqliteSessionService(join(dir, "iqai.db"));
const googleOurs = new GoogleOurs(googleStore);
const googleTheirs = new GoogleDatabase({ driver: BetterSqliteDriver, dbName: join(dir, "google.db") });
await googleTheirs.init();

const rows = {
  W1: new Row(`OpenAI W1 appends, one session (${EVENTS} items, 1 per call)`, "items/s"),
  W2: new Row(`OpenAI W2 appends, round robin over 20 sessions (${EVENTS} items)`, "items/s"),
  W3: new Row(`OpenAI W3 whole-session read (${EVENTS} items)`, "ms"),
  W3l: new Row(`OpenAI W3 last-20 read (of ${EVENTS} items)`, "ms"),
  I1: new Row(`ADK-TS \`appendEvent\` (${ADK_EVENTS} events)`, "events/s", 5),
  I2: new Row(`ADK-TS \`getSession\` (${ADK_EVENTS} events)`, "ms", 2),
  I3: new Row(`ADK-TS \`getSession\`, \`numRecentEvents: 20\``, "ms", 2),
  G1: new Row(`Google ADK \`appendEvent\` (${ADK_EVENTS} events)`, "events/s", 5),
  G2: new Row(`Google ADK \`getSession\` (${ADK_EVENTS} events)`, "ms", 2),
  G3: new Row(`Google ADK \`getSession\`, \`numRecentEvents: 20\``, "ms", 2),
};

const iqaiAppend = (service, session) => (e) => service.appendEvent(session, e);
const iqaiMake = (n) => new IqaiEvent({ invocationId: `inv-${n >> 2}`, author: n % 2 === 0 ? "user" : "model", content: content(n) });
const googleAppend = (service, session) => (e) => service.appendEvent({ session, event: e });
const googleMake = (n) => googleEvent({ invocationId: `inv-${n >> 2}`, author: n % 2 === 0 ? "user" : "model", content: content(n) });

// Warm-up (JIT, lazily built statements, SQLite caches): not counted.
for (const make of [oursMake, theirsMake]) {
  const s = make(`warm-${Math.random()}`);
  await w1(s, 50);
  await s.getItems();
  await s.getItems(20);
}
for (const [svc, append] of [[iqaiOurs, iqaiAppend], [iqaiTheirs, iqaiAppend]]) {
  const s = await svc.createSession("bench", "ada");
  await adkAppends(append(svc, s), iqaiMake, 20);
  await svc.getSession("bench", "ada", s.id);
}
for (const svc of [googleOurs, googleTheirs]) {
  const s = await svc.createSession({ appName: "bench", userId: "ada" });
  await adkAppends(googleAppend(svc, s), googleMake, 20);
  await svc.getSession({ appName: "bench", userId: "ada", sessionId: s.id });
}

for (let p = 0; p < PAIRS; p++) {
  const first = p % 2 === 0;
  const ours = oursMake(`s-${p}`);
  const theirs = theirsMake(`s-${p}`);
  rows.W1.add(await pair(first, () => w1(ours, EVENTS), () => w1(theirs, EVENTS)));
  rows.W2.add(await pair(first, () => w2(oursMake, EVENTS), () => w2(theirsMake, EVENTS)));
  rows.W3.add(await pair(first, () => timed(READS, () => ours.getItems()), () => timed(READS, () => theirs.getItems())));
  rows.W3l.add(await pair(first, () => timed(READS * 10, () => ours.getItems(20)), () => timed(READS * 10, () => theirs.getItems(20))));

  const io = await iqaiOurs.createSession("bench", "ada");
  const it = await iqaiTheirs.createSession("bench", "ada");
  rows.I1.add(await pair(first, () => adkAppends(iqaiAppend(iqaiOurs, io), iqaiMake, ADK_EVENTS), () => adkAppends(iqaiAppend(iqaiTheirs, it), iqaiMake, ADK_EVENTS)));
  const iget = (svc, id, config) => () => svc.getSession("bench", "ada", id, config);
  rows.I2.add(await pair(first, () => timed(READS, iget(iqaiOurs, io.id)), () => timed(READS, iget(iqaiTheirs, it.id))));
  rows.I3.add(await pair(first, () => timed(READS * 10, iget(iqaiOurs, io.id, { numRecentEvents: 20 })), () => timed(READS * 10, iget(iqaiTheirs, it.id, { numRecentEvents: 20 }))));

  const go = await googleOurs.createSession({ appName: "bench", userId: "ada" });
  const gt = await googleTheirs.createSession({ appName: "bench", userId: "ada" });
  rows.G1.add(await pair(first, () => adkAppends(googleAppend(googleOurs, go), googleMake, ADK_EVENTS), () => adkAppends(googleAppend(googleTheirs, gt), googleMake, ADK_EVENTS)));
  const gget = (svc, id, config) => () => svc.getSession({ appName: "bench", userId: "ada", sessionId: id, config });
  rows.G2.add(await pair(first, () => timed(READS, gget(googleOurs, go.id)), () => timed(READS, gget(googleTheirs, gt.id))));
  rows.G3.add(await pair(first, () => timed(READS * 10, gget(googleOurs, go.id, { numRecentEvents: 20 })), () => timed(READS * 10, gget(googleTheirs, gt.id, { numRecentEvents: 20 }))));
}

const searchMs = await timed(50, () => store.search("openai-agents", "ada", "ORD-7 ORD-8", { any: true, ranked: true }));

const command = `node bench/frameworks.mjs ${process.argv.slice(2).join(" ")}`.trim();
console.log(
  `\`${command}\` — ${new Date().toISOString().slice(0, 10)}, ${PAIRS} interleaved pairs, Node.js ${process.versions.node}, ` +
    `SQLite files in ${dir}`,
);
console.log();
console.log(
  "Theirs: `MemorySession` for OpenAI W1–W3 (in memory), ADK-TS's `DatabaseSessionService` on SQLite " +
    "(kysely, better-sqlite3), Google ADK's `DatabaseSessionService` on SQLite (MikroORM, better-sqlite3). " +
    "Ratio: ours as many times as fast as theirs, per pair (median, min–max).",
);
console.log();
console.log("| workload | ours | theirs | ratio (median) | min–max | target | met |");
console.log("|---|---|---|---|---|---|---|");
for (const row of Object.values(rows)) console.log(row.line());
console.log();
console.log(`W4 search across the user's sessions (any word, ranked): ${searchMs.toFixed(2)} ms per query (no framework store can search).`);
await googleTheirs.orm?.close?.();
for (const s of [store, iqaiStore, googleStore]) s.close();

// The Google ADK for JS (@google/adk) adapters under ADK's own runner,
// with a scripted model (no network), on SQLite and PostgreSQL: the
// conversation continues across runs, function calls pair, state scopes
// persist as ADK defines them (temp: never stored, null kept), reads
// filter in milliseconds, an event appended again under its id replaces
// it, sessions list with and without a user, and the memory service
// recalls through ADK's memory tool.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  BaseLlm,
  FunctionTool,
  InMemorySessionService,
  LlmAgent,
  LoadMemoryTool,
  Runner,
  createEvent,
  getFunctionCalls,
  getFunctionResponses,
  isFinalResponse,
} from "@google/adk";
import { z } from "zod";

import { AlreadyExistsError, Store } from "agent-session";
import { MemoryService, SessionService } from "agent-session/google-adk";

import { storeKinds } from "./support.mjs";

const APP = "weather";

/** A model answering each call with the next scripted response; it records each request's contents. */
class Scripted extends BaseLlm {
  constructor(turns) {
    super({ model: "scripted" });
    this.turns = [...turns];
    this.seen = [];
  }

  async *generateContentAsync(request) {
    this.seen.push(structuredClone(request.contents));
    const next = this.turns.shift();
    if (next === undefined) throw new Error("the script has no more turns");
    yield next;
  }

  async connect() {
    throw new Error("not used");
  }
}

const say = (text) => ({ content: { role: "model", parts: [{ text }] } });
const callTool = (id, name, args) => ({ content: { role: "model", parts: [{ functionCall: { id, name, args } }] } });
const message = (text) => ({ role: "user", parts: [{ text }] });

const remember = new FunctionTool({
  name: "remember_city",
  description: "Remembers the favourite city of the user for later turns.",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }, ctx) => {
    ctx.state.set("user:favorite_city", city);
    ctx.state.set("temp:scratch", "never stored");
    ctx.state.set("last_city", city);
    ctx.state.set("cleared", null);
    return { saved: city };
  },
});

function runnerWith(model, sessionService, memoryService, tools = [remember]) {
  const agent = new LlmAgent({ name: "assistant", description: "Helps.", model, instruction: "Help.", tools });
  return new Runner({ appName: APP, agent, sessionService, ...(memoryService ? { memoryService } : {}) });
}

async function drain(runner, userId, sessionId, text) {
  const events = [];
  for await (const e of runner.runAsync({ userId, sessionId, newMessage: message(text) })) events.push(e);
  return events;
}

for (const [kind, makeUrl] of await storeKinds()) {
  describe(`the Google ADK session service on ${kind}`, () => {
    it("continues a conversation across runs with tools and state scopes", async () => {
      const service = new SessionService(await Store.open(makeUrl()));
      const session = await service.createSession({ appName: APP, userId: "ada", state: { step: 1, "temp:x": 1 } });
      assert.ok(!("temp:x" in session.state));
      const model = new Scripted([callTool("c1", "remember_city", { city: "Paris" }), say("Noted: Paris."), say("Still Paris.")]);
      const runner = runnerWith(model, service);
      await drain(runner, "ada", session.id, "Remember Paris.");
      await drain(runner, "ada", session.id, "Which city?");

      const seen = model.seen[2];
      const texts = seen.map((c) => c.parts.map((p) => p.text ?? (p.functionCall ? "call" : p.functionResponse ? "response" : "")).join(""));
      assert.deepEqual(texts, ["Remember Paris.", "call", "response", "Noted: Paris.", "Which city?"]);

      const got = await service.getSession({ appName: APP, userId: "ada", sessionId: session.id });
      assert.equal(got.events.length, 6);
      assert.equal(getFunctionCalls(got.events[1])[0].id, getFunctionResponses(got.events[2])[0].id, "the call pairs with its response");
      assert.ok(isFinalResponse(got.events[5]));
      assert.equal(got.state.step, 1);
      assert.equal(got.state.last_city, "Paris");
      assert.equal(got.state["user:favorite_city"], "Paris");
      assert.ok("cleared" in got.state && got.state.cleared === null, "a null state value is kept, as in ADK");
      assert.ok(!("temp:scratch" in got.state), "temp: state is never stored");
      assert.ok(
        got.events.every((e) => !Object.keys(e.actions?.stateDelta ?? {}).some((k) => k.startsWith("temp:"))),
        "nor in the events' deltas",
      );
      assert.equal(got.lastUpdateTime, got.events[5].timestamp);

      const other = await service.createSession({ appName: APP, userId: "ada" });
      assert.equal((await service.getSession({ appName: APP, userId: "ada", sessionId: other.id })).state["user:favorite_city"], "Paris");
      assert.equal(await service.getSession({ appName: APP, userId: "bob", sessionId: session.id }), undefined);
      const bobs = await service.createSession({ appName: APP, userId: "bob", sessionId: session.id });
      assert.equal(bobs.id, session.id, "ids are scoped per (app, user)");
      await assert.rejects(service.createSession({ appName: APP, userId: "bob", sessionId: session.id }), AlreadyExistsError);
    });

    it("reads recent events and those after a time in milliseconds, and replaces an event by id", async () => {
      const service = new SessionService(await Store.open(makeUrl()));
      const session = await service.createSession({ appName: APP, userId: "ada" });
      for (let n = 0; n < 5; n++) {
        await service.appendEvent({
          session,
          event: createEvent({ author: "user", invocationId: `inv-${n}`, timestamp: 1_700_000_000_000 + n, content: message(`m${n}`) }),
        });
      }
      const get = (config) => service.getSession({ appName: APP, userId: "ada", sessionId: session.id, config });
      assert.deepEqual((await get({ numRecentEvents: 2 })).events.map((e) => e.content.parts[0].text), ["m3", "m4"]);
      assert.deepEqual((await get({ afterTimestamp: 1_700_000_000_003 })).events.map((e) => e.content.parts[0].text), ["m3", "m4"]);
      assert.equal((await get()).lastUpdateTime, 1_700_000_000_004);

      const again = { ...session.events[1], content: message("m1, edited") };
      await service.appendEvent({ session, event: again });
      const texts = (await get()).events.map((e) => e.content.parts[0].text);
      assert.deepEqual(texts, ["m0", "m1, edited", "m2", "m3", "m4"], "the same id replaces the event, as in ADK");
      assert.deepEqual(session.events.map((e) => e.content.parts[0].text), texts);
    });

    it("lists sessions with and without a user, paged, and deletes", async () => {
      const service = new SessionService(await Store.open(makeUrl()));
      for (const [user, id] of [["ada", "a1"], ["ada", "a2"], ["bob", "b1"]]) {
        await service.createSession({ appName: APP, userId: user, sessionId: id });
      }
      const mine = await service.listSessions({ appName: APP, userId: "ada", order: "asc" });
      assert.deepEqual(mine.sessions.map((s) => s.id).sort(), ["a1", "a2"]);
      assert.equal(mine.totalItems, 2);
      const all = await service.listSessions({ appName: APP, limit: 2, page: 2 });
      assert.equal(all.totalItems, 3);
      assert.equal(all.totalPages, 2);
      assert.equal(all.sessions.length, 1);
      const reference = new InMemorySessionService();
      for (const [user, id] of [["ada", "a1"], ["ada", "a2"], ["bob", "b1"]]) {
        await reference.createSession({ appName: APP, userId: user, sessionId: id });
      }
      const theirs = await reference.listSessions({ appName: APP, limit: 2, page: 2 });
      assert.deepEqual({ ...all, sessions: all.sessions.length }, { ...theirs, sessions: theirs.sessions.length }, "paged as ADK's own service");
      await service.deleteSession({ appName: APP, userId: "ada", sessionId: "a1" });
      await service.deleteSession({ appName: APP, userId: "ada", sessionId: "never-was" });
      assert.equal(await service.getSession({ appName: APP, userId: "ada", sessionId: "a1" }), undefined);
    });

    it("recalls across sessions with the memory service and ADK's memory tool", async () => {
      const store = await Store.open(makeUrl());
      const service = new SessionService(store);
      const memory = new MemoryService(store);
      const first = await service.createSession({ appName: APP, userId: "ada" });
      await drain(runnerWith(new Scripted([say("Your parcel PX-42 ships Friday.")]), service, memory), "ada", first.id, "When does PX-42 ship?");
      await memory.addSessionToMemory(await service.getSession({ appName: APP, userId: "ada", sessionId: first.id }));
      const found = await memory.searchMemory({ appName: APP, userId: "ada", query: "PX-42 Friday" });
      assert.ok(found.memories.some((m) => m.content.parts[0].text.includes("Friday")));
      assert.deepEqual((await memory.searchMemory({ appName: APP, userId: "bob", query: "PX-42" })).memories, []);

      const second = await service.createSession({ appName: APP, userId: "ada" });
      const model = new Scripted([callTool("m1", "load_memory", { query: "PX-42" }), say("It ships Friday.")]);
      await drain(runnerWith(model, service, memory, [new LoadMemoryTool()]), "ada", second.id, "When did you say PX-42 ships?");
      const response = model.seen[1].flatMap((c) => c.parts).find((p) => p.functionResponse);
      assert.match(JSON.stringify(response.functionResponse.response), /Friday/);
    });
  });
}

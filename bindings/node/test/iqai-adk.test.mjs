// The ADK-TS (@iqai/adk) adapters under ADK's own runner, with a scripted
// model (no network), on SQLite and PostgreSQL: the conversation
// continues across runs, function calls pair with their responses, state
// scopes persist as ADK defines them (temp: never stored), events come
// back as ADK's Event, reads filter, sessions of other users stay
// unseen, the runner's rewind restores, and the memory service recalls.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { BaseLlm, Event, InMemorySessionService, LlmAgent, LlmResponse, LoadMemoryTool, Runner, createTool } from "@iqai/adk";
import { z } from "zod";

import { AlreadyExistsError, Store } from "agent-session";
import { MemoryService, SessionService } from "agent-session/iqai-adk";

import { storeKinds } from "./support.mjs";

const APP = "weather";

/** A model answering each call with the next scripted response; it records each request's contents. */
class Scripted extends BaseLlm {
  constructor(turns) {
    super("scripted");
    this.turns = [...turns];
    this.seen = [];
  }

  async *generateContentAsyncImpl(request) {
    this.seen.push(structuredClone(request.contents));
    const next = this.turns.shift();
    if (next === undefined) throw new Error("the script has no more turns");
    yield next;
  }
}

const say = (text) => new LlmResponse({ content: { role: "model", parts: [{ text }] } });
const callTool = (id, name, args) => new LlmResponse({ content: { role: "model", parts: [{ functionCall: { id, name, args } }] } });
const message = (text) => ({ role: "user", parts: [{ text }] });

const remember = createTool({
  name: "remember_city",
  description: "Remembers the favourite city of the user for later turns.",
  schema: z.object({ city: z.string() }),
  fn: async ({ city }, ctx) => {
    ctx.state["user:favorite_city"] = city;
    ctx.state["temp:scratch"] = "never stored";
    ctx.state.last_city = city;
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
  describe(`the ADK-TS session service on ${kind}`, () => {
    it("continues a conversation across runs with tools and state scopes", async () => {
      const store = await Store.open(makeUrl());
      const service = new SessionService(store);
      const session = await service.createSession(APP, "ada", { step: 1 });
      const model = new Scripted([callTool("c1", "remember_city", { city: "Paris" }), say("Noted: Paris."), say("Still Paris.")]);
      const runner = runnerWith(model, service);
      await drain(runner, "ada", session.id, "Remember Paris.");
      await drain(runner, "ada", session.id, "Which city?");

      // The third model call saw the whole first run, then the new question.
      const seen = model.seen[2];
      const texts = seen.map((c) => c.parts.map((p) => p.text ?? (p.functionCall ? "call" : p.functionResponse ? "response" : "")).join(""));
      assert.deepEqual(texts, ["Remember Paris.", "call", "response", "Noted: Paris.", "Which city?"]);

      const got = await service.getSession(APP, "ada", session.id);
      assert.equal(got.events.length, 6);
      assert.ok(got.events.every((e) => e instanceof Event), "events come back as ADK's Event");
      const call = got.events[1].getFunctionCalls()[0];
      const response = got.events[2].getFunctionResponses()[0];
      assert.equal(call.id, response.id, "the call pairs with its response");
      assert.ok(got.events[5].isFinalResponse());
      assert.equal(got.state.step, 1);
      assert.equal(got.state.last_city, "Paris");
      assert.equal(got.state["user:favorite_city"], "Paris");
      assert.ok(!("temp:scratch" in got.state), "temp: state is never stored");
      assert.ok(
        got.events.every((e) => !Object.keys(e.actions?.stateDelta ?? {}).some((k) => k.startsWith("temp:"))),
        "nor in the events' deltas",
      );
      assert.equal(got.lastUpdateTime, got.events[5].timestamp);

      // The user: key reaches the user's other sessions; nothing of it reaches another user.
      const other = await service.createSession(APP, "ada");
      assert.equal((await service.getSession(APP, "ada", other.id)).state["user:favorite_city"], "Paris");
      assert.equal(await service.getSession(APP, "bob", session.id), undefined);
      const bobs = await service.createSession(APP, "bob", {}, session.id);
      assert.equal(bobs.id, session.id, "ids are scoped per (app, user)");
      assert.deepEqual((await service.getSession(APP, "bob", session.id)).events, []);
    });

    it("reads the most recent events and those after a time", async () => {
      const store = await Store.open(makeUrl());
      const service = new SessionService(store);
      const session = await service.createSession(APP, "ada");
      for (let n = 0; n < 5; n++) {
        await service.appendEvent(
          session,
          new Event({ author: "user", invocationId: `inv-${n}`, timestamp: 1000 + n, content: message(`m${n}`) }),
        );
      }
      const recent = await service.getSession(APP, "ada", session.id, { numRecentEvents: 2 });
      assert.deepEqual(recent.events.map((e) => e.content.parts[0].text), ["m3", "m4"]);
      const after = await service.getSession(APP, "ada", session.id, { afterTimestamp: 1003 });
      assert.deepEqual(after.events.map((e) => e.timestamp), [1003, 1004]);
      assert.equal(recent.lastUpdateTime, 1004);
      const partial = new Event({ author: "model", partial: true, content: message("half") });
      await service.appendEvent(session, partial);
      assert.equal((await service.getSession(APP, "ada", session.id)).events.length, 5, "a partial event is not stored");
    });

    it("lists, ends and deletes sessions, and refuses a taken id", async () => {
      const store = await Store.open(makeUrl());
      const service = new SessionService(store);
      const a = await service.createSession(APP, "ada", {}, "  s1  ");
      assert.equal(a.id, "s1");
      await assert.rejects(service.createSession(APP, "ada", {}, "s1"), AlreadyExistsError);
      await service.createSession(APP, "ada", {}, "s 2/é");
      const listed = await service.listSessions(APP, "ada");
      assert.deepEqual(listed.sessions.map((s) => s.id).sort(), ["s 2/é", "s1"]);
      assert.ok(listed.sessions.every((s) => s.events.length === 0));
      const ended = await service.endSession(APP, "ada", "s1");
      assert.equal(ended.id, "s1");
      await assert.rejects(
        service.appendEvent(ended, new Event({ author: "user", content: message("late") })),
        { name: "SessionEndedError" },
      );
      await service.deleteSession(APP, "ada", "s1");
      await service.deleteSession(APP, "ada", "never-was");
      assert.equal(await service.getSession(APP, "ada", "s1"), undefined);
      assert.equal(await service.endSession(APP, "ada", "s1"), undefined);
    });

    it("rewinds through ADK's runner as ADK's own in-memory service does", async () => {
      // The same script over ADK's InMemorySessionService and over ours:
      // the state after the rewind and what the model sees next are the
      // same (ADK-TS 0.5.9 keeps the rewound run's events before its last
      // one in the model's context, with its own service too).
      const scenario = async (service) => {
        const session = await service.createSession(APP, "ada");
        const model = new Scripted([
          callTool("c1", "remember_city", { city: "Paris" }),
          say("Noted: Paris."),
          callTool("c2", "remember_city", { city: "Rome" }),
          say("Noted: Rome."),
          say("Paris, then."),
        ]);
        const runner = runnerWith(model, service);
        await drain(runner, "ada", session.id, "Remember Paris.");
        await drain(runner, "ada", session.id, "No, Rome.");
        const before = await service.getSession(APP, "ada", session.id);
        const second = before.events.find((e) => e.content?.parts?.[0]?.text === "No, Rome.").invocationId;
        await runner.rewind({ userId: "ada", sessionId: session.id, rewindBeforeInvocationId: second });
        const after = await service.getSession(APP, "ada", session.id);
        await drain(runner, "ada", session.id, "Which city?");
        const texts = model.seen[4].map((c) => c.parts.map((p) => p.text ?? Object.keys(p).join()).join(""));
        return { before: before.state.last_city, after: after.state.last_city, texts };
      };
      const ours = await scenario(new SessionService(await Store.open(makeUrl())));
      assert.equal(ours.before, "Rome");
      assert.equal(ours.after, "Paris", "the session state is as before the rewound run");
      assert.deepEqual(ours, await scenario(new InMemorySessionService()));
    });

    it("recalls across sessions with the memory service and ADK's memory tool", async () => {
      const store = await Store.open(makeUrl());
      const service = new SessionService(store);
      const memory = new MemoryService(store);
      const first = await service.createSession(APP, "ada");
      await drain(runnerWith(new Scripted([say("Your parcel PX-42 ships Friday.")]), service, memory), "ada", first.id, "When does PX-42 ship?");
      await service.endSession(APP, "ada", first.id);
      await memory.addSessionToMemory(await service.getSession(APP, "ada", first.id));
      const found = await memory.searchMemory({ appName: APP, userId: "ada", query: "PX-42 Friday" });
      assert.ok(found.memories.some((m) => m.content.parts[0].text.includes("Friday")));
      assert.ok(found.memories.every((m) => !Number.isNaN(Date.parse(m.timestamp))));
      assert.deepEqual((await memory.searchMemory({ appName: APP, userId: "bob", query: "PX-42" })).memories, []);

      // A session of another service is copied in, events only.
      const elsewhere = new InMemorySessionService();
      const foreign = await elsewhere.createSession(APP, "ada");
      await elsewhere.appendEvent(foreign, new Event({ author: "user", content: message("the blue teapot") }));
      await memory.addSessionToMemory(await elsewhere.getSession(APP, "ada", foreign.id));
      assert.equal((await memory.searchMemory({ appName: APP, userId: "ada", query: "teapot" })).memories.length, 1);

      // Under the runner, ADK's memory tool finds the earlier session.
      const second = await service.createSession(APP, "ada");
      const model = new Scripted([callTool("m1", "load_memory", { query: "PX-42" }), say("It ships Friday.")]);
      await drain(runnerWith(model, service, memory, [new LoadMemoryTool()]), "ada", second.id, "When did you say PX-42 ships?");
      const response = model.seen[1].flatMap((c) => c.parts).find((p) => p.functionResponse);
      assert.match(JSON.stringify(response.functionResponse.response), /Friday/);
    });
  });
}

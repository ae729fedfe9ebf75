// The OpenAI Agents SDK for JS adapter under the SDK's own runner, with a
// scripted model (no network), on SQLite and PostgreSQL: the conversation
// continues across runs, tool calls pair with their results, items come
// back unchanged (binary data included), two sessions never see each
// other's items, a run rewinds, compaction keeps the archive searchable,
// and history transactions apply once.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Agent, Usage, run, setTracingDisabled, tool } from "@openai/agents";

import { Store } from "agent-session";
import { Session, chatView } from "agent-session/openai-agents";

import { storeKinds } from "./support.mjs";

setTracingDisabled(true);

/** A model answering each call with the next scripted turn; it records each call's input. */
class ScriptedModel {
  constructor(turns) {
    this.turns = [...turns];
    this.inputs = [];
  }

  async getResponse(request) {
    this.inputs.push(structuredClone(request.input));
    const output = this.turns.shift();
    if (output === undefined) throw new Error("the script has no more turns");
    return { usage: new Usage(), output, responseId: undefined };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse() {
    throw new Error("not used");
  }
}

const say = (text, n) => ({
  id: `msg_${n}`,
  type: "message",
  role: "assistant",
  status: "completed",
  content: [{ type: "output_text", text }],
});

const REASONING = {
  id: "rs_1",
  type: "reasoning",
  content: [{ type: "input_text", text: "The user wants the weather: call the tool." }],
  providerData: { encryptedContent: "opaque-blob-123" },
};

const getWeather = tool({
  name: "get_weather",
  description: "The weather in a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false,
  },
  strict: true,
  execute: async (input) => `sunny in ${input.city}`,
});

const agentWith = (model, tools = [getWeather]) => new Agent({ name: "assistant", instructions: "Help.", model, tools });

for (const [kind, makeUrl] of await storeKinds()) {
  describe(`the OpenAI Agents session on ${kind}`, () => {
    it("continues a conversation across runs with tools and reasoning", async () => {
      const store = await Store.open(makeUrl());
      const call = {
        id: "fc_1",
        type: "function_call",
        callId: "call_1",
        name: "get_weather",
        arguments: '{"city":"Paris"}',
        status: "completed",
      };
      const model = new ScriptedModel([[REASONING, call], [say("It is sunny in Paris.", 1)], [say("Tomorrow too.", 2)]]);
      const session = new Session("chat-1", store, { app: "weather", userId: "ada" });
      const first = await run(agentWith(model), "Weather in Paris?", { session });
      assert.equal(first.finalOutput, "It is sunny in Paris.");
      const second = await run(agentWith(model), "And tomorrow?", { session });
      assert.equal(second.finalOutput, "Tomorrow too.");

      // The third model call saw the whole first run, then the new question.
      const seen = model.inputs[2];
      assert.deepEqual(
        seen.map((i) => i.type ?? "message"),
        ["message", "reasoning", "function_call", "function_call_result", "message", "message"],
      );
      assert.equal(seen[2].callId, "call_1");
      assert.equal(seen[3].callId, "call_1", "the call pairs with its result");

      const items = await session.getItems();
      assert.equal(items.length, 7, "5 items of the first run, 2 of the second");
      assert.deepEqual(items[1], { ...REASONING }, "reasoning comes back unchanged");
      assert.deepEqual(await session.getItems(2), items.slice(-2));
      assert.deepEqual(await session.getItems(0), []);

      // Another session id, or another user, sees nothing of it.
      assert.deepEqual(await new Session("chat-2", store, { app: "weather", userId: "ada" }).getItems(), []);
      assert.deepEqual(await new Session("chat-1", store, { app: "weather", userId: "bob" }).getItems(), []);

      // The chat view of the same events is searchable, and each run is one invocation.
      const hits = await store.search("weather", "ada", "Paris");
      assert.ok(hits.items.length > 0, "recall finds the conversation");
      const id = await session.storeSessionId();
      const archive = await store.events("weather", "ada", id, { view: "archive", pageSize: 100 });
      const runs = new Set(archive.items.map((e) => e.invocation_id));
      assert.equal(runs.size, 2, "two runs, two invocations");
      const lastRun = archive.items[archive.items.length - 1].invocation_id;
      await store.rewind("weather", "ada", id, { invocationId: lastRun });
      assert.deepEqual(await session.getItems(), items.slice(0, 5), "the second run rewound");
    });

    it("keeps every item unchanged, binary data included", async () => {
      const store = await Store.open(makeUrl());
      const session = new Session("chat-bytes", store, { userId: "ada" });
      const bytes = new Uint8Array([0, 1, 2, 250, 255]);
      const buffer = Buffer.from("a file's bytes");
      const items = [
        { type: "message", role: "user", content: [{ type: "input_text", text: "what is this?" }, { type: "input_image", image: bytes }] },
        { type: "message", role: "developer", content: "be brief" },
        { type: "function_call_result", callId: "c9", name: "lookup", status: "completed", output: { type: "text", text: "found" } },
        { type: "hosted_tool_call", name: "web_search", status: "completed", providerData: { query: "weather" } },
        { type: "message", role: "user", content: [{ type: "input_file", file: buffer }] },
      ];
      await session.addItems(items);
      const back = await session.getItems();
      assert.deepEqual(back.slice(0, 4), items.slice(0, 4));
      assert.ok(back[0].content[1].image instanceof Uint8Array);
      const file = back[4].content[0].file;
      assert.ok(file instanceof Uint8Array && Buffer.from(file).equals(buffer), "a Buffer comes back as its bytes");
      const stored = await store.events("openai-agents", "ada", await session.storeSessionId());
      assert.deepEqual(stored.items.map((e) => e.message), [
        { role: "user", content: "what is this?" },
        { role: "system", content: "be brief" },
        { role: "tool", tool_call_id: "c9", content: "found" },
        chatView(JSON.parse(JSON.stringify(items[3]))),
        { role: "user", content: "" },
      ]);
    });

    it("pops and clears", async () => {
      const store = await Store.open(makeUrl());
      const session = new Session("chat-pop", store, { userId: "ada" });
      await session.addItems([
        { role: "user", content: "one" },
        { role: "assistant", content: "two" },
      ]);
      assert.deepEqual(await session.popItem(), { role: "assistant", content: "two" });
      assert.deepEqual(await session.getItems(), [{ role: "user", content: "one" }]);
      await session.clearSession();
      assert.deepEqual(await session.getItems(), []);
      assert.equal(await session.popItem(), undefined);
      await session.addItems([{ role: "user", content: "again" }]);
      assert.equal((await session.getItems()).length, 1);
    });

    it("compacts automatically and finds the compacted turns with its search tool", async () => {
      const store = await Store.open(makeUrl());
      const session = new Session("chat-long", store, {
        userId: "ada",
        compaction: { strategy: "summarize", keep: 1, trigger: { tokens: 200 } },
      });
      for (let n = 0; n < 12; n++) {
        await session.addItems([
          { role: "user", content: `question ${n} about parcel PX-${n} and its delivery window` },
          { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: `answer ${n}: PX-${n} ships soon` }] },
        ]);
      }
      const items = await session.getItems();
      assert.ok(items.length < 24, "the context was compacted");
      assert.equal(items[0].type, "message", "the summary reads as a message item");
      const search = session.searchTool();
      assert.equal(search.name, "conversation_search");
      const model = new ScriptedModel([
        [{ type: "function_call", callId: "s1", name: "conversation_search", arguments: '{"query":"PX-0","page":0}', status: "completed" }],
        [say("PX-0 was asked about first.", 1)],
      ]);
      const result = await run(agentWith(model, [search]), "What did I ask first?", { session });
      assert.equal(result.finalOutput, "PX-0 was asked about first.");
      const answer = model.inputs[1].find((i) => i.type === "function_call_result");
      assert.match(JSON.stringify(answer.output), /PX-0/, "the tool found the compacted turn");
    });

    it("applies a history transaction once per operation id", async () => {
      const store = await Store.open(makeUrl());
      const session = new Session("chat-tx", store, { userId: "ada" });
      await session.addItems([{ role: "user", content: "one" }]);
      const append = { type: "append_items", items: [{ role: "assistant", content: "two" }] };
      await session.applyHistoryTransaction({ operationId: "op-1", transaction: append });
      await session.applyHistoryTransaction({ operationId: "op-1", transaction: append });
      assert.deepEqual(await session.getItems(), [
        { role: "user", content: "one" },
        { role: "assistant", content: "two" },
      ]);
      // The SDK's UserError, by name: its ES module and CommonJS builds
      // each have their own class.
      const userError = { name: "UserError" };
      await assert.rejects(
        session.applyHistoryTransaction({ operationId: "op-1", transaction: { type: "append_items", items: [] } }),
        userError,
      );
      const replace = {
        type: "replace_suffix",
        expectedSuffix: [{ role: "assistant", content: "two" }],
        replacement: [{ role: "assistant", content: "2" }],
      };
      await session.applyHistoryTransaction({ operationId: "op-2", transaction: replace });
      await session.applyHistoryTransaction({ operationId: "op-2", transaction: replace });
      assert.deepEqual(await session.getItems(), [
        { role: "user", content: "one" },
        { role: "assistant", content: "2" },
      ]);
      const stale = { ...replace, expectedSuffix: [{ role: "assistant", content: "two" }] };
      await assert.rejects(session.applyHistoryTransaction({ operationId: "op-3", transaction: stale }), userError);
      await assert.rejects(session.applyHistoryTransaction({ operationId: " ", transaction: append }), userError);
      const hits = await store.search("openai-agents", "ada", "two");
      assert.equal(hits.items.length, 1, "the archive keeps the replaced item");

      // A transaction that writes nothing is recorded all the same.
      const nothing = { type: "append_items", items: [] };
      await session.applyHistoryTransaction({ operationId: "op-4", transaction: nothing });
      await session.applyHistoryTransaction({ operationId: "op-4", transaction: nothing });
      await assert.rejects(session.applyHistoryTransaction({ operationId: "op-4", transaction: append }), userError);
      // An empty expected suffix matches any history: the replacement is appended.
      const tail = { type: "replace_suffix", expectedSuffix: [], replacement: [{ role: "user", content: "three" }] };
      await session.applyHistoryTransaction({ operationId: "op-5", transaction: tail });
      assert.deepEqual((await session.getItems()).map((i) => i.content), ["one", "2", "three"]);
      // Two calls of one operation with different transactions: the second throws.
      const a = { type: "append_items", items: [{ role: "user", content: "a" }] };
      const b = { type: "append_items", items: [{ role: "user", content: "b" }] };
      const both = await Promise.allSettled([
        session.applyHistoryTransaction({ operationId: "op-6", transaction: a }),
        session.applyHistoryTransaction({ operationId: "op-6", transaction: b }),
      ]);
      assert.deepEqual(both.map((r) => r.status).sort(), ["fulfilled", "rejected"]);
      assert.equal((await session.getItems()).length, 4, "one of the two applied");
    });

    it("reads more than a page of the latest items", async () => {
      const store = await Store.open(makeUrl());
      const session = new Session("chat-big", store, { userId: "ada" });
      for (let chunk = 0; chunk < 4; chunk++) {
        await session.addItems(Array.from({ length: 300 }, (_, n) => ({ role: "user", content: `m${chunk * 300 + n}` })));
      }
      const last = await session.getItems(1100);
      assert.equal(last.length, 1100);
      assert.equal(last[0].content, "m100");
      assert.equal(last[1099].content, "m1199");
      assert.equal((await session.getItems()).length, 1200);
    });

    it("replaces the history with a compaction marker and its suffix", async () => {
      const store = await Store.open(makeUrl());
      const session = new Session("chat-marker", store, { userId: "ada" });
      await session.addItems([
        { role: "user", content: "a" },
        { role: "user", content: "b" },
        { role: "user", content: "c" },
      ]);
      const marker = { type: "compaction", encrypted_content: "opaque" };
      await session.replaceHistoryWithCompaction([marker, { role: "user", content: "c" }]);
      assert.deepEqual(await session.getItems(), [marker, { role: "user", content: "c" }]);
    });
  });
}

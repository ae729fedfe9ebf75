// Every call of the binding, on SQLite and on PostgreSQL, and each error
// kind as its error class.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";

import * as agentSession from "agent-session";
import {
  AlreadyExistsError,
  ConflictError,
  InvalidInputError,
  NotFoundError,
  QuotaExceededError,
  SessionEndedError,
  SessionError,
  Store,
  UnavailableError,
  event,
  fromNative,
  operations,
  uuid7,
} from "agent-session";

import { storeKinds, tempDir } from "./support.mjs";

const APP = "support";
const ADA = "ada";
const BOB = "bob";

for (const [kind, makeUrl] of await storeKinds()) {
  describe(`the store on ${kind}`, () => {
    const open = () => Store.open(makeUrl());

    it("creates, reads, lists and deletes sessions", async () => {
      const store = await open();
      const s = await store.create(APP, ADA, { key: "chat-1", metadata: { ticket: 7 }, state: { step: 1 } });
      assert.equal(s.user_id, ADA);
      assert.equal(s.key, "chat-1");
      assert.equal(s.version, 0);
      assert.deepEqual((await store.get(APP, ADA, s.id)).metadata, { ticket: 7 });
      const listed = await store.list(APP, ADA, { metadata: { ticket: 7 } });
      assert.deepEqual(listed.items.map((x) => x.id), [s.id]);
      const all = await store.listAll({ app: APP });
      assert.deepEqual(all.items.map((x) => x.id), [s.id]);
      await store.delete(APP, ADA, s.id);
      await assert.rejects(store.get(APP, ADA, s.id), NotFoundError);
    });

    it("answers another owner's session as an unknown one", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      const theirs = await store.get(APP, BOB, s.id).catch((e) => e);
      const unknown = await store.get(APP, BOB, "no-such-session").catch((e) => e);
      assert.ok(theirs instanceof NotFoundError && unknown instanceof NotFoundError);
      assert.equal(theirs.kind, unknown.kind);
      await assert.rejects(store.append(APP, BOB, s.id, { role: "user", content: "hi" }), NotFoundError);
      assert.equal((await store.get(APP, ADA, s.id)).event_count, 0);
    });

    it("round-trips messages in the chat shape", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      const call = {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"order": "ORD-1"}' } }],
      };
      const result = { role: "tool", tool_call_id: "call_1", content: "shipped" };
      const out = await store.append(APP, ADA, s.id, [{ role: "user", content: "where is ORD-1?" }, call, result]);
      assert.deepEqual(out.seqs, [1, 2, 3]);
      assert.equal(out.written, 3);
      const messages = await store.messages(APP, ADA, s.id);
      assert.deepEqual(messages[0], { role: "user", content: "where is ORD-1?" });
      assert.equal(messages[1].tool_calls[0].function.name, "lookup");
      assert.deepEqual(messages[2], result);
    });

    it("appends idempotently by event id", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      const e = event({ role: "user", content: "once" }, { id: "e-1" });
      const first = await store.appendEvents(APP, ADA, s.id, [e]);
      const again = await store.appendEvents(APP, ADA, s.id, [e]);
      assert.deepEqual(first.seqs, [1]);
      assert.deepEqual(again.seqs, [1]);
      assert.equal(again.written, 0);
    });

    it("reads events through filters", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      for (let n = 0; n < 30; n++) {
        await store.append(APP, ADA, s.id, { role: n % 2 === 0 ? "user" : "assistant", content: `message ${n}` });
      }
      const last = await store.events(APP, ADA, s.id, { lastN: 5 });
      assert.deepEqual(last.items.map((e) => e.seq), [26, 27, 28, 29, 30]);
      const users = await store.events(APP, ADA, s.id, { view: "archive", roles: ["user"], pageSize: 100 });
      assert.equal(users.items.length, 15);
      const after = await store.events(APP, ADA, s.id, { after: 28, pageSize: 10 });
      assert.deepEqual(after.items.map((e) => e.seq), [29, 30]);
    });

    it("answers the kept item of each event, or the event", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      const kept = { type: "function_call", call_id: "c1", name: "lookup", arguments: "{}" };
      await store.appendEvents(APP, ADA, s.id, [
        event({ role: "user", content: "plain" }),
        event({ role: "assistant", content: "call" }, { metadata: { item: kept } }),
      ]);
      const page = await store.items(APP, ADA, s.id, "item");
      assert.deepEqual(page.items, [null, kept]);
      const [[index, plain]] = page.events;
      assert.equal(index, 0);
      assert.deepEqual(plain.message, { role: "user", content: "plain" });
      assert.equal(page.has_more, false);
      const last = await store.items(APP, ADA, s.id, "item", { lastN: 1 });
      assert.deepEqual(last.items, [kept]);
      const first = await store.items(APP, ADA, s.id, "item", { page: 0, pageSize: 1 });
      assert.deepEqual(first.items, [null]);
      assert.equal(first.has_more, true);
      await assert.rejects(store.items(APP, BOB, s.id, "item"), NotFoundError);
    });

    it("pops the latest event and replaces the context by version", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      await store.append(APP, ADA, s.id, [{ role: "user", content: "one" }, { role: "assistant", content: "two" }]);
      const popped = await store.pop(APP, ADA, s.id);
      assert.deepEqual(popped.message, { role: "assistant", content: "two" });
      const version = (await store.get(APP, ADA, s.id)).version;
      const fresh = [event({ role: "user", content: "replaced" })];
      const next = await store.replaceContext(APP, ADA, s.id, fresh, version);
      assert.equal(next, version + 1);
      assert.deepEqual(await store.messages(APP, ADA, s.id), [{ role: "user", content: "replaced" }]);
      await assert.rejects(store.replaceContext(APP, ADA, s.id, fresh, version), ConflictError);
      const archive = await store.search(APP, ADA, "one", { sessionId: s.id });
      assert.equal(archive.items.length, 1, "the archive keeps what the context lost");
    });

    it("finds by search what compaction took out of the context", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      for (let n = 0; n < 8; n++) {
        await store.append(APP, ADA, s.id, [
          { role: "user", content: `order ORD-${n} is late` },
          { role: "assistant", content: `checking ORD-${n}` },
        ]);
      }
      const compacted = await store.compact(APP, ADA, s.id, { strategy: "summarize", keep: 2 });
      assert.ok(compacted.compacted && compacted.events_after < compacted.events_before);
      const context = await store.messages(APP, ADA, s.id);
      assert.ok(!context.some((m) => m.content === "order ORD-0 is late"));
      const hits = await store.search(APP, ADA, "ORD-0", { sessionId: s.id });
      assert.ok(hits.items.some((h) => h.snippet.includes("ORD-0")));
      const across = await store.search(APP, ADA, "ORD-3");
      assert.deepEqual([...new Set(across.items.map((h) => h.session_id))], [s.id]);
      const nothing = await store.compact(APP, ADA, s.id, { strategy: "summarize", keep: 2 });
      assert.equal(nothing.compacted, false);
      const missing = await store.compact(APP, ADA, s.id, { strategy: "sliding_window" }).catch((e) => e);
      assert.ok(missing instanceof InvalidInputError);
      assert.equal(missing.problem.field, "max_events");
    });

    it("searches for any term and since a time", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      await store.append(APP, ADA, s.id, [{ role: "user", content: "a plum" }, { role: "user", content: "a pear" }]);
      assert.deepEqual((await store.search(APP, ADA, "plum pear", { sessionId: s.id })).items, []);
      const hits = await store.search(APP, ADA, "plum pear", { sessionId: s.id, any: true });
      assert.deepEqual(hits.items.map((h) => h.event.message.content), ["a plum", "a pear"]);
      const sincePast = await store.search(APP, ADA, "plum", { sessionId: s.id, since: new Date("2000-01-01T00:00:00Z") });
      assert.equal(sincePast.items.length, 1);
      const later = await store.search(APP, ADA, "plum pear", { any: true, since: "2999-01-01T00:00:00Z" });
      assert.deepEqual(later.items, []);
      await assert.rejects(store.search(APP, ADA, "plum", { since: "yesterday" }), InvalidInputError);
    });

    it("rewinds a run and forks", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      await store.append(APP, ADA, s.id, { role: "user", content: "first" }, { invocationId: "run-1" });
      await store.append(APP, ADA, s.id, { role: "user", content: "second" }, { invocationId: "run-2" });
      const fork = await store.fork(APP, ADA, s.id);
      const rewound = await store.rewind(APP, ADA, s.id, { invocationId: "run-2" });
      assert.equal(rewound.event_count, 1);
      assert.equal((await store.messages(APP, ADA, fork.id)).length, 2, "the fork kept both");
      const early = await store.fork(APP, ADA, fork.id, { seq: 1 });
      assert.equal((await store.messages(APP, ADA, early.id)).length, 1);
      await store.rewind(APP, ADA, fork.id, { seq: 2 });
      assert.deepEqual((await store.messages(APP, ADA, fork.id)).map((m) => m.content), ["first"]);
    });

    it("keeps state by scope", async () => {
      const store = await open();
      const s = await store.create(APP, ADA, { state: { step: 1, "user:lang": "fr" } });
      await store.append(APP, ADA, s.id, { role: "user", content: "hi" }, { stateDelta: { "app:tier": "gold" } });
      const state = await store.state(APP, ADA, s.id);
      const version = (await store.get(APP, ADA, s.id)).version;
      assert.deepEqual(state, { session: { step: 1 }, user: { "user:lang": "fr" }, app: { "app:tier": "gold" }, version });
      const patched = await store.patchState(APP, ADA, s.id, { step: 2, draft: "x" });
      assert.deepEqual(patched.session, { step: 2, draft: "x" });
      await assert.rejects(store.patchState(APP, ADA, s.id, { "user:lang": "de" }), InvalidInputError);
      assert.deepEqual((await store.sharedState(APP, ADA)).user, { "user:lang": "fr" });
    });

    it("guards versions, ends, reopens and resolves by key", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      await assert.rejects(store.update(APP, ADA, s.id, { metadata: { a: 1 }, expected_version: 5 }), ConflictError);
      await store.end(APP, ADA, s.id);
      await assert.rejects(store.append(APP, ADA, s.id, { role: "user", content: "late" }), SessionEndedError);
      await store.reopen(APP, ADA, s.id);
      const first = await store.resolve(APP, ADA, "telegram:42", { idleTimeoutSecs: 1800 });
      const again = await store.resolve(APP, ADA, "telegram:42", { idleTimeoutSecs: 1800 });
      assert.ok(first.isNew && !again.isNew);
      assert.equal(first.session.id, again.session.id);
      const reset = await store.reset(APP, ADA, "telegram:42");
      assert.notEqual(reset.id, first.session.id);
      assert.equal((await store.resolve(APP, ADA, "telegram:42")).session.id, reset.id);
    });

    it("reports usage and erases a user", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      await store.append(APP, ADA, s.id, { role: "user", content: "hi" });
      const usage = await store.usage(APP, ADA, s.id);
      assert.deepEqual(usage.total, { calls: 0, input_tokens: 0, output_tokens: 0, cached_tokens: 0 });
      const erased = await store.eraseUser(APP, ADA);
      assert.equal(erased.sessions, 1);
      await assert.rejects(store.get(APP, ADA, s.id), NotFoundError);
    });

    it("names the field of bad input and stores nothing", async () => {
      const store = await open();
      const badUser = await store.create(APP, "a b").catch((e) => e);
      assert.ok(badUser instanceof InvalidInputError);
      assert.match(badUser.problem.field, /user/);
      await assert.rejects(store.create(APP, ADA, { ttlSecs: 60, neverExpires: true }), InvalidInputError);
      assert.deepEqual((await store.list(APP, ADA)).items, []);
    });

    it("loses nothing under concurrent appends", async () => {
      const store = await open();
      const s = await store.create(APP, ADA);
      await Promise.all(
        Array.from({ length: 40 }, (_, n) => store.append(APP, ADA, s.id, { role: "user", content: `m${n}` })),
      );
      const archive = await store.events(APP, ADA, s.id, { view: "archive", pageSize: 100 });
      assert.deepEqual(archive.items.map((e) => e.seq), Array.from({ length: 40 }, (_, n) => n + 1));
    });

    it("gives floats back exactly as stored", async () => {
      const store = await open();
      const values = [1795752466.7137277, 0.1 + 0.2, 1e-300, 2 ** -1074, 123456789.98765433];
      const s = await store.create("app", "ada", { state: { t: values }, metadata: { m: values[0] } });
      await store.appendEvents("app", "ada", s.id, [event({ role: "user", content: "x" }, { metadata: { v: values } })]);
      const got = await store.get("app", "ada", s.id);
      assert.deepEqual(got.state.t, values);
      assert.equal(got.metadata.m, values[0]);
      assert.deepEqual((await store.events("app", "ada", s.id)).items[0].metadata.v, values);
    });

    it("rejects calls after close with UnavailableError", async () => {
      const store = await open();
      assert.ok(["sqlite", "postgres"].includes(store.backend));
      await store.create(APP, ADA);
      store.close();
      const closed = await store.list(APP, ADA).catch((e) => e);
      assert.ok(closed instanceof UnavailableError, String(closed));
      assert.match(closed.message, /closed/);
    });
  });
}

describe("the package", () => {
  it("answers quota, existence and expiry errors with their classes", async () => {
    const dir = tempDir();
    const small = await Store.open(`sqlite://${dir}/q.db?max_session_events=2`);
    const s = await small.create(APP, ADA);
    await small.append(APP, ADA, s.id, [{ role: "user", content: "1" }, { role: "user", content: "2" }]);
    const over = await small.append(APP, ADA, s.id, { role: "user", content: "3" }).catch((e) => e);
    assert.ok(over instanceof QuotaExceededError);
    assert.equal(over.problem.limit, 2);
    const memory = await Store.open("memory://");
    const m = await memory.create(APP, ADA);
    await assert.rejects(memory.create(APP, ADA, { id: m.id }), AlreadyExistsError);
    const brief = await memory.create(APP, ADA, { ttlSecs: 1 });
    await new Promise((resolve) => setTimeout(resolve, 1200));
    await assert.rejects(memory.append(APP, ADA, brief.id, { role: "user", content: "too late" }), NotFoundError);
    await assert.rejects(Store.open("nosuch://x"), InvalidInputError);
  });

  it("has an error class for every error kind", () => {
    const kinds = [
      "not_found", "already_exists", "expired", "session_ended", "quota_exceeded", "conflict",
      "invalid_input", "unsupported", "backend", "serialization", "unavailable", "encryption", "unauthorized",
    ];
    for (const kind of kinds) {
      const e = fromNative(new Error(JSON.stringify({ kind, detail: "d" })));
      assert.ok(e instanceof SessionError);
      assert.equal(e.kind, kind);
      assert.equal(e.detail, "d");
      assert.equal(e.name.replace(/Error$/, "").toLowerCase(), kind.replaceAll("_", ""));
    }
    assert.equal(fromNative(new Error(JSON.stringify({ kind: "new_kind", detail: "d" }))).kind, "backend");
  });

  it("has a method for every operation of the store", () => {
    const camel = (op) => op.replace(/_(.)/g, (_, c) => c.toUpperCase());
    const aliases = { append: "appendEvents" };
    for (const op of operations()) {
      const name = aliases[op] ?? camel(op);
      assert.equal(typeof Store.prototype[name], "function", `Store.${name} for the operation ${op}`);
    }
  });

  it("shares its classes between import and require", () => {
    const require = createRequire(import.meta.url);
    const cjs = require("agent-session");
    assert.equal(cjs.Store, Store);
    assert.equal(cjs.NotFoundError, agentSession.NotFoundError);
    assert.ok(new cjs.NotFoundError("x") instanceof NotFoundError);
  });

  it("answers each call of the resident thread by its id, a failed one with its problem", async () => {
    // The native half the main thread's embedded-store calls go through.
    const require = createRequire(import.meta.url);
    const root = dirname(require.resolve("agent-session/package.json"));
    const { NativeResident, open: openNative } = require(join(root, "native", "binding.cjs"));
    const native = await openNative("memory://");
    const answers = [];
    let settled;
    const all = new Promise((resolve) => (settled = resolve));
    const resident = new NativeResident((answer) => {
      answers.push(answer);
      if (answers.length === 3) settled();
    });
    const owner = { app: APP, user_id: ADA };
    resident.send(native, 7, "create", JSON.stringify({ ...owner, session: { id: "r1" } }));
    resident.send(native, 8, "get", JSON.stringify({ ...owner, session_id: "r1" }));
    resident.send(native, 9, "get", JSON.stringify({ ...owner, session_id: "nosuch" }));
    await all;
    assert.deepEqual(answers.map(([id, ok]) => [id, ok]), [[7, true], [8, true], [9, false]]);
    assert.equal(JSON.parse(answers[1][2]).id, "r1");
    assert.ok(fromNative(new Error(answers[2][2])) instanceof NotFoundError);
  });

  it("makes event ids that are UUIDv7 growing with time", async () => {
    const first = uuid7();
    await new Promise((resolve) => setTimeout(resolve, 3));
    const second = event({ role: "user", content: "b" }).id;
    for (const id of [first, second]) {
      assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    assert.ok(first.slice(0, 13) < second.slice(0, 13), "the time prefix grows");
    const millis = parseInt(second.replaceAll("-", "").slice(0, 12), 16);
    assert.ok(Math.abs(millis - Date.now()) < 60_000);
  });
});

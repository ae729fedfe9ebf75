// The same-answer suite through the Node.js package: every step of
// tests/same-answer/scenario.json (the scenario the library, the HTTP
// routes, MCP, the CLI and the Python package run too) answers here
// exactly what the file says, reduced to the same plain JSON as the
// other faces reduce theirs to.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import { SessionError, Store } from "agent-session";

import { storeKinds } from "./support.mjs";

// Three levels up from this directory, in the repository as in CI's
// install directory (target/node-e2e/test).
const SCENARIO = new URL("../../../tests/same-answer/scenario.json", import.meta.url);
const APP = "same-answer";
const USER = "ada";
const HITS = 10;

/** A message as one line, as `session_testkit::same_answer::message_line`. */
function line(m) {
  const calls = (m.tool_calls ?? []).map((c) => c.function.name);
  if (calls.length > 0) return `${m.role}: call ${calls.join(",")}`;
  let content = m.content;
  if (Array.isArray(content)) {
    content = content.filter((p) => p.type === "text").map((p) => p.text ?? "").join("");
  }
  return `${m.role}: ${content || ""}`;
}

const events = (session) => ({ events: session.event_count });

function compacted(done) {
  let out = { compacted: false };
  if (done.compacted) {
    out = { compacted: true, events_after: done.events_after, tokens_after: done.tokens_after };
  }
  if (done.shortfall) out.over_by = done.shortfall.over_by;
  return out;
}

/** The package's Store, one step at a time. */
class Face {
  constructor(store) {
    this.store = store;
    this.ids = new Map();
  }

  id(alias) {
    return this.ids.get(alias) ?? alias;
  }

  async run(step) {
    try {
      return await this.#run(step);
    } catch (e) {
      if (e instanceof SessionError) return { error: e.kind };
      throw e;
    }
  }

  async #run(step) {
    const s = this.store;
    const sid = this.id(step.session ?? "");
    switch (step.op) {
      case "create": {
        const created = await s.create(APP, USER);
        this.ids.set(step.session, created.id);
        return events(created);
      }
      case "resolve":
        return { is_new: (await s.resolve(APP, USER, step.key)).isNew };
      case "append":
        return { written: (await s.appendEvents(APP, USER, sid, step.events)).written };
      case "context":
        return { messages: (await s.messages(APP, USER, sid)).map(line) };
      case "compact":
        return compacted(await s.compact(APP, USER, sid, step.spec));
      case "search":
        return { hits: (await s.search(APP, USER, step.query, { sessionId: sid, pageSize: HITS })).items.length };
      case "rewind":
        return events(await s.rewind(APP, USER, sid, { invocationId: step.invocation }));
      case "fork": {
        const fork = await s.fork(APP, USER, sid);
        this.ids.set(step.into, fork.id);
        return events(fork);
      }
      case "patch_state":
        return { session: (await s.patchState(APP, USER, sid, step.patch)).session };
      case "get":
        return events(await s.get(APP, step.user || USER, sid));
      default:
        throw new Error(`a step the scenario does not have: ${step.op}`);
    }
  }
}

for (const [kind, makeUrl] of await storeKinds()) {
  describe(`the same-answer scenario on ${kind}`, () => {
    it("answers what the scenario file says", async () => {
      const expected = JSON.parse(readFileSync(SCENARIO, "utf8"));
      const face = new Face(await Store.open(makeUrl()));
      for (const [i, want] of expected.entries()) {
        const got = await face.run(want.step);
        assert.deepEqual(got, want.outcome, `step ${i} (${want.step.op}) answered differently`);
      }
      assert.ok(expected.length > 20);
    });
  });
}

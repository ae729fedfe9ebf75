/**
 * A session of the OpenAI Agents SDK for JavaScript (`@openai/agents`)
 * on agent-session.
 *
 * ```ts
 * import { Agent, run } from "@openai/agents";
 * import { Store } from "agent-session";
 * import { Session } from "agent-session/openai-agents";
 *
 * const store = await Store.open("sqlite://sessions.db");
 * const session = new Session("user-42-chat", store, { app: "support", userId: "ada" });
 * const result = await run(agent, "where is my order?", { session });
 * ```
 *
 * It implements the SDK's `Session` interface with the run context the
 * runner passes (the items one run adds are one invocation of the
 * store, which `Store.rewind` undoes) and its history transactions. Each
 * input item is one event: the item exactly as given is kept with the
 * event and `getItems` returns it unchanged, item for item; the event's
 * message is the item's chat view, which compaction and recall search
 * work on. A compaction's summary comes back as a message item.
 *
 * @module
 */

import { createHash } from "node:crypto";

import type {
  AgentInputItem,
  FunctionTool,
  RunContext,
  RunContextAwareSession,
  SessionHistoryTransactionArgs,
  SessionHistoryTransactionAwareSession,
} from "@openai/agents";
import { UserError, tool } from "@openai/agents";

import { fromText, sortedJson, toStored } from "./codec.cjs";
import { ConflictError, type CompactionSpec, type JsonObject, type KeptItems, type Message, type SessionEvent, Store, event } from "./index.cjs";

/** The event metadata key that holds the SDK's item as it was added. */
export const ITEM_KEY = "openai_item";

export { BYTES_KEY } from "./codec.cjs";

/** Options of a {@link Session}. */
export interface SessionOptions {
  /** The store's app the sessions belong to (`openai-agents` unless told). */
  app?: string;
  /** The user they belong to (`default` unless told). */
  userId?: string;
  /**
   * A compaction spec as `Store.compact` takes it (`strategy`, its
   * parameters, `trigger`, `summarizer`), applied after each `addItems`,
   * e.g. `{strategy: "summarize", keep: 2, trigger: {tokens: 8000}}`.
   */
  compaction?: CompactionSpec;
}

/** The text of a message's content: a string, or the text of its parts. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  const texts: string[] = [];
  for (const part of content) {
    if (part && typeof part === "object") {
      const text = (part as { text?: unknown; refusal?: unknown }).text ?? (part as { refusal?: unknown }).refusal;
      if (typeof text === "string") texts.push(text);
    }
  }
  return texts.join("\n");
}

/** The chat message an SDK item reads as, for compaction and search. */
export function chatView(item: Record<string, unknown>): Message {
  const kind = item.type;
  const role = item.role;
  if ((kind === undefined || kind === "message") && typeof role === "string") {
    return { role: role === "developer" ? "system" : role, content: textOf(item.content) };
  }
  if (kind === "function_call") {
    return {
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id: String(item.callId ?? ""),
          type: "function",
          function: { name: String(item.name ?? ""), arguments: String(item.arguments ?? "") },
        },
      ],
    };
  }
  if (kind === "function_call_result") {
    const output = item.output;
    let text: string;
    if (typeof output === "string") {
      text = output;
    } else if (output && typeof output === "object" && typeof (output as { text?: unknown }).text === "string") {
      text = (output as { text: string }).text;
    } else {
      text = textOf(output) || sortedJson(output);
    }
    return { role: "tool", tool_call_id: String(item.callId ?? ""), content: text };
  }
  if (kind === "reasoning") {
    return { role: "assistant", content: textOf(item.content) || textOf(item.rawContent) };
  }
  // Every other item (hosted tool calls, computer and shell calls, a
  // compaction marker...): its JSON is what search finds.
  return { role: "assistant", content: sortedJson(item) };
}

/** A chat message (a summary's, say) as an SDK message item. */
function itemOfMessage(message: Partial<Message>): AgentInputItem {
  const text = textOf(message.content);
  if (message.role === "assistant") {
    return {
      type: "message",
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text }],
    } as AgentInputItem;
  }
  const role = message.role === "system" ? "system" : "user";
  return { type: "message", role, content: text } as AgentInputItem;
}

/** The items of an `items` page, each event without one (a summary) as a message item. */
function filled(page: KeptItems): AgentInputItem[] {
  const items = page.items as unknown as AgentInputItem[];
  for (const [index, stored] of page.events) {
    items[index] = itemOfMessage(stored.message);
  }
  return items;
}

/** The SDK item an event holds, or its message as a message item. */
function itemOf(stored: SessionEvent): AgentInputItem {
  const kept = stored.metadata?.[ITEM_KEY];
  if (kept && typeof kept === "object" && !Array.isArray(kept)) {
    return fromText<AgentInputItem>(JSON.stringify(kept));
  }
  return itemOfMessage(stored.message);
}

/** A stable digest of a JSON value (its keys sorted). */
function digest(value: unknown): string {
  return createHash("sha256").update(sortedJson(value)).digest("hex");
}

/**
 * An OpenAI Agents SDK session stored in agent-session. The SDK's session
 * id is the session's resolution key in the store, so any string works.
 */
export class Session implements RunContextAwareSession, SessionHistoryTransactionAwareSession {
  /** The runner passes its run context to every call. */
  readonly acceptsRunContext = true as const;
  /** The compaction spec applied after each `addItems` (`undefined`: none). */
  readonly compaction: CompactionSpec | undefined;
  readonly #sessionId: string;
  readonly #store: Store;
  readonly #app: string;
  readonly #user: string;
  #id: string | undefined;
  /** The invocation id of each run, by its run context. */
  readonly #runs = new WeakMap<object, string>();

  constructor(sessionId: string, store: Store, options: SessionOptions = {}) {
    if (options.compaction !== undefined && typeof options.compaction.strategy !== "string") {
      throw new TypeError("a compaction spec names its strategy: {strategy: 'summarize', ...}");
    }
    this.#sessionId = sessionId;
    this.#store = store;
    this.#app = options.app ?? "openai-agents";
    this.#user = options.userId ?? "default";
    this.compaction = options.compaction === undefined ? undefined : { ...options.compaction };
  }

  /** The SDK's session id. */
  async getSessionId(): Promise<string> {
    return this.#sessionId;
  }

  /** The store's id of the session, resolved by the SDK's id once. */
  async storeSessionId(): Promise<string> {
    if (this.#id === undefined) {
      const { session } = await this.#store.resolve(this.#app, this.#user, this.#sessionId);
      this.#id = session.id;
    }
    return this.#id;
  }

  async #items(args: { lastN?: number; page?: number; pageSize?: number }): Promise<KeptItems> {
    const id = await this.storeSessionId();
    const filter = { last_n: args.lastN, page: args.page ?? 0, page_size: args.pageSize };
    const text = await this.#store.callText("items", { app: this.#app, user_id: this.#user, session_id: id, key: ITEM_KEY, filter });
    return fromText<KeptItems>(text);
  }

  /**
   * The conversation's items, oldest first; the latest `limit` when
   * given (0 or less: none, as the SDK's `MemorySession`).
   */
  async getItems(limit?: number, _runContext?: RunContext<unknown>): Promise<AgentInputItem[]> {
    if (limit !== undefined && limit <= 0) return [];
    // Pages of at most 1,000 (the store's largest), of the last `limit` when given.
    const pageSize = Math.min(limit ?? 1000, 1000);
    const items: AgentInputItem[] = [];
    for (let page = 0; ; page++) {
      const kept = await this.#items({ ...(limit === undefined ? {} : { lastN: limit }), page, pageSize });
      items.push(...filled(kept));
      if (!kept.has_more) return items;
    }
  }

  /** The invocation id of a run: made on its first write, kept on its context. */
  #invocation(runContext: RunContext<unknown> | undefined): string | undefined {
    if (runContext === undefined || runContext === null || typeof runContext !== "object") return undefined;
    let invocation = this.#runs.get(runContext);
    if (invocation === undefined) {
      invocation = `openai-run-${event({ role: "user" }).id}`;
      this.#runs.set(runContext, invocation);
    }
    return invocation;
  }

  /** The items as events (the item kept, its chat view as the message). */
  #events(items: AgentInputItem[], invocationId: string | undefined, ids?: (i: number) => string): SessionEvent[] {
    return items.map((item, i) => {
      const kept = toStored<JsonObject>(item);
      return event(chatView(kept), {
        ...(ids ? { id: ids(i) } : {}),
        ...(invocationId === undefined ? {} : { invocationId }),
        metadata: { [ITEM_KEY]: kept },
      });
    });
  }

  /**
   * Stores the items, in order, in one atomic append, then applies the
   * `compaction` spec. Under the SDK's runner the items of one run share
   * one invocation id.
   */
  async addItems(items: AgentInputItem[], runContext?: RunContext<unknown>): Promise<void> {
    if (items.length === 0) return;
    const id = await this.storeSessionId();
    await this.#store.appendEvents(this.#app, this.#user, id, this.#events(items, this.#invocation(runContext)));
    if (this.compaction !== undefined) {
      await this.#store.compact(this.#app, this.#user, id, this.compaction);
    }
  }

  /** Removes the latest item and returns it (`undefined` if there is none). */
  async popItem(_runContext?: RunContext<unknown>): Promise<AgentInputItem | undefined> {
    const stored = await this.#store.pop(this.#app, this.#user, await this.storeSessionId());
    return stored === null ? undefined : itemOf(stored);
  }

  /** Deletes the conversation; the next item starts a new one. */
  async clearSession(_runContext?: RunContext<unknown>): Promise<void> {
    await this.#store.delete(this.#app, this.#user, await this.storeSessionId());
    this.#id = undefined;
  }

  /**
   * Replaces the context with `items` (a compaction marker and the items
   * it keeps), by compare-and-swap; the archive keeps the items it
   * replaces, so recall search still finds them.
   */
  async replaceHistoryWithCompaction(items: AgentInputItem[], runContext?: RunContext<unknown>): Promise<void> {
    await this.#replaceTail("all", () => this.#events(items, this.#invocation(runContext)));
  }

  /**
   * Applies a history transaction atomically and once per operation id:
   * the same id with the same transaction again changes nothing, with
   * another transaction it throws the SDK's `UserError`, as does a
   * `replace_suffix` whose expected suffix is not the history's tail.
   * The operation is recorded in the session's state under
   * `__openai_op_<digest of its id>__` (the transaction's digest), with
   * the append that applies it; its events carry the operation as their
   * invocation.
   */
  async applyHistoryTransaction(args: SessionHistoryTransactionArgs, runContext?: RunContext<unknown>): Promise<void> {
    const operationId = args?.operationId;
    const transaction = args?.transaction;
    if (typeof operationId !== "string" || operationId.trim() === "") {
      throw new UserError("Session history transaction operationId must be a non-empty string.");
    }
    if (!transaction || typeof transaction !== "object") {
      throw new UserError("Session history transaction must be an object.");
    }
    if (transaction.type !== "append_items" && transaction.type !== "replace_suffix") {
      throw new UserError("Session history transaction type is not supported.");
    }
    const sum = digest(transaction);
    const hash = createHash("sha256").update(operationId).digest("hex").slice(0, 32);
    const op = `openai-op-${hash}`;
    const key = `__openai_op_${hash}__`;
    const id = await this.storeSessionId();
    const applied = async (): Promise<boolean> => {
      const recorded = (await this.#store.state(this.#app, this.#user, id)).session[key];
      if (recorded === undefined) return false;
      if (recorded !== sum) {
        throw new UserError("Session history operation was already applied with a different transaction.");
      }
      return true;
    };
    if (await applied()) return;
    const events = (items: AgentInputItem[]) => this.#events(items, op, (i) => `${op}-${i}`);
    if (transaction.type === "append_items") {
      const batch = events(transaction.items);
      const last = batch[batch.length - 1];
      if (last === undefined) {
        await this.#store.patchState(this.#app, this.#user, id, { [key]: sum });
        return;
      }
      last.state_delta = { [key]: sum };
      const done = await this.#store.appendEvents(this.#app, this.#user, id, batch);
      // Events under these ids were there already: another call applied
      // the operation first, with this transaction or with another.
      if (done.written < batch.length && !(await applied())) {
        throw new UserError("Session history operation was already applied with a different transaction.");
      }
      return;
    }
    const expected = transaction.expectedSuffix.map((item) => sortedJson(item));
    await this.#replaceTail(expected.length, () => events(transaction.replacement), (tail) => {
      const actual = tail.map((item) => sortedJson(item));
      if (actual.length !== expected.length || actual.some((a, i) => a !== expected[i])) {
        throw new UserError("Session history suffix no longer matches the transaction precondition.");
      }
    });
    await this.#store.patchState(this.#app, this.#user, id, { [key]: sum });
  }

  /**
   * Replaces the last `count` items of the context (`"all"`: every one)
   * with `replacement()`, by compare-and-swap on the session's version,
   * after `check(tail)` accepts the items it replaces; a concurrent write
   * makes it read and try again.
   */
  async #replaceTail(count: number | "all", replacement: () => SessionEvent[], check?: (tail: AgentInputItem[]) => void): Promise<void> {
    const id = await this.storeSessionId();
    for (let attempt = 0; ; attempt++) {
      const { version } = await this.#store.get(this.#app, this.#user, id);
      const context: SessionEvent[] = [];
      for (let page = 0; ; page++) {
        const got = await this.#store.events(this.#app, this.#user, id, { page, pageSize: 1000 });
        context.push(...got.items);
        if (!got.has_more) break;
      }
      const start = count === "all" ? 0 : context.length - count;
      if (start < 0) {
        check?.([]);
        throw new UserError("Session history suffix no longer matches the transaction precondition.");
      }
      check?.(context.slice(start).map(itemOf));
      try {
        await this.#store.replaceContext(this.#app, this.#user, id, [...context.slice(0, start), ...replacement()], version);
        return;
      } catch (e) {
        if (!(e instanceof ConflictError) || attempt >= 2) throw e;
      }
    }
  }

  /**
   * `conversation_search` as an SDK function tool: the agent finds what
   * left its context (older turns a compaction summarized).
   */
  searchTool(options: { pageSize?: number } = {}): FunctionTool {
    const pageSize = options.pageSize ?? 10;
    return tool({
      name: "conversation_search",
      description:
        "Search the full history of this conversation, including parts no longer in your context, by keyword. " +
        "Returns matching messages oldest first as JSON, or 'No results found.'.",
      parameters: {
        type: "object",
        properties: {
          query: { type: "string", description: "Keywords; every word must occur, in any order." },
          page: { type: "integer", description: "Zero-based page of results." },
        },
        required: ["query", "page"],
        additionalProperties: false,
      },
      strict: true,
      execute: async (input: unknown) => {
        const { query, page } = input as { query: string; page: number };
        const hits = await this.#store.search(this.#app, this.#user, query, {
          sessionId: await this.storeSessionId(),
          page,
          pageSize,
        });
        if (hits.items.length === 0) return "No results found.";
        return JSON.stringify(
          hits.items.map((h) => {
            const e = h.event as unknown as SessionEvent;
            return { timestamp: e.timestamp, type: e.message.role, text: h.snippet };
          }),
        );
      },
    }) as FunctionTool;
  }
}

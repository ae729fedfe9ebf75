/**
 * Durable conversation sessions for LLM agents, from the Rust store.
 *
 * ```ts
 * import { Store } from "agent-session";
 * const store = await Store.open("sqlite://sessions.db");
 * const s = await store.create("support", "ada");
 * await store.append("support", "ada", s.id, { role: "user", content: "hi" });
 * const history = await store.messages("support", "ada", s.id);
 * ```
 *
 * Every call names its owner (`app`, `userId`); another owner's session
 * is a {@link NotFoundError}, as if it did not exist. Messages are plain
 * objects in the OpenAI chat shape; sessions, events and pages are the
 * JSON the HTTP API returns (`docs/server.md`), snake_case keys included.
 * Every call runs off the JavaScript thread: an embedded store's on the
 * addon's resident thread (the libuv thread pool in a worker thread), a
 * networked store's on the addon's Tokio runtime.
 *
 * @module
 */

import { randomBytes } from "node:crypto";
import { isMainThread } from "node:worker_threads";

import { NativeResident, NativeStore, open as openNative, operations as nativeOperations } from "../native/binding.cjs";
import { fromNative } from "./errors.cjs";

export * from "./errors.cjs";

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object. */
export type JsonObject = { [key: string]: Json };

/** A chat message in the OpenAI chat shape (`role`, `content`, `tool_calls`...). */
export interface Message {
  /** `system`, `user`, `assistant` or `tool`. */
  role: string;
  /** The text (or content parts); `null` for an assistant turn of tool calls only. */
  content?: Json;
  /** An assistant's tool calls. */
  tool_calls?: Json[];
  /** The call a tool message answers. */
  tool_call_id?: string;
  /** Further fields, kept as given. */
  [field: string]: unknown;
}

/** A session as the store answers it. */
export interface Session {
  /** The session's id. */
  id: string;
  /** The app it belongs to. */
  app: string;
  /** The user it belongs to. */
  user_id: string;
  /** The conversation key it was resolved by, if any. */
  key?: string | null;
  /** `active` or `ended`. */
  status: string;
  /** The state, with the `user:` and `app:` scopes merged in. */
  state: JsonObject;
  /** Free metadata. */
  metadata: JsonObject;
  /** The version compare-and-swaps name. */
  version: number;
  /** Further fields (times, counts...). */
  [field: string]: unknown;
}

/** An event as the store answers it. */
export interface SessionEvent {
  /** The event's id (appends are idempotent by it). */
  id: string;
  /** Its position in the session. */
  seq?: number;
  /** When it happened (RFC 3339). */
  timestamp: string;
  /** The chat message it carries. */
  message: Message;
  /** The run it belongs to. */
  invocation_id?: string | null;
  /** The state change it carries. */
  state_delta?: JsonObject;
  /** What an adapter stored with it. */
  metadata?: JsonObject;
  /** Further fields. */
  [field: string]: unknown;
}

/** A page of results. */
export interface Page<T> {
  /** This page's items. */
  items: T[];
  /** Whether a next page has more. */
  has_more: boolean;
}

/** What an append did. */
export interface Appended {
  /** The session's version after it. */
  version: number;
  /** Each event's seq, in order. */
  seqs: number[];
  /** How many events were new (an id already stored writes nothing). */
  written: number;
}

/**
 * What an adapter stored with each event of the context: `items[i]` is
 * the object in event `i`'s metadata under the key, or `null` when it
 * holds none (a summary), that event then being in `events` with its
 * index.
 */
export interface KeptItems {
  /** The session, when the read asked for it (`withSession`). */
  session?: Session;
  /** The stored object of each event, or `null`. */
  items: (Json | null)[];
  /** The events that hold none, with their index. */
  events: [number, SessionEvent][];
  /** Whether a next page has more. */
  has_more: boolean;
}

/** Options of an event made with {@link event}. */
export interface EventOptions {
  /** The event's id (a new UUID v7 when not given). */
  id?: string;
  /** The run it belongs to (what `rewind` undoes). */
  invocationId?: string;
  /** The agent's branch. */
  branch?: string;
  /** Who wrote it. */
  author?: string;
  /** A state change, applied with the event (`user:`, `app:` and `temp:` prefixes scope it). */
  stateDelta?: JsonObject;
  /** What an adapter keeps with it. */
  metadata?: JsonObject;
}

/**
 * A new UUID version 7 (RFC 9562): the time in milliseconds, then 74
 * random bits. Ids that grow with time keep a session's appends at the
 * end of the store's id index.
 */
export function uuid7(): string {
  const bytes = randomBytes(16);
  let millis = Date.now();
  for (let i = 5; i >= 0; i--) {
    bytes[i] = millis % 256;
    millis = Math.floor(millis / 256);
  }
  bytes[6] = 0x70 | (bytes[6]! & 0x0f);
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const h = bytes.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * An event carrying `message` (a chat message), ready for
 * {@link Store.appendEvents}. Appends are idempotent by `id`: sending the
 * same event again writes nothing.
 */
export function event(message: Message, options: EventOptions = {}): SessionEvent {
  const out: SessionEvent = {
    id: options.id ?? uuid7(),
    timestamp: new Date().toISOString(),
    message: { ...message },
  };
  if (options.invocationId !== undefined) out.invocation_id = options.invocationId;
  if (options.branch !== undefined) out.branch = options.branch;
  if (options.author !== undefined) out.author = options.author;
  if (options.stateDelta && Object.keys(options.stateDelta).length > 0) out.state_delta = { ...options.stateDelta };
  if (options.metadata && Object.keys(options.metadata).length > 0) out.metadata = { ...options.metadata };
  return out;
}

/** The names of the operations the native store runs (one method each here). */
export function operations(): string[] {
  return nativeOperations();
}

/** `values` without its `undefined` entries (JSON leaves them out anyway). */
function defined(values: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(values)) {
    if (v !== undefined && v !== null) out[k] = v;
  }
  return out;
}

/** Options of {@link Store.create}. */
export interface CreateOptions {
  /** The session's id (a new one when not given). */
  id?: string;
  /** A conversation key ({@link Store.resolve} finds the session by it). */
  key?: string;
  /** Seconds until it expires (60 days unless told). */
  ttlSecs?: number;
  /** Never expires. */
  neverExpires?: boolean;
  /** Free metadata. */
  metadata?: JsonObject;
  /** The session-scope state it starts with. */
  state?: JsonObject;
}

/** Options of {@link Store.list}. */
export interface ListOptions {
  /** Only sessions of this conversation key. */
  key?: string;
  /** Only `active` or `ended` sessions. */
  status?: string;
  /** Only sessions whose metadata holds these values. */
  metadata?: JsonObject;
  /** The page (0 first). */
  page?: number;
  /** Sessions per page (10 unless told). */
  pageSize?: number;
}

/** Options of {@link Store.resolve}. */
export interface ResolveOptions {
  /** A new session when the active one was idle this long. */
  idleTimeoutSecs?: number;
  /** A new session after this hour of the day... */
  dailyResetHour?: number;
  /** ...in this time zone (IANA name; UTC unless told). */
  dailyResetZone?: string;
  /** One session for the key across the app's users. */
  group?: boolean;
  /** Seconds until a new session expires. */
  ttlSecs?: number;
}

/** Options of {@link Store.events}. */
export interface EventsOptions {
  /** `context` (what the model sees, the default) or `archive` (everything ever appended). */
  view?: "context" | "archive";
  /** Only the last `n` events. */
  lastN?: number;
  /** Only events after this seq. */
  after?: number;
  /** Only these roles. */
  roles?: string[];
  /** Only this branch's view. */
  branch?: string;
  /** Only this run's events. */
  invocationId?: string;
  /** Only events holding this word. */
  keyword?: string;
  /** The page (0 first). */
  page?: number;
  /** Events per page. */
  pageSize?: number;
}

/** Options of {@link Store.search}. */
export interface SearchOptions {
  /** Only this session (all of the user's sessions otherwise). */
  sessionId?: string;
  /** Best matches first instead of newest first. */
  ranked?: boolean;
  /** Events holding any one term instead of every term. */
  any?: boolean;
  /** Only events at or after this time. */
  since?: string | Date;
  /** The page (0 first). */
  page?: number;
  /** Hits per page (10 unless told). */
  pageSize?: number;
}

/** A compaction: the strategy and its parameters (`maxEvents` is `max_events`...). */
export interface CompactionSpec {
  /** `sliding_window`, `turn_window`, `token_budget`, `summarize`, `structured_summary` or `tool_result_clearing`. */
  strategy: string;
  /** The strategy's parameters as the wire names them (`max_events`, `keep`, `trigger`, `summarizer`...). */
  [param: string]: Json | undefined;
}

/** The resident thread of the main thread's embedded-store calls, started by the first one. */
let resident: NativeResident | undefined;
/** The resident thread's calls not yet answered, by id. */
const owed = new Map<number, { resolve: (text: string) => void; reject: (e: Error) => void }>();
/** The id of the last call sent to the resident thread. */
let lastId = 0;

/** Settles the resident thread's call `id` with its answer (or its problem document). */
function settle([id, ok, text]: [number, boolean, string]): void {
  const call = owed.get(id);
  if (call === undefined) return;
  owed.delete(id);
  if (ok) call.resolve(text);
  else call.reject(new Error(text));
}

/** Runs a call on the resident thread (see `NativeResident`). */
function onResident(native: NativeStore, op: string, args: string): Promise<string> {
  const thread = (resident ??= new NativeResident(settle));
  lastId = lastId >= 0xffff_ffff ? 1 : lastId + 1;
  const id = lastId;
  return new Promise((resolve, reject) => {
    owed.set(id, { resolve, reject });
    try {
      thread.send(native, id, op, args);
    } catch (e) {
      owed.delete(id);
      reject(e as Error);
    }
  });
}

/**
 * A session store: SQLite, PostgreSQL, Redis, Elasticsearch/OpenSearch,
 * plain files, memory, or a server (`http://`). Open one with
 * {@link Store.open}.
 */
export class Store {
  /** The stores whose work runs in the process (on the thread that runs the call). */
  static readonly EMBEDDED: ReadonlySet<string> = new Set(["sqlite", "memory", "fs"]);
  readonly #native: NativeStore;
  /**
   * Where calls run: an embedded store's on the resident thread (the
   * main thread) or as thread-pool work (a worker thread, see
   * `NativeStore.callOnPool`); a networked store's on the runtime.
   */
  readonly #route: "resident" | "pool" | "runtime";

  private constructor(native: NativeStore) {
    this.#native = native;
    this.#route = !isMainThread ? "pool" : Store.EMBEDDED.has(native.backend) ? "resident" : "runtime";
  }

  /**
   * Opens the store a URL names: `sqlite://sessions.db`,
   * `postgres://user@host/db`, `redis://host:6379`, `es+http://host:9200`,
   * `fs://./dir`, `memory://`, `http://host:8080` (limits as query
   * parameters, e.g. `?max_session_events=10000`).
   */
  static async open(url: string): Promise<Store> {
    try {
      return new Store(await openNative(url));
    } catch (e) {
      throw fromNative(e);
    }
  }

  /** The store's backend (`sqlite`, `postgres`, ...). */
  get backend(): string {
    return this.#native.backend;
  }

  /**
   * Closes the store: its connections are released once the calls in
   * flight finish, and later calls reject with `UnavailableError`. A
   * store left open does not keep the process alive.
   */
  close(): void {
    this.#native.close();
  }

  /** Runs an operation of the store by name: its answer, decoded. */
  async call<T = Json>(op: string, args: Record<string, unknown>): Promise<T> {
    return JSON.parse(await this.callText(op, args)) as T;
  }

  /**
   * Runs an operation of the store by name: its answer as JSON text, for
   * a caller that decodes it its own way (with a reviver, say).
   */
  async callText(op: string, args: Record<string, unknown>): Promise<string> {
    const text = JSON.stringify(args);
    try {
      switch (this.#route) {
        case "resident":
          // One call at a time on the resident thread (an agent's loop of
          // awaited calls); calls made while one is owed run side by side
          // as thread-pool work.
          return await (owed.size === 0 ? onResident(this.#native, op, text) : this.#native.callOnPool(op, text));
        case "pool":
          return await this.#native.callOnPool(op, text);
        default:
          return await this.#native.call(op, text);
      }
    } catch (e) {
      throw fromNative(e);
    }
  }

  // Sessions.

  /** Creates a session (expiring in 60 days unless told otherwise). */
  create(app: string, userId: string, options: CreateOptions = {}): Promise<Session> {
    const session = defined({
      id: options.id,
      key: options.key,
      ttl_secs: options.ttlSecs,
      never_expires: options.neverExpires || undefined,
      metadata: options.metadata,
      state: options.state,
    });
    return this.call("create", { app, user_id: userId, session });
  }

  /** The session, its state with the `user:` and `app:` scopes merged. */
  get(app: string, userId: string, sessionId: string): Promise<Session> {
    return this.call("get", { app, user_id: userId, session_id: sessionId });
  }

  /** The owner's sessions, newest activity first. */
  list(app: string, userId: string, options: ListOptions = {}): Promise<Page<Session>> {
    const query = defined({
      key: options.key,
      status: options.status,
      metadata: options.metadata ? JSON.stringify(options.metadata) : undefined,
      page: options.page ?? 0,
      page_size: options.pageSize ?? 10,
    });
    return this.call("list", { app, user_id: userId, query });
  }

  /** Sessions of any owner (an operator's view), filtered by `app` and `userId` when given. */
  listAll(options: { app?: string; userId?: string; page?: number; pageSize?: number } = {}): Promise<Page<Session>> {
    const query = defined({
      app: options.app,
      user_id: options.userId,
      page: options.page ?? 0,
      page_size: options.pageSize ?? 10,
    });
    return this.call("list_all", { query });
  }

  /** Deletes the session and its events. */
  async delete(app: string, userId: string, sessionId: string): Promise<void> {
    await this.call("delete", { app, user_id: userId, session_id: sessionId });
  }

  /** Ends the session: readable, closed to writes until {@link Store.reopen}. */
  end(app: string, userId: string, sessionId: string): Promise<Session> {
    return this.call("end", { app, user_id: userId, session_id: sessionId });
  }

  /** Makes an ended session writable again. */
  reopen(app: string, userId: string, sessionId: string): Promise<Session> {
    return this.call("reopen", { app, user_id: userId, session_id: sessionId });
  }

  /**
   * Changes `metadata`, `state` (session scope), `status` or `expires_at`;
   * `expected_version` makes it a compare-and-swap.
   */
  update(app: string, userId: string, sessionId: string, update: JsonObject): Promise<Session> {
    return this.call("update", { app, user_id: userId, session_id: sessionId, update });
  }

  /**
   * The active session of `key`, or a new one after an idle timeout or a
   * daily reset.
   */
  async resolve(
    app: string,
    userId: string,
    key: string,
    options: ResolveOptions = {},
  ): Promise<{ session: Session; isNew: boolean }> {
    const resolve = defined({
      key,
      idle_timeout_secs: options.idleTimeoutSecs,
      daily_reset_hour: options.dailyResetHour,
      daily_reset_zone: options.dailyResetZone,
      group: options.group || undefined,
      ttl_secs: options.ttlSecs,
    });
    const answer = await this.call<{ session: Session; is_new: boolean }>("resolve", {
      app,
      user_id: userId,
      resolve,
    });
    return { session: answer.session, isNew: answer.is_new };
  }

  /** Starts `key` over: its active session is ended and a new one returned. */
  reset(
    app: string,
    userId: string,
    key: string,
    options: { group?: boolean; ttlSecs?: number; metadata?: JsonObject } = {},
  ): Promise<Session> {
    const reset = defined({
      key,
      group: options.group || undefined,
      ttl_secs: options.ttlSecs,
      metadata: options.metadata,
    });
    return this.call("reset", { app, user_id: userId, reset });
  }

  // Events.

  /**
   * Appends one message or a list of them, atomically; `stateDelta` rides
   * on the last one.
   */
  append(
    app: string,
    userId: string,
    sessionId: string,
    messages: Message | Message[],
    options: { invocationId?: string; stateDelta?: JsonObject } = {},
  ): Promise<Appended> {
    const batch = Array.isArray(messages) ? messages : [messages];
    const invocation = options.invocationId === undefined ? {} : { invocationId: options.invocationId };
    const events = batch.map((m) => event(m, invocation));
    const last = events[events.length - 1];
    if (last && options.stateDelta && Object.keys(options.stateDelta).length > 0) {
      last.state_delta = { ...options.stateDelta };
    }
    return this.appendEvents(app, userId, sessionId, events);
  }

  /** Appends events (see {@link event}) atomically; idempotent by event id. */
  appendEvents(app: string, userId: string, sessionId: string, events: SessionEvent[]): Promise<Appended> {
    return this.call("append", { app, user_id: userId, session_id: sessionId, events });
  }

  /** A page of events of the `context` or the `archive` view. */
  events(app: string, userId: string, sessionId: string, options: EventsOptions = {}): Promise<Page<SessionEvent>> {
    const filter = defined({
      view: options.view ?? "context",
      last_n: options.lastN,
      after: options.after,
      roles: options.roles && options.roles.length > 0 ? options.roles.join(",") : undefined,
      branch: options.branch,
      invocation_id: options.invocationId,
      keyword: options.keyword,
      page: options.page ?? 0,
      page_size: options.pageSize,
    });
    return this.call("events", { app, user_id: userId, session_id: sessionId, filter });
  }

  /**
   * What an adapter stored with each event of the context under `key`:
   * one object per event, for adapters' reads of whole conversations;
   * `withSession` answers the session too, in the same call.
   */
  items(
    app: string,
    userId: string,
    sessionId: string,
    key: string,
    options: { lastN?: number; page?: number; pageSize?: number; withSession?: boolean } = {},
  ): Promise<KeptItems> {
    const filter = defined({ last_n: options.lastN, page: options.page ?? 0, page_size: options.pageSize });
    const withSession = options.withSession ?? false;
    return this.call("items", { app, user_id: userId, session_id: sessionId, key, filter, with_session: withSession });
  }

  /**
   * Removes the latest event that is not a summary and returns it (`null`
   * when there is none); a compaction since then is undone.
   */
  pop(app: string, userId: string, sessionId: string): Promise<SessionEvent | null> {
    return this.call("pop", { app, user_id: userId, session_id: sessionId });
  }

  /**
   * The context as chat messages, ready for the next model call: the
   * pinned system messages first, the view of the agent on `branch` (all
   * of it by default), tool calls without their results left out.
   */
  messages(app: string, userId: string, sessionId: string, options: { branch?: string } = {}): Promise<Message[]> {
    return this.call("messages", { app, user_id: userId, session_id: sessionId, branch: options.branch ?? null });
  }

  /**
   * Swaps the context if the session is still at `expectedVersion` and
   * answers its new version; otherwise rejects with `ConflictError` and
   * nothing changed. The archive keeps everything.
   */
  replaceContext(
    app: string,
    userId: string,
    sessionId: string,
    events: SessionEvent[],
    expectedVersion: number,
  ): Promise<number> {
    return this.call("replace_context", {
      app,
      user_id: userId,
      session_id: sessionId,
      events,
      expected_version: expectedVersion,
    });
  }

  // Search, compaction, rewind, fork.

  /**
   * Searches one session's archive, or all of the user's sessions.
   * `any` finds events holding any one of the query's words and phrases
   * instead of every one (`-word` still excludes); `since` keeps the
   * events at or after that time.
   */
  search(app: string, userId: string, query: string, options: SearchOptions = {}): Promise<Page<JsonObject>> {
    const since = options.since instanceof Date ? options.since.toISOString() : options.since;
    return this.call("search", {
      app,
      user_id: userId,
      query,
      session_id: options.sessionId ?? null,
      ranked: options.ranked ?? false,
      any: options.any ?? false,
      since: since ?? null,
      page: options.page ?? 0,
      page_size: options.pageSize ?? 10,
    });
  }

  /**
   * Compacts the context by `spec`: `sliding_window` (`max_events`),
   * `turn_window` (`max_turns`), `token_budget` (`max_tokens`),
   * `summarize` or `structured_summary` (`keep` turns or `keep_messages`)
   * or `tool_result_clearing` (`keep`); optionally `trigger` (e.g.
   * `{tokens: 8000}`) and `summarizer` (`"extractive"` or
   * `"openai:MODEL"`). Answers what it did, or `compacted: false` and
   * the reason.
   */
  compact(app: string, userId: string, sessionId: string, spec: CompactionSpec): Promise<JsonObject> {
    return this.call("compact", { app, user_id: userId, session_id: sessionId, strategy: spec });
  }

  /**
   * Removes the invocation's events (or the event at `seq`) and
   * everything after; the context is restored as it was there and the
   * state replays. Give exactly one of `invocationId` and `seq`.
   */
  rewind(
    app: string,
    userId: string,
    sessionId: string,
    target: { invocationId: string } | { seq: number },
  ): Promise<JsonObject> {
    const rewind = "seq" in target ? { seq: target.seq } : { invocation_id: target.invocationId };
    return this.call("rewind", { app, user_id: userId, session_id: sessionId, rewind });
  }

  /**
   * A new session from this one's events up to `at`: `"latest"`,
   * `{seq: n}` or `{invocation: id}`.
   */
  fork(
    app: string,
    userId: string,
    sessionId: string,
    at: "latest" | { seq: number } | { invocation: string } = "latest",
  ): Promise<Session> {
    return this.call("fork", { app, user_id: userId, session_id: sessionId, fork: { at } });
  }

  // State.

  /** The session's state by scope: `{session, user, app}`. */
  state(app: string, userId: string, sessionId: string): Promise<{ session: JsonObject; user: JsonObject; app: JsonObject }> {
    return this.call("state", { app, user_id: userId, session_id: sessionId });
  }

  /**
   * Merges `patch` into the session scope (`null` removes a key); `user:`
   * and `app:` keys change through events' `state_delta`.
   */
  patchState(app: string, userId: string, sessionId: string, patch: JsonObject): Promise<JsonObject> {
    return this.call("patch_state", { app, user_id: userId, session_id: sessionId, patch });
  }

  /** The user's `user:` and the app's `app:` state. */
  sharedState(app: string, userId: string): Promise<JsonObject> {
    return this.call("shared_state", { app, user_id: userId });
  }

  /** Model usage recorded in the session: total, per invocation, per model. */
  usage(app: string, userId: string, sessionId: string): Promise<JsonObject> {
    return this.call("usage", { app, user_id: userId, session_id: sessionId });
  }

  /** Erases every session, event and `user:` value of the user in the app. */
  eraseUser(app: string, userId: string): Promise<JsonObject> {
    return this.call("erase_user", { app, user_id: userId });
  }
}

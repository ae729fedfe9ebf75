/**
 * A Google ADK for JS (`@google/adk`) session service and memory service
 * on agent-session.
 *
 * ```ts
 * import { LlmAgent, Runner } from "@google/adk";
 * import { Store } from "agent-session";
 * import { MemoryService, SessionService } from "agent-session/google-adk";
 *
 * const store = await Store.open("sqlite://sessions.db");
 * const runner = new Runner({
 *   appName: "support",
 *   agent,
 *   sessionService: new SessionService(store),
 *   memoryService: new MemoryService(store),
 * });
 * ```
 *
 * As `agent-session/iqai-adk`, on Google's interface: request objects,
 * times in milliseconds, `null` state values kept as values, an event
 * appended again under its id replacing the stored one, and
 * `listSessions` with or without a user, paged.
 *
 * @module
 */

import { randomUUID } from "node:crypto";

import { BaseSessionService, createEvent } from "@google/adk";
import type {
  AppendEventRequest,
  BaseMemoryService,
  CreateSessionRequest,
  DeleteSessionRequest,
  Event,
  GetSessionRequest,
  ListSessionsRequest,
  ListSessionsResponse,
  SearchMemoryRequest,
  SearchMemoryResponse,
  Session as AdkSession,
} from "@google/adk";

import {
  EVENT_KEY,
  LAST_UPDATE_KEY,
  adkSessionId,
  copyForRecall,
  deleteQuietly,
  readSession,
  rebuildPage,
  recall,
  storeSessionId,
  storedAdkEvent,
} from "./adk-common.cjs";
import { fromText, toStored } from "./codec.cjs";
import {
  AlreadyExistsError,
  type Json,
  type JsonObject,
  type Session as StoredSession,
  type SessionEvent,
  type Store,
} from "./index.cjs";

export { EVENT_KEY, LAST_UPDATE_KEY, adkSessionId, storeSessionId } from "./adk-common.cjs";
/**
 * The marker of a state value the store could not hold as it is: `null`
 * (which the store reads as "remove the key") and objects carrying the marker.
 */
export const VALUE_MARKER = "__adk_value__";

function encodeValue(value: unknown): Json {
  if (value === null || value === undefined) return { [VALUE_MARKER]: "null" };
  const stored = toStored<Json>(value);
  if (stored && typeof stored === "object" && !Array.isArray(stored) && VALUE_MARKER in stored) {
    return { [VALUE_MARKER]: "raw", value: stored };
  }
  return stored;
}

function decodeValue(value: unknown): unknown {
  if (value && typeof value === "object" && !Array.isArray(value) && VALUE_MARKER in value) {
    const marked = value as Record<string, unknown>;
    return marked[VALUE_MARKER] === "null" ? null : (marked.value ?? null);
  }
  return value;
}

/** State as the store keeps it: `temp:` keys left out, `null` kept as a value. */
function storedState(state: Record<string, unknown> | undefined): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(state ?? {})) {
    if (!k.startsWith("temp:")) out[k] = encodeValue(v);
  }
  return out;
}

/** State as ADK reads it: values decoded, the hidden key left out. */
function adkState(state: JsonObject): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(state)) {
    if (k !== LAST_UPDATE_KEY) out[k] = decodeValue(v);
  }
  return out;
}

/** The store event of an ADK event (its state delta left out when `withState` is false). */
function storedEvent(e: Event, withState = true): SessionEvent {
  const delta = withState ? storedState(e.actions?.stateDelta) : {};
  delta[LAST_UPDATE_KEY] = e.timestamp;
  return storedAdkEvent(e, delta, new Date(e.timestamp));
}

/** The ADK event a stored event holds; a summary as a text event. */
function adkEvent(stored: SessionEvent): Event {
  const kept = stored.metadata?.[EVENT_KEY];
  if (kept && typeof kept === "object" && !Array.isArray(kept)) {
    return createEvent(fromText(JSON.stringify(kept)));
  }
  const text = typeof stored.message.content === "string" ? stored.message.content : "";
  const user = stored.message.role === "user";
  return createEvent({
    id: stored.id,
    invocationId: stored.invocation_id ?? "",
    author: user ? "user" : "model",
    timestamp: Date.parse(stored.timestamp),
    content: { role: user ? "user" : "model", parts: [{ text }] },
  });
}

/** The ADK session of a store session. */
function adkSession(stored: StoredSession, adkId: string, events: Event[], state = adkState(stored.state)): AdkSession {
  const updated = stored.state[LAST_UPDATE_KEY];
  return {
    id: adkId,
    appName: stored.app,
    userId: stored.user_id,
    state,
    events,
    lastUpdateTime: typeof updated === "number" ? updated : Date.parse(String(stored.created_at)),
  };
}

/**
 * Google ADK's `BaseSessionService` over an agent-session `Store`,
 * behaving as ADK's own in-memory service does (ids scoped per (app,
 * user), `temp:` state never stored, `lastUpdateTime` the last appended
 * event's time, an event appended again under its id replacing the
 * stored one), except that a taken id throws `AlreadyExistsError`
 * instead of replacing the session.
 */
export class SessionService extends BaseSessionService {
  readonly #store: Store;

  constructor(store: Store) {
    super();
    this.#store = store;
  }

  /** Creates a session; a taken id throws `AlreadyExistsError`. */
  async createSession({ appName, userId, state, sessionId }: CreateSessionRequest): Promise<AdkSession> {
    const adkId = sessionId?.trim() || randomUUID();
    const id = storeSessionId(appName, userId, adkId);
    try {
      const stored = await this.#store.create(appName, userId, { id, state: storedState(state) });
      return adkSession(stored, adkId, []);
    } catch (e) {
      if (e instanceof AlreadyExistsError) {
        throw new AlreadyExistsError(`Session with id ${adkId} already exists.`, e.problem);
      }
      throw e;
    }
  }

  /**
   * The session with its events, or `undefined`: `numRecentEvents` keeps
   * the most recent ones (0: all), `afterTimestamp` (milliseconds) the
   * ones after the last event before it, as ADK's in-memory service.
   */
  async getSession({ appName, userId, sessionId, config }: GetSessionRequest): Promise<AdkSession | undefined> {
    const found = await readSession(
      this.#store,
      { appName, userId, sessionId },
      { recent: config?.numRecentEvents, after: config?.afterTimestamp },
      (page) => rebuildPage(page, (kept) => createEvent(kept as Partial<Event>), adkEvent),
    );
    return found && adkSession(found.stored, sessionId.trim(), found.events);
  }

  /**
   * The app's sessions of `userId` (of every user when not given),
   * without events or state, paged as ADK's in-memory service pages them
   * (`limit` with `page` or `offset`; `order` by last update).
   */
  async listSessions({ appName, userId, limit, offset, page, order }: ListSessionsRequest): Promise<ListSessionsResponse> {
    const all: AdkSession[] = [];
    for (let n = 0; ; n++) {
      const got =
        userId === undefined
          ? await this.#store.listAll({ app: appName, page: n, pageSize: 100 })
          : await this.#store.list(appName, userId, { page: n, pageSize: 100 });
      for (const stored of got.items) {
        const adkId = adkSessionId(stored.id, stored.app, stored.user_id);
        if (adkId !== undefined) all.push(adkSession(stored, adkId, [], {}));
      }
      if (!got.has_more) break;
    }
    if (order === "asc") all.sort((a, b) => a.lastUpdateTime - b.lastUpdateTime || a.id.localeCompare(b.id));
    if (order === "desc") all.sort((a, b) => b.lastUpdateTime - a.lastUpdateTime || a.id.localeCompare(b.id));
    const totalItems = all.length;
    if (limit === undefined) {
      return { sessions: offset ? all.slice(offset) : all, page: 1, limit: totalItems, totalItems, totalPages: totalItems === 0 ? 0 : 1 };
    }
    const start = page !== undefined ? (page - 1) * limit : (offset ?? 0);
    return {
      sessions: all.slice(start, start + limit),
      page: page ?? (limit === 0 ? 1 : Math.floor(start / limit) + 1),
      limit,
      totalItems,
      totalPages: limit === 0 ? 0 : Math.ceil(totalItems / limit),
    };
  }

  /** Deletes the session and its events; an unknown one is no error. */
  async deleteSession({ appName, userId, sessionId }: DeleteSessionRequest): Promise<void> {
    await deleteQuietly(this.#store, appName, userId, sessionId);
  }

  /**
   * Stores the event (`temp:` keys left out), then applies it to
   * `session` as ADK does; a partial event is neither. An event whose id
   * the session already holds replaces it, as in ADK.
   */
  override async appendEvent({ session, event }: AppendEventRequest): Promise<Event> {
    if (event.partial) return event;
    const id = storeSessionId(session.appName, session.userId, session.id);
    const stored = storedEvent(event);
    if (session.events.some((e) => e.id === event.id)) {
      // A store event is immutable under its id: the new copy takes a new one.
      stored.id = `${stored.id}.${randomUUID()}`;
      await this.#replace(session, id, event.id, stored);
    } else {
      await this.#store.appendEvents(session.appName, session.userId, id, [stored]);
    }
    const appended = await super.appendEvent({ session, event });
    session.lastUpdateTime = event.timestamp;
    return appended;
  }

  /**
   * Swaps the stored copy of ADK's event `adkId` in the context for
   * `stored`, by compare-and-swap (the archive keeps the old copy).
   */
  async #replace(session: AdkSession, id: string, adkId: string, stored: SessionEvent): Promise<void> {
    const holds = (e: SessionEvent) => (e.metadata?.[EVENT_KEY] as { id?: unknown } | undefined)?.id === adkId;
    for (let attempt = 0; ; attempt++) {
      const { version } = await this.#store.get(session.appName, session.userId, id);
      const context: SessionEvent[] = [];
      for (let page = 0; ; page++) {
        const got = await this.#store.events(session.appName, session.userId, id, { page, pageSize: 1000 });
        context.push(...got.items);
        if (!got.has_more) break;
      }
      const swapped = context.map((e) => (holds(e) ? stored : e));
      if (!context.some(holds)) swapped.push(stored);
      try {
        await this.#store.replaceContext(session.appName, session.userId, id, swapped, version);
        return;
      } catch (e) {
        if (attempt >= 2 || !(e instanceof Error && e.name === "ConflictError")) throw e;
      }
    }
  }
}

/**
 * Google ADK's `BaseMemoryService` over the store's cross-session
 * recall, as `agent-session/iqai-adk`'s: the user's events in the app
 * (the archive too), best first, for any word of the query.
 */
export class MemoryService implements BaseMemoryService {
  readonly #store: Store;
  readonly #limit: number;

  constructor(store: Store, options: { limit?: number } = {}) {
    this.#store = store;
    this.#limit = options.limit ?? 10;
  }

  /** Makes the session searchable (nothing to do for one the store holds). */
  async addSessionToMemory(session: AdkSession): Promise<void> {
    const events = session.events.filter((e) => !e.partial).map((e) => storedEvent(e, false));
    await copyForRecall(this.#store, session, events);
  }

  /** The user's events in the app that hold any word of `query`, best first. */
  async searchMemory({ appName, userId, query }: SearchMemoryRequest): Promise<SearchMemoryResponse> {
    const memories = [];
    for (const hit of await recall(this.#store, appName, userId, query, this.#limit)) {
      const e = adkEvent(hit);
      if (!(e.content?.parts ?? []).some((p) => p.text)) continue; // text is what is recalled, as in ADK
      memories.push({ content: e.content!, author: e.author, timestamp: new Date(e.timestamp).toISOString() });
    }
    return { memories };
  }
}

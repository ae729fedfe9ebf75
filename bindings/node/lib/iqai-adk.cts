/**
 * An ADK-TS (`@iqai/adk`) session service and memory service on
 * agent-session.
 *
 * ```ts
 * import { LlmAgent, Runner } from "@iqai/adk";
 * import { Store } from "agent-session";
 * import { MemoryService, SessionService } from "agent-session/iqai-adk";
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
 * Each ADK event is one event of the store: the ADK event is kept whole
 * (content, actions, flags) and comes back as an `Event` as ADK wrote
 * it, while the event's message is its chat view (text, function calls
 * and responses), which compaction and recall search read. State deltas
 * go through the store's scopes as ADK defines them: `app:` keys are the
 * app's, `user:` keys the user's across their sessions, `temp:` keys
 * live on the in-memory session of the invocation and are never stored,
 * the rest belong to the session; `null` removes a key. A session id is
 * scoped to its (app, user), as in ADK: two users may each have `s1`.
 *
 * @module
 */

import { randomUUID } from "node:crypto";

import { BaseSessionService, Event, EventActions } from "@iqai/adk";
import type {
  BaseMemoryService,
  GetSessionConfig,
  ListSessionsResponse,
  Session as AdkSession,
} from "@iqai/adk";

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
  type JsonObject,
  NotFoundError,
  type Session as StoredSession,
  type SessionEvent,
  type Store,
} from "./index.cjs";

export { EVENT_KEY, LAST_UPDATE_KEY, adkSessionId, storeSessionId } from "./adk-common.cjs";

/** The ADK event's own fields the `Event` constructor takes. */
const CONSTRUCTED = new Set(["content", "partial", "invocationId", "author", "actions", "longRunningToolIds", "branch", "id", "timestamp"]);

/** A state delta as the store keeps it: `temp:` keys left out. */
function storedDelta(delta: Record<string, unknown> | undefined): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(delta ?? {})) {
    if (!k.startsWith("temp:")) out[k] = toStored(v ?? null);
  }
  return out;
}

/** Session state as ADK reads it (the hidden last-update key left out). */
function adkState(state: JsonObject): Record<string, unknown> {
  const { [LAST_UPDATE_KEY]: _hidden, ...rest } = state;
  return rest;
}

/** The store event of an ADK event (its state delta left out when `withState` is false). */
function storedEvent(e: Event, withState = true): SessionEvent {
  const delta = withState ? storedDelta(e.actions?.stateDelta) : {};
  delta[LAST_UPDATE_KEY] = e.timestamp;
  return storedAdkEvent(e, delta, new Date(e.timestamp * 1000));
}

/** The ADK `Event` of its stored copy. */
function rebuild(kept: Record<string, unknown>): Event {
  const e = new Event({
    content: kept.content as never,
    partial: kept.partial as boolean | undefined,
    invocationId: kept.invocationId as string | undefined,
    author: kept.author as string,
    actions: new EventActions((kept.actions ?? {}) as never),
    longRunningToolIds: kept.longRunningToolIds as Set<string> | undefined,
    branch: kept.branch as string | undefined,
    id: kept.id as string | undefined,
    timestamp: kept.timestamp as number | undefined,
  });
  for (const [k, v] of Object.entries(kept)) {
    if (!CONSTRUCTED.has(k)) (e as unknown as Record<string, unknown>)[k] = v;
  }
  return e;
}

/** The ADK event a stored event holds; a summary as a text event. */
function adkEvent(stored: SessionEvent): Event {
  const kept = stored.metadata?.[EVENT_KEY];
  if (kept && typeof kept === "object" && !Array.isArray(kept)) {
    return rebuild(fromText(JSON.stringify(kept)));
  }
  const text = typeof stored.message.content === "string" ? stored.message.content : "";
  const user = stored.message.role === "user";
  return new Event({
    id: stored.id,
    invocationId: stored.invocation_id ?? "",
    author: user ? "user" : "model",
    timestamp: Date.parse(stored.timestamp) / 1000,
    content: { role: user ? "user" : "model", parts: [{ text }] } as never,
  });
}

/** The ADK session of a store session (scopes merged, as the store reads them). */
function adkSession(stored: StoredSession, adkId: string, events: Event[]): AdkSession {
  const updated = stored.state[LAST_UPDATE_KEY];
  return {
    id: adkId,
    appName: stored.app,
    userId: stored.user_id,
    state: adkState(stored.state),
    events,
    lastUpdateTime: typeof updated === "number" ? updated : Date.parse(String(stored.created_at)) / 1000,
  };
}

/**
 * ADK-TS's `BaseSessionService` over an agent-session `Store`, behaving
 * as ADK's own services do: ids scoped per (app, user) and stripped of
 * surrounding whitespace (none given: a UUID), `lastUpdateTime` the time
 * of the last appended event, `temp:` state never stored. A taken id is
 * the store's `AlreadyExistsError`.
 */
export class SessionService extends BaseSessionService {
  readonly #store: Store;

  constructor(store: Store) {
    super();
    this.#store = store;
  }

  /** Creates a session; a taken id throws `AlreadyExistsError`. */
  async createSession(appName: string, userId: string, state?: Record<string, unknown>, sessionId?: string): Promise<AdkSession> {
    const adkId = sessionId?.trim() || randomUUID();
    const id = storeSessionId(appName, userId, adkId);
    try {
      const stored = await this.#store.create(appName, userId, { id, state: storedDelta(state) });
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
   * the most recent ones (0: all, as ADK's in-memory service), and
   * `afterTimestamp` (seconds) the ones after the last event before it.
   */
  async getSession(appName: string, userId: string, sessionId: string, config?: GetSessionConfig): Promise<AdkSession | undefined> {
    const found = await readSession(
      this.#store,
      { appName, userId, sessionId },
      { recent: config?.numRecentEvents, after: config?.afterTimestamp },
      (page) => rebuildPage(page, rebuild, adkEvent),
    );
    return found && adkSession(found.stored, sessionId.trim(), found.events);
  }

  /** The user's sessions in the app, without events. */
  async listSessions(appName: string, userId: string): Promise<ListSessionsResponse> {
    const sessions: AdkSession[] = [];
    for (let page = 0; ; page++) {
      const got = await this.#store.list(appName, userId, { page, pageSize: 100 });
      for (const stored of got.items) {
        const adkId = adkSessionId(stored.id, stored.app, stored.user_id);
        if (adkId !== undefined) sessions.push(adkSession(stored, adkId, []));
      }
      if (!got.has_more) break;
    }
    sessions.sort((a, b) => a.lastUpdateTime - b.lastUpdateTime || (a.id < b.id ? -1 : 1));
    return { sessions };
  }

  /** Deletes the session and its events; an unknown one is no error. */
  async deleteSession(appName: string, userId: string, sessionId: string): Promise<void> {
    await deleteQuietly(this.#store, appName, userId, sessionId);
  }

  /**
   * Ends the session (the seed's `endSession`): it stays readable and
   * searchable, closed to appends; answers it, or `undefined` if unknown.
   */
  async endSession(appName: string, userId: string, sessionId: string): Promise<AdkSession | undefined> {
    try {
      await this.#store.end(appName, userId, storeSessionId(appName, userId, sessionId.trim()));
    } catch (e) {
      if (e instanceof NotFoundError || e instanceof RangeError) return undefined;
      throw e;
    }
    return this.getSession(appName, userId, sessionId);
  }

  /**
   * Stores the event (`temp:` keys left out), then applies it to
   * `session` as ADK does; a partial event is neither.
   */
  override async appendEvent(session: AdkSession, event: Event): Promise<Event> {
    if (event.partial) return event;
    const id = storeSessionId(session.appName, session.userId, session.id);
    await this.#store.appendEvents(session.appName, session.userId, id, [storedEvent(event)]);
    await super.appendEvent(session, event);
    session.lastUpdateTime = event.timestamp;
    return event;
  }
}

/**
 * ADK-TS's `BaseMemoryService` over the store's cross-session recall.
 * Every event of every session the user has in the app is memory, the
 * archive too (compaction forgets nothing), searchable the moment it is
 * appended through {@link SessionService}; `addSessionToMemory` copies
 * in only a session the store does not hold (from ADK's in-memory
 * service, say), events only. A search answers the best-ranked events
 * holding any word of the query with text, at most `limit`.
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
  async searchMemory(params: { appName: string; userId: string; query: string }) {
    const memories = [];
    for (const hit of await recall(this.#store, params.appName, params.userId, params.query, this.#limit)) {
      const e = adkEvent(hit);
      const parts = (e.content?.parts ?? []) as { text?: string }[];
      if (!parts.some((p) => p.text)) continue; // text is what is recalled, as in ADK
      memories.push({
        content: e.content as never,
        author: e.author,
        timestamp: new Date(e.timestamp * 1000).toISOString(),
      });
    }
    return { memories };
  }
}

/**
 * What the ADK adapters share: the store's session id behind an ADK
 * session id of an (app, user), and the chat view of an event's content
 * (`@google/genai`'s `Content`, the same in both ADKs).
 *
 * @module
 */

import { fromText, toStored } from "./codec.cjs";
import {
  type JsonObject,
  type KeptItems,
  type Message,
  NotFoundError,
  type Session as StoredSession,
  type SessionEvent,
  type Store,
  event as storeEvent,
} from "./index.cjs";

/** The longest store session id (the store's rule). */
export const MAX_ID_LEN = 128;

const PLAIN = /^[A-Za-z0-9_-]*$/;

/**
 * `name` in the letters `[A-Za-z0-9_-]`, every other byte of its UTF-8
 * as `.xx` (lowercase hex): injective, and never holds `:`.
 */
export function escapeName(name: string): string {
  if (PLAIN.test(name)) return name;
  let out = "";
  for (const c of name) {
    if (/^[A-Za-z0-9_-]$/.test(c)) {
      out += c;
    } else {
      for (const b of Buffer.from(c, "utf8")) out += `.${b.toString(16).padStart(2, "0")}`;
    }
  }
  return out;
}

/** The name {@link escapeName} made `text` from, or `undefined` if it made none. */
export function unescapeName(text: string): string | undefined {
  if (!/^(?:[A-Za-z0-9_-]|\.[0-9a-f]{2})*$/.test(text)) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < text.length; ) {
    if (text[i] === ".") {
      bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(text.charCodeAt(i));
      i += 1;
    }
  }
  const decoded = Buffer.from(bytes).toString("utf8");
  return Buffer.from(decoded, "utf8").equals(Buffer.from(bytes)) ? decoded : undefined;
}

/**
 * The store's session id behind ADK's `sessionId` of (app, user):
 * `<app>:<user>:<id>`, each escaped — a valid store id, different for
 * every different triple. Throws a `RangeError` past the store's 128 bytes.
 */
export function storeSessionId(appName: string, userId: string, sessionId: string): string {
  const encoded = [appName, userId, sessionId].map(escapeName).join(":");
  if (encoded.length > MAX_ID_LEN) {
    throw new RangeError(
      `session id ${JSON.stringify(sessionId)} of app ${JSON.stringify(appName)} and user ` +
        `${JSON.stringify(userId)} encodes to ${encoded.length} bytes; the store allows ${MAX_ID_LEN}`,
    );
  }
  return encoded;
}

/**
 * ADK's session id behind a store id of (app, user), or `undefined` when
 * the store session is not one an adapter created for that owner.
 */
export function adkSessionId(storedId: string, appName: string, userId: string): string | undefined {
  const parts = storedId.split(":").map(unescapeName);
  if (parts.length !== 3 || parts[0] !== appName || parts[1] !== userId) return undefined;
  return parts[2];
}

/** A part of a genai `Content`, as far as the chat view reads it. */
interface Part {
  text?: string;
  functionCall?: { id?: string; name?: string; args?: unknown };
  functionResponse?: { id?: string; name?: string; response?: unknown };
}

/** The chat message an event's content reads as, for compaction and search. */
export function contentChatView(author: string | undefined, content: { parts?: Part[] } | undefined): Message {
  const parts = content?.parts ?? [];
  const response = parts.find((p) => p.functionResponse)?.functionResponse;
  if (response) {
    return {
      role: "tool",
      tool_call_id: response.id || response.name || "",
      name: response.name ?? null,
      content: JSON.stringify(response.response ?? null),
    };
  }
  const role = author === "user" ? "user" : "assistant";
  const text = parts
    .map((p) => p.text)
    .filter((t): t is string => typeof t === "string" && t !== "")
    .join("\n");
  const calls = parts.map((p) => p.functionCall).filter((c) => c !== undefined);
  if (calls.length > 0 && role === "assistant") {
    return {
      role,
      content: text || null,
      tool_calls: calls.map((c) => ({
        id: c.id || c.name || "",
        type: "function",
        function: { name: c.name ?? "", arguments: JSON.stringify(c.args ?? {}) },
      })),
    };
  }
  return { role, content: text };
}

/** The event metadata key that holds an ADK event as it was appended (both ADKs). */
export const EVENT_KEY = "adk_event";
/**
 * The session-state key (hidden from ADK) that holds the timestamp of the
 * last event ADK appended: ADK's `Session.lastUpdateTime`.
 */
export const LAST_UPDATE_KEY = "__adk_last_update_time__";

/** What the store keeps of an ADK event, in both ADKs. */
interface AdkEventLike {
  id: string;
  invocationId?: string;
  branch?: string;
  author?: string;
  content?: unknown;
}

/**
 * The store event of an ADK event: its chat view as the message, the
 * event kept whole under {@link EVENT_KEY} (its delta's `temp:` keys
 * left out), `stateDelta` as the store is to apply it, at time `at`.
 * ADK event ids are 8 random characters: qualified by the run, two
 * events of one session never share a store id.
 */
export function storedAdkEvent(e: AdkEventLike, stateDelta: JsonObject, at: Date): SessionEvent {
  const kept = toStored<JsonObject>(e);
  const actions = kept.actions;
  if (actions && typeof actions === "object" && !Array.isArray(actions)) {
    const delta = actions.stateDelta;
    if (delta && typeof delta === "object" && !Array.isArray(delta)) {
      actions.stateDelta = Object.fromEntries(Object.entries(delta).filter(([k]) => !k.startsWith("temp:")));
    }
  }
  const id = e.invocationId ? `${e.invocationId}.${e.id}` : e.id;
  const stored = storeEvent(contentChatView(e.author, e.content as never), {
    id: escapeName(id),
    ...(e.invocationId ? { invocationId: escapeName(e.invocationId) } : {}),
    ...(e.branch ? { branch: e.branch } : {}),
    ...(e.author ? { author: e.author } : {}),
    stateDelta,
    metadata: { [EVENT_KEY]: kept },
  });
  stored.timestamp = at.toISOString();
  return stored;
}

/** The store id behind an ADK id, or `undefined` when it cannot be one (too long). */
function storedIdOf(appName: string, userId: string, sessionId: string): string | undefined {
  try {
    return storeSessionId(appName, userId, sessionId.trim());
  } catch (e) {
    if (e instanceof RangeError) return undefined;
    throw e;
  }
}

/** The ADK events of an `items` page, given how to rebuild a kept event and a stored one. */
export function rebuildPage<E>(page: KeptItems, kept: (value: Record<string, unknown>) => E, stored: (e: SessionEvent) => E): E[] {
  const others = new Map(page.events);
  return page.items.map((value, i) =>
    value !== null && typeof value === "object" && !Array.isArray(value)
      ? kept(value as Record<string, unknown>)
      : stored(others.get(i) as SessionEvent),
  );
}

/**
 * A session and its context's events as an ADK service reads them, or
 * `undefined` when there is none: the session comes with the first page
 * of its events (one call); `recent` keeps the last ones, `after`
 * the ones after the last event before it (as ADK's in-memory services).
 */
export async function readSession<E extends { timestamp: number }>(
  store: Store,
  owner: { appName: string; userId: string; sessionId: string },
  options: { recent: number | undefined; after: number | undefined },
  rebuild: (page: KeptItems) => E[],
): Promise<{ stored: StoredSession; events: E[] } | undefined> {
  const { appName, userId } = owner;
  const id = storedIdOf(appName, userId, owner.sessionId);
  if (id === undefined) return undefined;
  // One call answers the session with the first page: an unknown session
  // is its NotFoundError.
  const read = async (filter: JsonObject, withSession: boolean): Promise<KeptItems> =>
    fromText<KeptItems>(
      await store.callText("items", {
        app: appName,
        user_id: userId,
        session_id: id,
        key: EVENT_KEY,
        filter,
        with_session: withSession,
      }),
    );
  // Pages of at most 1,000 (the store's largest), of the last `recent` when given.
  const last: JsonObject = options.recent ? { last_n: options.recent } : {};
  const size = Math.min(options.recent || 1000, 1000);
  let first: KeptItems;
  try {
    first = await read({ ...last, page: 0, page_size: size }, true);
  } catch (e) {
    if (e instanceof NotFoundError) return undefined;
    throw e;
  }
  const stored = first.session as StoredSession;
  const events = rebuild(first);
  for (let page = 1, more = first.has_more; more; page++) {
    const kept = await read({ ...last, page, page_size: size }, false);
    events.push(...rebuild(kept));
    more = kept.has_more;
  }
  if (options.after) {
    let i = events.length - 1;
    while (i >= 0 && events[i]!.timestamp >= options.after) i--;
    return { stored, events: events.slice(i + 1) };
  }
  return { stored, events };
}

/** Deletes an ADK session's store session; an unknown one is no error. */
export async function deleteQuietly(store: Store, appName: string, userId: string, sessionId: string): Promise<void> {
  const id = storedIdOf(appName, userId, sessionId);
  if (id === undefined) return;
  try {
    await store.delete(appName, userId, id);
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
}

/**
 * Copies an ADK session of another service into the store (created if
 * need be), its events only, for recall; nothing for a session the store
 * holds already.
 */
export async function copyForRecall(
  store: Store,
  session: { appName: string; userId: string; id: string },
  events: SessionEvent[],
): Promise<void> {
  const id = storeSessionId(session.appName, session.userId, session.id);
  try {
    await store.get(session.appName, session.userId, id);
    return;
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
  await store.create(session.appName, session.userId, { id });
  if (events.length > 0) await store.appendEvents(session.appName, session.userId, id, events);
}

/** The hits of a memory search: the user's events in the app holding any word of `query`, best first. */
export async function recall(store: Store, appName: string, userId: string, query: string, limit: number): Promise<SessionEvent[]> {
  if (!query.trim()) return [];
  const page = await store.search(appName, userId, query, { any: true, ranked: true, pageSize: limit });
  return page.items.map((hit) => hit.event as unknown as SessionEvent);
}

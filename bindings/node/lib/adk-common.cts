/**
 * What the ADK adapters share: the store's session id behind an ADK
 * session id of an (app, user), and the chat view of an event's content
 * (`@google/genai`'s `Content`, the same in both ADKs).
 *
 * @module
 */

import type { Message } from "./index.cjs";

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

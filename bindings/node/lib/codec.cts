/**
 * What a framework's objects become in the store, and back: JSON with
 * the values JSON has no type for tagged — binary data (`Uint8Array`,
 * `Buffer`) as `{"$agent_session_bytes": base64}` and a `Set` as
 * `{"$agent_session_set": [...]}` — so that an adapter gives back what
 * it was given.
 *
 * @module
 */

/** The one key of the object that stands for binary data: its base64. */
export const BYTES_KEY = "$agent_session_bytes";
/** The one key of the object that stands for a `Set`: its members. */
export const SET_KEY = "$agent_session_set";

/**
 * The replacer that tags binary data and sets. It looks at the holder's
 * own value, not the one it is handed: `JSON.stringify` has already
 * turned a `Buffer` into `{type: "Buffer", data: [...]}` by its `toJSON`.
 */
function tag(this: unknown, key: string, v: unknown): unknown {
  const raw = this !== null && typeof this === "object" ? (this as Record<string, unknown>)[key] : v;
  if (raw instanceof Uint8Array) {
    return { [BYTES_KEY]: Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString("base64") };
  }
  if (raw instanceof Set) {
    return { [SET_KEY]: [...raw] };
  }
  return v;
}

/** The reviver that turns tagged objects back into binary data and sets. */
function untag(_key: string, v: unknown): unknown {
  if (v && typeof v === "object" && !Array.isArray(v)) {
    const keys = Object.keys(v);
    if (keys.length === 1) {
      const bytes = (v as Record<string, unknown>)[BYTES_KEY];
      if (typeof bytes === "string") return new Uint8Array(Buffer.from(bytes, "base64"));
      const members = (v as Record<string, unknown>)[SET_KEY];
      if (Array.isArray(members)) return new Set(members);
    }
  }
  return v;
}

/** `value` as the JSON value it is stored as (tagged, `undefined` left out). */
export function toStored<T = unknown>(value: unknown): T {
  return JSON.parse(JSON.stringify(value, tag)) as T;
}

/** JSON text decoded, tagged values revived (only when there are some: a plain parse is faster). */
export function fromText<T>(text: string): T {
  return (text.includes('"$agent_session_') ? JSON.parse(text, untag) : JSON.parse(text)) as T;
}

/** JSON text of a value with its object keys sorted, tagged as stored. */
export function sortedJson(value: unknown): string {
  return JSON.stringify(value, function (this: unknown, key: string, v: unknown) {
    const tagged = tag.call(this, key, v);
    if (tagged && typeof tagged === "object" && !Array.isArray(tagged)) {
      const entries = Object.entries(tagged as Record<string, unknown>);
      entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return Object.fromEntries(entries);
    }
    return tagged;
  });
}

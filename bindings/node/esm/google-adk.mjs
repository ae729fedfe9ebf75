// The ES module entry point of `agent-session/google-adk`: the CommonJS
// build re-exported (one copy of each class).
import cjs from "../dist/google-adk.cjs";

export const { SessionService, MemoryService, EVENT_KEY, LAST_UPDATE_KEY, VALUE_MARKER, storeSessionId, adkSessionId } = cjs;

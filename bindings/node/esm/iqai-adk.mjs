// The ES module entry point of `agent-session/iqai-adk`: the CommonJS
// build re-exported (one copy of each class).
import cjs from "../dist/iqai-adk.cjs";

export const { SessionService, MemoryService, EVENT_KEY, LAST_UPDATE_KEY, storeSessionId, adkSessionId } = cjs;

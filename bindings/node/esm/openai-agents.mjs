// The ES module entry point of `agent-session/openai-agents`: the
// CommonJS build re-exported (one copy of each class).
import cjs from "../dist/openai-agents.cjs";

export const { Session, chatView, ITEM_KEY, BYTES_KEY } = cjs;

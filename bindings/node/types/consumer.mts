// What a TypeScript user of the package writes, type-checked in CI
// (`tsc -p tsconfig.check.json`) against the package's own declarations,
// as an ES module; types/consumer.cts does the same through require.
import { NotFoundError, Store, event, type KeptItems, type Message, type Session } from "agent-session";

export async function consumer(): Promise<string> {
  const store: Store = await Store.open("memory://");
  const session: Session = await store.create("app", "ada", { state: { step: 1 } });
  const message: Message = { role: "user", content: "hi" };
  await store.appendEvents("app", "ada", session.id, [event(message, { invocationId: "run-1" })]);
  const kept: KeptItems = await store.items("app", "ada", session.id, "item", { lastN: 20 });
  const { isNew } = await store.resolve("app", "ada", "chat-1", { idleTimeoutSecs: 60 });
  try {
    await store.get("app", "bob", session.id);
  } catch (e) {
    if (e instanceof NotFoundError) return `${e.kind} ${e.problem.status ?? ""}`;
  }
  store.close();
  return `${kept.items.length} ${isNew}`;
}

// The OpenAI Agents adapter is the SDK's session, with run contexts and history transactions.
import type { RunContextAwareSession, SessionHistoryTransactionAwareSession } from "@openai/agents";
import { Session as OpenAISession } from "agent-session/openai-agents";

export const openAISession: RunContextAwareSession & SessionHistoryTransactionAwareSession = new OpenAISession(
  "chat-1",
  await Store.open("memory://"),
  { app: "support", userId: "ada", compaction: { strategy: "summarize", keep: 2, trigger: { tokens: 8000 } } },
);

// The ADK-TS adapters are its session and memory services.
import type { BaseMemoryService, BaseSessionService } from "@iqai/adk";
import { MemoryService as AdkMemoryService, SessionService as AdkSessionService } from "agent-session/iqai-adk";

const adkStore = await Store.open("memory://");
export const adkSessions: BaseSessionService = new AdkSessionService(adkStore);
export const adkMemory: BaseMemoryService = new AdkMemoryService(adkStore, { limit: 5 });

// The Google ADK adapters are its session and memory services.
import type { BaseMemoryService as GoogleMemory, BaseSessionService as GoogleSessions } from "@google/adk";
import { MemoryService as GoogleMemoryService, SessionService as GoogleSessionService } from "agent-session/google-adk";

export const googleSessions: GoogleSessions = new GoogleSessionService(adkStore);
export const googleMemory: GoogleMemory = new GoogleMemoryService(adkStore);

// The CommonJS side of types/consumer.mts.
import agentSession = require("agent-session");

export async function consumer(): Promise<number> {
  const store = await agentSession.Store.open("memory://");
  const page: agentSession.Page<agentSession.Session> = await store.list("app", "ada", { pageSize: 5 });
  return page.items.length;
}

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

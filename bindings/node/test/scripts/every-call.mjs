// Touches every store kind it is given and every call path, then ends the
// way argv[2] says: "return" (the event loop drains), "exit" (process.exit
// with calls still in flight), "idle" (an open store left idle), "throw"
// (an uncaught error with calls in flight), "worker" (a worker thread
// opens a store, calls it and is terminated mid-call).
// Usage: node every-call.mjs <how> <url>...
import { Worker } from "node:worker_threads";

import { Store } from "agent-session";

const [how, ...urls] = process.argv.slice(2);

async function exercise(url) {
  const store = await Store.open(url);
  const s = await store.create("exit", "ada");
  await store.append("exit", "ada", s.id, [
    { role: "user", content: "parcel PX-1 is late" },
    { role: "assistant", content: "checking PX-1" },
  ]);
  await Promise.all([
    store.messages("exit", "ada", s.id),
    store.events("exit", "ada", s.id, { view: "archive", pageSize: 1000 }),
    store.items("exit", "ada", s.id, "item"),
    store.search("exit", "ada", "PX-1"),
    store.list("exit", "ada"),
    store.state("exit", "ada", s.id),
  ]);
  await store.compact("exit", "ada", s.id, { strategy: "sliding_window", max_events: 1 });
  return { store, id: s.id };
}

const opened = [];
for (const url of urls) {
  // "idle": the stores are opened and never called.
  opened.push(how === "idle" ? { store: await Store.open(url), id: undefined } : await exercise(url));
}

// Calls left in flight, never awaited.
const inFlight = () => {
  for (const { store, id } of opened) {
    for (let n = 0; n < 20; n++) {
      store.append("exit", "ada", id, { role: "user", content: `late ${n}` }).catch(() => {});
      store.search("exit", "ada", "PX-1").catch(() => {});
    }
  }
};

switch (how) {
  case "return":
    break;
  case "idle":
    // Nothing pending, nothing ever called: the process must end
    // although the stores are open.
    break;
  case "exit":
    inFlight();
    process.exit(0);
    break;
  case "throw":
    inFlight();
    process.exitCode = 0;
    process.on("uncaughtException", () => process.exit(0));
    throw new Error("uncaught");
  case "worker": {
    const source = `
      const { parentPort, workerData } = require("node:worker_threads");
      const { Store } = require("agent-session");
      (async () => {
        const store = await Store.open(workerData);
        const s = await store.create("exit", "worker");
        parentPort.postMessage("open");
        for (;;) await store.append("exit", "worker", s.id, { role: "user", content: "busy" });
      })();`;
    const worker = new Worker(source, { eval: true, workerData: urls[0] });
    await new Promise((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await worker.terminate();
    // The main thread's stores still answer after the worker's teardown.
    for (const { store, id } of opened) {
      await store.messages("exit", "ada", id);
    }
    break;
  }
  default:
    console.error(`unknown ending: ${how}`);
    process.exit(2);
}

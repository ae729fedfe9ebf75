// The stores the tests run on: SQLite in a temporary file, and PostgreSQL
// in a schema of its own (dropped afterwards) when it answers on
// 127.0.0.1:5432 or POSTGRES_URL is set; under CI=true it must answer.
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";

export const PG_URL = process.env.POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

/** Whether something answers on the port. */
export function answers(port, host = "127.0.0.1") {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host, timeout: 1000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

/** Drops the PostgreSQL schemas the tests made. */
export function dropSchemas(schemas) {
  for (const schema of schemas) {
    try {
      execFileSync("psql", [PG_URL, "-q", "-c", `DROP SCHEMA IF EXISTS ${schema} CASCADE`], { stdio: "ignore" });
    } catch {
      // psql missing: the schema stays, named for the run.
    }
  }
}

/** A fresh temporary directory, removed when the file's tests end. */
export function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), "agent-session-node-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * The store kinds the store tests run on: `[name, makeUrl]` pairs; each
 * `makeUrl()` names a new empty store. PostgreSQL is left out (loudly)
 * when it does not answer, unless CI=true.
 */
export async function storeKinds() {
  const dir = tempDir();
  const kinds = [["sqlite", () => `sqlite://${join(dir, `${randomUUID()}.db`)}`]];
  if ((await answers(5432)) || process.env.POSTGRES_URL) {
    const schemas = [];
    after(() => dropSchemas(schemas));
    kinds.push([
      "postgres",
      () => {
        const schema = `node_${randomUUID().replaceAll("-", "")}`;
        schemas.push(schema);
        return `${PG_URL}?schema=${schema}`;
      },
    ]);
  } else if (process.env.CI === "true") {
    throw new Error("CI=true: PostgreSQL must answer on 127.0.0.1:5432");
  } else {
    console.warn("# skipping PostgreSQL: nothing answers on 127.0.0.1:5432");
  }
  return kinds;
}

// The process ends cleanly however it ends: exit status 0, nothing on
// stderr, no hang keeping it alive, with every store kind open and calls
// in flight, many times in a row.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { PG_URL, REDIS_URL, answers, dropSchemas, tempDir } from "./support.mjs";

const SCRIPT = fileURLToPath(new URL("./scripts/every-call.mjs", import.meta.url));
const ROUNDS = Number(process.env.EXIT_ROUNDS ?? 10);

/** Which servers answer (under CI=true both must). */
async function servers() {
  const up = {};
  for (const [port, name] of [[5432, "PostgreSQL"], [6379, "Redis"]]) {
    up[name] = await answers(port);
    if (!up[name] && process.env.CI === "true") {
      throw new Error(`CI=true: ${name} must answer on 127.0.0.1:${port}`);
    }
    if (!up[name]) console.warn(`# leaving ${name} out of the exit runs: nothing answers on ${port}`);
  }
  return up;
}

const schemas = [];
after(() => dropSchemas(schemas));

/** New stores of every kind for one run (a fresh file, schema and prefix). */
function freshStores(dir, up) {
  const id = randomUUID().replaceAll("-", "");
  const out = [`sqlite://${join(dir, `${id}.db`)}`, "memory://", `fs://${join(dir, id)}`];
  if (up.PostgreSQL) {
    schemas.push(`node_exit_${id}`);
    out.push(`${PG_URL}?schema=node_exit_${id}`);
  }
  if (up.Redis) out.push(`${REDIS_URL}?prefix=node-exit-${id}`);
  return out;
}

function run(how, stores, extra = []) {
  return spawnSync(process.execPath, [...extra, SCRIPT, how, ...stores], {
    encoding: "utf8",
    timeout: 60_000,
  });
}

describe("the process at exit", async () => {
  const dir = tempDir();
  const up = await servers();
  for (const how of ["return", "idle", "exit", "throw", "worker"]) {
    it(`ends cleanly after "${how}", ${ROUNDS} times in a row`, () => {
      for (let round = 0; round < ROUNDS; round++) {
        const r = run(how, freshStores(dir, up));
        assert.equal(r.error, undefined, `round ${round}: ${r.error}`);
        assert.equal(r.signal, null, `round ${round}: killed by ${r.signal}\n${r.stderr}`);
        assert.equal(r.status, 0, `round ${round}: exit ${r.status}\n${r.stderr}`);
        assert.equal(r.stderr, "", `round ${round}: stderr`);
      }
    });
  }

  it("ends cleanly under --unhandled-rejections=strict and --trace-warnings", () => {
    const r = run("exit", freshStores(dir, up), ["--unhandled-rejections=strict", "--trace-warnings"]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr, "");
  });
});

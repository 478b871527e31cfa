// Starts the real server binary (built by `cargo test`/`cargo build`) on a free loopback port
// with a fresh embedded database, for the Node tests.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const RESEARCHER_TOKEN = "node-researcher-token";

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function startServer(extraEnv = {}) {
  const bin =
    process.env.INTERVIEW_BIN ??
    fileURLToPath(new URL("../../target/debug/interview-runtime", import.meta.url));
  const dir = await mkdtemp(join(tmpdir(), "interview-node-"));
  const port = await freePort();
  const env = { ...process.env, BIND: `127.0.0.1:${port}`, RESEARCHER_TOKENS: RESEARCHER_TOKEN, ...extraEnv };
  delete env.DATABASE_URL;
  delete env.CONFIG_FILE;
  const child = spawn(bin, [], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  let logs = "";
  child.stdout.on("data", (d) => (logs += d));
  child.stderr.on("data", (d) => (logs += d));
  const base = `http://127.0.0.1:${port}`;
  const started = Date.now();
  for (;;) {
    try {
      const res = await fetch(`${base}/readyz`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() - started > 30_000) {
      throw new Error(`the server did not start:\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    logs: () => logs,
    async stop() {
      child.kill("SIGTERM");
      await new Promise((r) => (child.exitCode !== null ? r() : child.once("exit", r)));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function createSession(base, slug = "demo") {
  const res = await fetch(`${base}/api/public/studies/${slug}/sessions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  if (res.status !== 201) throw new Error(`create session: ${res.status} ${await res.text()}`);
  return res.json();
}

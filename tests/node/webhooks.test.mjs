// Webhook deliveries from the real server, verified the ways docs/webhooks.md tells receivers
// to: with the npm `standardwebhooks` package (Standard Webhooks' own TypeScript library) and
// with the Node and Python snippets printed in the docs, taken from the docs as they stand.
// A body changed by one byte fails all three.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFile, writeFile, mkdtemp } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { RESEARCHER_TOKEN, startServer } from "./server.mjs";

const docs = await readFile(new URL("../../docs/webhooks.md", import.meta.url), "utf8");

/// The fenced code block that follows `<!-- verify:NAME -->` in the docs.
function snippet(name) {
  const marker = docs.indexOf(`<!-- verify:${name} -->`);
  assert.ok(marker >= 0, `docs/webhooks.md has no ${name} snippet`);
  const start = docs.indexOf("\n", docs.indexOf("```", marker)) + 1;
  return docs.slice(start, docs.indexOf("```", start));
}

let server;
let receiver;
const received = [];

before(async () => {
  server = await startServer({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: "true" });
  receiver = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
});

after(async () => {
  await server?.stop();
  receiver?.close();
});

async function researcher(path, method = "GET", body) {
  const res = await fetch(`${server.base}${path}`, {
    method,
    headers: { authorization: `Bearer ${RESEARCHER_TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${await res.clone().text()}`);
  return res.status === 204 ? null : res.json();
}

function python(secret, delivery) {
  const program = `${snippet("python")}
import json, sys, base64
given = json.load(sys.stdin)
print(verify_webhook(given["secret"], given["headers"], base64.b64decode(given["body"])))
`;
  const run = spawnSync("python3", ["-c", program], {
    input: JSON.stringify({ secret, headers: delivery.headers, body: delivery.body.toString("base64") }),
    encoding: "utf8",
  });
  assert.equal(run.status, 0, run.stderr);
  return run.stdout.trim() === "True";
}

test("deliveries verify with standardwebhooks and with the docs' Node and Python code", async () => {
  const { studies } = await researcher("/api/studies");
  const study = studies.find((s) => s.public_slug === "demo").study_id;
  const { port } = receiver.address();
  const made = await researcher(`/api/studies/${study}/webhooks`, "POST", {
    url: `http://127.0.0.1:${port}/in`,
    events: ["study.paused", "study.resumed"],
  });
  await researcher(`/api/studies/${study}/pause`, "POST", {});
  await researcher(`/api/studies/${study}/resume`, "POST", {});
  const deadline = Date.now() + 30_000;
  while (received.length < 2) {
    assert.ok(Date.now() < deadline, `two deliveries expected, got ${received.length}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  const dir = await mkdtemp(join(tmpdir(), "webhook-docs-"));
  const module = join(dir, "verify.mjs");
  await writeFile(module, snippet("node"));
  const { verifyWebhook } = await import(module);

  const library = new Webhook(made.secret);
  for (const delivery of received) {
    const payload = library.verify(delivery.body, delivery.headers);
    assert.equal(payload.data.study_id, study);
    assert.ok(verifyWebhook(made.secret, delivery.headers, delivery.body), "the docs' Node code");
    assert.ok(python(made.secret, delivery), "the docs' Python code");

    const tampered = Buffer.from(delivery.body);
    tampered[tampered.length - 2] ^= 1;
    assert.throws(() => library.verify(tampered, delivery.headers));
    assert.equal(verifyWebhook(made.secret, delivery.headers, tampered), false);
    assert.equal(python(made.secret, { ...delivery, body: tampered }), false);
  }
  assert.deepEqual(
    received.map((d) => JSON.parse(d.body).type),
    ["study.paused", "study.resumed"],
  );
});

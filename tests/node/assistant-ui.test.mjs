// The real @assistant-ui/react-ag-ui adapter in headless Chromium: a minimal assistant-ui front
// end (./assistant-ui/app.jsx, bundled here by esbuild) interviews against the running server,
// and the page is reloaded twice mid-interview — once while a widget waits, once while the
// interviewer waits for words. After each reload the thread must show every earlier message,
// once, in order, and the interview must go on to its end.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { build } from "esbuild";
import { chromium } from "playwright-core";

import { createSession, startServer } from "./server.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
let server;
let browser;
let bundle;

before(async () => {
  const built = await build({
    entryPoints: [new URL("./assistant-ui/app.jsx", import.meta.url).pathname],
    bundle: true,
    format: "esm",
    jsx: "automatic",
    define: { "process.env.NODE_ENV": '"production"' },
    write: false,
    logLevel: "error",
  });
  bundle = built.outputFiles[0].contents;
  server = await startServer();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  });
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

/** A page on the server's origin (so the app's AG-UI requests are same-origin) that serves the
 * test app under /assistant-ui-test/, and fails the test on any page error. */
async function appPage() {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.route(`${server.base}/assistant-ui-test/**`, (route) => {
    if (new URL(route.request().url()).pathname.endsWith("/app.js")) {
      return route.fulfill({ body: Buffer.from(bundle), contentType: "text/javascript" });
    }
    return route.fulfill({
      contentType: "text/html",
      body: `<!doctype html><html lang="en"><meta charset="utf-8"><title>assistant-ui</title>
<pre id="errors"></pre><div id="root"></div>
<script type="module" src="/assistant-ui-test/app.js"></script></html>`,
    });
  });
  return { page, errors };
}

/** Waits until no run is in flight. */
async function settled(page) {
  await page.waitForFunction(() => document.body.dataset.running === "false", null, { timeout: 20_000 });
}

/** The thread as shown: each message's role and text, and its ids and part types. */
async function thread(page) {
  const shown = await page
    .locator(".message")
    .evaluateAll((els) => els.map((e) => [e.dataset.role, e.innerText.trim()]));
  return { shown, parts: await page.evaluate(() => window.thread) };
}

/** Reloads and waits for the run the reload starts to finish. */
async function reload(page, { widget }) {
  await page.reload();
  if (widget) await page.locator("button.interrupt:not([disabled])").waitFor({ timeout: 20_000 });
  await page.waitForFunction(() => window.thread?.length > 0, null, { timeout: 20_000 });
  await settled(page);
}

function assertOnce({ shown, parts }, context) {
  const ids = parts.map((m) => m.id);
  assert.equal(new Set(ids).size, ids.length, `each message once (${context}): ${ids}`);
  assert.ok(
    shown.every(([, text]) => text.length > 0),
    `no empty message (${context}): ${JSON.stringify(shown)}`,
  );
}

async function say(page, text) {
  const box = page.getByRole("textbox", { name: "Your answer" });
  await box.fill(text);
  await box.press("Enter");
  await page.waitForFunction(() => document.body.dataset.running === "true", null, { timeout: 5_000 }).catch(() => {});
  await settled(page);
}

test("a reload mid-interview shows every earlier message once, with the real assistant-ui adapter", async () => {
  const { session_id, participant_token } = await createSession(server.base);
  const { page, errors } = await appPage();
  await page.goto(`${server.base}/assistant-ui-test/#session=${session_id}&token=${participant_token}`);

  // Consent, then two answers: the satisfaction widget waits.
  await page.locator("button.interrupt[data-reason=consent]:not([disabled])").click();
  await page.waitForFunction(() => document.querySelectorAll(".message[data-role=assistant]").length >= 2);
  await settled(page);
  await say(page, "Last Sunday I wrote the shopping list on my phone while my partner checked the fridge.");
  await say(page, "Vegetables go bad before we eat them because we buy too much on impulse every week.");
  await page.locator("button.interrupt[data-reason=likert]:not([disabled])").waitFor();
  const before = await thread(page);
  assert.ok(before.shown.filter(([role]) => role === "user").length === 2, JSON.stringify(before.shown));
  assertOnce(before, "before the first reload");

  // Reload while the widget waits: the same thread, and the widget can be answered.
  await reload(page, { widget: true });
  const afterWidget = await thread(page);
  assert.deepEqual(afterWidget.shown, before.shown);
  assertOnce(afterWidget, "after the reload at a widget");
  await page.locator("button.interrupt[data-reason=likert]").click();
  await settled(page);
  while (await page.locator("button.interrupt").count()) {
    await page.locator("button.interrupt").first().click();
    await settled(page);
  }

  // Reload while the interviewer waits for words.
  const beforeWords = await thread(page);
  assert.ok(beforeWords.shown.length > before.shown.length, JSON.stringify(beforeWords.shown));
  await reload(page, { widget: false });
  const afterWords = await thread(page);
  assert.deepEqual(afterWords.shown, beforeWords.shown);
  assertOnce(afterWords, "after the reload at a question");

  // And the interview goes on to its end in the reloaded thread.
  const answers = ["A shopping list that fills itself from the meals we plan would save me the most time."];
  for (let step = 0; step < 12; step++) {
    if ((await page.evaluate(() => document.body.dataset.status)) === "completed") break;
    if (await page.locator("button.interrupt").count()) {
      await page.locator("button.interrupt").first().click();
      await settled(page);
      continue;
    }
    const summary = (await thread(page)).shown.at(-1)?.[1] ?? "";
    await say(page, /summar|right\?|correct/i.test(summary) ? "Yes, that's right" : answers.shift() ?? "That's all.");
  }
  assert.equal(await page.evaluate(() => document.body.dataset.status), "completed");
  assertOnce(await thread(page), "at the end");
  assert.deepEqual(errors, []);
  assert.equal(await page.locator("#errors").innerText(), "");
  await page.close();
});

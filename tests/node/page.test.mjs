// The participant page in headless Chromium (Debian's, driven by playwright-core): the demo
// interview end to end at phone width, keyboard only where it matters, a reload in the middle,
// the Chinese "thinking" text, and the numbers the README quotes (page weight, first character).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { chromium } from "playwright-core";

import { RESEARCHER_TOKEN, startServer } from "./server.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
let server;
let browser;

before(async () => {
  server = await startServer();
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

// `bypassCSP` lets a test inject axe-core (the page's policy allows only its own script).
async function phone({ bypassCSP = false } = {}) {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, hasTouch: true, bypassCSP });
  return { context, page: await context.newPage() };
}

const assistant = (page) => page.locator("#log li.them");

// axe-core over the page as it stands: every violation, named with its nodes.
const AXE = new URL("./node_modules/axe-core/axe.min.js", import.meta.url);
async function axe(page, step) {
  if (!(await page.evaluate(() => typeof window.axe !== "undefined"))) {
    await page.addScriptTag({ path: AXE.pathname });
  }
  const { violations, passes } = await page.evaluate(async () => {
    const result = await window.axe.run(document);
    return {
      violations: result.violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`),
      passes: result.passes.length,
    };
  });
  assert.ok(passes > 10, `axe ran at ${step}: ${passes} rules passed`);
  assert.deepEqual(violations, [], `axe at ${step}`);
}

// With SCREENSHOTS set (`scripts/screenshots`), the README's pictures are taken here.
const SHOTS = new URL("../../docs/screenshots/", import.meta.url);
async function screenshot(page, name) {
  if (process.env.SCREENSHOTS) await page.screenshot({ path: new URL(`${name}.png`, SHOTS).pathname });
}

/** Every element `selector` matches lies inside the viewport, and is what the page shows at its
 * centre and near each corner (nothing fixed or floating covers any part of it). */
async function assertFullyVisible(page, selector, context) {
  const hidden = await page.locator(selector).evaluateAll((els) => els.flatMap((e) => {
    const r = e.getBoundingClientRect();
    const inside = r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth;
    // Near each corner, inside the rounded border (hit testing follows the rounding).
    const n = 6;
    const points = [[r.left + r.width / 2, r.top + r.height / 2], [r.left + n, r.top + n], [r.right - n, r.top + n],
      [r.left + n, r.bottom - n], [r.right - n, r.bottom - n]];
    const covered = points.find(([x, y]) => !e.contains(document.elementFromPoint(x, y)));
    return inside && !covered ? [] : [`${e.textContent} (${Math.round(r.top)}–${Math.round(r.bottom)} of ${innerHeight}) ${covered ? document.elementFromPoint(...covered)?.outerHTML.slice(0, 80) : ""}`];
  }));
  assert.deepEqual(hidden, [], `fully visible at ${context}`);
}

/** Opens the study's page, starts, and agrees to take part (consent stays on screen until its
 * answer is acknowledged: this waits for that). */
async function consented(page, slug) {
  await page.goto(`${server.base}/interview/${slug}`);
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  await page.locator("#widget button.primary").click();
  await page.waitForFunction(() => document.querySelectorAll("#log li.note").length > 0);
}

async function say(page, text) {
  await page.locator("#text").fill(text);
  await page.keyboard.press("Enter");
}

test("the demo interview in the page, with a reload in the middle", async () => {
  const { context, page } = await phone();
  const cdp = await context.newCDPSession(page);
  await cdp.send("Network.enable");
  let transferred = 0;
  cdp.on("Network.loadingFinished", (e) => (transferred += e.encodedDataLength));

  await page.goto(`${server.base}/interview/demo`);
  await page.locator("#start").click();
  // Consent first, answered with the keyboard (focus lands on the panel's first button).
  await page.locator("#widget .consent-text").waitFor();
  assert.ok(await page.locator("#end").isHidden(), "nothing to end before consent");
  const firstLoadBytes = transferred;
  await page.keyboard.press("Enter");
  await assistant(page).first().waitFor();
  assert.match(await assistant(page).first().textContent(), /^To start, could you walk me through/);
  assert.ok(await page.locator("#end").isVisible(), "a way to end is always visible");

  await say(page, "Last Sunday I wrote the list on my phone while my partner checked the fridge and pantry");
  await assistant(page).nth(1).waitFor();
  await say(page, "Vegetables go bad before we eat them because we buy too much on impulse every single week");
  await page.locator("#widget .scale").waitFor();

  // Reload with a widget pending: the conversation and the widget come back.
  const before = await page.locator("#log li.them, #log li.me").allTextContents();
  await page.reload();
  await page.locator("#widget .scale").waitFor();
  await page.waitForFunction((n) => document.querySelectorAll("#log li.them, #log li.me").length >= n, before.length);
  const after = await page.locator("#log li.them, #log li.me").allTextContents();
  assert.deepEqual(after, before);

  await page.locator("#widget .scale button", { hasText: "2" }).click();
  await page.locator("#widget button.primary").click();
  await assistant(page).nth(2).waitFor();
  await say(page, "Honestly a shopping list that fills itself from the meals we plan would save me the most time");
  await page.locator("#widget .choices").waitFor();
  await page.locator("#widget .choice").first().click();
  await page.locator("#widget button.primary").click();
  await page.waitForFunction(() => /Did I get that right\?/.test(document.querySelector("#log li.them:last-of-type")?.textContent ?? ""));
  // The one-tap replies are fully in view as they appear, on a small phone, a phone, a tablet
  // and a desktop: nothing (the answer box above all) covers any part of them.
  await page.locator("#quick button").first().waitFor();
  for (const [width, height] of [[320, 568], [390, 844], [768, 1024], [1280, 800]]) {
    await page.setViewportSize({ width, height });
    await assertFullyVisible(page, "#quick button", `${width}×${height}`);
  }
  await page.setViewportSize({ width: 390, height: 844 });
  // The summary is confirmed with one tap, as its own message: what is typed in the box stays.
  await page.locator("#text").fill("a draft of something to add");
  await page.locator("#quick button.primary", { hasText: "Yes, that's right" }).click();
  await page.locator("#done h2").waitFor();
  assert.equal(await page.locator("#text").inputValue(), "a draft of something to add");
  await page.locator("#log li.me", { hasText: "Yes, that's right" }).waitFor();
  // Nothing typed outlives the interview in the browser.
  const { id: demoSession } = JSON.parse(await page.evaluate(() => localStorage.getItem("interview:demo")));
  assert.equal(await page.evaluate((id) => localStorage.getItem(`interview:draft:${id}`), demoSession), null);
  assert.match(await page.locator("#done").textContent(), /Thank you/);
  assert.ok(await page.locator("#quick").isHidden());
  assert.equal(await page.evaluate(() => document.activeElement?.tagName), "H2", "focus moves to the end");
  // The summary is shown once, in the conversation, its points a real list; the end card does
  // not repeat it.
  const summary = page.locator("#log > li.them", { hasText: "Did I get that right" }).last();
  const points = await summary.locator("ul > li").allTextContents();
  assert.ok(points.length >= 2, `the summary's points are a list: ${await summary.innerHTML()}`);
  assert.ok(points.every((p) => !p.startsWith("- ")), JSON.stringify(points));
  assert.match(await summary.locator("p").first().textContent(), /summary/);
  const main = await page.locator("main").textContent();
  for (const p of points) assert.equal(main.split(p).length - 1, 1, `the summary is shown once: ${p}`);
  assert.equal(await page.locator("#done .summary").count(), 0);
  assert.match(await page.locator("#done").textContent(), /summary above have been saved/);
  // No return link in this study: the participant may close the page, and is not invited to
  // start a second interview.
  assert.match(await page.locator("#done").textContent(), /You can close this page now/);
  assert.equal(await page.locator("#done button", { hasText: /new interview/i }).count(), 0);
  assert.ok(!(await page.locator("#composer").isVisible()));

  // Everything shown is plain language.
  const text = (await page.locator("main").textContent()).toLowerCase();
  for (const term of ["tool", "agent", "harness", "rationale", "{\""]) {
    assert.ok(!text.includes(term), `the page shows ${term}: ${text}`);
  }

  const { turns } = await page.evaluate(() => window.__metrics);
  const first = turns.filter((t) => t.first !== null).map((t) => (t.first - t.sent).toFixed(1));
  const accepted = turns.map((t) => (t.accepted - t.sent).toFixed(1));
  console.log(`# page weight (first load, bytes transferred): ${firstLoadBytes}`);
  assert.ok(firstLoadBytes < 40_000, `the first load stays under 40 KB: ${firstLoadBytes}`);
  console.log(`# message sent → first character shown (ms): ${first.join(", ")}`);
  console.log(`# message sent → 202 received (ms): ${accepted.join(", ")}`);
  assert.ok(first.length >= 1, JSON.stringify(turns));
  await context.close();
});

test("the first character of each answer appears promptly (timings for the README)", async () => {
  const { context, page } = await phone();
  await page.goto(`${server.base}/interview/demo`);
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  await page.keyboard.press("Enter");
  await assistant(page).first().waitFor();
  // Short answers keep the interviewer asking (follow-ups, then the next topic): words every time.
  for (let i = 1; i <= 6; i++) {
    await page.locator("#text:enabled").waitFor();
    await say(page, "I use a list");
    await assistant(page).nth(i).waitFor();
  }
  const { turns } = await page.evaluate(() => window.__metrics);
  const first = turns.map((t) => t.first - t.sent).sort((a, b) => a - b);
  assert.equal(first.length, 6, JSON.stringify(turns));
  console.log(`# first character after send (ms), sorted: ${first.map((x) => x.toFixed(1)).join(", ")}`);
  await context.close();
});

const researcher = { authorization: `Bearer ${RESEARCHER_TOKEN}`, "content-type": "application/json" };

// The study with one widget of each type (examples/every-type-study.json), published once.
let everyType;
function publishEveryType() {
  everyType ??= (async () => {
    const { readFile } = await import("node:fs/promises");
    const study = JSON.parse(await readFile(new URL("../../examples/every-type-study.json", import.meta.url), "utf8"));
    const created = await (await fetch(`${server.base}/api/studies`, { method: "POST", headers: researcher, body: JSON.stringify(study) })).json();
    await fetch(`${server.base}/api/studies/${created.study_id}/publish`, { method: "POST", headers: researcher, body: "{}" });
  })();
  return everyType;
}

test("every widget type works in the page, by mouse and by keyboard", async () => {
  await publishEveryType();
  const headers = researcher;
  const { context, page } = await phone({ bypassCSP: true });
  await page.goto(`${server.base}/interview/every-type`);
  await axe(page, "the landing");
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  await axe(page, "consent");
  // Each widget is a group a screen reader names by its question.
  const named = async (w) => {
    const prompt = await w.locator("h2").textContent();
    assert.equal(await w.getAttribute("role"), "group");
    const by = await w.getAttribute("aria-labelledby");
    assert.equal(await page.locator(`[id="${by}"]`).textContent(), prompt);
  };
  await named(page.locator("#widget"));
  await page.locator("#widget button.primary").click();
  // The consent widget stays on screen until its answer is acknowledged; wait for that, or the
  // loop below would read it again.
  await page.waitForFunction(() => document.querySelectorAll("#log li.note").length > 0);
  const seen = [];
  for (let step = 0; step < 30; step++) {
    await page.waitForFunction(() => !document.querySelector("#widget").hidden || !document.querySelector("#text").disabled || !document.querySelector("#done").hidden);
    if (!(await page.locator("#done").isHidden())) break;
    if (await page.locator("#widget").isHidden()) {
      const summary = /Did I get that right/.test(await assistant(page).last().textContent());
      await axe(page, summary ? "the summary" : "a question");
      const text = summary
        ? "Yes, that's right"
        : "Every Saturday morning I compare prices in two stores and then buy for the week";
      await say(page, text);
      await page.waitForFunction(() => document.querySelector("#text").disabled || !document.querySelector("#widget").hidden);
      continue;
    }
    const w = page.locator("#widget");
    const resolved = await page.locator("#log li.note").count();
    const kind = await w.getAttribute("data-type");
    seen.push(kind);
    await axe(page, kind);
    await named(w);
    // Every tap target is at least 44 × 44 px (WCAG 2.5.5).
    const small = await page.evaluate(() => [...document.querySelectorAll("#widget button, #end")]
      .filter((b) => b.offsetParent !== null)
      .map((b) => [b.textContent, b.getBoundingClientRect()])
      .filter(([, r]) => r.width < 44 || r.height < 44)
      .map(([t, r]) => `${t} ${Math.round(r.width)}×${Math.round(r.height)}`));
    assert.deepEqual(small, [], `${kind}: small tap targets`);
    if (kind === "ranking") {
      // Focus is on the list when it appears, and follows the item that moved.
      await page.waitForFunction(() => document.activeElement?.closest(".rank"));
      // Each place is numbered.
      const places = await w.locator(".rank li").count();
      assert.deepEqual(await w.locator(".rank li .position").allTextContents(), Array.from({ length: places }, (_, i) => `${i + 1}.`));
      const focused = () => page.evaluate(() => [document.activeElement.closest("li")?.querySelector(".label").textContent, document.activeElement.textContent]);
      await w.locator(".rank li").first().locator("button").nth(1).focus();
      await page.keyboard.press("Enter"); // the first one down
      assert.deepEqual(await focused(), ["Option PRICE", "↓"]);
      await page.keyboard.press("Enter"); // and down again, to the end
      assert.deepEqual(await focused(), ["Option PRICE", "↑"], "the button that can still move it");
      await page.keyboard.press("Enter"); // back up one
      await w.locator("button.primary").click();
    } else if (kind === "rating") {
      // Untouched, the slider is no answer yet.
      assert.ok(await w.locator("button.primary").isDisabled());
      assert.equal(await w.locator("input[type=range]").getAttribute("aria-valuetext"), "Not chosen yet");
      // No thumb until it is moved: one resting at the minimum would look like an answer.
      const thumb = () => w.locator("input[type=range]").evaluate((r) => !r.classList.contains("untouched"));
      assert.equal(await thumb(), false);
      await w.locator("input[type=range]").focus();
      // The minimum can be chosen too (Home at the minimum moves nothing).
      await page.keyboard.press("Home");
      assert.equal(await w.locator("input[type=range]").getAttribute("aria-valuetext"), "0");
      assert.equal(await thumb(), true);
      const max = await w.locator("input[type=range]").getAttribute("max");
      assert.equal(await w.locator("p.hint span").textContent(), `0 / ${max}`);
      assert.ok(await w.locator("button.primary").isEnabled());
      await page.keyboard.press("ArrowRight");
      assert.equal(await w.locator("input[type=range]").getAttribute("aria-valuetext"), "0.5");
      await w.locator("button.primary").click();
    } else if (kind === "free_text") {
      // 80 characters where 60 are allowed: nothing is cut, the participant is told and shortens it.
      const area = w.locator("textarea.answer");
      await area.fill("x".repeat(80));
      assert.equal((await area.inputValue()).length, 80);
      assert.ok(await w.locator("button.primary").isDisabled());
      assert.match(await w.locator(".count").textContent(), /At most 60 characters/);
      await area.fill("   ");
      assert.ok(await w.locator("button.primary").isDisabled(), "an empty answer is not a submit");
      await area.fill("Nothing else, thanks.");
      assert.match(await w.locator(".count").textContent(), /21 \/ 60 characters/);
      await w.locator("button.primary").click();
    } else if (kind === "likert") {
      await w.locator(".scale button").nth(3).click();
      await screenshot(page, "phone-widget");
      await w.locator("button.primary").click();
    } else if (kind === "multiple_choice") {
      // At most two: a third pick is refused, and the count says so as it changes.
      await w.locator(".choice").nth(0).click();
      await w.locator(".choice").nth(1).click();
      await w.locator(".choice").nth(2).click({ force: true }); // marked aria-disabled: a tap anyway
      assert.equal(await w.locator(".choice[aria-checked=true]").count(), 2);
      assert.equal(await w.locator(".choice").nth(2).getAttribute("aria-disabled"), "true");
      assert.equal(await w.locator(".count").textContent(), "2 of at most 2 chosen");
      await w.locator("button.primary").click();
    } else if (kind === "single_choice") {
      // While a widget waits, the box says so in full above it (not a cut-off placeholder).
      const hint = page.locator("#hint");
      assert.ok(await hint.isVisible());
      assert.equal(await hint.textContent(), "Please answer the question above first.");
      assert.ok(await hint.evaluate((h) => h.scrollWidth <= h.clientWidth && h.getBoundingClientRect().right <= innerWidth));
      // Keyboard: focus lands on the first option; arrows move and choose.
      await w.locator(".choice").first().focus();
      await page.keyboard.press("ArrowDown");
      // The chosen option has a filled mark of its own, and the focus ring is dark (≥ 3:1 on white).
      const marks = await w.locator(".choice").evaluateAll((bs) => bs.map((b) => getComputedStyle(b, "::before").backgroundColor));
      assert.notEqual(marks[1], marks[0], "the chosen mark differs from the others");
      const ring = await w.locator(".choice").nth(1).evaluate((b) => {
        const style = getComputedStyle(b);
        return [b.matches(":focus-visible"), style.outlineStyle, style.outlineColor];
      });
      assert.deepEqual(ring, [true, "solid", "rgb(29, 35, 48)"]);
      await w.locator("button.primary").click();
    } else {
      assert.equal(kind, "yes_no");
      await w.locator("button", { hasText: "Skip" }).click();
    }
    await page.waitForFunction((n) => document.querySelectorAll("#log li.note").length > n, resolved);
  }
  assert.deepEqual(seen, ["single_choice", "multiple_choice", "likert", "rating", "ranking", "yes_no", "free_text"]);
  await page.locator("#done h2").waitFor();
  await axe(page, "the completion");
  await screenshot(page, "phone-completion");
  // Each widget's question and the answer given stay in the conversation, in words.
  const notes = await page.locator("#log li.answered").allTextContents();
  const joined = notes.join("\n");
  assert.match(joined, /Agreed/);
  assert.match(joined, /Which do you buy online\?Option FRUIT, Option BREAD/);
  assert.match(joined, /Rank what matters most\.1\. Option QUALITY  2\. Option PRICE  3\. Option SPEED/);
  assert.match(joined, /Do you use coupons\?Skipped/);
  assert.match(joined, /Anything else we should know\?Nothing else, thanks\./);
  // A reload rebuilds them from the stream.
  await page.reload();
  await page.locator("#done h2").waitFor();
  await page.waitForFunction(() => document.querySelectorAll("#log li.answered").length >= 8);
  assert.equal((await page.locator("#log li.answered").allTextContents()).join("\n"), joined);
  await page.locator("#done h2").waitFor();
  // What the widgets sent, as researchers see it.
  const { id } = JSON.parse(await page.evaluate(() => localStorage.getItem("interview:every-type")));
  const res = await fetch(`${server.base}/api/sessions/${id}/interaction-events`, { headers });
  const values = JSON.stringify(await res.json());
  assert.match(values, /"value":\["fruit","bread"\]/);
  assert.match(values, /"value":\["quality","price","speed"\]/);
  assert.match(values, /"value":0\.5/);
  assert.match(values, /"status":"skipped"/);
  // The summary the participant read is in plain words.
  assert.doesNotMatch(await page.locator("#done").textContent(), /_answer/);
  await context.close();
});

// Long by design: one participant walks the every-type study through each of the page's
// resume paths in turn (a reload with a partial answer per widget type, "none of these fit",
// offline and back for a widget and for a message); each check sits right after its step.
test("partial answers survive a reload, a choice can be answered in own words, and what failed offline goes again", async () => {
  await publishEveryType();
  const { context, page } = await phone({ bypassCSP: true });
  await consented(page, "every-type");
  const w = page.locator("#widget");
  const reload = async () => {
    await page.reload();
    await page.waitForFunction(() => !document.querySelector("#widget").hidden || !document.querySelector("#text").disabled);
  };
  const notes = () => page.locator("#log li.note").count();
  const resolvedAfter = (n) => page.waitForFunction((n) => document.querySelectorAll("#log li.note").length > n, n);
  const { id: session } = JSON.parse(await page.evaluate(() => localStorage.getItem("interview:every-type")));
  const OFFLINE = "Every Saturday morning I compare prices in two stores, and this went while I was offline";
  const done = new Set();
  for (let step = 0; step < 30 && done.size < 8; step++) {
    await page.waitForFunction(() => !document.querySelector("#widget").hidden || !document.querySelector("#text").disabled || !document.querySelector("#done").hidden);
    if (!(await page.locator("#done").isHidden())) break;
    const before = await notes();
    if (await w.isHidden()) {
      if (!done.has("words")) {
        // A draft in the answer box comes back after a reload.
        await page.locator("#text").fill("Every Saturday morning I compare");
        await reload();
        assert.equal(await page.locator("#text").inputValue(), "Every Saturday morning I compare");
        // Sent offline, it waits as "not sent"; back online it goes once, and the notice clears.
        await context.setOffline(true);
        await page.locator("#text").fill(OFFLINE);
        await page.keyboard.press("Enter");
        await page.locator("#log li.me.failed").waitFor();
        assert.match(await page.locator("#notice").textContent(), /offline/);
        await context.setOffline(false);
        await page.waitForFunction(() => !document.querySelector("#log li.me.failed"));
        await page.waitForFunction(() => document.querySelector("#notice").hidden);
        assert.equal(await page.locator("#text").inputValue(), "", "the draft went with the message");
        done.add("words");
      } else {
        await say(page, "Every Saturday morning I compare prices in two stores and then buy for the week");
      }
      await page.waitForFunction(() => document.querySelector("#text").disabled || !document.querySelector("#widget").hidden);
      continue;
    }
    const kind = await w.getAttribute("data-type");
    done.add(kind);
    if (kind === "single_choice") {
      // A choice comes back after a reload …
      await w.locator(".choice").nth(1).click();
      await reload();
      assert.deepEqual(await w.locator(".choice").evaluateAll((bs) => bs.map((b) => b.getAttribute("aria-checked"))), ["false", "true", "false"]);
      // … and none of them may fit: the box opens for the participant's own words, and sending
      // them skips the widget and says them, in one request.
      await w.locator("button", { hasText: "None of these fit" }).click();
      assert.ok(await page.locator("#text").isEnabled());
      assert.ok(await page.locator("#hint").isHidden());
      assert.equal(await page.evaluate(() => document.activeElement.id), "text");
      const posts = [];
      page.on("request", (r) => r.method() === "POST" && posts.push(new URL(r.url()).pathname));
      await say(page, "None of them: I shop at the Saturday market");
      await resolvedAfter(before);
      assert.match(await page.locator("#log li.note").last().textContent(), /Skipped/);
      await page.locator("#log li.me", { hasText: "Saturday market" }).waitFor();
      const api = posts.filter((p) => p.startsWith("/api/"));
      assert.equal(api.length, 1, `one request: ${api}`);
      assert.match(api[0], new RegExp(`^/api/sessions/${session}/interactions/[^/]+/submit$`));
      assert.equal(await page.locator("#log li.me", { hasText: "Saturday market" }).count(), 1);
      continue;
    }
    if (kind === "multiple_choice") {
      await w.locator(".choice").nth(0).click();
      await w.locator(".choice").nth(2).click();
      await reload();
      assert.deepEqual(await w.locator(".choice[aria-checked=true]").allTextContents(), ["Option FRUIT", "Option MILK"]);
      // Submitted offline: the answer waits, and goes when the browser is back online.
      await context.setOffline(true);
      await w.locator("button.primary").click();
      await page.waitForFunction(() => !document.querySelector("#notice").hidden);
      assert.ok(await w.isVisible());
      await context.setOffline(false);
      await resolvedAfter(before);
      await page.waitForFunction(() => document.querySelector("#notice").hidden);
      assert.match(await page.locator("#log li.note").last().textContent(), /Option FRUIT, Option MILK/);
      continue;
    }
    if (kind === "likert") {
      await w.locator(".scale button").nth(3).click();
      await reload();
      assert.equal(await w.locator(".scale button[aria-checked=true]").textContent(), "4");
    } else if (kind === "rating") {
      await w.locator("input[type=range]").focus();
      await page.keyboard.press("End");
      const max = await w.locator("input[type=range]").getAttribute("max");
      await reload();
      assert.equal(await w.locator("input[type=range]").inputValue(), max);
      assert.ok(await w.locator("button.primary").isEnabled(), "a kept position is an answer");
    } else if (kind === "ranking") {
      await w.locator(".rank li").first().locator("button").nth(1).click(); // the first one down
      const order = await w.locator(".rank li .label").allTextContents();
      await reload();
      assert.deepEqual(await w.locator(".rank li .label").allTextContents(), order);
    } else if (kind === "free_text") {
      await w.locator("textarea.answer").fill("Nothing else");
      await reload();
      assert.equal(await w.locator("textarea.answer").inputValue(), "Nothing else");
    }
    if (kind === "yes_no") await w.locator("button", { hasText: "Yes" }).click();
    else await w.locator("button.primary").click();
    await resolvedAfter(before);
  }
  assert.deepEqual([...done].sort(), ["free_text", "likert", "multiple_choice", "ranking", "rating", "single_choice", "words", "yes_no"]);
  // What was sent is no longer kept in the browser.
  const kept = await page.evaluate((id) => localStorage.getItem(`interview:draft:${id}`), session);
  assert.equal(kept, null);
  // The server holds the offline message once.
  const read = await (await fetch(`${server.base}/api/sessions/${session}`, { headers: researcher })).json();
  assert.equal(read.transcript.filter((t) => t.content === OFFLINE).length, 1);
  await context.close();
});

// The demo study in Chinese (examples/demo-study-zh.json), published once.
let demoZh;
function publishDemoZh() {
  demoZh ??= (async () => {
    const { readFile } = await import("node:fs/promises");
    const study = await readFile(new URL("../../examples/demo-study-zh.json", import.meta.url), "utf8");
    const created = await (await fetch(`${server.base}/api/studies`, { method: "POST", headers: researcher, body: study })).json();
    const published = await fetch(`${server.base}/api/studies/${created.study_id}/publish`, { method: "POST", headers: researcher, body: "{}" });
    assert.equal(published.status, 200, await published.text());
  })();
  return demoZh;
}

const DEVICES = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 800 } };
const ANSWERS = {
  en: [
    "Last Sunday I wrote the list on my phone while my partner checked the fridge and the pantry shelves",
    "Vegetables go bad before we eat them because we buy too much on impulse every single week",
    "Honestly a shopping list that fills itself from the meals we plan would save me the most time",
  ],
  zh: [
    "上周日我一边用手机写清单，一边让我爱人看看冰箱和橱柜里还剩什么，然后再一起去超市买一周的菜。",
    "最烦的是蔬菜还没吃完就坏了，因为我们每周总是一时冲动买得太多，最后只好扔掉，很浪费钱。",
    "说实话，如果购物清单能根据我们计划的菜谱自动生成，那能帮我省下最多的时间。",
  ],
};

// The README's pictures of the summary and the end screen (with SCREENSHOTS set), and axe on
// both, at phone and desktop size, in English and in Chinese.
test("the summary and the end screen, on a phone and a desktop, in English and in Chinese", async () => {
  await publishDemoZh();
  for (const [locale, slug] of [["en", "demo"], ["zh", "demo-zh"]]) {
    for (const [device, viewport] of Object.entries(DEVICES)) {
      const context = await browser.newContext({ viewport, hasTouch: device === "phone", bypassCSP: true });
      const page = await context.newPage();
      await consented(page, slug);
      const answers = [...ANSWERS[locale]];
      for (let step = 0; step < 20; step++) {
        await page.waitForFunction(() => !document.querySelector("#widget").hidden || !document.querySelector("#text").disabled);
        if (await page.locator("#quick").isVisible()) break;
        if (await page.locator("#widget").isVisible()) {
          const notes = await page.locator("#log li.note").count();
          const w = page.locator("#widget");
          if (await w.locator(".scale").count()) await w.locator(".scale button").nth(1).click();
          else await w.locator(".choice").first().click();
          await w.locator("button.primary").click();
          await page.waitForFunction((n) => document.querySelectorAll("#log li.note").length > n, notes);
          continue;
        }
        const said = await page.locator("#log > li.them").count();
        await say(page, answers.shift() ?? (locale === "zh" ? "就这些了，谢谢。" : "That's all, thanks."));
        // The interviewer's next words (the step may be over before a poll sees the box disabled).
        await page.waitForFunction((n) => document.querySelectorAll("#log > li.them").length > n && !document.querySelector("#text").disabled
          || !document.querySelector("#widget").hidden, said);
      }
      assert.ok(await page.locator("#quick").isVisible(), `${locale} ${device}: the summary is reached`);
      await assertFullyVisible(page, "#quick button", `${locale} ${device}`);
      const points = await page.locator("#log > li.them").last().locator("ul > li").count();
      assert.ok(points >= 2, `${locale} ${device}: the summary's points are a list`);
      await axe(page, `the summary (${locale}, ${device})`);
      await screenshot(page, `${device}-${locale}-summary`);
      await page.locator("#quick button.primary").click();
      await page.locator("#done h2").waitFor();
      await axe(page, `the end (${locale}, ${device})`);
      await screenshot(page, `${device}-${locale}-end`);
      await context.close();
    }
  }
});

// The words the participant gave in place of a widget could not go (the server answered 503),
// and they answered the widget after all: the words are not lost — they go as a plain message,
// with the same id, when tapped again — and are written once.
test("own words that could not go are sent as a message once the widget was answered", async () => {
  await publishEveryType();
  const { context, page } = await phone();
  await consented(page, "every-type");
  const w = page.locator("#widget");
  for (let step = 0; step < 10 && (await w.getAttribute("data-type")) !== "single_choice"; step++) {
    await page.waitForFunction(() => !document.querySelector("#widget").hidden || !document.querySelector("#text").disabled);
    if (await w.isHidden()) {
      await say(page, "Every Saturday morning I compare prices in two stores and then buy for the week");
      await page.waitForFunction(() => document.querySelector("#text").disabled || !document.querySelector("#widget").hidden);
    }
  }
  await page.route("**/interactions/*/submit", (route) =>
    (route.request().postData() ?? "").includes('"message"')
      ? route.fulfill({ status: 503, contentType: "application/json", body: '{"error":{"code":"overloaded","message":"busy"}}' })
      : route.continue());
  const words = "None of them: a farm box is delivered every Friday";
  await w.locator("button", { hasText: "None of these fit" }).click();
  await say(page, words);
  await page.locator("#log li.me.failed", { hasText: words }).waitFor();
  // The participant answers the widget after all.
  const notes = await page.locator("#log li.note").count();
  await w.locator(".choice").first().click();
  await w.locator("button.primary").click();
  await page.waitForFunction((n) => document.querySelectorAll("#log li.note").length > n, notes);
  await page.locator("#text:enabled").waitFor();
  // Tapped again, the words go as a plain message.
  await page.locator("#log li.me.failed .retry").click();
  await page.waitForFunction(() => !document.querySelector("#log li.me.failed"));
  const { id } = JSON.parse(await page.evaluate(() => localStorage.getItem("interview:every-type")));
  const read = await (await fetch(`${server.base}/api/sessions/${id}`, { headers: researcher })).json();
  assert.equal(read.transcript.filter((t) => t.content === words).length, 1, JSON.stringify(read.transcript));
  await context.close();
});

test("the answer box grows, says when an answer is too long as the server counts it, and nothing 404s", async () => {
  const { context, page } = await phone();
  const missing = [];
  page.on("response", (r) => { if (r.status() === 404) missing.push(r.url()); });
  await page.goto(`${server.base}/interview/demo`);
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  await page.locator("#widget button.primary").click();
  await assistant(page).first().waitFor();
  await page.waitForFunction(() => !document.querySelector("#text").disabled);
  const box = page.locator("#text");
  const oneLine = await box.evaluate((t) => t.clientHeight);
  await box.fill("The first line of my answer\nand a second line\nand a third");
  const threeLines = await box.evaluate((t) => t.clientHeight);
  assert.ok(threeLines > oneLine * 2, `${oneLine} → ${threeLines}`);
  await box.fill(Array(40).fill("line").join("\n"));
  const many = await box.evaluate((t) => t.clientHeight);
  assert.ok(many < oneLine * 8, `it stops growing at about six lines: ${many}`);
  // However tall the bar grows, a notice is never hidden under it.
  await page.evaluate(() => notice("Something to read"));
  await page.waitForTimeout(100);
  const [noticeBottom, barTop] = await page.evaluate(() => [
    document.querySelector("#notice").getBoundingClientRect().bottom,
    document.querySelector("#composer").getBoundingClientRect().top,
  ]);
  assert.ok(noticeBottom <= barTop, `the notice ends at ${noticeBottom}, the bar starts at ${barTop}`);
  await page.evaluate(() => notice(""));
  // 3,000 Chinese characters are 9,000 bytes: over the server's 8,192, said before sending.
  await box.fill("我".repeat(3000));
  await page.locator("#limit.over").waitFor();
  assert.match(await page.locator("#limit").textContent(), /too long/);
  assert.ok(await page.locator("#send").isDisabled());
  await box.fill("我".repeat(2300)); // 6,900 bytes: near the limit, allowed
  assert.ok(await page.locator("#send").isEnabled());
  assert.match(await page.locator("#limit").textContent(), /8\d% of the length limit/);
  // The Enter that commits an IME composition sends nothing — also as Safari orders it
  // (compositionend first, then an Enter not flagged as composing).
  await box.fill("你好");
  const mine = await page.locator("#log li.me").count();
  await box.evaluate((t) => {
    t.dispatchEvent(new CompositionEvent("compositionstart", { data: "" }));
    t.dispatchEvent(new CompositionEvent("compositionend", { data: "你好" }));
    t.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
  });
  await page.waitForTimeout(200);
  assert.equal(await page.locator("#log li.me").count(), mine);
  assert.equal(await box.inputValue(), "你好");
  await page.keyboard.press("Enter");
  await page.waitForFunction((n) => document.querySelectorAll("#log li.me").length > n, mine);
  assert.deepEqual(missing, [], "no request of the page is a 404 (the icon included)");
  const favicon = await fetch(`${server.base}/favicon.ico`);
  assert.equal(favicon.status, 200, "a client that asks for /favicon.ico gets the icon");
  assert.equal(favicon.headers.get("content-type"), "image/svg+xml");
  await context.close();
});

test("a reader who scrolled up stays there, a message the server could not take waits to be sent again, and speakers are named", async () => {
  const { context, page } = await phone({ bypassCSP: true });
  await page.emulateMedia({ reducedMotion: "reduce" });
  await page.goto(`${server.base}/interview/demo`);
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  // Nothing moves on its own for a reader who asked for reduced motion.
  assert.equal(await page.locator("#thinking .dots").evaluate((d) => getComputedStyle(d, "::before").animationName), "none");
  // A widget answer the server could not take: said, and keyboard focus stays on the button.
  await page.route("**/submit", (route) => route.abort());
  await page.locator("#widget button.primary").focus();
  await page.keyboard.press("Enter");
  await page.locator("#notice").waitFor();
  assert.equal(await page.evaluate(() => document.activeElement.textContent), "I agree");
  await page.unroute("**/submit");
  await page.keyboard.press("Enter");
  await assistant(page).first().waitFor();
  // Speakers are named for assistive technology (CSS labels: the bubbles' text stays the words);
  // only the interviewer's whole utterances are announced; the composer is a landmark.
  const label = await assistant(page).first().evaluate((li) => getComputedStyle(li, "::before").content);
  assert.equal(label, '"Interviewer: "');
  assert.equal(await page.locator("#log").getAttribute("aria-live"), null);
  await page.waitForFunction(() => /To start/.test(document.querySelector("#spoken").textContent));
  assert.equal(await page.locator("#composer").getAttribute("aria-labelledby"), "text-label");

  // The server takes a message but its answer is lost on the way back: the stream says it
  // arrived, so nothing is marked not sent and the conversation goes on.
  await page.route("**/messages", async (route) => {
    await route.fetch();
    await route.abort();
  });
  const long = "We sit down on Sunday evening and go through the fridge, then ".repeat(12).trim();
  await say(page, long);
  await assistant(page).nth(1).waitFor();
  await page.unroute("**/messages");
  await page.waitForFunction(() => !document.querySelector("#text").disabled);
  assert.equal(await page.locator("#log li.me.failed").count(), 0);
  await page.locator("#text").fill("typing works");
  assert.ok(await page.locator("#send").isEnabled());
  await page.locator("#text").fill("");
  // The server cannot be reached: the message stays, marked not sent, and focus stays in the box.
  await page.route("**/messages", (route) => route.abort());
  await say(page, long);
  await page.locator("#log li.me.failed .retry").waitFor();
  assert.equal(await page.evaluate(() => document.activeElement.id), "text");
  await axe(page, "a message not sent");
  assert.equal(await page.locator("#log li.me").count(), 2);
  await page.unroute("**/messages");
  await page.locator("#log li.me .retry").click();
  // The interviewer's next move: a question or a widget.
  await page.waitForFunction(() => document.querySelectorAll("#log li.them").length > 2 || !document.querySelector("#widget").hidden);
  assert.equal(await page.locator("#log li.me.failed").count(), 0);
  assert.equal(await page.locator("#log li.me").count(), 2, "sent once, shown once");

  // Scrolled up to reread: what the interviewer says next does not pull the page down.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.waitForTimeout(100);
  const { id, token } = JSON.parse(await page.evaluate(() => localStorage.getItem("interview:demo")));
  await fetch(`${server.base}/api/sessions/${id}/end`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
  await page.waitForFunction(() => /Did I get that right/.test(document.querySelector("#log li.them:last-of-type")?.textContent ?? ""));
  await page.waitForTimeout(200);
  assert.equal(await page.evaluate(() => window.scrollY), 0, "left where the reader was");
  await page.locator("#newer").waitFor();
  await page.locator("#newer").click();
  assert.ok(await page.evaluate(() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80));
  assert.ok(await page.locator("#newer").isHidden());
  await context.close();
});

test("the thinking indicator speaks the study's language", async () => {
  const study = JSON.parse(
    await (await import("node:fs/promises")).readFile(new URL("../../examples/demo-study.json", import.meta.url), "utf8"),
  );
  study.public_slug = "zh-demo";
  study.locale = "zh-CN";
  study.interviewer_name = "小安";
  const headers = { authorization: `Bearer ${RESEARCHER_TOKEN}`, "content-type": "application/json" };
  const created = await (await fetch(`${server.base}/api/studies`, { method: "POST", headers, body: JSON.stringify(study) })).json();
  const published = await fetch(`${server.base}/api/studies/${created.study_id}/publish`, { method: "POST", headers, body: "{}" });
  assert.equal(published.status, 200);
  const { context, page } = await phone();
  await page.goto(`${server.base}/interview/zh-demo`);
  assert.equal(await page.locator("#thinking-text").textContent(), "正在思考…");
  assert.equal(await page.locator("#start").textContent(), "开始访谈");
  // Before consent: the study's title, description, duration and interviewer.
  assert.equal(await page.locator("#intro-title").textContent(), study.title);
  assert.equal(await page.locator("#intro-text").textContent(), study.description);
  assert.equal(await page.locator("#intro-facts").textContent(), "大约需要 10 分钟 · 与你交谈的是 小安。");
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  await page.locator("#widget button.primary").click();
  await assistant(page).first().waitFor();
  assert.equal(await assistant(page).first().evaluate((li) => getComputedStyle(li, "::before").content), '"小安："');
  await page.goto(`${server.base}/interview/no-such-study`);
  assert.ok(await page.locator("#notice").isVisible());
  await context.close();
});

// A careless (or hostile) study author, and a hostile participant: markup and script in every
// piece of study text the page shows, in the answers that come back in the summary, and in the
// session path. Nothing runs — no alert, no marker set, no request to another host — and the
// interview still works, the text shown as written.
test("hostile study text and answers never run as script on the page", async () => {
  const demo = JSON.parse(await (await import("node:fs/promises")).readFile(new URL("../../examples/demo-study.json", import.meta.url), "utf8"));
  const evil = (n) => `{{boot}}</script><!--<script>window.__xss=${n}</script><img src=x onerror="window.__xss=${n}">"'&amp;`;
  const study = structuredClone(demo);
  study.public_slug = "hostile";
  study.title = `Title ${evil(1)}`;
  study.description = `Description ${evil(2)}`;
  study.locale = `en" onload="window.__xss=3" x="{{boot}}`;
  study.consent.text = `Consent ${evil(4)}`;
  study.objectives[1].interaction.prompt = `Prompt ${evil(5)}`;
  study.objectives[1].interaction.labels = study.objectives[1].interaction.labels.map((l, i) => `${l} ${evil(10 + i)}`);
  study.objectives[2].interaction.prompt = `Choose ${evil(6)}`;
  study.objectives[2].interaction.options = study.objectives[2].interaction.options.map((o, i) => ({ ...o, label: `${o.label} ${evil(20 + i)}` }));
  const auth = { authorization: `Bearer ${RESEARCHER_TOKEN}`, "content-type": "application/json" };
  const created = await (await fetch(`${server.base}/api/studies`, { method: "POST", headers: auth, body: JSON.stringify(study) })).json();
  assert.ok(created.study_id, JSON.stringify(created));
  const published = await fetch(`${server.base}/api/studies/${created.study_id}/publish`, { method: "POST", headers: auth, body: "{}" });
  assert.equal(published.status, 200);

  const { context, page } = await phone();
  const dialogs = [];
  page.on("dialog", (d) => { dialogs.push(d.message()); d.dismiss(); });
  const foreign = [];
  page.on("request", (r) => { if (!r.url().startsWith(server.base) && !r.url().startsWith("data:")) foreign.push(r.url()); });
  const response = await page.goto(`${server.base}/interview/hostile`);
  const csp = response.headers()["content-security-policy"] ?? "";
  assert.match(csp, /script-src 'self'/);
  assert.equal(await page.locator("#title").textContent(), study.title, "the title is shown as written");
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  assert.ok((await page.locator("#widget .consent-text").textContent()).includes("window.__xss=4"), "consent shown as text");
  await page.keyboard.press("Enter");
  await assistant(page).first().waitFor();
  const answer = `We plan on Sundays <img src=x onerror="window.__xss=30"><script>window.__xss=31</script> {{boot}}`;
  await say(page, answer);
  await assistant(page).nth(1).waitFor();
  await say(page, `Food goes to waste every week </script><!--<script>window.__xss=32</script> because we buy too much`);
  await page.locator("#widget .scale").waitFor();
  await page.locator("#widget .scale button").nth(1).click();
  await page.locator("#widget button.primary").click();
  await assistant(page).nth(2).waitFor();
  await say(page, "A list that fills itself from the meals we plan would save me the most time every week");
  await page.locator("#widget .choices").waitFor();
  assert.ok((await page.locator("#widget").textContent()).includes("window.__xss=20"), "option labels shown as text");
  await page.locator("#widget .choice").first().click();
  await page.locator("#widget button.primary").click();
  await page.waitForFunction(() => /Did I get that right\?/.test(document.querySelector("#log li.them:last-of-type")?.textContent ?? ""));
  await say(page, "Yes, that's right");
  await page.locator("#done h2").waitFor();

  // A session path that tries to open a comment or a script.
  const other = await context.newPage();
  other.on("dialog", (d) => { dialogs.push(d.message()); d.dismiss(); });
  await other.goto(`${server.base}/interview/s/${encodeURIComponent("<!--<script>window.__xss=40</script>")}`);
  await other.locator("#notice").waitFor();

  for (const p of [page, other]) {
    assert.equal(await p.evaluate(() => window.__xss), undefined, "a script from study or participant text ran");
  }
  assert.deepEqual(dialogs, []);
  assert.deepEqual(foreign, [], "the page asked another host for something");
  await context.close();
});

// Withdrawal (docs/privacy.md): during the interview a participant can withdraw and have their
// answers deleted, after a confirmation; the page then keeps nothing of the conversation, and
// neither does the server (the researcher's event log no longer holds the words). The
// completion screen offers the same.
test("a participant withdraws and their answers are deleted", async () => {
  const { context, page } = await phone({ bypassCSP: true });
  const WORDS = "I keep my meal plans in a violet ledger 4471";
  await page.goto(`${server.base}/interview/demo`);
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  await page.keyboard.press("Enter");
  await assistant(page).first().waitFor();
  await say(page, WORDS);
  await assistant(page).nth(1).waitFor();
  const withdraw = page.locator("#withdraw");
  assert.equal(await withdraw.textContent(), "Withdraw and delete my answers");
  await withdraw.scrollIntoViewIfNeeded();
  assert.ok(await withdraw.isVisible(), "withdrawing is offered during the interview");
  await axe(page, "the interview with the withdraw button");
  const id = await page.evaluate(() => session.id);

  // Dismissed, nothing happens; accepted, the answers go.
  page.once("dialog", (d) => d.dismiss());
  await withdraw.click();
  assert.ok((await page.locator("#log").textContent()).includes("violet ledger"));
  const asked = [];
  page.once("dialog", (d) => { asked.push(d.message()); d.accept(); });
  await withdraw.click();
  await page.locator("#done h2", { hasText: "Your answers have been deleted." }).waitFor();
  assert.match(asked[0], /cannot be undone/);
  assert.equal(await page.locator("#log li").count(), 0, "the conversation is gone from the page");
  assert.ok((await page.locator("#done").textContent()).includes(`Reference: ${id}`), "the session is named for later");
  assert.ok(await page.locator("#composer").isHidden());
  assert.equal(await page.evaluate(() => document.activeElement?.tagName), "H2");
  await axe(page, "after withdrawal");
  const kept = await page.evaluate(() => JSON.stringify(localStorage));
  assert.ok(!kept.includes(id), "the browser keeps no token for the erased session");

  const auth = { authorization: `Bearer ${RESEARCHER_TOKEN}` };
  const log = await (await fetch(`${server.base}/api/sessions/${id}/events`, { headers: auth })).text();
  assert.ok(log.includes("participant.data.erased"), log.slice(0, 300));
  assert.ok(!log.includes("violet ledger"), "the server keeps none of the words");

  // A reload shows nothing of it either.
  await page.reload();
  assert.equal(await page.locator("#log li").count(), 0);
  await context.close();
});

test("the completion screen offers withdrawal too", async () => {
  const { context, page } = await phone();
  await page.goto(`${server.base}/interview/demo`);
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  await page.keyboard.press("Enter");
  await assistant(page).first().waitFor();
  await say(page, "I plan meals on Sundays with a list on the fridge");
  await assistant(page).nth(1).waitFor();
  // "End interview" once: the summary comes with a one-tap "Finish", and no second End.
  page.once("dialog", (d) => d.accept());
  await page.locator("#end").click();
  const finish = page.locator("#quick button", { hasText: "Finish" });
  await finish.waitFor();
  assert.ok(!(await page.locator("#end").isVisible()), "no second End at the summary");
  await finish.click();
  await page.locator("#done h2").waitFor();
  const button = page.locator("#done button", { hasText: "Withdraw and delete my answers" });
  assert.ok(await button.isVisible());
  page.once("dialog", (d) => d.accept());
  await button.click();
  await page.locator("#done h2", { hasText: "Your answers have been deleted." }).waitFor();
  assert.equal(await page.locator("#log li").count(), 0);
  await context.close();
});

test("a panel's signed link carries its participant, and a bad signature is told kindly", async () => {
  const { createHmac } = await import("node:crypto");
  const { readFile } = await import("node:fs/promises");
  const study = JSON.parse(await readFile(new URL("../../examples/demo-study.json", import.meta.url), "utf8"));
  study.public_slug = "signed-panel";
  const headers = { authorization: `Bearer ${RESEARCHER_TOKEN}`, "content-type": "application/json" };
  const created = await (await fetch(`${server.base}/api/studies`, { method: "POST", headers, body: JSON.stringify(study) })).json();
  await fetch(`${server.base}/api/studies/${created.study_id}/publish`, { method: "POST", headers, body: "{}" });
  const { secret } = await (await fetch(`${server.base}/api/studies/${created.study_id}/participant-link-secret`, { method: "POST", headers, body: "{}" })).json();
  const sig = createHmac("sha256", secret).update("panel 77").digest("hex");

  // A forged signature: nothing starts, and the page says the link is not valid.
  const { context, page } = await phone();
  await page.goto(`${server.base}/interview/signed-panel?ref=panel%2077&sig=${"0".repeat(64)}`);
  await page.locator("#start").click();
  await page.waitForFunction(() => /link/i.test(document.querySelector("#notice")?.textContent ?? ""));
  // The real link: the session is the panel participant's, and the link leaves the address bar.
  await page.goto(`${server.base}/interview/signed-panel?ref=panel%2077&sig=${sig}`);
  await page.locator("#start").click();
  await page.locator("#widget .consent-text").waitFor();
  assert.equal(new URL(page.url()).search, "", "ref and sig are out of the address bar");
  const id = await page.evaluate(() => {
    for (let i = 0; i < localStorage.length; i++) {
      const key = localStorage.key(i);
      if (key.startsWith("interview:s:")) return key.slice("interview:s:".length);
    }
    return null;
  });
  const state = await (await fetch(`${server.base}/api/sessions/${id}/state`, { headers })).json();
  assert.equal(state.participant_ref, "panel 77");
  await context.close();
});

test("a link that leads to no study answers 404 with a page that says so", async () => {
  const { context, page } = await phone();
  const res = await page.goto(`${server.base}/interview/no-such-study`);
  assert.equal(res.status(), 404);
  await page.waitForFunction(() => /doesn't lead to a study/.test(document.body.textContent));
  assert.ok(await page.locator("#start").isHidden(), "nothing to start");
  await context.close();
});

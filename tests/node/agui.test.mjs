// A full interview driven by @ag-ui/client's HttpAgent against the running server: consent, the
// conversation, widgets answered through `resume`, completion. The client validates every event
// it parses against the AG-UI schema and the protocol's ordering rules, so a malformed event
// fails the run.
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { HttpAgent } from "@ag-ui/client";

import { answer } from "./answers.mjs";
import { createSession, startServer } from "./server.mjs";

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

/** A subscriber that keeps every event, each interaction its tool call carried, and how the
 * last run finished. */
function following() {
  const seen = { events: [], interactions: new Map(), finished: undefined };
  let args = "";
  seen.subscriber = {
    onEvent: ({ event }) => {
      seen.events.push(event);
    },
    onToolCallArgsEvent: ({ event }) => {
      args += event.delta;
    },
    onToolCallEndEvent: ({ event }) => {
      seen.interactions.set(event.toolCallId, JSON.parse(args));
      args = "";
    },
    onRunFinishedEvent: (params) => {
      seen.finished = params;
    },
  };
  return seen;
}

test("a demo interview end to end through HttpAgent", async () => {
  const { session_id, participant_token } = await createSession(server.base);
  const agent = new HttpAgent({
    url: `${server.base}/api/sessions/${session_id}/agui`,
    headers: { Authorization: `Bearer ${participant_token}` },
    threadId: session_id,
  });
  const seen = following();
  const { events, interactions, subscriber } = seen;

  // The first run connects: consent is the interrupt.
  await agent.runAgent({}, subscriber);
  assert.equal(seen.finished.outcome, "interrupt");
  assert.equal(seen.finished.interrupts[0].reason, "consent");
  assert.ok(events.some((e) => e.type === "RUN_STARTED"));
  assert.ok(events.some((e) => e.type === "STATE_SNAPSHOT"));

  let answers = [
    "Last Sunday I wrote the shopping list on my phone while my partner checked the fridge.",
    "Vegetables go bad before we eat them because we buy too much on impulse every week.",
    "A shopping list that fills itself from the meals we plan would save me the most time.",
  ];
  let widgets = [];
  for (let step = 0; step < 20 && seen.finished.outcome !== "success-completed"; step++) {
    if (seen.finished.outcome === "interrupt") {
      const interrupt = seen.finished.interrupts[0];
      const interaction = interactions.get(interrupt.toolCallId);
      assert.ok(interaction, "the interaction arrived as a tool call before the interrupt");
      assert.equal(interaction.interaction_id, interrupt.id);
      assert.equal(interaction.type, interrupt.reason);
      assert.deepEqual(interaction.value_schema, interrupt.responseSchema);
      widgets.push(interrupt.reason);
      await agent.runAgent(
        { resume: [{ interruptId: interrupt.id, status: "resolved", payload: answer(interaction) }] },
        subscriber,
      );
      continue;
    }
    const state = events.filter((e) => e.type === "STATE_SNAPSHOT").at(-1).snapshot;
    if (state.status === "completed") break;
    const text = state.phase === "SUMMARY_CONFIRMATION" ? "Yes, that's right" : answers.shift() ?? "That's all.";
    agent.addMessage({ id: randomUUID(), role: "user", content: text });
    await agent.runAgent({}, subscriber);
  }

  const state = events.filter((e) => e.type === "STATE_SNAPSHOT").at(-1).snapshot;
  assert.equal(state.status, "completed");
  assert.ok(state.summary.length > 0);
  assert.deepEqual(widgets, ["consent", "likert", "single_choice"]);
  // The client assembled the interviewer's streamed messages.
  const said = agent.messages.filter((m) => m.role === "assistant" && m.content);
  assert.ok(said.length >= 4, JSON.stringify(agent.messages, null, 1));
  assert.ok(said[0].content.startsWith("To start, could you walk me through"));
  // Every run was well formed: started, finished, text messages closed.
  const starts = events.filter((e) => e.type === "RUN_STARTED").length;
  const ends = events.filter((e) => e.type === "RUN_FINISHED").length;
  assert.equal(starts, ends);
  assert.equal(
    events.filter((e) => e.type === "TEXT_MESSAGE_START").length,
    events.filter((e) => e.type === "TEXT_MESSAGE_END").length,
  );
});

test("a reload mid-interview gets every earlier message back once", async () => {
  const { session_id, participant_token } = await createSession(server.base);
  const connect = () =>
    new HttpAgent({
      url: `${server.base}/api/sessions/${session_id}/agui`,
      headers: { Authorization: `Bearer ${participant_token}` },
      threadId: session_id,
    });
  const agent = connect();
  const seen = following();
  const { interactions, subscriber } = seen;
  // Consent, then answers until the first widget after it waits.
  await agent.runAgent({}, subscriber);
  const answers = [
    "Last Sunday I wrote the shopping list on my phone while my partner checked the fridge.",
    "Vegetables go bad before we eat them because we buy too much on impulse every week.",
  ];
  for (let step = 0; step < 10; step++) {
    if (seen.finished.outcome === "interrupt") {
      const interrupt = seen.finished.interrupts[0];
      if (interrupt.reason !== "consent") break;
      const interaction = interactions.get(interrupt.toolCallId);
      await agent.runAgent(
        { resume: [{ interruptId: interrupt.id, status: "resolved", payload: answer(interaction) }] },
        subscriber,
      );
      continue;
    }
    agent.addMessage({ id: randomUUID(), role: "user", content: answers.shift() ?? "That's all." });
    await agent.runAgent({}, subscriber);
  }
  assert.equal(seen.finished.outcome, "interrupt", "a widget waits");
  const before = agent.messages.filter((m) => typeof m.content === "string" && m.role !== "tool");
  assert.ok(before.length >= 4, JSON.stringify(agent.messages, null, 1));

  // The page reloads: a new client with no messages connects to the same thread.
  const reloaded = connect();
  let snapshots = 0;
  let again;
  await reloaded.runAgent(
    {},
    {
      onMessagesSnapshotEvent: () => {
        snapshots += 1;
      },
      onRunFinishedEvent: (params) => {
        again = params;
      },
    },
  );
  assert.equal(snapshots, 1);
  const ids = reloaded.messages.map((m) => m.id);
  assert.equal(new Set(ids).size, ids.length, `each message once: ${ids}`);
  const after = reloaded.messages.filter((m) => typeof m.content === "string" && m.role !== "tool");
  assert.deepEqual(
    after.map((m) => [m.id, m.role, m.content]),
    before.map((m) => [m.id, m.role, m.content]),
  );
  // The waiting widget is there, as the interrupt's tool call, and can be answered.
  assert.equal(again.outcome, "interrupt");
  const interrupt = again.interrupts[0];
  const call = reloaded.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === interrupt.toolCallId);
  assert.ok(call, JSON.stringify(reloaded.messages, null, 1));
  const interaction = JSON.parse(call.function.arguments);
  await reloaded.runAgent(
    { resume: [{ interruptId: interrupt.id, status: "resolved", payload: answer(interaction) }] },
    { onRunFinishedEvent: (params) => { again = params; } },
  );
  assert.ok(again, "the widget was answered after the reload");
});

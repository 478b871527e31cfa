// A full interview driven by @ag-ui/client's HttpAgent against the running server: consent, the
// conversation, widgets answered through `resume`, completion. The client validates every event
// it parses against the AG-UI schema and the protocol's ordering rules, so a malformed event
// fails the run.
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { HttpAgent } from "@ag-ui/client";

import { createSession, startServer } from "./server.mjs";

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

/** A value for an interrupt, from the interaction its tool call carried. */
function answer(interaction) {
  switch (interaction.type) {
    case "consent":
      return { accepted: true };
    case "likert":
      return interaction.value_schema.minimum + 1;
    case "single_choice":
      return interaction.options[0].id;
    case "multiple_choice":
      return [interaction.options[0].id];
    case "rating":
      return interaction.value_schema.minimum;
    case "ranking":
      return interaction.options.map((o) => o.id);
    case "yes_no":
      return true;
    default:
      return "Nothing else, thanks.";
  }
}

test("a demo interview end to end through HttpAgent", async () => {
  const { session_id, participant_token } = await createSession(server.base);
  const agent = new HttpAgent({
    url: `${server.base}/api/sessions/${session_id}/agui`,
    headers: { Authorization: `Bearer ${participant_token}` },
    threadId: session_id,
  });
  const events = [];
  const interactions = new Map(); // tool call id → interaction
  let args = "";
  let finished;
  const subscriber = {
    onEvent: ({ event }) => {
      events.push(event);
    },
    onToolCallArgsEvent: ({ event }) => {
      args += event.delta;
    },
    onToolCallEndEvent: ({ event }) => {
      interactions.set(event.toolCallId, JSON.parse(args));
      args = "";
    },
    onRunFinishedEvent: (params) => {
      finished = params;
    },
  };

  // The first run connects: consent is the interrupt.
  await agent.runAgent({}, subscriber);
  assert.equal(finished.outcome, "interrupt");
  assert.equal(finished.interrupts[0].reason, "consent");
  assert.ok(events.some((e) => e.type === "RUN_STARTED"));
  assert.ok(events.some((e) => e.type === "STATE_SNAPSHOT"));

  let answers = [
    "Last Sunday I wrote the shopping list on my phone while my partner checked the fridge.",
    "Vegetables go bad before we eat them because we buy too much on impulse every week.",
    "A shopping list that fills itself from the meals we plan would save me the most time.",
  ];
  let widgets = [];
  for (let step = 0; step < 20 && finished.outcome !== "success-completed"; step++) {
    if (finished.outcome === "interrupt") {
      const interrupt = finished.interrupts[0];
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

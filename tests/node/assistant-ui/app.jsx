// A minimal assistant-ui front end on the real @assistant-ui/react-ag-ui adapter, bundled by
// esbuild for the Chromium test (tests/node/assistant-ui.test.mjs). It knows its session from
// the page's hash, so a reload reconnects to the same interview with an empty thread, as a
// participant's would. What the test reads: the rendered messages (`.message[data-role]`), each
// pending interrupt as a button that answers it, `data-running`/`data-status` on <body>, and
// `window.thread` (each message's id, role and part types).
import { useEffect, useRef } from "react";
import { createRoot } from "react-dom/client";
import { HttpAgent } from "@ag-ui/client";
import {
  AssistantRuntimeProvider,
  ComposerPrimitive,
  MessagePrimitive,
  ThreadPrimitive,
  useAui,
  useAuiState,
} from "@assistant-ui/react";
import {
  useAgUiInterrupts,
  useAgUiRuntime,
  useAgUiState,
  useAgUiSubmitInterruptResponses,
} from "@assistant-ui/react-ag-ui";

import { answer } from "../answers.mjs";

const hash = new URLSearchParams(location.hash.slice(1));
const session = hash.get("session");
const agent = new HttpAgent({
  url: `/api/sessions/${session}/agui`,
  headers: { Authorization: `Bearer ${hash.get("token")}` },
  threadId: session,
});

function ToolCall({ toolName, args, result }) {
  return (
    <div className="widget" data-tool={toolName} data-answered={String(result !== undefined)}>
      {args?.prompt ?? toolName}
    </div>
  );
}

function Message({ role }) {
  return (
    <MessagePrimitive.Root className="message" data-role={role}>
      <MessagePrimitive.Parts components={{ tools: { Fallback: ToolCall } }} />
    </MessagePrimitive.Root>
  );
}

/** Each pending interrupt as a button that answers it. */
function Interrupts() {
  const interrupts = useAgUiInterrupts();
  const submit = useAgUiSubmitInterruptResponses();
  const messages = useAuiState((s) => s.thread.messages);
  const calls = messages.flatMap((m) => m.content).filter((p) => p.type === "tool-call");
  return interrupts.map((interrupt) => {
    const call = calls.find((p) => p.toolCallId === interrupt.toolCallId);
    return (
      <button
        key={interrupt.id}
        className="interrupt"
        data-reason={interrupt.reason}
        disabled={!call}
        onClick={() =>
          submit([{ interruptId: interrupt.id, status: "resolved", payload: answer(call.args) }])
        }
      >
        Answer {interrupt.reason}
      </button>
    );
  });
}

/** Connects once on load: a run with whatever the thread holds (nothing, after a reload). */
function Connect() {
  const aui = useAui();
  const once = useRef(false);
  const running = useAuiState((s) => s.thread.isRunning);
  const messages = useAuiState((s) => s.thread.messages);
  const state = useAgUiState();
  useEffect(() => {
    if (once.current) return;
    once.current = true;
    aui.thread().startRun({ parentId: null });
  }, [aui]);
  useEffect(() => {
    document.body.dataset.running = String(running);
    document.body.dataset.status = state?.status ?? "";
    window.thread = messages.map((m) => ({
      id: m.id,
      role: m.role,
      parts: m.content.map((p) => p.type),
    }));
  }, [running, state, messages]);
  return null;
}

function App() {
  const runtime = useAgUiRuntime({
    agent,
    onError: (e) => {
      document.getElementById("errors").textContent += `${e?.message ?? e}\n`;
    },
  });
  return (
    <AssistantRuntimeProvider runtime={runtime}>
      <Connect />
      <ThreadPrimitive.Root>
        <ThreadPrimitive.Viewport>
          <ThreadPrimitive.Messages
            components={{
              UserMessage: () => <Message role="user" />,
              AssistantMessage: () => <Message role="assistant" />,
            }}
          />
        </ThreadPrimitive.Viewport>
        <Interrupts />
        <ComposerPrimitive.Root>
          <ComposerPrimitive.Input aria-label="Your answer" />
          <ComposerPrimitive.Send>Send</ComposerPrimitive.Send>
        </ComposerPrimitive.Root>
      </ThreadPrimitive.Root>
    </AssistantRuntimeProvider>
  );
}

createRoot(document.getElementById("root")).render(<App />);

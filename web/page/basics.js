// The page's basics: DOM helpers, notices, what the browser keeps (the session, drafts), the
// API, scrolling, the conversation's bubbles, the status and the summary's one-tap replies.

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) node.append(c);
  return node;
};

// Timings the browser test reads, per message sent: when it was sent, when the server accepted
// it, and when the first character of the answer appeared (none when the answer is a widget).
window.__metrics = { turns: [] };
const lastTurn = () => window.__metrics.turns[window.__metrics.turns.length - 1];

const ui = { log: $("log"), widget: $("widget"), composer: $("composer"), text: $("text") };
let session = null; // { id, token }
let status = "created";
let streamStatus = "created"; // the last status the stream reported (the UI may run ahead of it)
let phase = "";
// The participant pressed "End interview" (and confirmed): the summary then offers "Finish".
let endPressed = false;
let pending = null; // the interaction waiting for an answer
let events = null;
const bubbles = new Map(); // message id → <li>
const widgets = new Map(); // interaction id → the interaction, to show its answer later
let awaitingFirstCharacter = false;
let erased = false; // the participant's data was erased: nothing of it is shown again
let ownWords = null; // the choice widget the participant answers in their own words instead
let failedAnswer = null; // a widget answer the server could not take: { interaction, value, skipped }

function firstCharacter() {
  if (awaitingFirstCharacter) {
    awaitingFirstCharacter = false;
    lastTurn().first = performance.now();
  }
}

function notice(text) {
  const n = $("notice");
  // The same words again (a reconnect that failed again) are not announced again.
  if ((n.textContent === (text || "")) && n.hidden === !text) return;
  n.textContent = text || "";
  n.hidden = !text;
  if (text && following) scrollDown();
}

// Short state changes for screen readers (a limit crossed), apart from the interviewer's words.
function announce(text) {
  $("announce").textContent = text;
}

// The page's end stays clear of the fixed input bar however tall the bar grows, so nothing
// (a notice, the last words) sits hidden under it.
new ResizeObserver(() => {
  $("main").style.paddingBottom = `${ui.composer.offsetHeight + 24}px`;
  $("newer").style.bottom = `${ui.composer.offsetHeight + 12}px`;
}).observe(ui.composer);

function thinking(on) {
  $("thinking").hidden = !on;
}

function storageKey() {
  return boot.session_id ? `interview:s:${boot.session_id}` : `interview:${boot.slug}`;
}

// Storage may be refused (cookies blocked): the interview still works, only a reload forgets it.
function save() {
  const value = JSON.stringify(session);
  try {
    localStorage.setItem(storageKey(), value);
    localStorage.setItem(`interview:s:${session.id}`, value);
  } catch {
    // kept in memory only
  }
}

function saved() {
  try {
    return localStorage.getItem(storageKey());
  } catch {
    return null;
  }
}

function forget() {
  try {
    localStorage.removeItem(storageKey());
  } catch {
    // nothing kept
  }
}

// What the participant has typed or chosen but not sent — the answer box, and each widget's
// partial answer — is kept in this browser per session, so a reload brings it back; it goes
// when it is sent. (Storage may be refused: then only a reload forgets it.)
const draftKey = () => `interview:draft:${session.id}`;
function drafts() {
  try {
    return JSON.parse(localStorage.getItem(draftKey()) || "{}");
  } catch {
    return {};
  }
}
// Every draft of the session goes: the interview ended, was erased, or is not this server's.
function forgetDrafts() {
  try {
    localStorage.removeItem(draftKey());
  } catch {
    // nothing kept
  }
}
function keepDraft(key, value) {
  if (!session) return;
  const all = drafts();
  if (value === undefined || value === "") delete all[key];
  else all[key] = value;
  try {
    if (Object.keys(all).length) localStorage.setItem(draftKey(), JSON.stringify(all));
    else localStorage.removeItem(draftKey());
  } catch {
    // kept in memory only
  }
}

async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${session.token}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.ok) return res.json();
  let code = "";
  try {
    code = (await res.json()).error.code;
  } catch {
    // not our error shape
  }
  const error = new Error(code || String(res.status));
  error.status = res.status;
  error.code = code;
  throw error;
}

// The study's own refusals (a full study, a reference already taking part, a link whose
// signature does not hold) say so; anything else is "try again".
const refusals = { study_full: "full", study_paused: "paused", active_session_exists: "taken" };

function friendly(error) {
  if (refusals[error.code]) return T[refusals[error.code]];
  if (error.status === 410) return T.gone;
  if (error.code === "interaction_pending") return T.answerAbove;
  if (error.status === 422) return T.invalid;
  return T.failed;
}

// The page follows the conversation only while the reader is at its end: someone who scrolled
// up to reread is left there, with a button to come back. Jumps, not animations (nothing
// moves on its own for a reader who asked for reduced motion, or for anyone mid-sentence).
let following = true;
const atEnd = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80;
window.addEventListener("scroll", () => {
  following = atEnd();
  if (following) $("newer").hidden = true;
}, { passive: true });

function scrollDown(force = false) {
  if (!following && !force) {
    $("newer").hidden = false;
    return;
  }
  following = true;
  $("newer").hidden = true;
  window.scrollTo({ top: document.documentElement.scrollHeight, behavior: "auto" });
}

// Who speaks, for assistive technology (a CSS label, so the bubble's text stays the words).
const speaker = (role) => (role === "user" ? T.you : boot.interviewer_name ? T.named(boot.interviewer_name) : T.interviewer);

function bubble(id, role, text) {
  let li = bubbles.get(id);
  if (!li) {
    li = el("li", { class: role === "user" ? "me" : "them", "data-speaker": speaker(role) });
    bubbles.set(id, li);
    ui.log.append(li);
  }
  if (text !== undefined) li.textContent = text;
  scrollDown();
  return li;
}

// A message's words. Lines that start with "- ", "• " or "* " (the summary's points) become a
// real list, so a screen reader says how many there are and where each begins.
const point = /^\s*[-•*]\s+/;
function showWords(li, text) {
  const lines = text.split("\n");
  if (lines.filter((l) => point.test(l)).length < 2) {
    li.textContent = text;
    return;
  }
  const parts = [];
  let list = null;
  for (const line of lines) {
    if (point.test(line)) {
      if (!list) parts.push((list = el("ul")));
      list.append(el("li", { text: line.replace(point, "") }));
    } else {
      list = null;
      if (line.trim()) parts.push(el("p", { text: line }));
    }
  }
  li.replaceChildren(...parts);
}

function setStatus(next) {
  // An ended interview stays ended, whatever a late failure says.
  if (status === "completed" || status === "abandoned") return;
  status = next;
  if (status !== "waiting_for_tool") ownWords = null;
  const open = status === "waiting_for_user" || (status === "waiting_for_tool" && ownWords !== null);
  ui.composer.hidden = status === "completed" || status === "abandoned";
  ui.text.disabled = !open;
  $("send").disabled = !open || unsent !== null;
  // Said in full above the box (a placeholder is cut off on a phone).
  ui.text.placeholder = ownWords ? T.ownWordsPlaceholder : T.placeholder;
  $("hint").textContent = T.answerAbove;
  $("hint").hidden = status !== "waiting_for_tool" || ownWords !== null;
  endButton();
  // At the page's end while the interview runs; the completion card has its own.
  $("withdraw").hidden = !session || erased || status === "completed" || status === "abandoned";
  if (["waiting_for_user", "waiting_for_tool", "completed", "abandoned"].includes(status)) thinking(false);
  if (open && document.activeElement === document.body) ui.text.focus();
  quickReplies(open && phase === "SUMMARY_CONFIRMATION");
}

// "End interview": not before consent (there is nothing to end yet: declining is the way out),
// and not at the summary, whose own buttons are the way out.
function endButton() {
  $("end").hidden = status === "completed" || status === "abandoned" || !session || erased
    || ["", "LOAD_CONTEXT"].includes(phase) || pending?.type === "consent"
    || phase === "SUMMARY_CONFIRMATION";
}

// At the summary, one tap confirms it; "Add something" opens the box (typing works either way).
// After "End interview", "Finish" comes first: it ends the interview there, the summary left
// unconfirmed, with no second question (confirming it is still one tap away).
function quickReplies(show) {
  const box = $("quick");
  box.hidden = !show;
  if (!show) return;
  const mode = endPressed ? "finish" : "confirm";
  if (box.dataset.mode !== mode) {
    box.dataset.mode = mode;
    // Said as its own message: whatever is typed in the box stays there.
    const confirmIt = el("button", { type: "button", class: endPressed ? "" : "primary", text: T.confirmYes, onclick: () => sendText(T.confirmYes) });
    const first = endPressed
      ? [el("button", { type: "button", class: "primary", text: T.finish, onclick: finishNow }), confirmIt]
      : [confirmIt];
    box.replaceChildren(
      ...first,
      el("button", { type: "button", text: T.confirmAdd, onclick: () => {
        ui.text.placeholder = T.addPlaceholder;
        ui.text.focus();
      } }),
    );
  }
}

async function finishNow() {
  try {
    thinking(true);
    await api("POST", `/api/sessions/${session.id}/end`, {});
  } catch (error) {
    thinking(false);
    notice(friendly(error));
  }
}

// The answer box (sending, resending what did not go), the start of an interview, and the
// page's wiring.

// The box grows with its text up to about six lines (then it scrolls), and says how close the
// answer is to the server's limit, counted as the server counts: UTF-8 bytes.
const maxBytes = boot.max_message_bytes || 8192;
const bytes = (text) => new TextEncoder().encode(text).length;
function composerChanged() {
  ui.text.style.height = "auto";
  ui.text.style.height = `${ui.text.scrollHeight + 2}px`;
  const used = bytes(ui.text.value.trim());
  const limit = $("limit");
  const over = used > maxBytes;
  limit.hidden = used < maxBytes * 0.8;
  limit.classList.toggle("over", over);
  limit.textContent = over ? T.tooLong : T.nearLimit(Math.floor((used * 100) / maxBytes));
  if (over !== (limit.dataset.over === "true")) announce(over ? T.tooLong : "");
  limit.dataset.over = String(over);
  $("send").disabled = over || ui.text.disabled || unsent !== null;
}

// A message the server could not take (it was down, or overloaded) stays in the conversation
// as "not sent", and goes again — with the same id, so it is written once — when the
// participant taps it, the stream reconnects or the browser is back online.
let unsent = null; // { li, text, id, instead }

function send(e) {
  e.preventDefault();
  const text = ui.text.value.trim();
  if (!text || ui.text.disabled || bytes(text) > maxBytes) return;
  if (sendText(text)) {
    // The box empties; its draft stays kept until the server has the words (`post`).
    ui.text.value = "";
    ui.text.placeholder = T.placeholder;
    composerChanged();
  }
}

// Says `text` (from the box, or a one-tap reply): shown at once, posted, and true if it went
// out (false while another message waits to be sent again: one at a time).
function sendText(text) {
  if (unsent) return false;
  const li = el("li", { class: "me", "data-pending": "", "data-speaker": T.you, "data-text": text, text });
  ui.log.append(li);
  scrollDown(true);
  // In own words for a widget: the widget is skipped and the words said in the same request.
  post({ li, text, id: crypto.randomUUID(), instead: ownWords?.interaction_id });
  return true;
}

// The request that carries a message: with the widget it replaces while that widget still
// waits, else as a plain message. Either way its turn is named from its id, so the words are
// written once whichever request the server took.
function request({ text, id, instead }) {
  if (instead && pending?.interaction_id === instead) {
    return api("POST", `/api/sessions/${session.id}/interactions/${instead}/submit`,
      { status: "skipped", message: { content: text, client_message_id: id } });
  }
  return api("POST", `/api/sessions/${session.id}/messages`, { content: text, client_message_id: id });
}

// Long by design: one message's whole round — sending, then each way it can fail (the server
// already had it, it could not be reached, it was refused) with what the page shows for each.
async function post(message) {
  const { li, text } = message;
  // Sent once at a time: the stream reopening and the browser coming back online may both
  // try it again.
  if (message.sending) return;
  message.sending = true;
  window.__metrics.turns.push({ sent: performance.now(), accepted: null, first: null });
  awaitingFirstCharacter = true;
  setStatus("active");
  thinking(true);
  notice("");
  try {
    const answer = await request(message);
    lastTurn().accepted = performance.now();
    unsent = null;
    sent(text);
    li.classList.remove("failed");
    li.querySelector(".retry")?.remove();
    if (answer.turn_id && !bubbles.has(answer.turn_id) && li.hasAttribute("data-pending")) bubbles.set(answer.turn_id, li);
    // Sent again after the server already had it: the stream has moved on, and its word stands.
    if (!li.hasAttribute("data-pending") && streamStatus !== "active") {
      setStatus(streamStatus);
      composerChanged();
    }
  } catch (error) {
    awaitingFirstCharacter = false;
    thinking(false);
    // The widget these words were to replace was answered meanwhile (a tap, an earlier try that
    // went through): the words go as a plain message, with the same id — written once.
    if (message.instead && error.code === "interaction_already_answered") {
      message.instead = undefined;
      message.sending = false;
      await post(message);
      return;
    }
    // Back to the box the participant was writing in: their own words for the widget, if it
    // still waits.
    const ownWordsFor = message.instead && pending?.interaction_id === message.instead ? pending : null;
    if (!li.hasAttribute("data-pending")) {
      // The stream already showed the server has it (the response was lost on the way back).
      unsent = null;
      setStatus(streamStatus);
    } else if (unreachable(error)) {
      unsent = message;
      if (!navigator.onLine) notice(T.offline);
      li.classList.add("failed");
      if (!li.querySelector(".retry")) {
        li.append(el("button", { type: "button", class: "retry quiet", text: T.notSent, onclick: resend }));
      }
      ownWords = ownWordsFor;
      setStatus(pending ? "waiting_for_tool" : "waiting_for_user");
      $("send").disabled = true; // one message at a time: this one first
    } else {
      li.remove();
      ui.text.value = text;
      composerChanged();
      ownWords = ownWordsFor;
      if (error.status !== 410) setStatus(error.code === "interaction_pending" || pending ? "waiting_for_tool" : "waiting_for_user");
      notice(friendly(error));
    }
    // Keyboard focus stays where the participant was typing (or goes to the widget that waits).
    (ui.text.disabled ? ui.widget.querySelector("button:not(:disabled), input, textarea") : ui.text)?.focus();
  } finally {
    message.sending = false;
  }
}

// The server has these words: the box's draft, if it still holds them, is no longer kept.
function sent(text) {
  if ((drafts().text ?? "").trim() === text) keepDraft("text");
}

// Again, once the session can take it: with its widget while that still waits, else as a
// plain message when the interviewer waits for words.
function resend() {
  if (!unsent) return;
  const withWidget = unsent.instead && pending?.interaction_id === unsent.instead;
  if (status === (withWidget ? "waiting_for_tool" : "waiting_for_user")) post(unsent);
}

// Back online (or the stream back): what did not go through goes again — the message with
// its own id (written once whatever happens), the widget answer as it was given.
function sendWhatFailed() {
  resend();
  const failed = failedAnswer;
  if (failed && pending?.interaction_id === failed.interaction.interaction_id) {
    submit(failed.interaction, failed.value, failed.skipped);
  }
}

async function endInterview() {
  if (!confirm(T.endConfirm)) return;
  try {
    thinking(true);
    await api("POST", `/api/sessions/${session.id}/end`, {});
    endPressed = true;
    if (phase === "SUMMARY_CONFIRMATION") quickReplies(!$("quick").hidden);
  } catch (error) {
    thinking(false);
    notice(friendly(error));
  }
}

async function begin() {
  $("start").disabled = true;
  try {
    // A panel's link names its participant (`?ref=`) and may sign the reference (`&sig=`,
    // docs/study-definition.md): both go with the create.
    const params = new URLSearchParams(location.search);
    const request = {};
    if (params.get("ref")) request.participant_ref = params.get("ref");
    if (params.get("sig")) request.participant_ref_signature = params.get("sig");
    const res = await fetch(`/api/public/studies/${encodeURIComponent(boot.slug)}/sessions`, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request),
    });
    if (!res.ok) {
      const code = await res.json().then((b) => b.error.code, () => "");
      throw Object.assign(new Error(code || String(res.status)), { status: res.status, code });
    }
    const body = await res.json();
    session = { id: body.session_id, token: body.participant_token };
    save();
    // The signed reference has done its work: it leaves the address bar and the history.
    if (params.has("ref") || params.has("sig")) history.replaceState(null, "", location.pathname);
    $("intro").hidden = true;
    thinking(true);
    connect();
  } catch (error) {
    $("start").disabled = false;
    notice(error.status === 404 ? T.notFound : error.status === 403 ? T.badLink : friendly(error));
  }
}

function init() {
  $("start").textContent = T.start;
  $("send").textContent = T.send;
  $("newer").textContent = T.newer;
  $("newer").addEventListener("click", () => scrollDown(true));
  $("end").textContent = T.end;
  $("thinking-text").textContent = T.thinking;
  $("text-label").textContent = T.messageLabel;
  ui.text.placeholder = T.placeholder;
  ui.composer.addEventListener("submit", send);
  ui.text.addEventListener("input", () => {
    keepDraft("text", ui.text.value);
    composerChanged();
  });
  window.addEventListener("online", sendWhatFailed);
  // The Enter that commits an IME composition is not a send. Chromium flags it as composing;
  // Safari ends the composition first and sends the Enter after it, so an Enter right after a
  // compositionend is ignored too.
  let compositionEnded = -Infinity;
  ui.text.addEventListener("compositionend", (e) => (compositionEnded = e.timeStamp));
  ui.text.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.shiftKey) return;
    if (e.isComposing || e.keyCode === 229 || e.timeStamp - compositionEnded < 100) {
      e.preventDefault();
      return;
    }
    send(e);
  });
  $("end").addEventListener("click", endInterview);
  $("withdraw").textContent = T.withdraw;
  $("withdraw").addEventListener("click", withdraw);
  $("start").addEventListener("click", begin);
  if (boot.error) {
    notice(boot.error === "study_not_found" ? T.notFound : boot.error === "session_not_found" ? T.missing : T.failed);
    return;
  }
  const kept = saved();
  if (kept) {
    session = JSON.parse(kept);
    ui.composer.hidden = false;
    setStatus("active");
    // The answer box's draft from before the reload.
    ui.text.value = drafts().text ?? "";
    composerChanged();
    connect();
  } else if (boot.session_id) {
    notice(T.missing);
  } else {
    showIntro();
  }
}

// Before consent: what the study is, how long it takes, and who asks.
function showIntro() {
  $("intro-title").textContent = boot.title || "";
  $("intro-text").textContent = boot.description || "";
  const facts = [boot.estimated_minutes ? T.minutes(boot.estimated_minutes) : "", boot.interviewer_name ? T.withName(boot.interviewer_name) : ""];
  $("intro-facts").textContent = facts.filter(Boolean).join(" · ");
  $("intro-facts").hidden = !facts.some(Boolean);
  $("intro").hidden = false;
  $("start").disabled = false;
}

init();

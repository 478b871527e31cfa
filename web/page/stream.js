// The session's event stream: the conversation as the server tells it, rebuilt from the start
// on every (re)connection.

function connect() {
  const url = `/api/sessions/${session.id}/stream?token=${encodeURIComponent(session.token)}`;
  events = new EventSource(url);
  events.onopen = () => {
    reopenDelay = 1000;
    notice("");
    sendWhatFailed();
  };
  events.onerror = () => {
    if (status === "completed" || status === "abandoned") return;
    notice(T.reconnecting);
    // EventSource gives up for good on an HTTP error (an overloaded server's 503, a proxy's
    // 502, a token this server no longer knows): try again, and find out which it was.
    if (events.readyState === EventSource.CLOSED) reopenLater();
  };
  // The browser's own connection errors are `error` events too, without data: only the
  // server's (a plain-words notice) carry JSON.
  const on = (name, fn) =>
    events.addEventListener(name, (e) => {
      if (typeof e.data === "string") fn(JSON.parse(e.data));
    });
  on("message.delta", (d) => {
    const li = bubble(d.message_id, "assistant");
    li.textContent += d.content;
    scrollDown();
    firstCharacter();
    thinking(false);
  });
  on("message.completed", (d) => {
    if (d.role === "user") {
      // The participant's own message: already shown if it was sent from this page.
      const mine = [...ui.log.querySelectorAll("li.me[data-pending]")].find((li) => li.dataset.text === d.content);
      if (mine) {
        mine.removeAttribute("data-pending");
        mine.classList.remove("failed");
        mine.querySelector(".retry")?.remove();
        // The server has it: nothing is left to resend.
        if (unsent && unsent.li === mine) {
          unsent = null;
          composerChanged();
        }
        bubbles.set(d.turn_id, mine);
      } else if (!bubbles.has(d.turn_id)) {
        bubble(d.turn_id, "user", d.content);
      }
      // The server has these words: a draft of them — kept across a reload while the response
      // was lost — is not kept, nor put back in the box, any more.
      sent(d.content);
      if (!mine && ui.text.value.trim() === d.content) {
        ui.text.value = "";
        composerChanged();
      }
      return;
    }
    firstCharacter();
    showWords(bubble(d.message_id, "assistant"), d.content);
    // The interviewer's words, once whole, are what a screen reader announces.
    $("spoken").textContent = d.content;
  });
  on("interaction.render", (d) => {
    awaitingFirstCharacter = false; // the answer is a widget, not words
    widgets.set(d.interaction.interaction_id, d.interaction);
    showWidget(d.interaction);
  });
  on("interaction.resolved", (d) => {
    if (pending && pending.interaction_id === d.interaction_id) hideWidget();
    keepDraft(d.interaction_id); // answered, skipped or said in words: nothing left to keep
    ui.log.append(answeredNote(widgets.get(d.interaction_id), d));
  });
  on("session.status", (d) => {
    phase = d.phase || phase;
    streamStatus = d.status;
    setStatus(d.status);
    if (d.status === "completed" || d.status === "abandoned") finish(null, d.redirect_url);
  });
  on("session.completed", (d) => finish(d.summary, d.redirect_url));
  on("session.erased", () => showErased());
  on("error", (d) => notice(d.message || T.failed));
}

let reopenDelay = 1000;
function reopenLater() {
  setTimeout(async () => {
    try {
      await api("GET", `/api/sessions/${session.id}`);
    } catch (error) {
      if (error.status === 401 || error.status === 403 || error.status === 404) {
        // The saved session is not this server's (any more): start again.
        forget();
        forgetDrafts();
        events.close();
        session = null;
        ui.composer.hidden = true;
        $("end").hidden = true;
        thinking(false);
        notice(boot.session_id ? T.missing : "");
        if (!boot.session_id) showIntro();
        return;
      }
    }
    reopenDelay = Math.min(reopenDelay * 2, 15000);
    events.close();
    connect();
  }, reopenDelay);
}

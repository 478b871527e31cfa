// The end of the interview, and withdrawal (which erases the participant's answers).

function finish(summary, redirect) {
  if (erased) return;
  // Nothing typed and unsent outlives the interview in this browser.
  forgetDrafts();
  hideWidget();
  thinking(false);
  ui.composer.hidden = true;
  $("end").hidden = true;
  $("withdraw").hidden = true;
  const done = $("done");
  done.hidden = false;
  if (summary === null && done.childElementCount) {
    if (redirect && !done.querySelector("a")) done.append(el("p", {}, el("a", { href: redirect, class: "button primary", text: T.returnLink })));
    return;
  }
  const heading = el("h2", { tabindex: "-1", text: status === "completed" || summary ? T.doneTitle : T.ended });
  done.replaceChildren(heading);
  // The summary is in the conversation just above: said once, not repeated here.
  if (summary) done.append(el("p", { class: "saved", text: T.saved }));
  // The study's return link is the way on; without one, the participant is done here (no
  // invitation to start over: a second interview would be a duplicate in the study's data).
  if (redirect) done.append(el("p", {}, el("a", { href: redirect, class: "button primary", text: T.returnLink })));
  else done.append(el("p", { class: "close-page", text: T.closePage }));
  done.append(el("p", {}, el("button", { type: "button", class: "quiet danger", text: T.withdraw, onclick: withdraw })));
  scrollDown();
  heading.focus();
}

// ---- withdrawal ---------------------------------------------------------------------------

// The participant leaves the study: after a confirmation in their language, the server ends the
// interview if it runs and erases everything they said or chose (docs/privacy.md).
async function withdraw() {
  if (!confirm(T.withdrawConfirm)) return;
  try {
    await api("POST", `/api/sessions/${session.id}/withdraw`, {});
    showErased();
  } catch (error) {
    notice(friendly(error));
  }
}

// Nothing of the conversation stays on screen or in this browser; the stream (this tab or
// another) says the same with `session.erased`.
function showErased() {
  if (erased) return;
  erased = true;
  events?.close();
  hideWidget();
  thinking(false);
  quickReplies(false);
  notice("");
  ui.log.replaceChildren();
  bubbles.clear();
  widgets.clear();
  ui.composer.hidden = true;
  $("end").hidden = true;
  $("withdraw").hidden = true;
  forget();
  forgetDrafts();
  try {
    localStorage.removeItem(`interview:s:${session.id}`);
  } catch {
    // nothing kept
  }
  const heading = el("h2", { tabindex: "-1", text: T.erased });
  // The session's id, in case the participant or the study is asked about it later.
  $("done").replaceChildren(heading, el("p", { text: T.erasedDetail }), el("p", { class: "facts", text: T.reference(session.id) }));
  $("done").hidden = false;
  heading.focus();
}

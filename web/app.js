// The participant page: one interview over the REST routes and the session's event stream.
// The stream is the source of truth: the page rebuilds the conversation from it (it replays
// from the start, and EventSource resumes with Last-Event-ID after a drop), so a reload
// restores the transcript and any pending question. The token stays in this browser's storage.
"use strict";

const boot = JSON.parse(document.getElementById("boot").textContent);
const zh = (boot.locale || "").toLowerCase().startsWith("zh");
const T = zh
  ? {
      start: "开始访谈", thinking: "正在思考…", send: "发送", placeholder: "输入你的回答…",
      end: "结束访谈", endConfirm: "确定要结束访谈吗？", submit: "提交", skip: "跳过",
      agree: "我同意", decline: "我不同意", yes: "是", no: "否", up: "上移", down: "下移",
      answered: "已回答", skipped: "已跳过", agreed: "同意", declined: "不同意", answerAbove: "请先回答上面的问题。",
      doneTitle: "谢谢你的参与！", saved: "你的回答和上面的总结已经保存。", ended: "访谈已结束。", continue: "继续",
      reconnecting: "连接中断，正在重新连接…", failed: "出了点问题，请稍后再试。",
      invalid: "这个回答不太符合要求，请检查后再提交。", gone: "这次访谈已经结束。",
      missing: "找不到这次访谈。请用开始访谈时的浏览器打开链接。", notFound: "这个链接没有通向任何研究，请检查链接，或回到邀请你的页面重新打开。",
      full: "这项研究的名额已满，谢谢你的关注。", paused: "这项研究暂时不接受新的参与者。",
      taken: "你已经有一次正在进行的访谈，请在开始它的地方继续。", badLink: "这个链接不完整或已失效，请回到邀请你的页面重新打开。",
      chooseBetween: (a, b) => `请选择 ${a} 到 ${b} 项`, messageLabel: "你的回答", returnLink: "返回",
      rankHint: "拖动或用按钮调整顺序", closePage: "现在可以关闭这个页面了。",
      confirmYes: "没错", confirmAdd: "补充一点", addPlaceholder: "想补充或更正什么？", finish: "完成",
      nearLimit: (p) => `已用 ${p}% 的长度上限`, tooLong: "这段回答太长了，请缩短一些再发送。",
      chosen: (n, max) => `已选 ${n} 项（最多 ${max} 项）`, characters: (n, max) => `${n} / ${max} 字`,
      tooLongField: (max) => `最多 ${max} 个字，请缩短一些。`, notChosen: "还没有选择",
      newer: "有新消息 ↓", notSent: "没有发出去 — 点这里重试", interviewer: "访谈者：", you: "你：",
      minutes: (n) => `大约需要 ${n} 分钟`, withName: (name) => `与你交谈的是 ${name}。`, named: (name) => `${name}：`,
      withdraw: "撤回并删除我的回答", withdrawConfirm: "确定要退出这项研究，并从研究中删除你在这次访谈中的回答吗？删除后无法恢复。",
      erased: "你的回答已删除。", erasedDetail: "你在这次访谈中说过、选过的内容已从这项研究中删除，研究人员再也看不到。",
      reference: (id) => `编号：${id}`,
      ownWords: "都不合适——用我自己的话回答", ownWordsPlaceholder: "用你自己的话说说…",
      offline: "网络已断开。恢复后会自动发送。",
    }
  : {
      start: "Start the interview", thinking: "Thinking…", send: "Send", placeholder: "Type your answer…",
      end: "End interview", endConfirm: "Do you want to end the interview?", submit: "Submit", skip: "Skip",
      agree: "I agree", decline: "I do not agree", yes: "Yes", no: "No", up: "Move up", down: "Move down",
      answered: "Answered", skipped: "Skipped", agreed: "Agreed", declined: "Declined", answerAbove: "Please answer the question above first.",
      doneTitle: "Thank you for taking part!", saved: "Your answers and the summary above have been saved.", ended: "The interview has ended.", continue: "Continue",
      reconnecting: "Connection lost — reconnecting…", failed: "Something went wrong. Please try again in a moment.",
      invalid: "That answer doesn't fit — please check it and try again.", gone: "This interview has already ended.",
      missing: "We can't find this interview. Please open the link in the browser you started it in.",
      notFound: "This link doesn't lead to a study. Please check it, or open it again from where you were invited.", full: "This study has all the participants it needs — thank you for your interest.",
      paused: "This study isn't taking new participants right now.",
      taken: "You already have an interview in progress for this study — please continue it where you started it.",
      badLink: "This link is incomplete or no longer valid. Please go back to where you were invited and open it again.",
      chooseBetween: (a, b) => `Choose ${a} to ${b}`,
      messageLabel: "Your answer", returnLink: "Continue", rankHint: "Drag, or use the buttons, to reorder",
      closePage: "You can close this page now.",
      confirmYes: "Yes, that's right", confirmAdd: "Add something", addPlaceholder: "What would you add or correct?",
      finish: "Finish",
      nearLimit: (p) => `${p}% of the length limit used`, tooLong: "This answer is too long — please shorten it before sending.",
      chosen: (n, max) => `${n} of at most ${max} chosen`, characters: (n, max) => `${n} / ${max} characters`,
      tooLongField: (max) => `At most ${max} characters — please shorten it.`, notChosen: "Not chosen yet",
      newer: "New message ↓", notSent: "Not sent — tap to retry", interviewer: "Interviewer: ", you: "You: ",
      minutes: (n) => `About ${n} minute${n === 1 ? "" : "s"}`, withName: (name) => `You'll be talking with ${name}.`,
      named: (name) => `${name}: `,
      withdraw: "Withdraw and delete my answers",
      withdrawConfirm: "Withdraw from this study and delete your answers from this interview? This cannot be undone.",
      erased: "Your answers have been deleted.",
      erasedDetail: "What you said and chose in this interview has been deleted from the study, and the researchers can no longer see it.",
      reference: (id) => `Reference: ${id}`,
      ownWords: "None of these fit — answer in my own words", ownWordsPlaceholder: "Say it in your own words…",
      offline: "You're offline. We'll send it as soon as you're back.",
    };

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

// A message's words. Lines that start with "- " or "• " (the summary's points) become a real
// list, so a screen reader says how many there are and where each begins.
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
    const confirmIt = el("button", { type: "button", class: endPressed ? "" : "primary", text: T.confirmYes, onclick: () => {
      ui.text.value = T.confirmYes;
      ui.composer.requestSubmit();
    } });
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

// ---- the stream -------------------------------------------------------------------------

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

// ---- widgets ------------------------------------------------------------------------------

// A widget's answer in words, as the participant gave it: the chosen options' labels, the
// scale's label, yes or no, the text itself.
function answerWords(it, value) {
  const label = (id) => (it.options || []).find((o) => o.id === id)?.label ?? String(id);
  switch (it.type) {
    case "consent": return value && value.accepted ? T.agreed : T.declined;
    case "single_choice": return label(value);
    case "multiple_choice": return (value || []).map(label).join(", ");
    case "ranking": return (value || []).map((id, i) => `${i + 1}. ${label(id)}`).join("  ");
    case "likert": return (it.labels || [])[value - 1] ?? `${value} / ${it.scale}`;
    case "yes_no": return value ? T.yes : T.no;
    default: return String(value ?? "");
  }
}

// The widget's question and its answer stay in the conversation ("Skipped" when skipped).
function answeredNote(it, d) {
  if (!it) return el("li", { class: "note", text: d.status === "skipped" ? T.skipped : T.answered });
  const answer = d.status === "skipped" ? T.skipped : d.value === undefined ? T.answered : answerWords(it, d.value);
  return el("li", { class: "note answered" },
    el("span", { class: "question", "data-speaker": speaker("assistant"), text: it.prompt }),
    el("span", { class: "answer", "data-speaker": T.you, text: answer }));
}

function hideWidget() {
  pending = null;
  ownWords = null;
  ui.widget.hidden = true;
  ui.widget.removeAttribute("role");
  ui.widget.removeAttribute("aria-labelledby");
  delete ui.widget.dataset.type;
  ui.widget.replaceChildren();
  endButton();
}

async function submit(interaction, value, skipped) {
  const buttons = [...ui.widget.querySelectorAll("button")];
  const was = buttons.map((b) => b.disabled);
  const focused = document.activeElement;
  buttons.forEach((b) => (b.disabled = true));
  notice("");
  // Before the answer: the stream may bring the next step before the response does.
  thinking(true);
  failedAnswer = null;
  try {
    const body = skipped ? { status: "skipped" } : { status: "submitted", value };
    await api("POST", `/api/sessions/${session.id}/interactions/${interaction.interaction_id}/submit`, body);
  } catch (error) {
    thinking(false);
    // Answered already (the response was lost on the way back): the stream says so.
    if (error.code === "interaction_already_answered") return;
    // Offline or the server away: the answer goes again when the browser is back online.
    if (unreachable(error)) failedAnswer = { interaction, value, skipped };
    notice(unreachable(error) && !navigator.onLine ? T.offline : friendly(error));
    buttons.forEach((b, i) => (b.disabled = was[i]));
    // Keyboard focus goes back where it was (a disabled button had dropped it).
    (ui.widget.contains(focused) ? focused : ui.widget.querySelector("button:not(:disabled)"))?.focus();
  }
}

const unreachable = (error) => error.status === undefined || error.status >= 500 || error.status === 429;

function actions(interaction, getValue, { skippable = true, submitLabel = T.submit } = {}) {
  const row = el("div", { class: "actions" });
  if (getValue) {
    row.append(el("button", { type: "button", class: "primary", text: submitLabel, onclick: () => {
      const value = getValue();
      if (value !== undefined) submit(interaction, value, false);
    } }));
  }
  if (skippable) {
    row.append(el("button", { type: "button", text: T.skip, onclick: () => submit(interaction, null, true) }));
  }
  return row;
}

/**
 * A group of toggle buttons; `multi` allows several, at most `max` (further picks are refused
 * until one is taken back). `onchange(count)` follows every change. Returns the group and the
 * chosen ids.
 */
function choiceGroup(options, multi, label, { max = Infinity, onchange = () => {} } = {}) {
  const group = el("div", { class: "choices", role: multi ? "group" : "radiogroup", "aria-label": label });
  const chosen = new Set();
  const buttons = options.map((o, i) => {
    const b = el("button", {
      type: "button", class: "choice", role: multi ? "checkbox" : "radio", "aria-checked": "false",
      tabindex: multi || i === 0 ? "0" : "-1", text: o.label,
      onclick: () => {
        if (!multi) chosen.clear();
        if (chosen.has(o.id)) chosen.delete(o.id);
        else if (chosen.size < max) chosen.add(o.id);
        const full = multi && chosen.size >= max;
        buttons.forEach((x, j) => {
          const on = chosen.has(options[j].id);
          x.setAttribute("aria-checked", on ? "true" : "false");
          if (!multi) x.tabIndex = on ? 0 : -1;
          if (full && !on) x.setAttribute("aria-disabled", "true");
          else x.removeAttribute("aria-disabled");
        });
        onchange(chosen.size);
      },
      onkeydown: (e) => {
        if (multi || !["ArrowDown", "ArrowUp", "ArrowRight", "ArrowLeft"].includes(e.key)) return;
        e.preventDefault();
        const next = buttons[(i + (e.key === "ArrowDown" || e.key === "ArrowRight" ? 1 : buttons.length - 1)) % buttons.length];
        next.focus();
        next.click();
      },
    });
    group.append(b);
    return b;
  });
  return { group, chosen };
}

// A widget's partial answer, kept from before a reload, put back by `put`.
function restore(it, put) {
  const value = drafts()[it.interaction_id];
  if (value !== undefined) put(value);
}

// "None of these fit": the answer box opens for this widget, and what is sent there skips the
// widget and says it in the participant's words, in one request (`post`).
function inOwnWords(it) {
  ownWords = it;
  setStatus(status);
  ui.text.focus();
}

function showWidget(it) {
  pending = it;
  endButton();
  ui.widget.replaceChildren();
  ui.widget.dataset.type = it.type;
  ui.widget.hidden = false;
  const heading = el("h2", { id: `w-${it.interaction_id}`, text: it.prompt });
  ui.widget.append(heading);
  // Every widget is a group named by its question, so a screen reader says the question
  // whichever control it lands on (a yes/no button, a ranked item, "I agree").
  ui.widget.setAttribute("role", "group");
  ui.widget.setAttribute("aria-labelledby", heading.id);
  const schema = it.value_schema || {};
  switch (it.type) {
    case "consent": {
      ui.widget.append(el("div", { class: "consent-text", text: it.consent_text || "" }));
      const row = el("div", { class: "actions" });
      row.append(
        el("button", { type: "button", class: "primary", text: T.agree, onclick: () => submit(it, { accepted: true }) }),
        el("button", { type: "button", text: T.decline, onclick: () => submit(it, { accepted: false }) }),
      );
      ui.widget.append(el("p"), row);
      break;
    }
    case "single_choice":
    case "multiple_choice": {
      const multi = it.type === "multiple_choice";
      const min = schema.minItems ?? 1;
      const max = multi ? (schema.maxItems ?? it.options.length) : 1;
      // How many are chosen, said as it changes.
      const count = el("p", { class: "hint count", "aria-live": "polite", text: T.chosen(0, max) });
      const { group, chosen } = choiceGroup(it.options, multi, it.prompt, { max, onchange: (n) => {
        count.textContent = T.chosen(n, max);
        keepDraft(it.interaction_id, [...chosen]);
      } });
      ui.widget.append(group);
      restore(it, (ids) => ids.forEach((id) => group.querySelectorAll(".choice")[it.options.findIndex((o) => o.id === id)]?.click()));
      if (multi) {
        ui.widget.append(el("p", { class: "hint", text: T.chooseBetween(min, max) }), count);
        ui.widget.append(actions(it, () => {
          if (chosen.size < min || chosen.size > max) {
            notice(T.chooseBetween(min, max));
            return undefined;
          }
          return [...chosen];
        }));
      } else {
        ui.widget.append(actions(it, () => [...chosen][0] ?? (notice(T.invalid), undefined)));
      }
      ui.widget.append(el("p", { class: "own-words" }, el("button", { type: "button", class: "quiet", text: T.ownWords, onclick: () => inOwnWords(it) })));
      break;
    }
    case "likert": {
      const scale = it.scale || schema.maximum || 5;
      const labels = it.labels || [];
      const options = Array.from({ length: scale }, (_, i) => ({ id: i + 1, label: String(i + 1) }));
      const { group, chosen } = choiceGroup(options, false, it.prompt, { onchange: () => keepDraft(it.interaction_id, [...chosen]) });
      group.className = "scale";
      restore(it, ([n]) => group.children[n - 1]?.click());
      [...group.children].forEach((b, i) => labels[i] && b.setAttribute("aria-label", `${i + 1} — ${labels[i]}`));
      ui.widget.append(group);
      if (labels.length) {
        ui.widget.append(el("div", { class: "scale-labels" }, el("span", { text: labels[0] }), el("span", { text: labels[labels.length - 1] })));
      }
      ui.widget.append(actions(it, () => [...chosen][0] ?? (notice(T.invalid), undefined)));
      break;
    }
    case "rating": {
      const min = it.min ?? schema.minimum ?? 0;
      const max = it.max ?? schema.maximum ?? 10;
      const step = it.step ?? 1;
      // No value until the participant moves it: an untouched slider is not an answer.
      // A plain span (an <output> is a live region: the value would be spoken twice).
      const output = el("span", { "aria-hidden": "true", text: T.notChosen });
      const touched = () => {
        keepDraft(it.interaction_id, Number(input.value));
        output.textContent = `${input.value} / ${max}`;
        input.setAttribute("aria-valuetext", input.value);
        input.classList.remove("untouched");
        row.querySelector("button.primary").disabled = false;
      };
      // Home or a tap at the minimum fires no input event: pressing a key or the pointer on it
      // counts as choosing its value too.
      // No thumb either until then: one resting at the minimum would look like an answer.
      const input = el("input", { type: "range", class: "untouched", min, max, step, value: min, "aria-labelledby": heading.id,
        "aria-valuetext": T.notChosen, oninput: touched, onchange: touched, onpointerup: touched,
        onkeyup: (e) => ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown"].includes(e.key) && touched() });
      const row = actions(it, () => Number(input.value));
      row.querySelector("button.primary").disabled = true;
      ui.widget.append(input,
        el("div", { class: "scale-labels" }, el("span", { text: String(min) }), el("span", { text: String(max) })),
        el("p", { class: "hint" }, output), row);
      restore(it, (v) => {
        input.value = v;
        touched();
      });
      break;
    }
    case "ranking": {
      const order = it.options.slice();
      // A moved order comes back after a reload (ids the widget does not have are ignored).
      restore(it, (ids) => {
        const byId = new Map(order.map((o) => [o.id, o]));
        if (ids.length === order.length && ids.every((id) => byId.has(id))) order.splice(0, order.length, ...ids.map((id) => byId.get(id)));
      });
      const keepOrder = () => keepDraft(it.interaction_id, order.map((o) => o.id));
      const list = el("ol", { class: "rank", "aria-label": T.rankHint });
      // Focus follows the item that moved: its button that can still move it (at the top or
      // the bottom one of the two is disabled).
      const refocus = (index, down) => {
        const [up, dn] = list.children[index].querySelectorAll("button");
        ((down ? dn : up).disabled ? (down ? up : dn) : down ? dn : up).focus();
      };
      const draw = () => {
        list.replaceChildren(...order.map((o, i) => {
          const li = el("li", { draggable: "true", "data-index": i },
            el("span", { class: "position", "aria-hidden": "true", text: `${i + 1}.` }),
            el("span", { class: "label", "aria-label": `${i + 1}. ${o.label}`, text: o.label }),
            el("button", { type: "button", "aria-label": `${T.up}: ${o.label}`, text: "↑", disabled: i === 0,
              onclick: () => { [order[i - 1], order[i]] = [order[i], order[i - 1]]; keepOrder(); draw(); refocus(i - 1, false); } }),
            el("button", { type: "button", "aria-label": `${T.down}: ${o.label}`, text: "↓", disabled: i === order.length - 1,
              onclick: () => { [order[i + 1], order[i]] = [order[i], order[i + 1]]; keepOrder(); draw(); refocus(i + 1, true); } }));
          li.addEventListener("dragstart", (e) => { e.dataTransfer.setData("text/plain", String(i)); li.classList.add("dragging"); });
          li.addEventListener("dragend", () => li.classList.remove("dragging"));
          li.addEventListener("dragover", (e) => e.preventDefault());
          li.addEventListener("drop", (e) => {
            e.preventDefault();
            const from = Number(e.dataTransfer.getData("text/plain"));
            const [moved] = order.splice(from, 1);
            order.splice(i, 0, moved);
            keepOrder();
            draw();
          });
          return li;
        }));
      };
      draw();
      ui.widget.append(el("p", { class: "hint", text: T.rankHint }), list, actions(it, () => order.map((o) => o.id)));
      break;
    }
    case "yes_no": {
      ui.widget.append(el("div", { class: "actions" },
        el("button", { type: "button", class: "primary", text: T.yes, onclick: () => submit(it, true) }),
        el("button", { type: "button", class: "primary", text: T.no, onclick: () => submit(it, false) }),
        el("button", { type: "button", text: T.skip, onclick: () => submit(it, null, true) })));
      break;
    }
    default: {
      // Nothing is cut: the participant sees the count and shortens it; an empty answer is not an
      // answer (Skip is there for that).
      const max = it.max_length || schema.maxLength || 2000;
      const count = el("p", { class: "hint count", id: `c-${it.interaction_id}` });
      const area = el("textarea", { class: "answer", rows: "3", "aria-labelledby": heading.id, "aria-describedby": count.id });
      let wasOver = false;
      const row = actions(it, () => area.value.trim());
      const submitButton = row.querySelector("button.primary");
      const changed = () => {
        const n = [...area.value.trim()].length;
        const over = n > max;
        count.textContent = over ? T.tooLongField(max) : T.characters(n, max);
        count.classList.toggle("over", over);
        if (over !== wasOver) announce(over ? T.tooLongField(max) : "");
        wasOver = over;
        submitButton.disabled = n === 0 || over;
      };
      area.addEventListener("input", () => {
        keepDraft(it.interaction_id, area.value);
        changed();
      });
      restore(it, (text) => (area.value = text));
      changed();
      ui.widget.append(area, count, row);
      break;
    }
  }
  setTimeout(() => ui.widget.querySelector("button:not(:disabled), input, textarea")?.focus(), 0);
  scrollDown();
}

// ---- the end ------------------------------------------------------------------------------

function finish(summary, redirect) {
  if (erased) return;
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
  try {
    localStorage.removeItem(`interview:s:${session.id}`);
    localStorage.removeItem(draftKey());
  } catch {
    // nothing kept
  }
  const heading = el("h2", { tabindex: "-1", text: T.erased });
  // The session's id, in case the participant or the study is asked about it later.
  $("done").replaceChildren(heading, el("p", { text: T.erasedDetail }), el("p", { class: "facts", text: T.reference(session.id) }));
  $("done").hidden = false;
  heading.focus();
}

// ---- start --------------------------------------------------------------------------------

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
// participant taps it or the stream reconnects.
let unsent = null; // { li, text, id }

async function send(e) {
  e.preventDefault();
  const text = ui.text.value.trim();
  if (!text || ui.text.disabled || bytes(text) > maxBytes || unsent) return;
  const li = el("li", { class: "me", "data-pending": "", "data-speaker": T.you, "data-text": text, text });
  ui.log.append(li);
  ui.text.value = "";
  keepDraft("text");
  ui.text.placeholder = T.placeholder;
  composerChanged();
  scrollDown(true);
  // In own words for a widget: the widget is skipped and the words said in the same request.
  const instead = ownWords?.interaction_id;
  await post({ li, text, id: crypto.randomUUID(), instead });
}

async function post(message) {
  const { li, text, id, instead } = message;
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
    const answer = instead
      ? await api("POST", `/api/sessions/${session.id}/interactions/${instead}/submit`,
        { status: "skipped", message: { content: text, client_message_id: id } })
      : await api("POST", `/api/sessions/${session.id}/messages`, { content: text, client_message_id: id });
    lastTurn().accepted = performance.now();
    unsent = null;
    li.classList.remove("failed");
    li.querySelector(".retry")?.remove();
    if (!bubbles.has(answer.turn_id) && li.hasAttribute("data-pending")) bubbles.set(answer.turn_id, li);
    // Sent again after the server already had it: the stream has moved on, and its word stands.
    if (!li.hasAttribute("data-pending") && streamStatus !== "active") {
      setStatus(streamStatus);
      composerChanged();
    }
  } catch (error) {
    awaitingFirstCharacter = false;
    thinking(false);
    // A retry of words in place of a widget, after the first went through (its response lost):
    // the stream shows them.
    const had = instead && error.code === "interaction_already_answered";
    if (!li.hasAttribute("data-pending") || had) {
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
      setStatus(instead ? "waiting_for_tool" : "waiting_for_user");
      $("send").disabled = true; // one message at a time: this one first
    } else {
      li.remove();
      ui.text.value = text;
      keepDraft("text", text);
      composerChanged();
      if (error.status !== 410) setStatus(error.code === "interaction_pending" ? "waiting_for_tool" : "waiting_for_user");
      notice(friendly(error));
    }
    // Keyboard focus stays where the participant was typing (or goes to the widget that waits).
    (ui.text.disabled ? ui.widget.querySelector("button:not(:disabled), input, textarea") : ui.text)?.focus();
  } finally {
    message.sending = false;
  }
}

function resend() {
  const waiting = unsent?.instead ? "waiting_for_tool" : "waiting_for_user";
  if (unsent && status === waiting) post(unsent);
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

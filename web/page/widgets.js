// The widgets: one panel per interaction type, its partial answer kept, its submit and skip,
// and "none of these fit" for choices.

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

// A group of toggle buttons; `multi` allows several, at most `max` (further picks are refused
// until one is taken back). `onchange(count)` follows every change. Returns the group and the
// chosen ids.
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
  if (value === undefined) return;
  try {
    put(value);
  } catch {
    // A draft of another shape (an older page's): the widget starts afresh.
    keepDraft(it.interaction_id);
  }
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

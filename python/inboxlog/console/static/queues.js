// The two queue lists (data-queue="next-turn"|"next-step"), one item per pending message
// (data-message-id) with remove, replace and move controls; move (data-action="move",
// SPEC §17.5) sends the message to the end of the other list (its data-target): "send
// now" from next-turn, "next turn" from next-step. Replace opens an editor whose text
// field is data-field="content", saved by data-action="save".

import { el, textOf } from "./dom.js";
import { TARGETS } from "./projection.js";

// Where move sends a message of each list, and its button's label and title.
const MOVES = {
  "next-turn": { target: "next-step", label: "Send now", title: "Move to the end of the next step" },
  "next-step": { target: "next-turn", label: "Next turn", title: "Move to the end of the next turn" },
};

// `controls(id, action)`: the disabled state and title of a control (null: none shown).
function item(message, from, controls) {
  const move = MOVES[from];
  const button = (action, label, kind, extra) =>
    el("button", { type: "button", class: kind ? `small ${kind}` : "small", "data-action": action, ...extra, ...controls(message.id, action) }, label);
  const meta = [message.role, message.source].filter((v) => typeof v === "string").join(" · ");
  return el(
    "li",
    { class: "msg", "data-message-id": message.id },
    el(
      "div",
      { class: "msg-head" },
      el("code", { class: "msg-id" }, message.id),
      meta ? el("span", { class: "msg-meta" }, meta) : null,
      controls
        ? el(
            "span",
            { class: "msg-actions" },
            button("move", move.label, "", { "data-target": move.target, title: move.title }),
            button("replace", "Replace", ""),
            button("remove", "Remove", "danger"),
          )
        : null,
    ),
    el("div", { class: "msg-text" }, textOf(message)),
  );
}

/**
 * Renders both lists. `controls` null for a past inbox (no controls); else
 * `{readOnly, moving}`: a read-only console's controls are disabled, and so is the move
 * of each message id in the set `moving` (its move is on its way).
 */
export function renderQueues(root, lists, controls) {
  const state =
    controls &&
    ((id, action) =>
      controls.readOnly
        ? { disabled: true, title: "this console is read-only" }
        : { disabled: action === "move" && controls.moving.has(id) });
  for (const target of TARGETS) {
    const list = root.querySelector(`[data-queue="${target}"]`);
    const messages = lists[target];
    list.replaceChildren(...messages.map((m) => item(m, target, state)));
    list.dataset.count = String(messages.length);
    const count = root.querySelector(`[data-count="${target}"]`);
    if (count) count.textContent = String(messages.length);
  }
}

/**
 * The replace editor for a message, to put under its item; `onSave(text)` when saved,
 * `onClose()` when saved or canceled. The page keeps the node across re-renders.
 */
export function editor(message, onSave, onClose) {
  const field = el("textarea", { "data-field": "content", rows: "3", "aria-label": `New content of ${message.id}` });
  field.value = textOf(message);
  const save = el("button", { type: "button", class: "primary small", "data-action": "save" }, "Save");
  const cancel = el("button", { type: "button", class: "small", "data-action": "cancel" }, "Cancel");
  const node = el("div", { class: "editor" }, field, el("div", { class: "editor-actions" }, cancel, save));
  save.addEventListener("click", async () => {
    if (save.disabled) return;
    save.disabled = true;
    try {
      if (await onSave(field.value)) {
        node.remove();
        onClose();
      }
    } finally {
      save.disabled = false;
    }
  });
  cancel.addEventListener("click", () => {
    node.remove();
    onClose();
  });
  return node;
}

// Building elements. Data only ever reaches the page as text (textContent and
// attribute values), never as markup: message content is untrusted (§14.3).

/**
 * An element with attributes and children; a string child becomes a text node.
 * `attrs` keys starting with `data-` and plain attributes are set with setAttribute;
 * `class` sets the class list; `hidden` a boolean.
 */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/** The local wall-clock time of an epoch-milliseconds stamp, to the millisecond. */
export function clock(ms) {
  const d = new Date(ms);
  const two = (n) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}

/** The local date and time of an epoch-milliseconds stamp. */
export function dateTime(ms) {
  const d = new Date(ms);
  const two = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${clock(ms).slice(0, 8)}`;
}

/** The readable text of a message or event payload: its `content` or `text` as text, else JSON. */
export function textOf(data) {
  if (typeof data === "string") return data;
  if (data === null || typeof data !== "object") return JSON.stringify(data);
  for (const key of ["content", "text"]) {
    if (key in data) return partsText(data[key]);
  }
  return JSON.stringify(data);
}

function partsText(value) {
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    return value
      .map((part) => (typeof part === "string" ? part : typeof part?.text === "string" ? part.text : JSON.stringify(part)))
      .join("\n");
  }
  return JSON.stringify(value);
}

/** Shows a transient notice in the page's status line (role="status"). */
export function notify(text, kind = "info") {
  const line = document.querySelector("[data-role=notice]");
  if (!line) return;
  line.textContent = text;
  line.dataset.kind = kind;
}

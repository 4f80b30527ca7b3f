// Small DOM helpers. Every text shown goes through text nodes, never through HTML parsing, so
// values from the broker (sinks, events, errors) are always shown as text.

/** Create an element: h("a", {href: "#/"}, "text", child, ...). `on` maps events to handlers. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElementNS(
    tag === "svg" || attrs.svg ? "http://www.w3.org/2000/svg" : "http://www.w3.org/1999/xhtml",
    tag,
  );
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "svg" || value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) el.addEventListener(event, handler);
    } else if (name === "class") {
      el.setAttribute("class", value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

/** An SVG element (for the rate chart). */
export function s(tag, attrs = {}, ...children) {
  return h(tag, { ...attrs, svg: true }, ...children);
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A time from the API, in the reader's local time; a dash for none. */
export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

/** A count with thousands separators. */
export function count(n) {
  return typeof n === "number" ? n.toLocaleString() : "—";
}

/** Pretty JSON for <pre> blocks. */
export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

/** A short message in the status region (read out by screen readers). */
export function toast(message) {
  const region = document.getElementById("toast");
  fill(region, message);
  region.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => region.classList.remove("shown"), 4000);
}

/** The page heading; also sets the document title. */
export function title(text) {
  document.title = `${text} · cebroker console`;
  return h("h1", {}, text);
}

/** A definition list from [label, value] pairs. */
export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)]));
}

/** Repeat `task` every `ms` until the returned stop function is called; never overlaps itself. */
export function every(ms, task) {
  let stopped = false;
  let timer = null;
  const run = async () => {
    try {
      await task();
    } catch (error) {
      if (!stopped) showError(error);
    }
    if (!stopped) timer = setTimeout(run, ms);
  };
  run();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/** Show a failed call to the reader (a toast; the page stays as it was). */
export function showError(error) {
  toast(error && error.message ? error.message : String(error));
}

// Calls of the broker's HTTP API. Every call sends the bearer token kept in sessionStorage (if
// any); an answer of 401 asks for a token and tries again. Errors keep the problem details.

const TOKEN_KEY = "cebroker.token";

/** A call that did not succeed; `problem` is the RFC 9457 document when the broker sent one. */
export class ApiError extends Error {
  constructor(status, problem) {
    const detail = problem && (problem.detail || problem.title);
    super(detail ? `${status}: ${detail}` : `request failed with status ${status}`);
    this.status = status;
    this.problem = problem || {};
  }

  /** The problem's `errors` entries (each with `pointer` and `detail`). */
  get errors() {
    return Array.isArray(this.problem.errors) ? this.problem.errors : [];
  }
}

function headers(extra) {
  const all = { Accept: "application/json, application/problem+json", ...extra };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) all.Authorization = `Bearer ${token}`;
  return all;
}

/** Ask for a token in the sign-in dialog; resolves once one was entered. */
export function askToken() {
  const dialog = document.getElementById("token-dialog");
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  if (askToken.pending) return askToken.pending;
  askToken.pending = new Promise((resolve) => {
    const done = (event) => {
      event.preventDefault();
      if (!input.value) return;
      sessionStorage.setItem(TOKEN_KEY, input.value);
      input.value = "";
      form.removeEventListener("submit", done);
      dialog.close();
      askToken.pending = null;
      resolve();
    };
    form.addEventListener("submit", done);
    dialog.showModal();
    input.focus();
  });
  return askToken.pending;
}

/**
 * One call: `body` (if given) is sent as JSON. Resolves to the parsed answer, or with
 * `{raw: true}` to `{doc, response}`. Rejects with ApiError.
 */
export async function api(method, path, body, options = {}) {
  for (let attempt = 0; ; attempt += 1) {
    const init = { method, headers: headers(options.headers) };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    if (response.status === 401 && attempt < 3) {
      await askToken();
      continue;
    }
    const type = response.headers.get("content-type") || "";
    const doc = type.includes("json") ? await response.json() : await response.text();
    if (!response.ok) {
      throw new ApiError(response.status, typeof doc === "object" ? doc : { detail: doc });
    }
    return options.raw ? { doc, response } : doc;
  }
}

/** GET a path as text (a schema document). */
export async function text(path) {
  const { doc } = await api("GET", path, undefined, { raw: true, headers: { Accept: "*/*" } });
  return typeof doc === "string" ? doc : JSON.stringify(doc, null, 2);
}

/**
 * Read a Server-Sent Events stream with fetch (which, unlike EventSource, can send the token).
 * Calls `onMessage(event, data, id)` per message until `signal` aborts or the stream ends.
 */
export async function stream(path, onMessage, signal) {
  for (let attempt = 0; ; attempt += 1) {
    const response = await fetch(path, { headers: headers({ Accept: "text/event-stream" }), signal });
    if (response.status === 401 && attempt < 3) {
      await askToken();
      continue;
    }
    if (!response.ok) {
      const type = response.headers.get("content-type") || "";
      throw new ApiError(response.status, type.includes("json") ? await response.json() : {});
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let event = "message";
        let id = "";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
          else if (line.startsWith("id:")) id = line.slice(3).trim();
        }
        if (data.length) onMessage(event, data.join("\n"), id);
      }
    }
  }
}

// Create or edit a subscription. The broker validates; each problem it names is shown next to
// the field its JSON Pointer points into. The explain tester tries the form as a draft, and
// follows the form and the event as they are typed (with a transformation in config, it shows
// what the sink would receive).

import { api, ApiError } from "../api.js";
import { h, fill, title, pretty, toast } from "../ui.js";
import { explainResult, sampleEvent } from "./explain.js";

const PROTOCOLS = ["HTTP", "MQTT3", "MQTT5", "AMQP", "KAFKA", "NATS"];
// Form fields by the first segment of a pointer into the subscription.
const FIELDS = {
  protocol: "Protocol",
  sink: "Sink",
  source: "Source",
  types: "Types",
  filters: "Filters",
  protocolsettings: "Protocol settings",
  config: "Config",
  sinkcredential: "Sink credential",
};
const JSON_FIELDS = new Set(["filters", "protocolsettings", "config", "sinkcredential"]);

export async function editor(main, id) {
  const editing = id !== undefined;
  const path = editing ? `/subscriptions/${encodeURIComponent(id)}` : "/subscriptions";
  let current = null;
  let etag = null;
  if (editing) {
    const { doc, response } = await api("GET", path, undefined, { raw: true });
    current = doc;
    etag = response.headers.get("etag");
  }
  const inputs = {};
  const errors = {};
  const summary = h("div", { class: "error", role: "alert", hidden: true, id: "form-errors" });

  const field = (name, control, hint) => {
    inputs[name] = control;
    errors[name] = h("ul", { class: "field-error", id: `err-${name}`, "data-error-for": name, hidden: true });
    const hintId = hint ? `hint-${name}` : null;
    control.id = `field-${name}`;
    control.setAttribute("aria-describedby", [hintId, `err-${name}`].filter(Boolean).join(" "));
    return h(
      "div",
      { class: "field" },
      h("label", { for: `field-${name}` }, FIELDS[name]),
      hint ? h("p", { class: "hint", id: hintId }, hint) : null,
      control,
      errors[name],
    );
  };
  const area = (value, rows = 4) => h("textarea", { rows, spellcheck: "false" }, value);

  const protocol = h(
    "select",
    {},
    PROTOCOLS.map((p) => h("option", { value: p, selected: current ? current.protocol === p : p === "HTTP" }, p)),
  );
  const credentialHint = editing
    ? "Secrets are never shown. A replace sends the whole subscription: type the secret again to keep a credential, or clear the field to remove it."
    : 'Optional, e.g. {"credentialtype": "PLAIN", "identifier": "svc", "secret": "…"}. Secrets are never shown again.';
  const form = h(
    "form",
    { novalidate: true, on: { submit: (event) => save(event) } },
    summary,
    field("protocol", protocol),
    field("sink", h("input", { type: "text", value: current ? current.sink : "", autocomplete: "off", placeholder: "https://hooks.example.com/orders" }), "Where deliveries go: a URL whose scheme fits the protocol."),
    field("source", h("input", { type: "text", value: current && current.source ? current.source : "", autocomplete: "off" }), "Optional: only events with exactly this source."),
    field("types", area(current && current.types ? current.types.join("\n") : "", 3), "Optional: accepted event types, one per line."),
    field("filters", area(current ? pretty(current.filters) : "[]", 5), 'A JSON array of filter expressions, e.g. [{"prefix": {"subject": "eu/"}}, {"sql": "amount > 100"}].'),
    field("protocolsettings", area(current ? pretty(current.protocolsettings || {}) : "{}", 4), "A JSON object: the protocol's settings."),
    field("config", area(current ? pretty(current.config || {}) : "{}", 3), 'A JSON object, e.g. {"maxattempts": "10"}.'),
    field("sinkcredential", area(current && current.sinkcredential ? pretty(current.sinkcredential) : "", 3), credentialHint),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", class: "primary" }, editing ? "Save changes" : "Create subscription"),
      h("a", { class: "button", href: editing ? `#${path}` : "#/subscriptions" }, "Cancel"),
    ),
  );

  const eventArea = h("textarea", { id: "draft-event", rows: 8, spellcheck: "false", "aria-describedby": "err-event" }, sampleEvent(current));
  const eventErrors = h("ul", { class: "field-error", id: "err-event", hidden: true });
  const result = h("div", { "aria-live": "polite" });

  fill(
    main,
    title(editing ? `Edit subscription ${id.slice(0, 8)}` : "New subscription"),
    h(
      "div",
      { class: "columns" },
      h("section", { class: "panel", "aria-label": "Subscription" }, form),
      h(
        "section",
        { class: "panel", "aria-labelledby": "tester-title" },
        h("h2", { id: "tester-title" }, "Explain tester"),
        h("p", { class: "hint" }, 'Paste an event and see which condition of the subscription above (as it is in the form, not yet saved) accepts or refuses it, and, with a transformation in config ({"transform": {"cel": "…"}}), what the sink would receive. The result follows as you type.'),
        h(
          "form",
          { novalidate: true, on: { submit: (event) => tryDraft(event) } },
          h("label", { for: "draft-event" }, "CloudEvent (JSON)"),
          eventArea,
          eventErrors,
          h("div", { class: "actions" }, h("button", { type: "submit" }, "Explain")),
        ),
        result,
      ),
    ),
  );

  // The preview as you type: once the typing pauses, the form and the event (when both parse)
  // are explained as a draft; only the latest answer is shown.
  let pause = null;
  let latest = 0;
  const PAUSE_MS = 400;
  const schedule = () => {
    clearTimeout(pause);
    pause = setTimeout(preview, PAUSE_MS);
  };
  form.addEventListener("input", schedule);
  eventArea.addEventListener("input", schedule);

  async function preview() {
    const { doc, problems } = body();
    if (problems.length) return;
    let sample;
    try {
      sample = JSON.parse(eventArea.value);
    } catch {
      return;
    }
    const mine = ++latest;
    try {
      const answer = await api("POST", "/explain", { subscription: doc, event: sample });
      if (mine === latest) fill(result, explainResult(answer));
    } catch (error) {
      if (mine !== latest) return;
      const items = error instanceof ApiError && error.errors.length ? error.errors.map((p) => `${p.pointer}: ${p.detail}`) : [error.message];
      fill(result, h("div", { class: "error", "data-preview-error": "" }, h("p", {}, "Not previewed:"), h("ul", {}, items.map((item) => h("li", {}, item)))));
    }
  }

  function clearErrors() {
    fill(summary);
    summary.hidden = true;
    for (const [name, list] of [...Object.entries(errors), ["event", eventErrors]]) {
      fill(list);
      list.hidden = true;
      (inputs[name] || eventArea).removeAttribute("aria-invalid");
    }
  }

  function showErrors(problems, prefix = "") {
    const general = [];
    let first = null;
    for (const problem of problems) {
      let pointer = problem.pointer ?? "";
      if (prefix) {
        if (pointer.startsWith("/event")) {
          eventErrors.hidden = false;
          eventErrors.append(h("li", {}, `${pointer.slice(6) || "(event)"}: ${problem.detail}`));
          eventArea.setAttribute("aria-invalid", "true");
          continue;
        }
        pointer = pointer.startsWith(prefix) ? pointer.slice(prefix.length) : pointer;
      }
      const head = pointer.split("/")[1] === "filter" ? "filters" : pointer.split("/")[1];
      if (head && errors[head]) {
        errors[head].hidden = false;
        errors[head].append(h("li", {}, pointer === `/${head}` ? problem.detail : `${pointer}: ${problem.detail}`));
        inputs[head].setAttribute("aria-invalid", "true");
        first = first || inputs[head];
      } else {
        general.push(`${pointer || "(subscription)"}: ${problem.detail}`);
      }
    }
    if (general.length) {
      summary.hidden = false;
      fill(summary, h("p", {}, "The broker refused the subscription:"), h("ul", {}, general.map((g) => h("li", {}, g))));
    }
    if (first) first.focus();
  }

  // The form as a subscription body; problems with the JSON fields are reported like the API's.
  function body() {
    const doc = { protocol: protocol.value };
    const problems = [];
    const text = (name) => inputs[name].value.trim();
    if (text("sink")) doc.sink = text("sink");
    if (text("source")) doc.source = text("source");
    const types = text("types").split("\n").map((t) => t.trim()).filter(Boolean);
    if (types.length) doc.types = types;
    for (const name of JSON_FIELDS) {
      if (!text(name)) continue;
      try {
        doc[name] = JSON.parse(text(name));
      } catch (error) {
        problems.push({ pointer: `/${name}`, detail: `not valid JSON: ${error.message}` });
      }
    }
    return { doc, problems };
  }

  async function save(event) {
    event.preventDefault();
    clearErrors();
    const { doc, problems } = body();
    if (problems.length) return showErrors(problems);
    try {
      const saved = await api(editing ? "PUT" : "POST", path, doc, { headers: etag ? { "If-Match": etag } : {} });
      toast(editing ? "Subscription saved" : "Subscription created");
      location.hash = `#/subscriptions/${encodeURIComponent(saved.id)}`;
    } catch (error) {
      if (error instanceof ApiError && error.errors.length) return showErrors(error.errors);
      showErrors([{ pointer: "", detail: error.message }]);
    }
  }

  async function tryDraft(event) {
    event.preventDefault();
    clearErrors();
    fill(result);
    const { doc, problems } = body();
    if (problems.length) return showErrors(problems);
    let sample;
    try {
      sample = JSON.parse(eventArea.value);
    } catch (error) {
      return showErrors([{ pointer: "/event", detail: `not valid JSON: ${error.message}` }], "/subscription");
    }
    try {
      fill(result, explainResult(await api("POST", "/explain", { subscription: doc, event: sample })));
    } catch (error) {
      if (error instanceof ApiError && error.errors.length) return showErrors(error.errors, "/subscription");
      showErrors([{ pointer: "", detail: error.message }]);
    }
  }
}

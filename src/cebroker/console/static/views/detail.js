// One subscription: its filters and settings, delivery status, dead letters with redrive, the
// explain tester and a live tail of the events it matches.

import { api, stream } from "../api.js";
import { h, fill, count, when, title, every, facts, pretty, toast, showError } from "../ui.js";
import { explainResult, parseJson, sampleEvent } from "./explain.js";

const POLL_MS = 3000;
const TAIL_KEEP = 50;

export async function detail(main, id) {
  const path = `/subscriptions/${encodeURIComponent(id)}`;
  const sub = await api("GET", path);
  const status = h("div");
  const deadletters = h("div");
  const selected = new Set();
  const controller = new AbortController();

  const credential = sub.sinkcredential
    ? `${sub.sinkcredential.credentialtype}${sub.sinkcredential.identifier || sub.sinkcredential.identity ? `, ${sub.sinkcredential.identifier || sub.sinkcredential.identity}` : ""} (secrets are never shown)`
    : "none";
  fill(
    main,
    h(
      "div",
      { class: "heading" },
      title(`Subscription ${id.slice(0, 8)}`),
      h(
        "div",
        { class: "actions" },
        h("a", { class: "button", href: `#${path}/edit` }, "Edit"),
        h("button", { type: "button", class: "danger", on: { click: () => remove(path) } }, "Delete"),
      ),
    ),
    h("p", { class: "mono muted" }, id),
    h(
      "div",
      { class: "columns" },
      h(
        "section",
        { class: "panel", "aria-labelledby": "settings-title" },
        h("h2", { id: "settings-title" }, "Filters and settings"),
        facts([
          ["Protocol", sub.protocol],
          ["Sink", sub.protocol === "PULL" ? "none: consumers receive the events" : sub.sink],
          ["Source", sub.source || "any"],
          ["Types", sub.types ? sub.types.join(", ") : "any"],
          ["Filters", sub.filters.length ? h("pre", {}, pretty(sub.filters)) : "none"],
          ["Protocol settings", h("pre", {}, pretty(sub.protocolsettings || {}))],
          ["Config", Object.keys(sub.config || {}).length ? h("pre", {}, pretty(sub.config)) : "defaults"],
          ["Credential", credential],
        ]),
      ),
      h("section", { class: "panel", "aria-labelledby": "status-title" }, h("h2", { id: "status-title" }, "Delivery"), status),
    ),
    h(
      "section",
      { class: "panel", "aria-labelledby": "dl-title" },
      h("h2", { id: "dl-title" }, "Dead letters and recent failures"),
      deadletters,
    ),
    explainPanel(path, sub),
    tailPanel(path, controller),
  );

  const refresh = async () => {
    const [state, page] = await Promise.all([
      api("GET", `${path}/status`),
      api("GET", `${path}/deadletters?limit=100`),
    ]);
    fill(
      status,
      facts([
        ["Delivered", h("span", { "data-status": "delivered" }, count(state.delivered))],
        ["Failed attempts", h("span", { "data-status": "failed" }, count(state.failed))],
        ["Pending", h("span", { "data-status": "pending" }, count(state.pending))],
        ["Dead letters now", h("span", { "data-status": "deadlettered" }, count(state.deadlettered))],
        ["Dead letters ever", count(state.deadletteredTotal)],
        ["Last error", state.lastError ? h("span", { class: "error-text" }, `${when(state.lastErrorAt)}: ${state.lastError}`) : "none"],
        ...(state.locked === undefined
          ? [["Sink", circuitFact(state.circuit)]]
          : [
              ["Locked by consumers", h("span", { "data-status": "locked" }, count(state.locked))],
              ["Oldest lock", h("span", { "data-status": "oldest-lock" }, lockAge(state.oldestLockAt))],
            ]),
        ...(state.replies
          ? [
              [
                "Replies",
                h(
                  "span",
                  { "data-status": "replies" },
                  `${count(state.replies.published)} published, ${count(state.replies.duplicates)} duplicates, ${count(state.replies.refused)} refused`,
                ),
              ],
              ["Last refused reply", state.replies.lastRefusal ? h("span", { class: "error-text" }, state.replies.lastRefusal) : "none"],
            ]
          : []),
      ]),
    );
    renderDeadLetters(deadletters, path, page.items, selected, refresh);
  };
  const stop = every(POLL_MS, refresh);
  return () => {
    stop();
    controller.abort();
  };
}

// How long the oldest lock of a PULL subscription has been held.
function lockAge(iso) {
  if (!iso) return "none";
  const seconds = Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
  return `${seconds} s (since ${when(iso)})`;
}

// The sink's circuit: while it is open the backlog waits and one probe at a time goes out.
function circuitFact(circuit) {
  if (circuit.state === "closed") return h("span", { "data-circuit": "closed" }, "up: deliveries flow");
  const next = circuit.state === "probing" ? "a probe is on its way" : `next probe ${when(circuit.nextProbeAt)}`;
  return h(
    "span",
    { class: "error-text", "data-circuit": circuit.state },
    `down since ${when(circuit.openedAt)}; the backlog waits. ${next}, ${circuit.failedProbes} failed probes. ` +
      `Last error: ${circuit.lastError}`,
  );
}

async function remove(path) {
  if (!window.confirm("Delete this subscription, its pending deliveries and its dead letters?")) return;
  try {
    await api("DELETE", path);
    toast("Subscription deleted");
    location.hash = "#/subscriptions";
  } catch (error) {
    showError(error);
  }
}

function renderDeadLetters(container, path, items, selected, refresh) {
  for (const id of [...selected]) if (!items.some((d) => d.id === id)) selected.delete(id);
  const redrive = async (ids) => {
    try {
      const answer = await api("POST", `${path}/deadletters/redrive`, ids ? { ids } : undefined);
      toast(`Redriven: ${answer.redriven}`);
      selected.clear();
      await refresh();
    } catch (error) {
      showError(error);
    }
  };
  const selectedButton = h(
    "button",
    { type: "button", disabled: selected.size === 0, on: { click: () => redrive([...selected]) } },
    `Redrive selected (${selected.size})`,
  );
  if (!items.length) {
    fill(container, h("p", { class: "muted", "data-deadletters": "0" }, "No dead letters."));
    return;
  }
  fill(
    container,
    h(
      "div",
      { class: "actions" },
      selectedButton,
      h("button", { type: "button", class: "primary", on: { click: () => redrive(null) } }, `Redrive all (${items.length})`),
    ),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "list", "data-deadletters": String(items.length) },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Select", "ID", "Failed at", "Attempts", "Status", "Event", "Last error"].map((label) => h("th", { scope: "col" }, label)),
          ),
        ),
        h(
          "tbody",
          {},
          items.map((d) =>
            h(
              "tr",
              {},
              h(
                "td",
                {},
                h("input", {
                  type: "checkbox",
                  "aria-label": `Select dead letter ${d.id}`,
                  checked: selected.has(d.id),
                  on: {
                    change: (event) => {
                      if (event.target.checked) selected.add(d.id);
                      else selected.delete(d.id);
                      selectedButton.disabled = selected.size === 0;
                      fill(selectedButton, `Redrive selected (${selected.size})`);
                    },
                  },
                }),
              ),
              h("td", { class: "num" }, d.id),
              h("td", {}, when(d.failedAt)),
              h("td", { class: "num" }, d.attempts),
              h("td", {}, d.status || "—"),
              h("td", { class: "mono" }, `${d.event.type} ${d.event.id}`),
              h("td", { class: "error-text" }, d.lastError),
            ),
          ),
        ),
      ),
    ),
  );
}

function explainPanel(path, sub) {
  const area = h("textarea", { id: "explain-event", rows: 8, spellcheck: "false" }, sampleEvent(sub));
  const result = h("div", { "aria-live": "polite" });
  const run = async (event) => {
    event.preventDefault();
    try {
      const answer = await api("POST", `${path}/explain`, parseJson(area.value, "The event"));
      fill(result, explainResult(answer));
    } catch (error) {
      const lines = error.errors ? error.errors.map((e) => `${e.pointer || "(event)"}: ${e.detail}`) : [];
      fill(result, h("div", { class: "error", role: "alert" }, error.message, lines.length ? h("ul", {}, lines.map((l) => h("li", {}, l))) : null));
    }
  };
  return h(
    "section",
    { class: "panel", "aria-labelledby": "explain-title" },
    h("h2", { id: "explain-title" }, "Explain an event"),
    h(
      "form",
      { on: { submit: run } },
      h("label", { for: "explain-event" }, "CloudEvent (JSON)"),
      area,
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Explain")),
    ),
    result,
  );
}

function tailPanel(path, controller) {
  const list = h("ol", { class: "tail", "aria-live": "polite", "data-tail": "" });
  const state = h("span", { class: "muted" }, "Not watching.");
  let local = null;
  const button = h("button", { type: "button", "aria-pressed": "false" }, "Start live tail");
  const stopTail = () => {
    if (local) local.abort();
    local = null;
    button.setAttribute("aria-pressed", "false");
    fill(button, "Start live tail");
  };
  button.addEventListener("click", () => {
    if (local) {
      stopTail();
      fill(state, "Stopped.");
      return;
    }
    local = new AbortController();
    controller.signal.addEventListener("abort", () => local && local.abort());
    button.setAttribute("aria-pressed", "true");
    fill(button, "Stop live tail");
    fill(state, "Connecting…");
    stream(
      `${path}/tail`,
      (kind, data, traceId) => {
        const doc = JSON.parse(data);
        if (kind === "ready") fill(state, "Watching: events this subscription matches appear here as they arrive.");
        else if (kind === "dropped") fill(state, `${doc.dropped} events skipped (the page fell behind).`);
        else if (kind === "cloudevent") {
          list.prepend(
            h(
              "li",
              { "data-event-id": doc.id, "data-trace-id": traceId || "" },
              h("span", { class: "mono" }, doc.id),
              " ",
              h("strong", {}, doc.type),
              ` from ${doc.source}`,
              doc.subject ? ` · ${doc.subject}` : "",
              traceId ? h("span", { class: "mono trace" }, ` · trace ${traceId}`) : "",
              h("details", {}, h("summary", {}, "Event"), h("pre", {}, JSON.stringify(doc, null, 2))),
            ),
          );
          while (list.children.length > TAIL_KEEP) list.lastElementChild.remove();
        }
      },
      local.signal,
    )
      .then(() => {
        stopTail();
        fill(state, "The stream ended.");
      })
      .catch((error) => {
        if (error.name === "AbortError") return;
        stopTail();
        fill(state, `The stream failed: ${error.message}`);
      });
  });
  return h(
    "section",
    { class: "panel", "aria-labelledby": "tail-title" },
    h("h2", { id: "tail-title" }, "Live tail"),
    h("div", { class: "actions" }, button, state),
    list,
  );
}

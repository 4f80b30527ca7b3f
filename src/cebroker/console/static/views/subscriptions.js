// Subscriptions: every subscription with its delivery health, sortable by any column, refreshed
// every three seconds.

import { api } from "../api.js";
import { h, fill, count, when, title, every } from "../ui.js";

const POLL_MS = 3000;
const COLUMNS = [
  { key: "id", label: "ID" },
  { key: "protocol", label: "Protocol" },
  { key: "sink", label: "Sink" },
  { key: "delivered", label: "Delivered", number: true },
  { key: "failed", label: "Failed", number: true },
  { key: "pending", label: "Pending", number: true },
  { key: "deadlettered", label: "Dead-lettered", number: true },
  { key: "circuitOrder", label: "Sink" },
  { key: "lastError", label: "Last error" },
  { key: "lastDeliveredAt", label: "Last success" },
];

export function subscriptions(main) {
  let items = [];
  let sort = { key: null, descending: false };
  const body = h("tbody");
  const head = h("tr");
  const empty = h("p", { class: "muted", hidden: true }, "No subscriptions yet. ", h("a", { href: "#/new" }, "Create one."));
  fill(
    main,
    h("div", { class: "heading" }, title("Subscriptions"), h("a", { class: "button primary", href: "#/new" }, "New subscription")),
    h(
      "div",
      { class: "table-wrap" },
      h("table", { class: "list", "aria-describedby": "list-note" }, h("thead", {}, head), body),
    ),
    h("p", { id: "list-note", class: "muted" }, "Sort by a column with its header button. Counts refresh every few seconds."),
    empty,
  );

  const headers = () =>
    fill(
      head,
      COLUMNS.map((column) => {
        const state = sort.key === column.key ? (sort.descending ? "descending" : "ascending") : "none";
        return h(
          "th",
          { scope: "col", "aria-sort": state, class: column.number ? "num" : null },
          h(
            "button",
            {
              type: "button",
              class: "sort",
              "data-sort": column.key,
              on: {
                click: () => {
                  sort = { key: column.key, descending: sort.key === column.key ? !sort.descending : column.number };
                  headers();
                  rows();
                },
              },
            },
            column.label,
            h("span", { "aria-hidden": "true" }, state === "ascending" ? " ▲" : state === "descending" ? " ▼" : ""),
          ),
        );
      }),
    );

  const rows = () => {
    const sorted = [...items];
    if (sort.key) {
      const column = COLUMNS.find((c) => c.key === sort.key);
      sorted.sort((a, b) => compare(a[sort.key], b[sort.key], column.number) * (sort.descending ? -1 : 1));
    }
    empty.hidden = items.length > 0;
    fill(
      body,
      sorted.map((item) =>
        h(
          "tr",
          { "data-id": item.id },
          h("td", { class: "mono" }, h("a", { href: `#/subscriptions/${encodeURIComponent(item.id)}`, title: item.id }, item.id.slice(0, 8))),
          h("td", {}, item.protocol),
          h("td", { class: "sink", title: item.sink || "pull" }, item.sink || "(pull)"),
          h("td", { class: "num", "data-col": "delivered" }, count(item.delivered)),
          h("td", { class: "num", "data-col": "failed" }, count(item.failed)),
          h("td", { class: "num", "data-col": "pending" }, count(item.pending)),
          h("td", { class: item.deadlettered ? "num bad" : "num", "data-col": "deadlettered" }, count(item.deadlettered)),
          circuitCell(item.circuit),
          h("td", { class: item.lastError ? "error-text" : null, title: item.lastError || null }, item.lastError ? `${when(item.lastErrorAt)}: ${item.lastError}` : "—"),
          h("td", {}, when(item.lastDeliveredAt)),
        ),
      ),
    );
  };

  headers();
  return every(POLL_MS, async () => {
    // Sorting by the sink's state puts the ones that are down first (descending) or last.
    items = (await api("GET", "/status/subscriptions")).items.map((item) => ({
      ...item,
      circuitOrder: item.circuit.state === "closed" ? "" : `down ${item.circuit.openedAt}`,
    }));
    rows();
  });
}

// The sink's circuit: "up" while closed; "down since ..." while open, with the next probe in
// the cell's title.
function circuitCell(circuit) {
  if (circuit.state === "closed") return h("td", { "data-col": "circuit", "data-circuit": "closed" }, "up");
  const probing = circuit.state === "probing" ? "probing now" : `next probe ${when(circuit.nextProbeAt)}`;
  return h(
    "td",
    {
      class: "error-text",
      "data-col": "circuit",
      "data-circuit": circuit.state,
      title: `${probing}; ${circuit.failedProbes} failed probes; ${circuit.lastError}`,
    },
    `down since ${when(circuit.openedAt)}`,
  );
}

function compare(a, b, number) {
  const missing = (v) => v === null || v === undefined || v === "";
  if (missing(a) || missing(b)) return missing(a) - missing(b); // empty cells last
  if (number) return a - b;
  return String(a).localeCompare(String(b));
}

// Overview: totals of the whole broker and their rates, polled every two seconds, with a chart
// of the last two minutes.

import { api } from "../api.js";
import { h, s, fill, count, title, every } from "../ui.js";

const POLL_MS = 2000;
const KEEP = 60; // samples in the chart: two minutes

const CARDS = [
  ["events", "Events in", (d) => d.events.accepted + d.events.duplicates],
  ["deliveries", "Deliveries", (d) => d.deliveries.delivered],
  ["failures", "Failed attempts", (d) => d.deliveries.retried + d.deliveries.deadlettered],
  ["backlog", "Backlog", (d) => d.backlog],
  ["deadletters", "Dead letters", (d) => d.deadletters],
  ["subscriptions", "Subscriptions", (d) => d.subscriptions],
];
const RATES = new Set(["events", "deliveries", "failures"]);

export function overview(main) {
  const values = {};
  const rates = {};
  const cards = CARDS.map(([key, label]) => {
    values[key] = h("p", { class: "value", "data-metric": key }, "—");
    rates[key] = RATES.has(key) ? h("p", { class: "rate", "data-rate": key }, "") : null;
    return h("section", { class: "card", "aria-label": label }, h("h2", {}, label), values[key], rates[key]);
  });
  const chart = s("svg", {
    class: "chart",
    viewBox: "0 0 600 160",
    preserveAspectRatio: "none",
    role: "img",
    "aria-label": "Rates",
  });
  const scale = h("p", { class: "tick" });
  const started = h("p", { class: "muted" });
  fill(
    main,
    title("Overview"),
    started,
    h("div", { class: "cards" }, cards),
    h(
      "section",
      { class: "panel", "aria-labelledby": "rates-title" },
      h("h2", { id: "rates-title" }, "Rates, per second"),
      h(
        "p",
        { class: "legend" },
        h("span", { class: "swatch events" }),
        " events in ",
        h("span", { class: "swatch deliveries" }),
        " deliveries ",
        h("span", { class: "swatch failures" }),
        " failed attempts",
      ),
      scale,
      chart,
    ),
  );

  const history = { events: [], deliveries: [], failures: [] };
  let previous = null;
  return every(POLL_MS, async () => {
    const doc = await api("GET", "/status");
    const now = performance.now();
    fill(started, `Up since ${new Date(doc.startedAt).toLocaleString()}; counts since then.`);
    for (const [key, , read] of CARDS) {
      const value = read(doc);
      fill(values[key], count(value));
      if (RATES.has(key) && previous) {
        const rate = Math.max(0, (value - previous.values[key]) / ((now - previous.at) / 1000));
        history[key].push(rate);
        if (history[key].length > KEEP) history[key].shift();
        fill(rates[key], `${rate.toFixed(1)} /s`);
      }
    }
    previous = { at: now, values: Object.fromEntries(CARDS.map(([key, , read]) => [key, read(doc)])) };
    draw(chart, scale, history);
  });
}

function draw(svg, scale, history) {
  const width = 600;
  const height = 160;
  const top = Math.max(1, ...Object.values(history).flat());
  const x = (i) => (i / (KEEP - 1)) * width;
  const y = (v) => height - 8 - (v / top) * (height - 24);
  const lines = Object.entries(history).map(([key, values]) => {
    const offset = KEEP - values.length;
    const points = values.map((v, i) => `${x(i + offset).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    return s("polyline", { class: `line ${key}`, points });
  });
  const label = Object.entries(history)
    .map(([key, values]) => `${key} ${(values.at(-1) ?? 0).toFixed(1)} per second`)
    .join(", ");
  svg.setAttribute("aria-label", `Rates over the last two minutes: ${label}`);
  fill(scale, `top of the chart: ${top.toFixed(1)} /s`);
  fill(svg, s("line", { class: "axis", x1: 0, y1: height - 8, x2: width, y2: height - 8 }), lines);
}

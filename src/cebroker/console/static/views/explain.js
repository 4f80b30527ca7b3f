// The explain tester's pieces: a sample event to start from, the table of verdicts and, for a
// subscription with a transformation, what the sink would receive.

import { h, pretty } from "../ui.js";

/** A CloudEvent that fits a subscription's source and first type, to edit before explaining. */
export function sampleEvent(subscription) {
  const event = {
    specversion: "1.0",
    id: "try-1",
    source: (subscription && subscription.source) || "/example",
    type: (subscription && subscription.types && subscription.types[0]) || "com.example.event",
    subject: "eu/42",
  };
  return JSON.stringify(event, null, 2);
}

/** The verdict and one row per condition, or the problems that kept it from being explained. */
export function explainResult(answer) {
  const shown = [
    h(
      "p",
      { class: answer.matched ? "verdict good" : "verdict bad", "data-verdict": answer.matched ? "matched" : "refused" },
      answer.matched ? "Matched: this event would be delivered." : "Not matched: this event would not be delivered.",
    ),
    h(
      "table",
      { class: "checks" },
      h("caption", { class: "visually-hidden" }, "Each condition of the subscription"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Condition"), h("th", { scope: "col" }, "Result"), h("th", { scope: "col" }, "Why"))),
      h(
        "tbody",
        {},
        answer.checks.map((check) =>
          h(
            "tr",
            { class: check.matched ? "yes" : "no", "data-pointer": check.pointer },
            h("td", { class: "mono" }, check.pointer),
            h("td", {}, check.matched ? "✓ yes" : "✗ no"),
            h("td", {}, check.detail),
          ),
        ),
      ),
    ),
  ];
  if (answer.transform) shown.push(transformResult(answer.transform));
  return shown;
}

/** A transformation's outcome: the request or message the sink would get, the drop, the failure. */
export function transformResult(outcome) {
  const parts = [h("h3", {}, "Transformation")];
  if (outcome.outcome === "dropped") {
    parts.push(h("p", { class: "verdict", "data-transform": "dropped" }, "Dropped: the transformation returns null; nothing is sent."));
  } else if (outcome.outcome === "failed") {
    parts.push(
      h("p", { class: "verdict bad", "data-transform": "failed" }, `Failed: ${outcome.error.reason}. The delivery would become a dead letter.`),
    );
  } else {
    parts.push(h("p", { class: "verdict good", "data-transform": "delivered" }, `Sent to ${outcome.sink}`));
    if (outcome.message && outcome.message.headers) {
      const lines = Object.entries(outcome.message.headers).map(([name, value]) => `${name}: ${value}`);
      const body = outcome.message.body !== undefined ? outcome.message.body : `(base64) ${outcome.message.body_base64}`;
      parts.push(h("p", { class: "hint" }, "The request (credentials and the signature are added when it is sent):"));
      parts.push(h("pre", { "data-transform-part": "message" }, `${outcome.message.method}\n${lines.join("\n")}\n\n${body}`));
    }
    parts.push(h("p", { class: "hint" }, "The outgoing event:"));
    parts.push(h("pre", { "data-transform-part": "event" }, pretty(outcome.event)));
    if (outcome.delivery && Object.keys(outcome.delivery).length) {
      parts.push(h("pre", { "data-transform-part": "delivery" }, pretty(outcome.delivery)));
    }
  }
  return h("section", { class: "transform", "aria-label": "Transformation preview" }, parts);
}

/** Parse the JSON of a text area; throws an Error that names the field. */
export function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON: ${error.message}`);
  }
}

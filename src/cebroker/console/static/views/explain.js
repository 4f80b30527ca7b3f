// The explain tester's pieces: a sample event to start from and the table of verdicts.

import { h } from "../ui.js";

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
  return [
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
}

/** Parse the JSON of a text area; throws an Error that names the field. */
export function parseJson(text, what) {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON: ${error.message}`);
  }
}

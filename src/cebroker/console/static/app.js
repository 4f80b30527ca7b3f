// The console's router: the URL fragment names the page (#/subscriptions/ID), each page is a
// function that fills <main> and returns what stops its polling when the reader leaves.

import { h, fill, showError } from "./ui.js";
import { overview } from "./views/overview.js";
import { subscriptions } from "./views/subscriptions.js";
import { detail } from "./views/detail.js";
import { editor } from "./views/editor.js";
import { registry } from "./views/registry.js";

const ROUTES = [
  [/^#?\/?$/, "overview", () => overview],
  [/^#\/subscriptions$/, "subscriptions", () => subscriptions],
  [/^#\/subscriptions\/([^/]+)$/, "subscriptions", () => detail],
  [/^#\/subscriptions\/([^/]+)\/edit$/, "subscriptions", () => editor],
  [/^#\/new$/, "new", () => editor],
  [/^#\/registry$/, "registry", () => registry],
];

let leave = null;

async function show() {
  const hash = location.hash;
  if (hash && !hash.startsWith("#/")) return; // an in-page anchor such as the skip link
  const main = document.getElementById("main");
  if (leave) {
    leave();
    leave = null;
  }
  for (const [pattern, section, page] of ROUTES) {
    const match = pattern.exec(hash);
    if (!match) continue;
    for (const link of document.querySelectorAll("[data-nav]")) {
      if (link.dataset.nav === section) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    fill(main);
    try {
      leave = (await page()(main, ...match.slice(1).map(decodeURIComponent))) || null;
    } catch (error) {
      showError(error);
      fill(main, h("h1", {}, "Something went wrong"), h("p", { class: "error" }, error.message || String(error)));
    }
    return;
  }
  fill(main, h("h1", {}, "Not found"), h("p", {}, "No page here. ", h("a", { href: "#/" }, "Go to the overview.")));
}

document.getElementById("skip").addEventListener("click", (event) => {
  event.preventDefault();
  document.getElementById("main").focus();
});
window.addEventListener("hashchange", show);
show();

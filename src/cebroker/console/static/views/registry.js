// The registry: message groups with their message definitions, schema groups with their schemas
// and every version, a version's document on request.

import { api, text } from "../api.js";
import { h, fill, title, when, showError } from "../ui.js";

export async function registry(main) {
  const [messagegroups, schemagroups] = await Promise.all([
    api("GET", "/messagegroups?inline=messages"),
    api("GET", "/schemagroups?inline=schemas.versions"),
  ]);
  fill(
    main,
    title("Registry"),
    h(
      "section",
      { class: "panel", "aria-labelledby": "mg-title" },
      h("h2", { id: "mg-title" }, "Message groups"),
      Object.keys(messagegroups).length ? Object.values(messagegroups).map(messageGroup) : h("p", { class: "muted" }, "No message groups."),
    ),
    h(
      "section",
      { class: "panel", "aria-labelledby": "sg-title" },
      h("h2", { id: "sg-title" }, "Schema groups"),
      Object.keys(schemagroups).length ? Object.values(schemagroups).map(schemaGroup) : h("p", { class: "muted" }, "No schema groups."),
    ),
  );
}

function messageGroup(group) {
  const messages = Object.values(group.messages || {});
  return h(
    "div",
    { class: "group", "data-group": group.messagegroupid },
    h("h3", {}, group.messagegroupid, group.description ? h("span", { class: "muted" }, ` · ${group.description}`) : null),
    messages.length
      ? h(
          "table",
          { class: "list" },
          h("thead", {}, h("tr", {}, ["Message", "Type", "Data schema", "Description", "Modified"].map((l) => h("th", { scope: "col" }, l)))),
          h(
            "tbody",
            {},
            messages.map((m) =>
              h(
                "tr",
                {},
                h("td", { class: "mono" }, m.messageid),
                h("td", { class: "mono" }, (m.envelopemetadata && m.envelopemetadata.type && m.envelopemetadata.type.value) || "—"),
                h("td", { class: "mono" }, m.dataschemauri || (m.dataschema ? "inline" : "—")),
                h("td", {}, m.description || "—"),
                h("td", {}, when(m.modifiedat)),
              ),
            ),
          ),
        )
      : h("p", { class: "muted" }, "No messages."),
  );
}

function schemaGroup(group) {
  const schemas = Object.values(group.schemas || {});
  return h(
    "div",
    { class: "group", "data-group": group.schemagroupid },
    h("h3", {}, group.schemagroupid, group.description ? h("span", { class: "muted" }, ` · ${group.description}`) : null),
    schemas.length ? schemas.map((schema) => schemaBlock(group, schema)) : h("p", { class: "muted" }, "No schemas."),
  );
}

function schemaBlock(group, schema) {
  const shown = h("pre", { class: "document", hidden: true, tabindex: "0" });
  const versions = Object.values(schema.versions || {});
  return h(
    "div",
    { class: "schema" },
    h("h4", {}, schema.schemaid, h("span", { class: "muted" }, ` · ${schema.format || "no format"} · default version ${schema.versionid}`)),
    h(
      "table",
      { class: "list" },
      h("thead", {}, h("tr", {}, ["Version", "Format", "Created", "Document"].map((l) => h("th", { scope: "col" }, l)))),
      h(
        "tbody",
        {},
        versions.map((v) =>
          h(
            "tr",
            {},
            h("td", { class: "mono" }, v.versionid, v.isdefault ? " (default)" : ""),
            h("td", {}, v.format || "—"),
            h("td", {}, when(v.createdat)),
            h(
              "td",
              {},
              h(
                "button",
                {
                  type: "button",
                  on: {
                    click: async () => {
                      const ids = [group.schemagroupid, schema.schemaid, v.versionid].map(encodeURIComponent);
                      try {
                        fill(shown, await text(`/schemagroups/${ids[0]}/schemas/${ids[1]}/versions/${ids[2]}`));
                        shown.hidden = false;
                        shown.setAttribute("aria-label", `Schema ${schema.schemaid} version ${v.versionid}`);
                      } catch (error) {
                        showError(error);
                      }
                    },
                  },
                },
                `Show version ${v.versionid}`,
              ),
            ),
          ),
        ),
      ),
    ),
    shown,
  );
}

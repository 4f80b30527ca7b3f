// The API reference at /docs: Swagger UI (shipped in a Python package, served by the broker)
// rendering this broker's /openapi.json.
window.addEventListener("DOMContentLoaded", () => {
  window.SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    tryItOutEnabled: false,
  });
});

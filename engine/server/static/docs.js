// /docs: starts Swagger UI (static/swagger/, from the package) on this app's OpenAPI document.
// A file rather than an inline script, so the page's Content-Security-Policy allows scripts
// from this origin only. The document's URL, with the root path, is in data-openapi-url.
"use strict";

const root = document.getElementById("swagger-ui");
window.ui = SwaggerUIBundle({
  url: root.dataset.openapiUrl,
  domNode: root,
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  validatorUrl: null, // no badge fetched from validator.swagger.io
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});

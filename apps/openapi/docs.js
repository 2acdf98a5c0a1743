// The docs page's start: Swagger UI on this server's own /openapi.json
// (apps/openapi/docs.html loads it after swagger-ui-bundle.js).
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});

// The status page's verbs. A button with data-verb and data-agent POSTs
// v1/agents/{agent}/{verb} (no body) with the page's anti-forgery token in
// the X-CSRF-Token header, then reloads the page; a refusal is shown on
// the page with the API's error, never swallowed. Served as GET
// /status.js to a page whose caller may operate; the page's
// Content-Security-Policy runs no other script.
"use strict";
(function () {
  const meta = document.querySelector('meta[name="csrf-token"]');
  const csrf = meta ? meta.content : "";
  function show(text) {
    const p = document.getElementById("verb-error");
    if (p) {
      p.textContent = text;
      p.hidden = false;
    }
  }
  document.addEventListener("click", async function (ev) {
    const b = ev.target.closest("button[data-verb]");
    if (!b) {
      return;
    }
    ev.preventDefault();
    b.disabled = true;
    const verb = b.dataset.verb, agent = b.dataset.agent;
    const headers = {};
    if (csrf) {
      headers["X-CSRF-Token"] = csrf;
    }
    try {
      const res = await fetch("v1/agents/" + encodeURIComponent(agent) + "/" + encodeURIComponent(verb),
        { method: "POST", headers: headers, credentials: "same-origin" });
      if (res.ok) {
        location.reload();
        return;
      }
      let why = res.status + " " + res.statusText;
      try {
        const body = await res.json();
        if (body && body.error) {
          why = res.status + ": " + body.error;
        }
      } catch (e) { /* not JSON: the status says it */ }
      show(verb + " " + agent + " refused: " + why);
    } catch (e) {
      show(verb + " " + agent + " failed: " + e);
    }
    b.disabled = false;
  });
})();

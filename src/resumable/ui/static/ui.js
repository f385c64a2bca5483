// resumable dashboard: live updates by polling, and JSON checks before a send.
// Loaded from /static (the Content-Security-Policy allows no inline script).
"use strict";

const POLL_MS = 2000;

function poll() {
  const live = document.getElementById("live");
  if (!live || live.dataset.terminal === "1") return;
  setTimeout(async () => {
    if (document.hidden) return poll();
    try {
      const response = await fetch(location.href, { headers: { "X-Fragment": "1" } });
      if (response.ok) {
        const html = await response.text();
        const holder = document.createElement("div");
        holder.innerHTML = html;  // our own server-rendered, escaped HTML
        const fresh = holder.querySelector("#live") || holder;
        live.replaceChildren(...fresh.childNodes);
        if (fresh.dataset) {
          live.dataset.terminal = fresh.dataset.terminal || "0";
          live.dataset.status = fresh.dataset.status || "";
        }
      }
    } catch (e) {
      // the server stopped: keep the last view and keep trying
    }
    poll();
  }, POLL_MS);
}

function checkJson(form) {
  const area = form.querySelector("textarea[data-json]");
  const out = form.querySelector(".json-error");
  if (!area) return true;
  try {
    JSON.parse(area.value);
    if (out) out.textContent = "";
    return true;
  } catch (e) {
    if (out) out.textContent = "Not JSON: " + e.message + ' (quote strings: "yes")';
    return false;
  }
}

document.addEventListener("submit", (event) => {
  if (!checkJson(event.target)) event.preventDefault();
});
document.addEventListener("DOMContentLoaded", poll);

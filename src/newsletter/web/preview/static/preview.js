// Live reload for the preview: the server pushes a version on every save (Server-Sent Events);
// the page fetches itself again and swaps the parts marked data-live, keeping the chosen width,
// color scheme, tab and the email frame's scroll position.
"use strict";
(() => {
  const body = document.body;
  const frame = document.getElementById("email-frame");
  const KEY = "newsletter-preview";
  const state = { width: "desktop", scheme: "light", tab: "email" };
  try {
    Object.assign(state, JSON.parse(localStorage.getItem(KEY) || "{}"));
  } catch (_) { /* a corrupt entry falls back to the defaults */ }

  function frameSrc() {
    const base = body.dataset.emailSrc;
    if (!base) return "";
    return `${base}?scheme=${encodeURIComponent(state.scheme)}&v=${encodeURIComponent(body.dataset.version)}`;
  }

  function loadFrame() {
    const src = frameSrc();
    if (!frame || !src || frame.dataset.src === src) return;
    let y = 0;
    try { y = frame.contentWindow.scrollY; } catch (_) { /* not loaded yet */ }
    frame.addEventListener("load", () => {
      try { frame.contentWindow.scrollTo(0, y); } catch (_) { /* cross-origin: cannot restore */ }
      body.dataset.frameVersion = body.dataset.version;
    }, { once: true });
    frame.dataset.src = src;
    // replace(): a reload must not add an entry to the browser history.
    if (frame.contentWindow && frame.getAttribute("src")) frame.contentWindow.location.replace(src);
    else frame.setAttribute("src", src);
  }

  function apply() {
    // The tab chosen on another kind of page (Checks, Headers) may not be here: show the email,
    // and keep the choice for the pages that have it.
    const panes = [...document.querySelectorAll("[data-pane]")].map((pane) => pane.dataset.pane);
    const shown = { ...state, tab: panes.includes(state.tab) ? state.tab : "email" };
    body.dataset.width = shown.width;
    body.dataset.scheme = shown.scheme;
    body.dataset.tab = shown.tab;
    for (const button of document.querySelectorAll("[data-set]")) {
      const [key, value] = button.dataset.set.split(":");
      button.setAttribute("aria-pressed", String(shown[key] === value));
    }
    try { localStorage.setItem(KEY, JSON.stringify(state)); } catch (_) { /* private mode */ }
    loadFrame();
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-set]");
    if (!button) return;
    const [key, value] = button.dataset.set.split(":");
    state[key] = value;
    apply();
  });

  let latest = body.dataset.version;
  let queue = Promise.resolve();

  async function refresh(force) {
    const wanted = latest;
    if (wanted === body.dataset.version && !force) return;
    // A captured message does not change with the project's files: nothing to fetch again.
    if (!document.querySelector("[data-live]")) return;
    const response = await fetch(location.href, { cache: "no-store" });
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    const live = [...document.querySelectorAll("[data-live]")];
    if (live.some((old) => !doc.getElementById(old.id))) {
      // Another kind of page now (the issue file was deleted, or is back): load it whole.
      location.reload();
      return;
    }
    for (const old of live) old.replaceWith(document.adoptNode(doc.getElementById(old.id)));
    document.title = doc.title;
    body.dataset.state = doc.body.dataset.state || "";
    body.dataset.emailSrc = doc.body.dataset.emailSrc || "";
    body.dataset.version = doc.body.dataset.version || wanted;
    loadFrame();
  }

  const status = document.getElementById("live-status");
  let events = null;
  let mailSeen = null;
  let checksSeen = null;

  function connect() {
    events = new EventSource("/events");
    events.addEventListener("version", (event) => {
      latest = event.data;
      queue = queue.then(() => refresh(false)).catch(() => { /* the next event retries */ });
    });
    events.addEventListener("mail", (event) => {
      // Only the mailbox page shows captured messages; an issue page stays as it is.
      const seen = mailSeen;
      mailSeen = event.data;
      if (!document.getElementById("mailbox") || seen === event.data) return;
      queue = queue.then(() => refresh(true)).catch(() => { /* the next event retries */ });
    });
    events.addEventListener("checks", (event) => {
      // A check that runs in the background (SpamAssassin) finished: update the live parts.
      const seen = checksSeen;
      checksSeen = event.data;
      const pending = document.querySelector("#spam-score[data-pending]");
      if (!document.getElementById("checks")) return;
      if (!pending && (seen === null || seen === event.data)) return;
      queue = queue.then(() => refresh(true)).catch(() => { /* the next event retries */ });
    });
    events.addEventListener("open", () => {
      status.classList.add("on");
      status.title = "Live reload: on";
    });
    events.addEventListener("error", () => {
      status.classList.remove("on");
      status.title = "Live reload: reconnecting";
    });
  }

  function disconnect() {
    if (events) events.close();
    events = null;
    status.classList.remove("on");
    status.title = "Live reload: paused while the tab is hidden";
  }

  // A browser allows about six connections per server; a stream per background tab would use
  // them up. Hidden tabs let go of theirs and catch up when shown (the first event is the
  // current version).
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) disconnect();
    else if (!events) connect();
  });
  // Close the stream when leaving the page so the server can stop promptly.
  window.addEventListener("pagehide", disconnect);
  window.addEventListener("pageshow", () => { if (!events && !document.hidden) connect(); });
  if (!document.hidden) connect();

  apply();
})();

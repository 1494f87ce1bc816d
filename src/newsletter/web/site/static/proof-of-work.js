// The proof of work behind the signup form, solved in the reader's browser: ALTCHA's protocol
// (v2, PBKDF2/SHA-256, the counter as a big-endian uint32 after the nonce), checked on the
// server by the `altcha` package (signup/challenge.py). Our own code, served from our own
// static files: no third party sees the reader, and the strict Content-Security-Policy holds.
//
// A form opts in with data-challenge="URL of a challenge" and a hidden input name="altcha";
// its submit buttons stay disabled until the payload is in. WebCrypto does the hashing off the
// page's thread, several counters at once; it needs a secure context (HTTPS, or loopback).
(function () {
  "use strict";

  function hexToBytes(hex) {
    if (!/^(?:[0-9a-fA-F]{2})*$/.test(hex)) throw new Error("not hex: " + hex);
    const bytes = new Uint8Array(hex.length / 2);
    for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.substr(i * 2, 2), 16);
    return bytes;
  }

  function bytesToHex(buffer) {
    return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
  }

  async function derive(parameters, nonce, salt, counter) {
    const password = new Uint8Array(nonce.length + 4);
    password.set(nonce, 0);
    new DataView(password.buffer).setUint32(nonce.length, counter, false);
    const key = await crypto.subtle.importKey("raw", password, "PBKDF2", false, ["deriveBits"]);
    const bits = await crypto.subtle.deriveBits(
      { name: "PBKDF2", hash: "SHA-256", salt: salt, iterations: parameters.cost },
      key,
      parameters.keyLength * 8
    );
    return bytesToHex(bits);
  }

  // The lowest counter whose derived key starts with the challenge's prefix.
  async function solve(challenge, options) {
    const parameters = challenge.parameters;
    if (parameters.algorithm !== "PBKDF2/SHA-256") {
      throw new Error("unsupported algorithm " + parameters.algorithm);
    }
    const nonce = hexToBytes(parameters.nonce);
    const salt = hexToBytes(parameters.salt);
    const prefix = String(parameters.keyPrefix).toLowerCase();
    const width = Math.min(8, Math.max(1, (options && options.parallel) || navigator.hardwareConcurrency || 4));
    const started = performance.now();
    for (let base = 0; base <= 0xffffffff; base += width) {
      const counters = [];
      for (let i = 0; i < width && base + i <= 0xffffffff; i++) counters.push(base + i);
      const keys = await Promise.all(counters.map((c) => derive(parameters, nonce, salt, c)));
      const found = keys.findIndex((k) => k.startsWith(prefix));
      if (found >= 0) {
        return { counter: counters[found], derivedKey: keys[found], time: performance.now() - started };
      }
      if (options && options.signal && options.signal.aborted) return null;
    }
    return null;
  }

  function payload(challenge, solution) {
    return btoa(JSON.stringify({ challenge: challenge, solution: solution }));
  }

  async function prepare(form) {
    const field = form.querySelector('input[name="altcha"]');
    const buttons = form.querySelectorAll('button[type="submit"], button:not([type])');
    const status = form.querySelector("[data-work-status]");
    if (!field) return;
    buttons.forEach((b) => { b.disabled = true; });
    form.setAttribute("aria-busy", "true");
    try {
      const response = await fetch(form.dataset.challenge, { credentials: "omit", cache: "no-store" });
      if (!response.ok) throw new Error("challenge: HTTP " + response.status);
      const challenge = await response.json();
      const solution = await solve(challenge);
      if (!solution) throw new Error("no solution");
      field.value = payload(challenge, solution);
      buttons.forEach((b) => { b.disabled = false; });
      form.dispatchEvent(new CustomEvent("work-done", { detail: solution }));
    } catch (error) {
      if (status) status.hidden = false;
      form.dispatchEvent(new CustomEvent("work-failed", { detail: String(error) }));
    } finally {
      form.removeAttribute("aria-busy");
    }
  }

  window.NewsletterWork = { solve: solve, payload: payload, prepare: prepare };
  document.querySelectorAll("form[data-challenge]").forEach(prepare);
})();

// Shared helpers of the LEMON web view. Every piece of data reaches the page as a text node
// (el(..., text) / textContent) or an attribute value: no HTML is ever built from data.

export const SVG_NS = "http://www.w3.org/2000/svg";

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.setAttribute("class", value);
    else if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else node.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export class Unauthorized extends Error {}

export async function getJSON(url) {
  const response = await fetch(url, {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  });
  if (response.status === 401) {
    location.assign("/ui/login?next=" + encodeURIComponent(location.pathname + location.search));
    throw new Unauthorized("sign in needed");
  }
  if (!response.ok) {
    let message = response.statusText;
    try {
      message = (await response.json()).error || message;
    } catch (_) {
      // not JSON: keep the status text
    }
    throw new Error(`${response.status}: ${message}`);
  }
  return response.json();
}

export function main() {
  return document.getElementById("main");
}

export function show(...nodes) {
  main().replaceChildren(...nodes.flat(Infinity).filter((n) => n));
}

export function failure(error) {
  if (error instanceof Unauthorized) return;
  show(el("h1", { text: "Could not load this page" }), el("p", { class: "error", text: String(error.message || error) }));
}

export function markNav(name) {
  for (const link of document.querySelectorAll("header nav a")) {
    if (link.dataset.nav === name) link.setAttribute("aria-current", "page");
  }
}

export async function showSource() {
  try {
    const info = await getJSON("/ui/api/info");
    document.getElementById("source").textContent = "showing " + info.source;
    return info;
  } catch (error) {
    return null;
  }
}

const TIER_LETTER = { small: "S", medium: "M", large: "L" };

export function tierBadge(tier) {
  const known = tier in TIER_LETTER;
  return el("span", {
    class: `tier tier-${known ? tier : "unknown"}`,
    title: `${tier || "unknown"} tier`,
    text: known ? `${TIER_LETTER[tier]} · ${tier}` : tier || "?",
  });
}

const STATUS_MARK = {
  pending: "○",
  queued: "○",
  running: "◐",
  retrying: "↻",
  succeeded: "✓",
  failed: "✗",
  skipped: "–",
  cancelled: "⊘",
};

export function statusBadge(status) {
  return el("span", {
    class: `status status-${status}`,
    text: `${STATUS_MARK[status] || "?"} ${status}`,
  });
}

export function number(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return Number(value).toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

export function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (value < 10) return `${Number(value).toFixed(2)} s`;
  if (value < 600) return `${Number(value).toFixed(1)} s`;
  return `${(value / 60).toFixed(1)} min`;
}

export function ago(epochSeconds) {
  const delta = Date.now() / 1000 - epochSeconds;
  if (delta < 60) return `${Math.max(0, Math.round(delta))} s ago`;
  if (delta < 3600) return `${Math.round(delta / 60)} min ago`;
  if (delta < 86400) return `${Math.round(delta / 3600)} h ago`;
  return new Date(epochSeconds * 1000).toISOString().slice(0, 16).replace("T", " ");
}

export function pageId() {
  const parts = location.pathname.split("/").filter((p) => p);
  return decodeURIComponent(parts[parts.length - 1] || "");
}

export function ready() {
  // how long the page took, from the start of its navigation to drawn (the load-time tests)
  if (!document.body.dataset.readyMs) document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
}

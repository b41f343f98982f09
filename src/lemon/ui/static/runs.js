// The runs list: newest first, filtered and paged on the server, refreshed every 2 s.
import {
  ago, el, failure, getJSON, markNav, number, ready, seconds, show, showSource, statusBadge,
  tierBadge,
} from "./common.js";

const LIMIT = 50;
const REFRESH_MS = 2000;
const state = { offset: 0, q: "", status: "", tier: "" };
let body = null;
let counter = null;
let pager = null;
let timer = null;

function query() {
  const params = new URLSearchParams({ offset: state.offset, limit: LIMIT });
  for (const key of ["q", "status", "tier"]) if (state[key]) params.set(key, state[key]);
  return params.toString();
}

function row(run) {
  const tiers = Object.entries(run.tiers).map(([tier, count]) => [tierBadge(tier), ` ×${count} `]);
  const verdict = run.correct === null ? null : el("span", {
    class: run.correct ? "status status-succeeded" : "status status-failed",
    text: run.correct ? " ✓ correct" : " ✗ wrong",
  });
  return el(
    "tr",
    { "data-run": run.id },
    el("td", { class: "when", text: ago(run.when), title: new Date(run.when * 1000).toISOString() }),
    el("td", {}, statusBadge(run.status), verdict),
    el("td", { class: "task-cell" },
      el("a", { href: `/ui/runs/${encodeURIComponent(run.id)}`, text: run.task || "(no task recorded)" })),
    el("td", { class: "num", text: run.agents }),
    el("td", { class: "tiers" }, tiers),
    el("td", { class: "num", text: number(run.tokens) }),
    el("td", { class: "num", text: number(run.cost, 1) }),
    el("td", { class: "num", text: seconds(run.wall_s) }),
    el("td", { class: "muted source", text: run.source }),
  );
}

async function refresh() {
  const data = await getJSON(`/ui/api/runs?${query()}`);
  body.replaceChildren(...data.runs.map(row));
  const first = data.total ? data.offset + 1 : 0;
  const last = Math.min(data.offset + data.limit, data.total);
  counter.textContent = `${number(first)}–${number(last)} of ${number(data.total)} runs`;
  pager.newer.disabled = data.offset === 0;
  pager.older.disabled = last >= data.total;
  if (!data.total) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: 9, class: "muted", text: "No runs match." })));
  }
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(async () => {
    if (document.visibilityState === "visible") {
      try {
        await refresh();
      } catch (error) {
        // keep the rows already shown; the next refresh tries again
      }
    }
    schedule();
  }, REFRESH_MS);
}

function filters() {
  let debounce = null;
  const change = () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => {
      state.offset = 0;
      refresh().catch(failure);
    }, 200);
  };
  const text = el("input", {
    id: "q", type: "search", placeholder: "task or file", oninput: (e) => { state.q = e.target.value; change(); },
  });
  const status = el("select", { id: "status", onchange: (e) => { state.status = e.target.value; change(); } },
    ["", "running", "succeeded", "failed", "queued", "cancelled"].map((s) => el("option", { value: s, text: s || "any" })));
  const tier = el("select", { id: "tier", onchange: (e) => { state.tier = e.target.value; change(); } },
    ["", "small", "medium", "large"].map((t) => el("option", { value: t, text: t || "any" })));
  return el("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
    el("span", {}, el("label", { for: "q", text: "Search" }), text),
    el("span", {}, el("label", { for: "status", text: "Status" }), status),
    el("span", {}, el("label", { for: "tier", text: "Uses tier" }), tier));
}

async function start() {
  markNav("runs");
  showSource();
  body = el("tbody");
  counter = el("span", { class: "muted", "aria-live": "polite" });
  const newer = el("button", { type: "button", text: "← Newer", onclick: () => { state.offset = Math.max(0, state.offset - LIMIT); refresh().catch(failure); } });
  const older = el("button", { type: "button", text: "Older →", onclick: () => { state.offset += LIMIT; refresh().catch(failure); } });
  pager = { newer, older };
  const head = el("thead", {}, el("tr", {},
    ["When", "Status", "Task", "Agents", "Tiers", "Tokens", "Cost", "Wall time", "Source"].map((name, i) =>
      el("th", { scope: "col", class: [3, 5, 6, 7].includes(i) ? "num" : null, text: name }))));
  show(
    el("h1", { text: "Runs" }),
    el("p", { class: "muted", text: "Newest first; refreshed every 2 s. Cost is tier-priced tokens (a medium-tier token = 1)." }),
    filters(),
    el("div", { class: "pager" }, newer, older, counter),
    el("table", { class: "list", id: "runs" }, el("caption", { class: "muted", text: "" }), head, body),
  );
  await refresh();
  ready();
  schedule();
}

start().catch(failure);

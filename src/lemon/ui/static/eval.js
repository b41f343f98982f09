// One evaluation: its accuracy (95% interval) and cost, the cost–accuracy plot of the runs
// beside it, and its items, filtered and paged on the server.
import {
  el, failure, getJSON, markNav, number, pageId, ready, show, showSource, svg, tierBadge,
} from "./common.js";

const evalId = pageId();
const LIMIT = 50;
const state = { filter: "all", q: "", offset: 0 };
let itemsBox = null;

const KIND_CLASS = {
  "fixed team": "kind-fixed",
  "learned policy": "kind-policy",
  router: "kind-router",
  "oracle (bound)": "kind-oracle",
  other: "kind-other",
};

function marker(kind, x, y, r) {
  if (kind === "learned policy") {
    return svg("path", { class: "mark", d: `M ${x} ${y - r * 1.3} L ${x + r * 1.3} ${y} L ${x} ${y + r * 1.3} L ${x - r * 1.3} ${y} Z` });
  }
  if (kind === "router") return svg("rect", { class: "mark", x: x - r, y: y - r, width: 2 * r, height: 2 * r });
  if (kind === "oracle (bound)") {
    const points = [];
    for (let i = 0; i < 10; i++) {
      const radius = i % 2 ? r * 0.6 : r * 1.5;
      const angle = (Math.PI / 5) * i - Math.PI / 2;
      points.push(`${x + radius * Math.cos(angle)},${y + radius * Math.sin(angle)}`);
    }
    return svg("polygon", { class: "mark", points: points.join(" ") });
  }
  return svg("circle", { class: "mark", cx: x, cy: y, r });
}

function plot(data) {
  const points = data.points;
  const width = 760;
  const height = 400;
  const m = { left: 60, right: 20, top: 16, bottom: 46 };
  const maxCost = Math.max(...points.map((p) => p.cost), 1) * 1.1;
  const sx = (c) => m.left + (c / maxCost) * (width - m.left - m.right);
  const sy = (a) => height - m.bottom - a * (height - m.top - m.bottom);
  const chart = svg("svg", { width, height, role: "group", "aria-label": "accuracy against cost, one point per run" });
  for (let i = 0; i <= 5; i++) {
    const a = i / 5;
    chart.append(svg("line", { class: "grid", x1: m.left, x2: width - m.right, y1: sy(a), y2: sy(a) }));
    chart.append(svg("text", { x: m.left - 8, y: sy(a) + 4, "text-anchor": "end", text: a.toFixed(1) }));
    const c = (maxCost * i) / 5;
    chart.append(svg("text", { x: sx(c), y: height - m.bottom + 16, "text-anchor": "middle", text: number(c) }));
  }
  chart.append(svg("line", { class: "axis", x1: m.left, x2: width - m.right, y1: sy(0), y2: sy(0) }));
  chart.append(svg("line", { class: "axis", x1: m.left, x2: m.left, y1: sy(0), y2: sy(1) }));
  chart.append(svg("text", { x: (width + m.left) / 2, y: height - 8, "text-anchor": "middle", text: data.cost_axis }));
  chart.append(svg("text", { x: 14, y: (height - m.bottom) / 2, transform: `rotate(-90 14 ${(height - m.bottom) / 2})`, "text-anchor": "middle", text: "accuracy (95% CI)" }));
  const front = points.filter((p) => p.pareto).sort((a, b) => a.cost - b.cost);
  if (front.length > 1) {
    chart.append(svg("polyline", { class: "front", points: front.map((p) => `${sx(p.cost)},${sy(p.accuracy)}`).join(" ") }));
  }
  const tip = el("div", { class: "tooltip", role: "status", hidden: true });
  const showTip = (p, x, y) => {
    tip.hidden = false;
    tip.textContent = `${p.run} — ${p.kind}: accuracy ${number(p.accuracy, 3)} (${number(p.ci95[0], 3)}–${number(p.ci95[1], 3)}), cost ${number(p.cost, 1)}${p.pareto ? ", on the Pareto front" : ""}`;
    tip.style.left = `${x + 12}px`;
    tip.style.top = `${y - 10}px`;
  };
  for (const p of points) {
    const x = sx(p.cost);
    const y = sy(p.accuracy);
    const label = `${p.run}: accuracy ${number(p.accuracy, 3)}, cost ${number(p.cost, 1)} (${p.kind})`;
    const group = svg(p.folder ? "a" : "g", {
      class: `point ${KIND_CLASS[p.kind] || "kind-other"}${p.current ? " current" : ""}`,
      "data-run": p.run,
      href: p.folder ? `/ui/evals/${encodeURIComponent(p.folder)}` : null,
      tabindex: p.folder ? null : "0",
      "aria-label": label,
    });
    group.append(svg("title", { text: label }));
    group.append(svg("line", { class: "ci", x1: x, x2: x, y1: sy(p.ci95[0]), y2: sy(p.ci95[1]) }));
    group.append(marker(p.kind, x, y, p.current ? 7 : 5.5));
    const short = p.run.startsWith(`${data.summary.benchmark}-`) ? p.run.slice(data.summary.benchmark.length + 1) : p.run;
    group.append(svg("text", { class: "point-label", x: x + 9, y: y - 7, text: p.current ? `${short} (this run)` : short }));
    group.addEventListener("mouseenter", () => showTip(p, x, y));
    group.addEventListener("focus", () => showTip(p, x, y));
    group.addEventListener("mouseleave", () => { tip.hidden = true; });
    group.addEventListener("blur", () => { tip.hidden = true; });
    chart.append(group);
  }
  const legend = el("div", { class: "legend" },
    Object.keys(KIND_CLASS).filter((k) => points.some((p) => p.kind === k)).map((kind) => {
      const icon = svg("svg", { width: 18, height: 18, "aria-hidden": "true" }, svg("g", { class: `point ${KIND_CLASS[kind]}` }, marker(kind, 9, 9, 5)));
      return el("span", {}, icon, ` ${kind}`);
    }),
    el("span", { text: "· dashed: Pareto front · bars: 95% interval · hover or focus a point for its run" }));
  return el("div", { class: "plot", id: "plot" }, legend, chart, tip);
}

function itemRow(item) {
  const verdict = item.status !== "succeeded" && item.status !== "spec_only"
    ? el("span", { class: "status status-failed", text: `✗ ${item.status}` })
    : el("span", { class: item.correct ? "status status-succeeded" : "status status-failed", text: item.correct ? "✓ correct" : "✗ wrong" });
  return el("tr", { "data-item": item.id },
    el("td", { text: item.id }),
    el("td", {}, verdict),
    el("td", { text: item.extracted === null || item.extracted === undefined ? "–" : String(item.extracted) }),
    el("td", {}, el("details", {}, el("summary", { text: (item.answer || item.error || "(no answer)").slice(0, 90) }),
      el("pre", { text: item.answer || item.error || "" }),
      el("pre", { text: item.spec }))),
    el("td", { class: "num", text: number(item.tokens) }),
    el("td", { class: "num", text: number(item.priced_tokens, 1) }),
    el("td", { class: "num", text: number(item.wall_s, 1) }));
}

async function loadItems(given = null) {
  const params = new URLSearchParams({ filter: state.filter, q: state.q, offset: state.offset, limit: LIMIT });
  const data = given || await getJSON(`/ui/api/evals/${encodeURIComponent(evalId)}?${params}`);
  const items = data.items;
  const first = items.matched ? items.offset + 1 : 0;
  const last = Math.min(items.offset + items.limit, items.matched);
  const newer = el("button", { type: "button", text: "← Previous", disabled: items.offset === 0, onclick: () => { state.offset = Math.max(0, state.offset - LIMIT); loadItems().catch(failure); } });
  const older = el("button", { type: "button", text: "Next →", disabled: last >= items.matched, onclick: () => { state.offset += LIMIT; loadItems().catch(failure); } });
  const head = el("thead", {}, el("tr", {}, ["Item", "Verdict", "Read", "Answer and spec", "Tokens", "Priced", "Seconds"]
    .map((name, i) => el("th", { scope: "col", class: i >= 4 ? "num" : null, text: name }))));
  itemsBox.replaceChildren(
    el("div", { class: "pager" }, newer, older,
      el("span", { class: "muted", "aria-live": "polite", text: `${number(first)}–${number(last)} of ${number(items.matched)} items (${number(items.total)} in the run)` })),
    el("table", { class: "list", id: "items" }, head, el("tbody", {}, items.page.map(itemRow))));
  return data;
}

function filters() {
  let debounce = null;
  const reload = () => {
    state.offset = 0;
    loadItems().catch(failure);
  };
  const select = el("select", { id: "filter", onchange: (e) => { state.filter = e.target.value; reload(); } },
    ["all", "correct", "wrong", "failed"].map((f) => el("option", { value: f, text: f })));
  const search = el("input", { id: "q", type: "search", placeholder: "item id or answer", oninput: (e) => {
    state.q = e.target.value;
    clearTimeout(debounce);
    debounce = setTimeout(reload, 200);
  } });
  return el("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
    el("span", {}, el("label", { for: "filter", text: "Show" }), select),
    el("span", {}, el("label", { for: "q", text: "Search" }), search));
}

async function start() {
  markNav("evals");
  showSource();
  const params = new URLSearchParams({ limit: LIMIT });
  const data = await getJSON(`/ui/api/evals/${encodeURIComponent(evalId)}?${params}`);
  const s = data.summary;
  itemsBox = el("div", { id: "items-box" });
  const models = Object.entries(s.models || {}).map(([tier, model]) => el("li", {}, tierBadge(tier), ` ${model}`));
  const acc = s.accuracy === null || s.accuracy === undefined ? "–"
    : `${number(s.accuracy, 3)} (95% CI ${number(s.ci95[0], 3)}–${number(s.ci95[1], 3)}), ${number(s.correct)} of ${number(s.n)} items`;
  show(
    el("p", {}, el("a", { href: "/ui/evals", text: "← all evaluations" })),
    el("h1", { text: `Evaluation ${s.run}` }),
    el("dl", { class: "facts", id: "summary" },
      el("dt", { text: "benchmark" }), el("dd", { text: `${s.benchmark || "–"}${s.split ? ` (${s.split})` : ""}` }),
      el("dt", { text: "method" }), el("dd", { text: `${s.method} — ${s.kind}` }),
      el("dt", { text: "accuracy" }), el("dd", { id: "accuracy", text: acc }),
      el("dt", { text: "cost per item" }), el("dd", { text: `${number(s.mean_priced_tokens, 1)} tier-priced worker tokens${s.mean_full_cost ? `; ${number(s.mean_full_cost, 1)} with the policy's own tokens` : ""} (${number(s.mean_tokens, 0)} raw tokens)` }),
      el("dt", { text: "failed runs" }), el("dd", { text: number(s.failed_runs) }),
      el("dt", { text: "profile" }), el("dd", {}, s.profile || "–", models.length ? el("ul", {}, models) : null),
      el("dt", { text: "folder" }), el("dd", { text: data.label })),
    s.partial ? el("p", { class: "muted", text: "No summary.json yet (still running?): summarized from its items." }) : null,
    el("h2", { text: "Cost and accuracy beside the other runs" }),
    el("p", { class: "muted", text: `The eval run folders next to this one on ${s.benchmark || "the same benchmark"}.` }),
    plot(data),
    el("h2", { text: "Items" }),
    filters(),
    itemsBox,
  );
  await loadItems(data);
  ready();
}

start().catch(failure);

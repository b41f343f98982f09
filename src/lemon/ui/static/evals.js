// The evaluations found: one line per eval run folder, grouped by benchmark.
import { el, failure, getJSON, markNav, number, ready, show, showSource } from "./common.js";

function ci(value) {
  return value ? `${number(value[0], 3)}–${number(value[1], 3)}` : "–";
}

async function start() {
  markNav("evals");
  showSource();
  const data = await getJSON("/ui/api/evals");
  const rows = data.evals.map((e) => el("tr", {},
    el("td", {}, el("a", { href: `/ui/evals/${encodeURIComponent(e.id)}`, text: e.label })),
    el("td", { text: e.benchmark || "–" }),
    el("td", { text: e.kind || "–" }),
    el("td", { text: e.method || "–" }),
    el("td", { class: "num", text: number(e.n) }),
    el("td", { class: "num", text: e.accuracy === undefined || e.accuracy === null ? "–" : number(e.accuracy, 3) }),
    el("td", { class: "num", text: ci(e.ci95) }),
    el("td", { class: "num", text: number(e.cost, 1) })));
  const head = el("thead", {}, el("tr", {}, ["Run folder", "Benchmark", "Kind", "Method", "Items", "Accuracy", "95% CI", "Cost / item"]
    .map((name, i) => el("th", { scope: "col", class: i >= 4 ? "num" : null, text: name }))));
  show(
    el("h1", { text: "Evaluations" }),
    el("p", { class: "muted", text: "lemon eval run folders; cost is mean tier-priced worker tokens per item (a medium-tier token = 1)." }),
    rows.length ? el("table", { class: "list", id: "evals" }, head, el("tbody", {}, rows))
      : el("p", { text: "No evaluation folders here (lemon ui DIR shows the items.jsonl folders under DIR)." }),
  );
  ready();
}

start().catch(failure);

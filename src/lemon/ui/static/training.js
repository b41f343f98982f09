// One training run: reward, validity, span share and distinct worker calls per step, and for a
// sampled spec its text with the counterfactual credit drawn over the tokens it landed on.
import { el, failure, getJSON, markNav, number, pageId, ready, show, showSource, svg } from "./common.js";

const trainingId = pageId();
const SHOWN = ["reward", "validity", "cf/span_share", "worker_calls", "cf/delta_mean", "worker_tokens"];

function chart(key, label, points) {
  if (!points.length) {
    return el("div", { class: "chart panel", "data-series": key },
      el("h3", { text: label }), el("p", { class: "muted", text: "not logged by this run" }));
  }
  const width = 330;
  const height = 150;
  const m = { left: 58, right: 10, top: 10, bottom: 24 };
  const xs = points.map((p) => p[0]);
  const ys = points.map((p) => p[1]);
  let lo = Math.min(...ys);
  let hi = Math.max(...ys);
  if (hi - lo < 1e-9) {
    lo -= 0.5;
    hi += 0.5;
  }
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs, x0 + 1);
  const sx = (x) => m.left + ((x - x0) / (x1 - x0)) * (width - m.left - m.right);
  const sy = (y) => height - m.bottom - ((y - lo) / (hi - lo)) * (height - m.top - m.bottom);
  const box = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": `${label} per step: from ${number(ys[0], 3)} to ${number(ys[ys.length - 1], 3)}` });
  box.append(svg("line", { class: "axis", x1: m.left, x2: width - m.right, y1: height - m.bottom, y2: height - m.bottom }));
  box.append(svg("line", { class: "axis", x1: m.left, x2: m.left, y1: m.top, y2: height - m.bottom }));
  for (const value of [lo, (lo + hi) / 2, hi]) {
    const digits = hi - lo < 10 && Math.max(Math.abs(hi), Math.abs(lo)) < 100 ? 2 : 0;
    box.append(svg("text", { x: m.left - 5, y: sy(value) + 4, "text-anchor": "end", text: number(value, digits) }));
  }
  box.append(svg("text", { x: sx(x0), y: height - 6, "text-anchor": "start", text: `step ${x0}` }));
  box.append(svg("text", { x: sx(x1), y: height - 6, "text-anchor": "end", text: `step ${x1}` }));
  box.append(svg("polyline", { class: "series", points: points.map((p) => `${sx(p[0])},${sy(p[1])}`).join(" ") }));
  for (const [x, y] of points) {
    box.append(svg("circle", { class: "dot", cx: sx(x), cy: sy(y), r: 2.5 }, svg("title", { text: `step ${x}: ${number(y, 4)}` })));
  }
  return el("div", { class: "chart panel", "data-series": key }, el("h3", { text: label }), box);
}

function sign(delta) {
  if (delta > 1e-12) return "pos";
  if (delta < -1e-12) return "neg";
  return "zero";
}

function signed(delta) {
  return `${delta > 0 ? "+" : delta < 0 ? "−" : "±"}${Math.abs(delta).toFixed(3)}`;
}

// The text cut at every span boundary; each piece lists the credits covering it.
function drawn(sample) {
  const cuts = new Set([0, sample.completion.length]);
  sample.credit.forEach((c) => c.spans.forEach(([s, e]) => { cuts.add(s); cuts.add(e); }));
  const points = [...cuts].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const [s, e] = [points[i], points[i + 1]];
    const text = sample.completion.slice(s, e);
    const covering = sample.credit.filter((c) => c.spans.some(([a, b]) => a <= s && e <= b));
    if (!covering.length) {
      out.push(text);
      continue;
    }
    const total = covering.reduce((sum, c) => sum + c.delta, 0);
    const label = covering.map((c) => `${c.kind}${c.agent ? ` (${c.agent})` : ""}: Δc ${signed(c.delta)}`).join("; ");
    // the mark and its label stay on the line: surrounding whitespace (a newline a token
    // carried) goes outside them
    const body = text.trim();
    const head = text.slice(0, text.indexOf(body));
    const tail = text.slice(head.length + body.length);
    out.push(head);
    if (body) out.push(el("mark", { class: `credit ${sign(total)}`, title: label, "data-kind": covering.map((c) => c.kind).join(" "), "data-delta": total }, body));
    const ends = covering.filter((c) => c.spans.some(([, b]) => b === e));
    for (const c of ends) {
      out.push(el("span", { class: `credit-tag ${sign(c.delta)}`, text: `${signed(c.delta)} ${c.kind}` }));
    }
    out.push(tail);
  }
  return out;
}

function creditView(data) {
  const box = el("section", { id: "credit" });
  if (!data.credit.length) {
    box.append(el("p", { class: "muted", text: data.credit_file
      ? "The credit record has no samples."
      : "This run has no credit record (credit.jsonl): GRPO writes one beside its metrics; runs from before it, and SFT, have none." }));
    return box;
  }
  const steps = data.credit;
  const stepSelect = el("select", { id: "step" }, steps.map((s) => el("option", { value: s.step, text: `step ${s.step} (${s.credited} of ${s.samples.length} specs credited)` })));
  const sampleBox = el("div", { class: "samples", role: "group", "aria-label": "sampled specs" });
  const textBox = el("pre", { class: "spec-text", id: "credit-text" });
  const listBox = el("ul", { id: "credit-list" });
  const pick = (step, index) => {
    const sample = step.samples[index];
    for (const b of sampleBox.querySelectorAll("button")) b.setAttribute("aria-pressed", String(Number(b.dataset.index) === index));
    textBox.replaceChildren(...drawn(sample));
    listBox.replaceChildren(...(sample.credit.length ? sample.credit.map((c) => el("li", {},
      el("span", { class: `credit-tag ${sign(c.delta)}`, text: signed(c.delta) }),
      ` ${c.kind} on ${c.agent || "(agent not found)"}: Δc = ${c.delta.toFixed(4)} on ${c.spans.map(([s, e]) => JSON.stringify(sample.completion.slice(s, e))).join(", ") || "no characters"}`))
      : [el("li", { class: "muted", text: "no credit on this spec (invalid, or no field was mutated)" })]));
  };
  const chooseStep = () => {
    const step = steps.find((s) => String(s.step) === stepSelect.value) || steps[0];
    sampleBox.replaceChildren(...step.samples.map((sample, index) => el("button", {
      type: "button", "data-index": index, "aria-pressed": "false",
      text: `spec ${index + 1}: reward ${sample.reward === null ? "–" : sample.reward.toFixed(3)}, ${sample.credit.length} credit${sample.credit.length === 1 ? "" : "s"}`,
      onclick: () => pick(step, index),
    })));
    const first = step.samples.findIndex((s) => s.credit.length);
    pick(step, first < 0 ? 0 : first);
  };
  stepSelect.addEventListener("change", chooseStep);
  const last = [...steps].reverse().find((s) => s.credited) || steps[steps.length - 1];
  stepSelect.value = String(last.step);
  box.append(
    el("p", { class: "legend" },
      el("mark", { class: "credit pos", text: "solid, +" }), " Δc > 0: the field's value did better than its alternatives (reinforced) · ",
      el("mark", { class: "credit neg", text: "dashed, −" }), " Δc < 0: it did worse (discouraged) · the label after a span names the mutated field's kind"),
    el("div", { class: "row" }, el("label", { for: "step", text: "Step" }), stepSelect),
    sampleBox, textBox, listBox);
  queueMicrotask(chooseStep);
  return box;
}

async function start() {
  markNav("trainings");
  showSource();
  const data = await getJSON(`/ui/api/training/${encodeURIComponent(trainingId)}`);
  show(
    el("p", {}, el("a", { href: "/ui/training", text: "← all training runs" })),
    el("h1", { text: `Training run ${data.label}` }),
    el("p", { class: "muted", text: `${data.steps} logged steps from ${data.metrics_file}${data.credit_file ? `; credit from ${data.credit_file}` : ""}.` }),
    el("div", { class: "charts", id: "charts" }, SHOWN.map((key) => chart(key, data.series_labels[key], data.series[key]))),
    el("h2", { text: "Where the counterfactual credit landed" }),
    el("p", { class: "muted", text: "One sampled spec at a time: each mutated field's Δc = R(spec) − R(mutant) was added to the advantages of exactly the highlighted tokens." }),
    creditView(data),
  );
  ready();
}

start().catch(failure);

// One run: the DAG by levels (live), the timeline with its critical path, each agent's prompt
// and output, the spec, the answer and verdict, and the cost beside one large agent's.
import {
  el, failure, getJSON, markNav, number, pageId, ready, seconds, show, showSource, statusBadge,
  svg, tierBadge,
} from "./common.js";

const runId = pageId();
let view = null;
let agents = new Map();
let stream = null;
let loadedAt = 0;
let pending = false;

function layout(data) {
  const compact = data.agents.length > 24;
  const size = compact
    ? { w: 184, h: 84, gapX: 56, gapY: 18, rows: 12 }
    : { w: 230, h: 128, gapX: 72, gapY: 22, rows: 10 };
  const pad = 22;
  const top = 34;
  const places = new Map();
  const labels = [];
  let x = pad;
  let height = 0;
  data.levels.forEach((names, level) => {
    const chunks = Math.max(1, Math.ceil(names.length / size.rows));
    labels.push({ level, x });
    for (let c = 0; c < chunks; c++) {
      const column = names.slice(c * size.rows, (c + 1) * size.rows);
      column.forEach((name, row) => {
        const y = top + row * (size.h + size.gapY);
        places.set(name, { x, y, row });
        height = Math.max(height, y + size.h);
      });
      x += size.w + (c === chunks - 1 ? size.gapX : 24);
    }
  });
  return {
    places, labels, size, compact, top,
    width: Math.max(x - size.gapX + pad, 2 * pad), height: Math.max(height + pad, top + pad),
  };
}

// An edge from a dependency's right side to its dependant's left side. Next to each other: one
// curve. Further apart: along the gaps, never across a node (out into the column gap, along the
// row gap above the dependant, down the column gap before it).
function edgePath(a, b, size, lane) {
  const x1 = a.x + size.w;
  const y1 = a.y + size.h / 2;
  const x2 = b.x;
  const y2 = b.y + size.h / 2;
  if (x2 - x1 <= size.gapX + 1) {
    const dx = Math.max(24, (x2 - x1) / 2);
    return `M ${x1} ${y1} C ${x1 + dx} ${y1}, ${x2 - dx} ${y2}, ${x2} ${y2}`;
  }
  const shift = ((lane % 5) - 2) * 3;
  const gx1 = x1 + size.gapX / 2 + shift;
  const gx2 = x2 - size.gapX / 2 + shift;
  const yl = b.y - size.gapY / 2 + shift;
  const r = 6;
  const up = yl < y1 ? -1 : 1;
  const down = y2 > yl ? 1 : -1;
  return [
    `M ${x1} ${y1}`,
    `L ${gx1 - r} ${y1} Q ${gx1} ${y1} ${gx1} ${y1 + up * r}`,
    `L ${gx1} ${yl - up * r} Q ${gx1} ${yl} ${gx1 + r} ${yl}`,
    `L ${gx2 - r} ${yl} Q ${gx2} ${yl} ${gx2} ${yl + down * r}`,
    `L ${gx2} ${y2 - down * r} Q ${gx2} ${y2} ${gx2 + r} ${y2}`,
    `L ${x2} ${y2}`,
  ].join(" ");
}

function nodeLines(agent, compact) {
  const tokens = agent.prompt_tokens + agent.completion_tokens;
  const done = !["pending", "running", "retrying"].includes(agent.status);
  return [
    el("span", { class: "name", text: agent.name }),
    el("span", { class: "line" }, tierBadge(agent.capacity), " ", agent.role || "(role not recorded)"),
    el("span", { class: "line" }, statusBadge(agent.status)),
    el("span", { class: "line", text: done ? `${number(tokens)} tokens · cost ${number(agent.cost, 1)} tier-priced tokens` : "tokens when done" }),
    compact ? null : el("span", { class: "duties", text: agent.duties || "(base role's duties)" }),
  ];
}

function updateNode(agent) {
  const node = document.querySelector(`.node[data-agent="${CSS.escape(agent.name)}"]`);
  if (!node) return;
  node.dataset.status = agent.status;
  node.setAttribute("aria-label", `${agent.name}: ${agent.role}, ${agent.capacity} tier, ${agent.status}`);
  node.replaceChildren(...nodeLines(agent, node.classList.contains("compact")).filter((n) => n));
}

function select(name) {
  for (const node of document.querySelectorAll(".node.selected")) node.classList.remove("selected");
  const node = document.querySelector(`.node[data-agent="${CSS.escape(name)}"]`);
  if (node) node.classList.add("selected");
  const details = document.getElementById(`agent-${name}`);
  if (details) {
    details.open = true;
    details.scrollIntoView({ block: "nearest" });
    details.querySelector("summary").focus({ preventScroll: true });
  }
}

function dag(data) {
  if (!data.agents.length) {
    return el("div", { class: "dag-wrap", id: "dag" }, el("p", { class: "muted", text: "Waiting for the spec: the team appears when the run starts." }));
  }
  const { places, labels, size, compact, width, height } = layout(data);
  const critical = new Set(data.critical_path);
  const criticalEdges = new Set();
  for (let i = 1; i < data.critical_path.length; i++) {
    criticalEdges.add(`${data.critical_path[i - 1]}\u0000${data.critical_path[i]}`);
  }
  const edges = svg("svg", { class: "edges", width, height, "aria-hidden": "true" },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))));
  data.edges.forEach(([from, to], lane) => {
    const a = places.get(from);
    const b = places.get(to);
    if (!a || !b) return;
    const isCritical = criticalEdges.has(`${from}\u0000${to}`);
    edges.append(svg("path", {
      class: isCritical ? "edge critical" : "edge",
      "data-from": from,
      "data-to": to,
      "marker-end": "url(#arrow)",
      d: edgePath(a, b, size, lane),
    }));
  });
  const box = el("div", { class: "dag", style: null });
  box.style.width = `${width}px`;
  box.style.height = `${height}px`;
  box.append(edges);
  for (const { level, x } of labels) {
    const label = el("span", { class: "level-label", text: `level ${level + 1}` });
    label.style.left = `${x}px`;
    label.style.top = "3px";
    box.append(label);
  }
  for (const agent of data.agents) {
    const place = places.get(agent.name);
    if (!place) continue;
    const node = el("button", {
      type: "button",
      class: `node tier-${agent.capacity || "unknown"}${critical.has(agent.name) ? " critical" : ""}${compact ? " compact" : ""}`,
      "data-agent": agent.name,
      "data-status": agent.status,
      onclick: () => select(agent.name),
    });
    node.style.left = `${place.x}px`;
    node.style.top = `${place.y}px`;
    node.style.width = `${size.w}px`;
    node.style.height = `${size.h}px`;
    box.append(node);
    agents.set(agent.name, agent);
  }
  const wrap = el("div", { class: "dag-wrap", id: "dag", tabindex: null }, box);
  queueMicrotask(() => data.agents.forEach(updateNode));
  return wrap;
}

function elapsed() {
  if (!view) return 0;
  if (view.over) return view.wall_s || view.elapsed_s;
  return view.elapsed_s + (performance.now() - loadedAt) / 1000;
}

function timeline() {
  const list = [...agents.values()].filter((a) => a.started !== null || a.status !== "pending");
  list.sort((a, b) => (a.started ?? 1e12) - (b.started ?? 1e12) || a.name.localeCompare(b.name));
  const end = Math.max(elapsed(), ...list.map((a) => a.finished ?? 0), 0.001);
  const left = 170;
  const width = 960;
  const rowH = 20;
  const height = 34 + list.length * rowH;
  const scale = (t) => left + (t / end) * (width - left - 12);
  const critical = new Set(view.critical_path);
  const chart = svg("svg", { width, height, role: "img", "aria-label": "agent timeline" });
  for (let i = 0; i <= 5; i++) {
    const t = (end * i) / 5;
    const x = scale(t);
    chart.append(svg("line", { class: "grid", x1: x, x2: x, y1: 14, y2: height - 4 }));
    chart.append(svg("text", { x, y: 11, "text-anchor": "middle", text: seconds(t) }));
  }
  list.forEach((agent, i) => {
    const y = 20 + i * rowH;
    const start = agent.started ?? 0;
    const stop = agent.finished ?? end;
    const onPath = critical.has(agent.name);
    chart.append(svg("text", { x: left - 6, y: y + 13, "text-anchor": "end", text: `${onPath ? "★ " : ""}${agent.name}` }));
    chart.append(svg("rect", {
      class: `bar tier-${agent.capacity}${onPath ? " critical" : ""}`,
      "data-agent": agent.name,
      x: scale(start),
      y: y + 2,
      width: Math.max(2, scale(stop) - scale(start)),
      height: rowH - 6,
    }, svg("title", { text: `${agent.name}: ${seconds(start)} → ${agent.finished === null ? "running" : seconds(stop)} (${agent.status})` })));
  });
  let peak = 0;
  const marks = [];
  for (const a of list) {
    if (a.started === null) continue;
    marks.push([a.started, 1], [a.finished ?? end, -1]);
  }
  marks.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let running = 0;
  for (const [, step] of marks) {
    running += step;
    peak = Math.max(peak, running);
  }
  const path = view.critical_path.length
    ? `critical path (★, bold): ${view.critical_path.join(" → ")}`
    : "no critical path yet";
  return el("div", { class: "timeline", id: "timeline" },
    el("p", { class: "muted", text: `Up to ${peak} agent${peak === 1 ? "" : "s"} ran at once; ${path}. Wall time ${seconds(end)}.` }),
    el("div", { class: "dag-wrap" }, chart));
}

function costs(data) {
  const large = data.one_large.cost;
  const top = Math.max(data.cost, large, 1);
  const bar = (value, cls) => {
    const node = el("div", { class: cls });
    node.style.width = `${Math.max(0.5, (100 * value) / top)}%`;
    return node;
  };
  const ratio = large > 0 ? ` (${(data.cost / large).toFixed(2)}× one large agent)` : "";
  return el("div", { id: "cost" },
    el("div", { class: "costs" },
      el("span", { text: "this team" }), bar(data.cost, "costbar"), el("span", { class: "num", text: `${number(data.cost, 1)} tier-priced tokens${ratio}` }),
      el("span", { text: "one large agent" }), bar(large, "costbar reference"), el("span", { class: "num", text: number(large, 1) })),
    el("p", { class: "muted", text:
      `Tier-priced tokens: each agent's tokens × its tier's price (small ${data.tier_prices.small}, medium ${data.tier_prices.medium}, large ${data.tier_prices.large}). ` +
      `One large agent: ${number(data.one_large.prompt_tokens)} prompt + ${number(data.one_large.completion_tokens)} completion tokens at the large price — ` +
      "the run's smallest prompt among agents that read only the task, and the output agent's answer length; an estimate from this run's sizes, not a run." }));
}

function budget(data) {
  const b = data.budget;
  if (!b) return null;
  const limits = b.limits
    ? [["tokens", b.limits.tokens, "worker tokens"], ["cost", b.limits.cost, "tier-priced tokens"], ["wall", b.limits.wall_s, "s"]]
      .filter(([, v]) => v !== null && v !== undefined).map(([k, v, u]) => `${k} ${number(v, k === "tokens" ? 0 : 1)} ${u}`).join(", ")
    : "none of its own";
  const stopper = { run: "its own budget", shared: "its namespace's budget" }[b.scope] || "";
  return el("section", { id: "budget" },
    el("h2", { text: "Budget" }),
    el("dl", { class: "facts" },
      el("dt", { text: "budget" }), el("dd", { text: limits }),
      b.shared ? [el("dt", { text: "namespace" }), el("dd", { text: b.shared })] : null,
      el("dt", { text: "spent" }), el("dd", { text: `${number(b.spent.tokens)} worker tokens, ${number(b.spent.cost, 1)} tier-priced tokens, ${seconds(b.spent.wall_s)}` }),
      b.reason ? [el("dt", { text: "stopped" }), el("dd", { class: "error", text: `${stopper ? stopper + ": " : ""}${b.reason}` })] : null));
}

function agentDetails(agent) {
  const tokens = agent.prompt_tokens + agent.completion_tokens;
  return el("details", { class: "agent", id: `agent-${agent.name}` },
    el("summary", {}, el("strong", { text: agent.name }), " ", tierBadge(agent.capacity), " ",
      agent.role, " · ", statusBadge(agent.status), ` · ${number(tokens)} tokens · cost ${number(agent.cost, 1)} tier-priced tokens`),
    el("dl", { class: "facts" },
      el("dt", { text: "duties" }), el("dd", { text: agent.duties || "(the base role's)" }),
      el("dt", { text: "reads" }), el("dd", { text: agent.depends_on.length ? agent.depends_on.join(", ") : "only the task" }),
      el("dt", { text: "model" }), el("dd", { text: agent.model || "–" }),
      el("dt", { text: "time" }), el("dd", { text: agent.started === null ? "did not start" : `${seconds(agent.started)} → ${agent.finished === null ? "…" : seconds(agent.finished)} (${seconds(agent.latency_s)} in the model, ${agent.attempts} attempt${agent.attempts === 1 ? "" : "s"}${agent.reused ? ", reused" : ""})` }),
      agent.error ? [el("dt", { text: "error" }), el("dd", { class: "error", text: agent.error })] : null),
    el("h3", { text: "Prompt" }), el("pre", { class: "prompt", text: agent.prompt || "(not recorded)" }),
    el("h3", { text: "Output" }), el("pre", { class: "output", text: agent.output || (agent.status === "succeeded" ? "(empty)" : "(none yet)") }));
}

function policy(data) {
  const p = data.policy;
  if (!p.origin && !p.attempts.length) return null;
  return el("section", {},
    el("h2", { text: "Where the spec came from" }),
    el("p", { text: p.origin + (p.fell_back ? " (the learned policy fell back to the template)" : "") }),
    p.attempts.length ? el("ul", {}, p.attempts.map((a) =>
      el("li", { text: `attempt ${a.attempt}: ${a.valid ? "valid spec" : a.errors.join("; ")} (${a.tokens} tokens)` }))) : null);
}

function render(data) {
  view = data;
  loadedAt = performance.now();
  agents = new Map();
  const verdict = data.verdict
    ? el("p", { id: "verdict", class: data.verdict.correct ? "status status-succeeded" : "status status-failed",
      text: `${data.verdict.correct ? "✓ correct" : "✗ wrong"}: item ${data.verdict.item}, expected ${data.verdict.expected}, read ${data.verdict.extracted || "nothing"}` })
    : null;
  const truncated = data.truncated ? el("p", { class: "error", text: `${data.truncated} events were left out of this trace.` }) : null;
  const tiers = data.agents.reduce((m, a) => ({ ...m, [a.capacity]: (m[a.capacity] || 0) + 1 }), {});
  show(
    el("p", {}, el("a", { href: "/ui/", text: "← all runs" })),
    el("h1", {}, "Run ", statusBadge(data.status)),
    el("p", { class: "task", id: "task", text: data.task || "(no task recorded)" }),
    el("dl", { class: "facts" },
      el("dt", { text: "team" }), el("dd", {}, `${data.agents.length} agents, ${data.edges.length} dependencies: `,
        Object.entries(tiers).map(([t, n]) => [tierBadge(t), ` ×${n} `])),
      el("dt", { text: "profile" }), el("dd", { text: data.profile || "–" }),
      el("dt", { text: "tokens" }), el("dd", { text: number(data.tokens) }),
      el("dt", { text: "wall time" }), el("dd", { text: data.wall_s === null ? "running" : seconds(data.wall_s) }),
      el("dt", { text: "source" }), el("dd", { text: data.source })),
    truncated,
    el("h2", { text: "Team" }),
    el("div", { class: "legend" },
      "Tiers:", tierBadge("small"), tierBadge("medium"), tierBadge("large"),
      "· Status:", ["pending", "running", "succeeded", "failed", "skipped"].map(statusBadge),
      "· ★ bold: critical path · select an agent for its prompt and output"),
    dag(data),
    el("h2", { text: "Timeline" }),
    timeline(),
    el("h2", { text: "Cost" }),
    costs(data),
    budget(data),
    el("h2", { text: "Answer" }),
    verdict,
    el("pre", { id: "answer", text: data.answer ?? (data.error ? `failed: ${data.error}` : "(not finished)") }),
    el("h2", { text: "Agents" }),
    el("div", { id: "agents" }, data.agents.map(agentDetails)),
    policy(data),
    el("h2", { text: "Spec" }),
    el("pre", { id: "spec", text: data.spec || "(this trace does not record the spec)" }),
  );
}

function refreshLive() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    const old = document.getElementById("timeline");
    if (old) old.replaceWith(timeline());
    for (const agent of agents.values()) {
      const details = document.getElementById(`agent-${agent.name}`);
      if (details && !details.open) details.replaceWith(agentDetails(agent));
    }
  });
}

function apply(event) {
  const t = event.t - view.t0;
  view.elapsed_s = Math.max(view.elapsed_s, t);
  loadedAt = performance.now();
  const agent = agents.get(event.agent);
  if (event.event === "run_start" || (event.agent && !agent)) {
    reload();
    return;
  }
  if (event.event === "agent_start") {
    Object.assign(agent, { status: "running", started: t, model: event.model, prompt: event.prompt, reused: event.reused });
  } else if (event.event === "agent_retry") {
    Object.assign(agent, { status: "retrying", attempts: event.attempt, error: event.error });
  } else if (event.event === "agent_finish") {
    const price = view.tier_prices[agent.capacity] ?? 1;
    Object.assign(agent, {
      status: event.status,
      finished: t,
      prompt_tokens: event.prompt_tokens,
      completion_tokens: event.completion_tokens,
      latency_s: event.latency_s,
      attempts: event.attempts,
      error: event.error,
      output: event.output,
      cost: price * (event.prompt_tokens + event.completion_tokens),
    });
  } else {
    return;
  }
  updateNode(agent);
  refreshLive();
}

function follow(data) {
  if (stream) stream.close();
  stream = null;
  if (data.over) return;
  stream = new EventSource(`/ui/api/runs/${encodeURIComponent(runId)}/events?from=${data.events}`);
  stream.onmessage = (message) => apply(JSON.parse(message.data));
  stream.addEventListener("end", () => {
    stream.close();
    stream = null;
    reload();
  });
}

async function reload() {
  if (stream) {
    stream.close();
    stream = null;
  }
  const data = await getJSON(`/ui/api/runs/${encodeURIComponent(runId)}`);
  const selected = document.querySelector(".node.selected")?.dataset.agent;
  render(data);
  if (selected) select(selected);
  follow(data);
  ready();
}

markNav("runs");
showSource();
reload().catch(failure);
setInterval(() => {
  if (view && !view.over && document.visibilityState === "visible") refreshLive();
}, 1000);

// The training runs found: metrics files, and whether GRPO's credit record is beside them.
import { el, failure, getJSON, markNav, ready, show, showSource } from "./common.js";

async function start() {
  markNav("trainings");
  showSource();
  const data = await getJSON("/ui/api/training");
  const rows = data.trainings.map((t) => el("li", {},
    el("a", { href: `/ui/training/${encodeURIComponent(t.id)}`, text: t.label }),
    t.credit ? " · counterfactual credit recorded" : ""));
  show(
    el("h1", { text: "Training runs" }),
    el("p", { class: "muted", text: "lemon train metrics files (one line per logged step)." }),
    rows.length ? el("ul", { id: "trainings" }, rows) : el("p", { text: "No training metrics files here." }),
  );
  ready();
}

start().catch(failure);

// subconscious ui: reads the JSON API of the server that served this page and draws it.
// Everything the agent or a state file wrote is put on the page as text (textContent), never as HTML.
"use strict";

const TOKEN = document.querySelector('meta[name="subconscious-token"]').content;
const state = { editing: false, data: {} };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = String(v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (isNaN(d)) return String(iso);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function hostText(id, name) {
  if (!id) return "—";
  return name && name !== id ? `${name} (${id})` : id;
}

function table(heads, rows, cls) {
  return el("table", { class: cls || null },
    el("thead", {}, el("tr", {}, heads.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows));
}

function fill(name, ...nodes) {
  const box = document.querySelector(`[data-section="${name}"]`);
  box.replaceChildren(...nodes.flat().filter(Boolean));
}

async function api(path, init) {
  const headers = Object.assign({ "X-Subconscious-Token": TOKEN }, (init && init.headers) || {});
  const resp = await fetch(path, Object.assign({}, init || {}, { headers, cache: "no-store" }));
  let body;
  try { body = await resp.json(); } catch (e) { body = { ok: false, error: `HTTP ${resp.status}` }; }
  if (!resp.ok || !body.ok) throw new Error(body.error || `HTTP ${resp.status}`);
  return body.data;
}

// ------------------------------------------------------------------ health

function renderHealth(h) {
  const findings = h.findings || [];
  const problems = findings.filter((f) => f.severity === "error" || f.severity === "warning");
  const summary = el("p", { class: problems.length ? "verdict bad" : "verdict good", id: "health-verdict",
    text: problems.length ? `${problems.length} problem${problems.length === 1 ? "" : "s"} in the shared home`
                          : "no problems found in the shared home" });
  const c = h.counts || {};
  const facts = el("dl", { class: "facts" },
    el("dt", { text: "home" }), el("dd", { text: h.home || "—" }),
    el("dt", { text: "this machine" }), el("dd", { text: h.host || "—" }),
    el("dt", { text: "found" }), el("dd", { text: `${c.sessions || 0} sessions, ${c.conversations || 0} conversations, ${c.hosts || 0} machines` }),
    el("dt", { text: "encryption" }), el("dd", { id: "encryption", text: encryptionText(h.encryption) }));

  const engines = Object.entries(h.conflict_copies_by_engine || {});
  const conflicts = findings.filter((f) => f.kind === "conflict-copy");
  const conflictBox = el("div", { class: "card span2" }, el("h3", { text: "Conflict copies" }),
    conflicts.length === 0 ? el("p", { class: "muted", text: "none" }) :
      [el("p", { text: engines.map(([e, n]) => `${e}: ${n}`).join(", ") }),
       table(["engine", "file", "what"], conflicts.map((f) => el("tr", { class: "conflict" },
         el("td", { text: f.engine || "?" }), el("td", { class: "path", text: f.path }),
         el("td", { text: f.message }))), "conflicts")]);

  const skew = (h.clocks || []);
  const skewBox = el("div", { class: "card" }, el("h3", { text: "Clocks per machine" }),
    skew.length === 0 ? el("p", { class: "muted", text: "no machine has written a clock yet" }) :
      table(["machine", "last write", "ahead of the others by"], skew.map((s) => el("tr", { class: s.skewed ? "bad" : null },
        el("td", { text: hostText(s.host, s.host_name) }), el("td", { text: when(s.last_write) }),
        el("td", { text: s.skew_s === null || s.skew_s === undefined ? "—" : `${Math.round(s.skew_s)} s` })))));

  const quarantined = h.quarantine || [];
  const qBox = el("div", { class: "card" }, el("h3", { text: "Quarantined files" }),
    quarantined.length === 0 ? el("p", { class: "muted", text: "none" }) :
      el("ul", {}, quarantined.map((q) => el("li", { class: "path", text: q.path || q }))));

  const others = findings.filter((f) => f.kind !== "conflict-copy");
  const rest = el("div", { class: "card span2" }, el("h3", { text: "Everything doctor found" }),
    others.length === 0 ? el("p", { class: "muted", text: "nothing else" }) :
      table(["severity", "kind", "where", "what", "doctor --fix"], others.map((f) => el("tr", { class: `sev-${f.severity}` },
        el("td", { text: f.severity }), el("td", { text: f.kind }), el("td", { class: "path", text: f.path || "—" }),
        el("td", { text: f.message }), el("td", { text: f.fixable ? "repairs it" : "no" })))));
  fill("health", summary, facts, el("div", { class: "grid" }, conflictBox, skewBox, qBox, rest));
}

function encryptionText(e) {
  if (!e) return "unknown";
  if (e.error) return `unknown: ${e.error}`;
  if (!e.enabled) return "off: cached block values are plain text in the shared home";
  let s = `on (key ${e.key_id || "?"})`;
  s += e.this_machine_has_key ? ", this machine has the key" : ", this machine does NOT have the key";
  if (e.values !== undefined) s += `; ${e.sealed || 0} of ${e.values} cached values sealed`;
  return s;
}

// ------------------------------------------------------------------ memory

function renderMemory(m) {
  const who = document.getElementById("whoami");
  who.textContent = m.agent ? `agent ${m.agent.name || ""} ${m.agent.id}`.replace("  ", " ") : "no agent yet";
  const blocks = m.blocks || [];
  if (blocks.length === 0) return fill("memory", el("p", { class: "muted", text: "the agent has no memory blocks" }));
  fill("memory", el("div", { class: "blocks" }, blocks.map(blockCard)));
}

function blockCard(b) {
  const value = el("pre", { class: "block-value", text: b.value });
  const card = el("article", { class: "card block", "data-label": b.label },
    el("h3", {}, el("span", { class: "label", text: b.label }),
      el("span", { class: "muted size", text: ` ${b.size ?? (b.value || "").length}${b.limit ? " / " + b.limit : ""} chars` })),
    b.description ? el("p", { class: "muted", text: b.description }) : null,
    value);
  if (state.editing) {
    card.append(el("button", { type: "button", class: "edit", text: "Edit", onclick: () => editBlock(card, b) }));
  }
  return card;
}

function editBlock(card, b) {
  const area = el("textarea", { rows: Math.min(30, Math.max(4, (b.value || "").split("\n").length + 1)) });
  area.value = b.value || "";
  const msg = el("span", { class: "muted" });
  const save = el("button", { type: "button", text: "Save to Letta", onclick: async () => {
    save.disabled = true;
    msg.textContent = "saving…";
    try {
      const nb = await api(`/api/blocks/${encodeURIComponent(b.label)}`, { method: "POST",
        headers: { "Content-Type": "application/json" }, body: JSON.stringify({ value: area.value, expected: b.value }) });
      Object.assign(b, nb);
      card.replaceWith(blockCard(b));
      loadSection("history");
    } catch (e) {
      msg.textContent = `not saved: ${e.message}`;
      save.disabled = false;
    }
  } });
  const cancel = el("button", { type: "button", text: "Cancel", onclick: () => card.replaceWith(blockCard(b)) });
  card.replaceChildren(card.firstChild, area, el("div", { class: "actions" }, save, cancel, msg));
}

function renderHistory(h) {
  const changes = h.changes || [];
  if (changes.length === 0) return fill("history", el("p", { class: "muted", text: h.note || "no changes recorded" }));
  fill("history", h.note ? el("p", { class: "muted", text: h.note }) : null, el("ol", { class: "history" }, changes.map((c) =>
    el("li", {}, el("div", {}, el("time", { text: when(c.at) }), " ", el("span", { class: "label", text: c.label }),
      c.source ? el("span", { class: "muted", text: ` — ${c.source}` }) : null),
      el("pre", { class: "diff" }, (c.diff || []).map(([op, line]) =>
        el("span", { class: op === "+" ? "add" : op === "-" ? "del" : "same", text: `${op} ${line}\n` })))))));
}

// ------------------------------------------------------------------ sessions and messages

function readErrors(errors) {
  if (!errors || errors.length === 0) return null;
  return el("p", { class: "error" }, `could not read ${errors.length} conversation${errors.length === 1 ? "" : "s"}: `,
    errors.map((e) => `${e.session}: ${e.error}`).join("; "));
}

function pendingText(p) {
  if (p === null || p === undefined) return "kept on its machine";
  if (p.length === 0) return "nothing";
  return p.map((d) => d.start_message ? "start message" : (d.lines ? `lines ${d.lines[0]}-${d.lines[1]}` : "new lines")).join(", ");
}

function renderSessions(s) {
  const rows = (s.sessions || []).map((x) => el("tr", { class: x.ended ? "ended" : null, "data-session": x.session },
    el("td", { class: "id", text: x.session }), el("td", { text: hostText(x.host, x.host_name) }),
    el("td", { class: "path", text: x.project || "—" }), el("td", { text: when(x.started) }),
    el("td", { text: when(x.last_delivery) }), el("td", { text: x.cursor ?? "—" }),
    el("td", { text: pendingText(x.pending) }), el("td", { text: x.ended ? when(x.ended) : "open" })));
  if (rows.length === 0) return fill("sessions", el("p", { class: "muted", text: "no sessions yet" }), readErrors(s.errors));
  fill("sessions", readErrors(s.errors), table(["session", "machine", "project", "started", "last delivery", "cursor", "pending", "ended"], rows, "sessions"));
}

function renderMessages(m) {
  const msgs = m.messages || [];
  const hostSel = document.getElementById("filter-host");
  const sesSel = document.getElementById("filter-session");
  const hosts = [...new Set(msgs.map((x) => x.host || "?"))].sort();
  const sessions = [...new Set(msgs.map((x) => x.session || "?"))].sort();
  for (const [sel, vals] of [[hostSel, hosts], [sesSel, sessions]]) {
    const keep = sel.value;
    sel.replaceChildren(el("option", { value: "", text: "all" }), vals.map((v) => el("option", { value: v, text: v })));
    sel.value = vals.includes(keep) ? keep : "";
  }
  const shown = msgs.filter((x) => (!hostSel.value || (x.host || "?") === hostSel.value)
    && (!sesSel.value || (x.session || "?") === sesSel.value));
  if (shown.length === 0) return fill("messages", readErrors(m.errors), el("p", { class: "muted", text: "no messages" }));
  const groups = new Map();
  for (const x of shown) {
    const key = `${x.session || "?"}\u0000${x.host || "?"}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(x);
  }
  fill("messages", readErrors(m.errors), [...groups.entries()].map(([key, items]) => {
    const [session, host] = key.split("\u0000");
    return el("div", { class: "card timeline", "data-session": session },
      el("h3", {}, `session ${session}`, el("span", { class: "muted", text: ` on ${items[0].host_name || host}` })),
      el("ol", {}, items.map((x) => el("li", { class: x.shown ? "shown" : "unshown" },
        el("time", { text: when(x.date) }), " ",
        el("span", { class: "badge", text: x.shown ? "shown to Claude Code" : "not shown yet" }),
        el("div", { class: "text", text: x.text })))));
  }));
}

const RENDER = { health: renderHealth, memory: renderMemory, history: renderHistory, sessions: renderSessions, messages: renderMessages };

async function loadSection(name) {
  try {
    state.data[name] = await api(`/api/${name}`);
    RENDER[name](state.data[name]);
  } catch (e) {
    fill(name, el("p", { class: "error", text: `could not read: ${e.message}` }));
  }
}

async function loadAll() {
  const status = document.getElementById("status");
  status.textContent = "reading…";
  await Promise.all(Object.keys(RENDER).map(loadSection));
  status.textContent = `read at ${when(new Date().toISOString())}`;
  document.body.dataset.loaded = "1";
}

document.getElementById("edit-mode").addEventListener("click", (ev) => {
  state.editing = !state.editing;
  ev.target.textContent = state.editing ? "Back to read-only" : "Allow editing";
  if (state.data.memory) renderMemory(state.data.memory);
});
for (const id of ["filter-host", "filter-session"]) {
  document.getElementById(id).addEventListener("change", () => state.data.messages && renderMessages(state.data.messages));
}
loadAll();

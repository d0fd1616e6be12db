/* Ultron dashboard: a small framework-free single-page app. Data comes from the hub's JSON API with the
   API key from sessionStorage (never localStorage); pages are routed by the URL hash. */
"use strict";

const KEY_STORE = "ultron.apiKey";
const TYPES = ["error", "security", "correction", "pattern", "preference", "life"];
const TIERS = ["hot", "warm", "cold"];
const KINDS = ["upload", "merge", "search", "edit", "delete"];
const KIND_COLORS = { upload: "#8b9cff", merge: "#a78bfa", search: "#38bdf8", edit: "#34d399", delete: "#f87171" };
const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
const typeColor = (t) => css(`--t-${t}`) || "#8b9cff";
const tierColor = (t) => css(`--${t}`) || "#8b9cff";

const state = { me: null, features: {}, agents: [], page: null, memFilter: {}, memCursors: [null], memIndex: 0,
  memSort: "created", selected: null };

// --- tiny DOM helpers ---------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "html") el.innerHTML = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const svgNS = "http://www.w3.org/2000/svg";
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}
const fmt = (n) => Number(n || 0).toLocaleString("en-US");
const when = (iso) => iso ? new Date(iso).toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" }) + " UTC" : "—";
const ago = (iso) => {
  if (!iso) return "never";
  const sec = (Date.now() - new Date(iso).getTime()) / 1000;
  if (sec < 60) return "just now";
  if (sec < 3600) return `${Math.floor(sec / 60)} min ago`;
  if (sec < 86400) return `${Math.floor(sec / 3600)} h ago`;
  return `${Math.floor(sec / 86400)} d ago`;
};
function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg; t.hidden = false;
  clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.hidden = true; }, 2600);
}
const typeChip = (t) => h("span", { class: "chip", "data-type": t }, h("span", { class: "dot", style: `background:${typeColor(t)}` }), t);
const tierChip = (t) => h("span", { class: `chip tier-${t}` }, t);
// How sure the hub is that a result bears on the query: "low" is probably unrelated (docs/ranking.md).
const confidenceChip = (c) => h("span", { class: `chip confidence-${c}`, "data-testid": "confidence" }, `${c} confidence`);

// --- API ----------------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) { super(body && body.detail ? body.detail : `HTTP ${status}`); this.status = status; }
}

async function api(path, { method = "GET", body, key } = {}) {
  const headers = { Accept: "application/json" };
  const k = key !== undefined ? key : sessionStorage.getItem(KEY_STORE);
  if (k) headers.Authorization = `Bearer ${k}`;
  const form = body instanceof FormData;
  if (body !== undefined && !form) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined || form ? body : JSON.stringify(body) });
  if (res.status === 204) return null;
  const data = await res.json().catch(() => null);
  if (res.status === 401 && key === undefined) { showSignIn(data && data.detail); throw new ApiError(401, data); }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

// --- sign-in ------------------------------------------------------------------------------------------

function showSignIn(reason) {
  document.getElementById("app").hidden = true;
  document.getElementById("drawer").hidden = true;
  document.getElementById("signin").hidden = false;
  document.getElementById("signin-error").textContent = sessionStorage.getItem(KEY_STORE) && reason ? reason : "";
  sessionStorage.removeItem(KEY_STORE);
  document.getElementById("signin-key").focus();
}

async function signIn(ev) {
  ev.preventDefault();
  const key = document.getElementById("signin-key").value.trim();
  try {
    await api("/api/dashboard/whoami", { key });
    sessionStorage.setItem(KEY_STORE, key);
    document.getElementById("signin-key").value = "";
    await start();
  } catch (e) {
    document.getElementById("signin-error").textContent = e.status === 401 ? e.message : `Sign-in failed: ${e.message}`;
  }
}

function signOut() {
  sessionStorage.removeItem(KEY_STORE);
  state.me = null;
  showSignIn();
}

async function start() {
  let me;
  try {
    me = await api("/api/dashboard/whoami", { key: sessionStorage.getItem(KEY_STORE) || "" });
  } catch (e) {
    if (e.status === 401) { showSignIn(); return; }
    document.body.textContent = `The hub did not answer: ${e.message}`;
    return;
  }
  state.me = me;
  const [features, agents] = await Promise.all([api("/api/dashboard/features"), api("/api/dashboard/agents")]);
  state.features = features; state.agents = agents;
  document.getElementById("signin").hidden = true;
  document.getElementById("app").hidden = false;
  const who = document.getElementById("whoami");
  who.replaceChildren(
    h("div", {}, "Agent ", h("b", { "data-testid": "agent-name" }, me.agent), me.is_admin ? " · admin" : ""),
    h("div", {}, "Tenant ", h("b", {}, me.tenant)),
    me.signed_in ? h("button", { class: "btn small", onclick: signOut, "data-testid": "sign-out" }, "Sign out")
      : h("div", { class: "badge-open" }, "Open hub on loopback (no keys yet)"),
    h("div", { class: "fine" }, `Ultron ${me.version}`),
  );
  route();
}

// --- routing ------------------------------------------------------------------------------------------

const PAGES = { overview: pageOverview, memories: pageMemories, search: pageSearch, map: pageMap, skills: pageSkills,
  trajectories: pageTrajectories, settings: pageSettings, network: pageNetwork, brief: pageBrief };

function route() {
  if (!state.me) return;
  const [page, raw] = (location.hash.replace(/^#\/?/, "") || "overview").split("/");
  const name = PAGES[page] ? page : "overview";
  let arg = "";
  try { arg = decodeURIComponent(raw || ""); } catch { arg = ""; }
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === name);
  // A skill is a view of its own; a memory or a cluster opens in the drawer over its page.
  const view = name === "skills" && arg ? `skills/${arg}` : name;
  if (view !== state.view) {
    state.view = view; state.page = name;
    closeDrawer(false);
    // Each view draws into its own box: a slow page that answers after the user moved on draws into a
    // box that is no longer on the page, instead of over the page now shown.
    const main = h("div", { class: "view" }, h("div", { class: "loading" }, "Loading…"));
    document.getElementById("main").replaceChildren(main);
    PAGES[name](main, arg).catch((e) => main.replaceChildren(h("div", { class: "card error" }, `Could not load: ${e.message}`)));
    return;
  }
  if (name === "memories" && arg) openMemory(arg);
  if (name === "map" && arg) openClusterById(arg);
}
window.addEventListener("hashchange", route);

function head(title, sub) {
  return h("div", { class: "page-head" }, h("h1", {}, title), sub ? h("span", { class: "muted" }, sub) : null);
}

// --- charts -------------------------------------------------------------------------------------------

function barList(entries, colorOf, { testid } = {}) {
  const max = Math.max(1, ...entries.map(([, v]) => v));
  if (!entries.length) return h("div", { class: "muted" }, "Nothing yet.");
  return h("div", { class: "bars", "data-testid": testid },
    entries.map(([k, v]) => h("div", { class: "bar-row", "data-key": k },
      h("span", { class: "name" }, k),
      h("div", { class: "track" }, h("div", { class: "fill", style: `width:${(100 * v) / max}%;background:${colorOf(k)}` })),
      h("span", { class: "num" }, fmt(v)))));
}

function ordered(obj, order) {
  const keys = [...order.filter((k) => k in obj), ...Object.keys(obj).filter((k) => !order.includes(k)).sort()];
  return keys.map((k) => [k, obj[k]]);
}

function activityChart(days, activity) {
  const W = 900, H = 220, L = 36, B = 24, T = 10;
  const byDay = Object.fromEntries(days.map((d) => [d, {}]));
  for (const a of activity) if (byDay[a.day]) byDay[a.day][a.kind] = a.events;
  const totals = days.map((d) => Object.values(byDay[d]).reduce((x, y) => x + y, 0));
  const max = Math.ceil(Math.max(4, ...totals) / 4) * 4;  // quarters on whole numbers
  const step = (W - L) / days.length, bw = Math.max(3, step * 0.7);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", "data-testid": "activity-chart" });
  for (let i = 0; i <= 4; i++) {
    const y = T + ((H - B - T) * i) / 4;
    svg.append(s("line", { x1: L, x2: W, y1: y, y2: y, stroke: "#1f2946" }),
      s("text", { x: L - 6, y: y + 4, "text-anchor": "end" }, fmt(Math.round(max * (1 - i / 4)))));
  }
  days.forEach((d, i) => {
    let y = H - B;
    const x = L + i * step + (step - bw) / 2;
    for (const kind of [...KINDS, ...Object.keys(byDay[d]).filter((k) => !KINDS.includes(k))]) {
      const v = byDay[d][kind] || 0;
      if (!v) continue;
      const hgt = ((H - B - T) * v) / max;
      y -= hgt;
      svg.append(s("rect", { x, y, width: bw, height: hgt, rx: 2, fill: KIND_COLORS[kind] || "#64748b" },
        s("title", {}, `${d} · ${kind}: ${v}`)));
    }
    if (i % Math.ceil(days.length / 10) === 0 || i === days.length - 1)
      svg.append(s("text", { x: x + bw / 2, y: H - 6, "text-anchor": "middle" }, d.slice(5)));
  });
  if (!activity.length) svg.append(s("text", { x: (W + L) / 2, y: (H - B) / 2, "text-anchor": "middle", "font-size": 14 }, "No uploads, merges or searches in this period"));
  const legend = h("div", { class: "legend" }, KINDS.map((k) => h("span", {}, h("i", { style: `background:${KIND_COLORS[k]}` }), k)));
  return h("div", {}, svg, legend);
}

// --- Overview -----------------------------------------------------------------------------------------

async function pageOverview(main) {
  const o = await api("/api/dashboard/overview?days=30");
  const st = o.stats;
  const sumKinds = (kind) => o.activity.filter((a) => a.kind === kind).reduce((x, a) => x + a.events, 0);
  const redactedTotal = Object.values(st.redacted_entities).reduce((x, y) => x + y, 0);
  const kpi = (label, value, sub, testid) => h("div", { class: "card kpi", "data-testid": testid },
    h("div", { class: "label" }, label), h("div", { class: "value" }, value), sub ? h("div", { class: "sub" }, sub) : null);
  main.replaceChildren(
    head("Overview", `tenant ${state.me.tenant} · embeddings ${st.embedding_model || "—"}`),
    h("div", { class: "grid kpis" },
      kpi("Memories", fmt(st.total), `${fmt(st.by_status.active || 0)} active`, "kpi-total"),
      kpi("Pinned", fmt(o.pinned), "always surfaced", "kpi-pinned"),
      kpi("Contributions", fmt(st.contributions), "uploads incl. merges", "kpi-contributions"),
      kpi("Uploads, 30 d", fmt(sumKinds("upload")), `${fmt(sumKinds("merge"))} merged`, "kpi-uploads"),
      kpi("Searches, 30 d", fmt(sumKinds("search")), "by all agents", "kpi-searches"),
      kpi("Redacted", fmt(redactedTotal), "secrets & personal data", "kpi-redacted"),
      kpi("Agents", fmt(o.agents), "in this tenant", "kpi-agents")),
    h("div", { class: "grid cols-2" },
      h("div", { class: "card span-2" }, h("h2", {}, "Activity · last 30 days (UTC)"), activityChart(o.days, o.activity)),
      h("div", { class: "card" }, h("h2", {}, "By tier"), barList(ordered(st.by_tier, TIERS), tierColor, { testid: "by-tier" })),
      h("div", { class: "card" }, h("h2", {}, "By type"), barList(ordered(st.by_type, TYPES), typeColor, { testid: "by-type" })),
      h("div", { class: "card" }, h("h2", {}, "By status"), barList(ordered(st.by_status, ["active", "archived"]),
        (k) => (k === "active" ? "#34d399" : "#64748b"), { testid: "by-status" })),
      h("div", { class: "card" }, h("h2", {}, "By scope"), barList(ordered(st.by_scope, ["shared", "group", "private"]),
        () => "#8b9cff", { testid: "by-scope" })),
      h("div", { class: "card" }, h("h2", {}, "Redactions by entity"),
        redactedTotal ? barList(Object.entries(st.redacted_entities).sort((a, b) => b[1] - a[1]), () => "#fbbf24", { testid: "redactions" })
          : h("div", { class: "muted", "data-testid": "redactions" }, "Nothing redacted so far: no secrets or personal data were found in uploads.")),
      workerCard(o.worker)),
  );
}

function workerCard(worker) {
  const card = h("div", { class: "card", "data-testid": "worker" }, h("h2", {}, "Worker runs · last 30 days"));
  if (!worker) {
    card.append(h("div", { class: "muted" }, "The background worker is not installed in this hub yet. Once it is, each step of its cycles (segmentation, scoring, extraction, tier rebalance, crystallization) and its outcome appear here."));
    return card;
  }
  if (!worker.outcomes.length) {
    card.append(h("div", { class: "muted" }, "No worker cycle has run in the last 30 days. Start one with `ultron worker`."));
    return card;
  }
  const colors = { ok: "#34d399", failed: "#f87171", skipped: "#64748b", running: "#38bdf8", interrupted: "#fbbf24" };
  card.append(barList(worker.outcomes.map((o) => [`${o.step} · ${o.status}`, o.runs]), (k) => colors[k.split(" · ")[1]] || "#8b9cff"));
  if (worker.recent.length) {
    card.append(h("table", { class: "events" }, h("tbody", {}, worker.recent.slice(0, 6).map((r) =>
      h("tr", {}, h("td", {}, r.step), h("td", {}, r.status), h("td", {}, ago(r.started_at)),
        h("td", {}, r.errors ? `${r.errors} errors` : ""))))));
  }
  return card;
}

// --- Memories -----------------------------------------------------------------------------------------

function selectFilter(name, label, options) {
  const sel = h("select", { "data-filter": name, "aria-label": label },
    h("option", { value: "" }, `${label}: any`), options.map((o) => h("option", { value: o }, o)));
  sel.value = state.memFilter[name] || "";
  sel.addEventListener("change", () => { state.memFilter[name] = sel.value; resetPages(); loadMemories(); });
  return sel;
}
function resetPages() { state.memCursors = [null]; state.memIndex = 0; }

async function pageMemories(main, arg) {
  if (arg) openMemory(arg);
  const q = h("input", { type: "search", placeholder: "Filter by words (every word must match)…", value: state.memFilter.q || "",
    "data-testid": "memory-filter-q" });
  let timer;
  q.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => { state.memFilter.q = q.value; resetPages(); loadMemories(); }, 300); });
  const sort = h("select", { "aria-label": "Sort", "data-testid": "memory-sort" },
    h("option", { value: "created" }, "Newest first"), h("option", { value: "updated" }, "Recently changed"),
    h("option", { value: "hits" }, "Most used"));
  sort.value = state.memSort;
  sort.addEventListener("change", () => { state.memSort = sort.value; resetPages(); loadMemories(); });
  main.replaceChildren(
    head("Memories", "browsing never counts a hit"),
    h("div", { class: "toolbar" }, q,
      selectFilter("type", "Type", TYPES), selectFilter("tier", "Tier", TIERS),
      selectFilter("status", "Status", ["active", "archived"]), selectFilter("scope", "Scope", ["shared", "group", "private"]),
      selectFilter("agent", "Agent", state.agents), selectFilter("pinned", "Pinned", ["true", "false"]), sort),
    h("div", { class: "card table-card" },
      h("table", { "data-testid": "memory-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Summary"), h("th", {}, "Type"), h("th", {}, "Tier"), h("th", {}, "Agent"),
          h("th", { style: "text-align:right" }, "Hits"), h("th", {}, "Created"))),
        h("tbody", { id: "memory-rows" })),
      h("div", { class: "pager" }, h("span", { id: "memory-count", "data-testid": "memory-count" }),
        h("div", { class: "btns" },
          h("button", { class: "btn small", id: "prev-page", onclick: () => { state.memIndex--; loadMemories(); } }, "← Previous"),
          h("button", { class: "btn small", id: "next-page", "data-testid": "next-page", onclick: () => { state.memIndex++; loadMemories(); } }, "Next →")))),
  );
  await loadMemories();
}

async function loadMemories() {
  const params = new URLSearchParams({ limit: "50", sort: state.memSort });
  for (const [k, v] of Object.entries(state.memFilter)) if (v) params.set(k, v);
  const cursor = state.memCursors[state.memIndex];
  if (cursor) params.set("cursor", cursor);
  const page = await api(`/api/dashboard/memories?${params}`);
  state.memCursors[state.memIndex + 1] = page.next_cursor;
  const tbody = document.getElementById("memory-rows");
  if (!tbody) return;
  tbody.replaceChildren(...page.items.map((m) => h("tr", { "data-id": m.id, class: state.selected === m.id ? "selected" : null,
    onclick: () => { history.replaceState(null, "", `#/memories/${m.id}`); openMemory(m.id); } },
    h("td", { class: "summary" }, h("div", { class: "s" }, m.pinned ? "★ " : "", m.summary_l0),
      m.tags.length ? h("div", { class: "tags" }, m.tags.slice(0, 5).map((t) => h("span", { class: "tag" }, t))) : null),
    h("td", {}, typeChip(m.memory_type)),
    h("td", {}, tierChip(m.tier), m.status === "archived" ? h("span", { class: "chip archived", style: "margin-left:4px" }, "archived") : null),
    h("td", { class: "muted" }, m.agent || "—"),
    h("td", { class: "num" }, fmt(m.hit_count)),
    h("td", { class: "muted" }, ago(m.created_at)))));
  if (!page.items.length) tbody.append(h("tr", {}, h("td", { colspan: 6, class: "muted", style: "padding:30px;text-align:center" }, "No memory matches these filters.")));
  const first = state.memIndex * 50;
  document.getElementById("memory-count").textContent = page.total
    ? `${fmt(first + 1)}–${fmt(first + page.items.length)} of ${fmt(page.total)}${page.total_capped ? "+" : ""} memories` : "0 memories";
  document.getElementById("prev-page").disabled = state.memIndex === 0;
  document.getElementById("next-page").disabled = !page.next_cursor;
}

// --- memory detail drawer -----------------------------------------------------------------------------

function closeDrawer(updateHash = true) {
  const d = document.getElementById("drawer");
  d.hidden = true; d.replaceChildren();
  state.selected = null;
  if (updateHash && location.hash.startsWith("#/memories/")) history.replaceState(null, "", "#/memories");
  if (updateHash && location.hash.startsWith("#/map/")) history.replaceState(null, "", "#/map");
}

async function openMemory(id) {
  const d = document.getElementById("drawer");
  d.hidden = false;
  d.replaceChildren(h("div", { class: "loading" }, "Loading memory…"));
  state.selected = id;
  for (const tr of document.querySelectorAll("#memory-rows tr")) tr.classList.toggle("selected", tr.dataset.id === id);
  try {
    const [m, contributions, hits] = await Promise.all([
      api(`/memories/${id}`), api(`/memories/${id}/contributions`), api(`/api/dashboard/memories/${id}/hits?days=90`)]);
    renderMemory(d, m, contributions, hits);
  } catch (e) {
    d.replaceChildren(h("button", { class: "btn small close", onclick: () => closeDrawer() }, "✕"),
      h("div", { class: "error", style: "margin-top:40px" }, e.message));
  }
}

function renderMemory(d, m, contributions, hits) {
  const body = h("div", { "data-testid": "memory-text" });
  const show = (level) => {
    for (const b of tabs.querySelectorAll("button")) b.classList.toggle("active", b.dataset.level === level);
    const blocks = level === "l0" ? [["L0 · one line", m.summary_l0]]
      : level === "l1" ? [["L1 · overview", m.overview_l1], ["Context", m.context]]
        : [["Content", m.content], ["Context", m.context], ["Resolution", m.resolution]];
    body.replaceChildren(h("div", { class: "text-block" }, blocks.filter(([, v]) => v).flatMap(([l, v]) => [h("span", { class: "lbl" }, l), v])));
  };
  const tabs = h("div", { class: "tabs" }, [["l0", "L0"], ["l1", "L1"], ["full", "Full"]].map(([lvl, label]) =>
    h("button", { "data-level": lvl, onclick: () => show(lvl) }, label)));
  const patch = async (change, msg) => {
    try { await api(`/memories/${m.id}`, { method: "PATCH", body: change }); toast(msg); await openMemory(m.id); refreshList(); }
    catch (e) { toast(e.message); }
  };
  const actions = h("div", { class: "actions" },
    h("button", { class: "btn", "data-testid": "pin", onclick: () => patch({ pinned: !m.pinned }, m.pinned ? "Unpinned" : "Pinned") },
      m.pinned ? "★ Unpin" : "☆ Pin"),
    h("button", { class: "btn", "data-testid": "archive", onclick: () => patch({ status: m.status === "archived" ? "active" : "archived" },
      m.status === "archived" ? "Restored" : "Archived") }, m.status === "archived" ? "Restore" : "Archive"),
    h("button", { class: "btn", "data-testid": "edit", onclick: () => editMemory(d, m) }, "Edit"),
    h("button", { class: "btn danger", "data-testid": "delete", onclick: async () => {
      if (!confirm("Delete this memory for good? Its contributions and hit history go with it.")) return;
      try { await api(`/memories/${m.id}`, { method: "DELETE" }); toast("Deleted"); closeDrawer(); refreshList(); }
      catch (e) { toast(e.message); }
    } }, "Delete"));
  d.replaceChildren(
    h("button", { class: "btn small close", onclick: () => closeDrawer(), "aria-label": "Close" }, "✕"),
    h("div", { class: "chips" }, typeChip(m.memory_type), tierChip(m.tier),
      m.status === "archived" ? h("span", { class: "chip archived" }, "archived") : null,
      m.pinned ? h("span", { class: "chip pinned", "data-testid": "pinned-chip" }, "★ pinned") : null,
      h("span", { class: "chip" }, m.scope + (m.group ? ` · ${m.group}` : ""))),
    h("div", { class: "title", "data-testid": "memory-title" }, m.summary_l0 || m.content.slice(0, 120)),
    tabs, body, actions,
    moodForm(m),
    h("h3", {}, "Details"),
    h("dl", { class: "meta" },
      h("dt", {}, "Hits"), h("dd", { "data-testid": "memory-hits" }, `${fmt(m.hit_count)} · last ${ago(m.last_hit_at)}`),
      h("dt", {}, "First agent"), h("dd", {}, m.agent || "—"),
      h("dt", {}, "Created"), h("dd", {}, when(m.created_at)),
      h("dt", {}, "Updated"), h("dd", {}, when(m.updated_at)),
      h("dt", {}, "Tags"), h("dd", {}, m.tags.length ? m.tags.map((t) => h("span", { class: "tag", style: "margin-right:4px" }, t)) : "—"),
      h("dt", {}, "Redacted"), h("dd", {}, Object.keys(m.redacted_entities).length
        ? Object.entries(m.redacted_entities).map(([k, v]) => `${k} ×${v}`).join(", ") : "nothing"),
      h("dt", {}, "Id"), h("dd", {}, h("code", {}, m.id))),
    h("h3", {}, `Hit history · 90 days`), hitChart(hits),
    hits.recent.length ? h("table", { class: "events", "data-testid": "hit-events" }, h("tbody", {}, hits.recent.slice(0, 8).map((e) =>
      h("tr", {}, h("td", {}, e.signal), h("td", {}, e.agent || "—"), h("td", {}, `+${e.weight}`),
        h("td", { class: "muted" }, e.counted ? "counted" : "same agent, in window"), h("td", { class: "muted" }, ago(e.at))))))
      : h("div", { class: "muted" }, "Not used yet."),
    h("h3", {}, `Contributions · ${contributions.length}`),
    h("div", { "data-testid": "contributions" }, contributions.map((c) => h("div", { class: "contrib" },
      h("div", { class: "who" }, h("b", {}, c.agent || "unknown agent"), ` · ${c.decision.replace("_", " ")}`,
        c.similarity !== null ? ` · similarity ${c.similarity.toFixed(3)}` : "", ` · ${when(c.created_at)}`),
      h("div", { class: "what" }, c.content),
      c.decision.startsWith("merged") ? h("button", { class: "btn small", "data-testid": "split", onclick: async () => {
        if (!confirm("Split this upload out into a memory of its own?")) return;
        try {
          const r = await api(`/memories/${m.id}/split`, { method: "POST", body: { contribution_id: c.id } });
          toast("Split into a memory of its own"); await openMemory(r.split.id); refreshList();
        } catch (e) { toast(e.message); }
      } }, "Split out") : null))),
  );
  show("l0");
}

function hitChart(hits) {
  const days = [];
  const today = new Date(); today.setUTCHours(0, 0, 0, 0);
  for (let i = 89; i >= 0; i--) days.push(new Date(today.getTime() - i * 86400000).toISOString().slice(0, 10));
  const per = Object.fromEntries(days.map((d) => [d, { search: 0, details: 0, merge: 0 }]));
  for (const x of hits.days) if (per[x.day]) per[x.day][x.signal] = x.events;
  const W = 500, H = 70, bw = W / days.length;
  const max = Math.max(1, ...days.map((d) => per[d].search + per[d].details + per[d].merge));
  const colors = { search: "#38bdf8", details: "#8b9cff", merge: "#a78bfa" };
  const svg = s("svg", { viewBox: `0 0 ${W} ${H + 14}`, width: "100%", "data-testid": "hit-chart" },
    s("line", { x1: 0, x2: W, y1: H, y2: H, stroke: "#24304f" }));
  days.forEach((d, i) => {
    let y = H;
    for (const sig of ["search", "details", "merge"]) {
      const v = per[d][sig]; if (!v) continue;
      const hh = (H - 4) * v / max; y -= hh;
      svg.append(s("rect", { x: i * bw + 0.5, y, width: Math.max(1, bw - 1), height: hh, fill: colors[sig] }, s("title", {}, `${d} · ${sig}: ${v}`)));
    }
  });
  svg.append(s("text", { x: 0, y: H + 12 }, days[0].slice(5)), s("text", { x: W, y: H + 12, "text-anchor": "end" }, "today"));
  return h("div", {}, svg, h("div", { class: "legend" }, Object.entries(colors).map(([k, c]) => h("span", {}, h("i", { style: `background:${c}` }), k))));
}

const MOOD_FIELDS = [
  ["valence", "Valence", -1, 1, 0.05, "−1 negative … 1 positive"],
  ["arousal", "Arousal", 0, 1, 0.05, "0 calm … 1 intense"],
  ["importance", "Importance", 1, 10, 1, "1 … 10 (5 is neutral)"],
];

function moodForm(m) {
  // Valence, arousal and importance: they weigh the memory in search (resonance, urgency, slower decay),
  // in the worker's tiers and TTL (arousal) and in ranking and decay (importance).
  const error = h("div", { class: "error", "data-testid": "mood-error", hidden: true });
  const fields = MOOD_FIELDS.map(([name, label, min, max, step, hint]) => {
    const value = m[name] === null || m[name] === undefined ? "" : String(m[name]);
    const input = h("input", { type: "number", name, min, max, step, value, placeholder: "unset", style: "width:6em", "data-testid": `mood-${name}` });
    const bar = h("i", { style: `width:${value === "" ? 0 : Math.round(100 * (Number(value) - min) / (max - min))}%` });
    input.addEventListener("input", () => { bar.style.width = `${Math.max(0, Math.min(100, 100 * (Number(input.value) - min) / (max - min)))}%`; });
    return h("label", { class: "mood-field" }, h("span", { class: "muted" }, label), input, h("span", { class: "mood-bar" }, bar), h("span", { class: "fine" }, hint));
  });
  const form = h("form", { class: "mood", "data-testid": "mood-form", novalidate: true }, fields,
    h("button", { class: "btn small", type: "submit", "data-testid": "mood-save" }, "Save mood & importance"), error);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const change = {};
    for (const [name, label, min, max] of MOOD_FIELDS) {
      const raw = String(new FormData(form).get(name)).trim();
      if (raw === "") continue;  // unset stays unset (the hub keeps what it has)
      const v = Number(raw);
      const whole = name === "importance";
      if (!Number.isFinite(v) || v < min || v > max || (whole && !Number.isInteger(v))) {
        error.textContent = `${label} must be ${whole ? "a whole number " : ""}from ${min} to ${max}`; error.hidden = false; return;
      }
      if (v !== m[name]) change[name] = v;
    }
    if (!Object.keys(change).length) { error.textContent = "Nothing changed."; error.hidden = false; return; }
    try { await api(`/memories/${m.id}`, { method: "PATCH", body: change }); toast("Saved"); await openMemory(m.id); refreshList(); }
    catch (e) { error.textContent = e.message; error.hidden = false; }
  });
  return h("div", {}, h("h3", {}, "Mood and importance"), form);
}

function editMemory(d, m) {
  const field = (name, label, value, rows = 3) => h("label", { style: "display:block;margin-top:10px" },
    h("span", { class: "muted", style: "font-size:12px" }, label), h("textarea", { name, rows }, value));
  const tags = h("input", { name: "tags", value: m.tags.join(", "), style: "width:100%" });
  const tier = h("select", { name: "tier" }, TIERS.map((t) => h("option", { value: t }, t)));
  tier.value = m.tier;
  const form = h("form", { "data-testid": "edit-form" },
    field("content", "Content", m.content, 4), field("context", "Context", m.context), field("resolution", "Resolution", m.resolution),
    h("label", { style: "display:block;margin-top:10px" }, h("span", { class: "muted", style: "font-size:12px" }, "Tags (comma separated)"), tags),
    h("label", { style: "display:block;margin-top:10px" }, h("span", { class: "muted", style: "font-size:12px;margin-right:8px" }, "Tier"), tier),
    h("p", { class: "fine" }, "Changed text is redacted, re-typed, re-embedded and re-summarized."),
    h("div", { class: "actions" }, h("button", { class: "btn primary", type: "submit" }, "Save"),
      h("button", { class: "btn", type: "button", onclick: () => openMemory(m.id) }, "Cancel")));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const fd = new FormData(form);
    const change = { tier: fd.get("tier"), tags: String(fd.get("tags")).split(",").map((t) => t.trim()).filter(Boolean) };
    for (const k of ["content", "context", "resolution"]) if (fd.get(k) !== m[k]) change[k] = fd.get(k);
    try { await api(`/memories/${m.id}`, { method: "PATCH", body: change }); toast("Saved"); await openMemory(m.id); refreshList(); }
    catch (e) { toast(e.message); }
  });
  d.replaceChildren(h("button", { class: "btn small close", onclick: () => openMemory(m.id) }, "✕"),
    h("div", { class: "title" }, "Edit memory"), form);
}

function refreshList() {
  state.mapStale = true;  // the hub reuses the map for 30 s; after a change ask for a fresh one
  if (state.page === "memories") loadMemories();
  if (state.page === "map") { state.view = null; route(); }
}

// --- Search playground --------------------------------------------------------------------------------

async function pageSearch(main) {
  const q = h("input", { type: "search", placeholder: "What would an agent ask? e.g. postgres connection refused", "data-testid": "search-q" });
  const tier = h("select", { "aria-label": "Tier" }, h("option", { value: "" }, "Tier: any"), TIERS.map((t) => h("option", { value: t }, t)));
  const limit = h("select", { "aria-label": "Limit" }, [5, 10, 20, 50].map((n) => h("option", { value: n }, `${n} results`)));
  limit.value = "10";
  // filters apply inside the search (docs/ranking.md, "Filters"), not to the results shown
  const type = h("select", { "aria-label": "Type", "data-testid": "search-type" }, h("option", { value: "" }, "Type: any"), TYPES.map((t) => h("option", { value: t }, t)));
  const tag = h("input", { type: "text", placeholder: "Tag", "aria-label": "Tag", "data-testid": "search-tag", style: "width:8em" });
  const out = h("div", { "data-testid": "search-results" });
  const form = h("form", { class: "toolbar" }, q, tier, type, tag, limit, h("button", { class: "btn primary", type: "submit", "data-testid": "search-go" }, "Search"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!q.value.trim()) return;
    out.replaceChildren(h("div", { class: "loading" }, "Searching…"));
    const t0 = performance.now();
    try {
      const body = { query: q.value, tier: tier.value || null, limit: Number(limit.value), detail_level: "l1", explain: true };
      if (type.value) body.types = [type.value];
      if (tag.value.trim()) body.tags = [tag.value.trim()];
      const res = await api("/memories/search", { method: "POST", body });
      renderResults(out, res.results, performance.now() - t0);
    } catch (e) { out.replaceChildren(h("div", { class: "card error" }, e.message)); }
  });
  main.replaceChildren(head("Search playground", "hybrid vector + full-text ranking, every factor shown"), form,
    h("p", { class: "fine" }, "Every bar is on one 0–1 scale: relevance is the calibrated relevance the confidence floor applies to; vector the cosine similarity; full text the share of the query's words (by rarity) the memory holds; rank score the ranking score (relevance × tier boost × (1 − w + w · hotness)) relative to the best result; tier boost relative to the largest boost. Like any agent's search, each result returned counts one hit."),
    out);
  q.focus();
}

function renderResults(out, results, ms) {
  if (!results.length) { out.replaceChildren(h("div", { class: "card muted" }, "No memory matched.")); return; }
  // Shown to people on one 0-1 scale: the raw score (boosts pass 1) and BM25 (14.37) are made relative.
  const maxScore = Math.max(...results.map((r) => r.score), 1e-9);
  const maxBoost = Math.max(...results.map((r) => r.explain.tier_boost), 1e-9);
  const clamp = (v) => Math.max(0, Math.min(1, Number(v) || 0));
  const comp = (label, value, color, text) => h("div", { class: "comp", "data-component": label },
    h("span", {}, label), h("div", { class: "track" }, h("div", { class: "fill", style: `width:${Math.round(100 * clamp(value))}%;background:${color}` })),
    h("span", { class: "num" }, text || clamp(value).toFixed(2)));
  const confident = results.some((r) => r.confidence !== "low");
  out.replaceChildren(h("div", { class: "muted", style: "margin-bottom:10px" }, `${results.length} results in ${ms.toFixed(0)} ms`),
    confident ? null : h("div", { class: "card warn", "data-testid": "nothing-confident" }, "Nothing confident found; closest matches:"),
    ...results.map((r, i) => {
      const e = r.explain, m = r.record;
      return h("div", { class: "result", "data-id": m.id, onclick: () => { location.hash = `#/memories/${m.id}`; } },
        h("div", {},
          h("div", { class: "rank" }, `#${i + 1}`, " ", typeChip(m.memory_type), " ", tierChip(m.tier), m.pinned ? " ★" : ""),
          h("div", { class: "s" }, m.summary_l0),
          m.overview_l1 && m.overview_l1 !== m.summary_l0 ? h("div", { class: "fine" }, m.overview_l1.slice(0, 260)) : null,
          h("div", { class: "src" }, `found by ${[e.from_vector ? "vector" : null, e.from_text ? "full text" : null].filter(Boolean).join(" + ")} · ${fmt(m.hit_count)} hits · last used ${ago(m.last_hit_at)}`)),
        h("div", { "data-testid": "score-bars" },
          h("div", { class: "score-big" }, clamp(r.similarity_score).toFixed(2), h("span", { class: "muted", style: "font-size:12px;font-weight:400" }, "  relevance "), confidenceChip(r.confidence)),
          comp("relevance", r.similarity_score, "#8b9cff"),
          comp("rank score", r.score / maxScore, "linear-gradient(90deg,#6d7cff,#38bdf8)"),
          comp("vector", e.vector_similarity, "#60a5fa"),
          comp("full text", e.text_coverage, "#34d399"),
          comp("tier boost", e.tier_boost / maxBoost, tierColor(m.tier), `×${e.tier_boost.toFixed(2)}`),
          comp("hotness", e.hotness, "#fb923c")));
    }));
}

// --- Map ----------------------------------------------------------------------------------------------

function hashOf(id) { let x = 2166136261; for (const c of id) { x ^= c.charCodeAt(0); x = Math.imul(x, 16777619); } return (x >>> 0) / 4294967296; }

// Knowledge clusters are drawn in pale hues, so they do not read as memory types (the saturated ones).
const CLUSTER_COLORS = ["#f1f5f9", "#5eead4", "#bef264", "#fda4af", "#fde68a", "#a5b4fc", "#67e8f9", "#f0abfc"];
const CLUSTER_LABELS = 12;  // the largest drawn clusters are labelled; the others on hover
const STOPWORDS = new Set(("the a an and or of to in on for with from by at is are was were be been it its this that these " +
  "as not no after before when then into over under via per than but has have had can cannot does did do use used using " +
  "every each all any only also more most less same other new old one two first last just how what why which who").split(" "));

function clusterNames(data) {
  // A cluster is named when it first crystallizes; until then the map calls it by the words that set its
  // members apart: those in many of its sampled members' lines and in few other clusters' (df × idf), top 3.
  const words = (text) => [...new Set(((text || "").toLowerCase().match(/[\p{L}\p{N}][\p{L}\p{N}_+#.-]*/gu) || [])
    .map((w) => w.replace(/[.-]+$/, "")).filter((w) => w.length > 2 && !STOPWORDS.has(w) && !/^[\d.]+$/.test(w)))];
  const counts = {}, spread = {};
  for (const c of data.clusters) {
    counts[c.id] = {};
    for (const n of data.nodes) if (n.cluster_id === c.id) for (const w of words(n.label)) counts[c.id][w] = (counts[c.id][w] || 0) + 1;
    for (const w of Object.keys(counts[c.id])) spread[w] = (spread[w] || 0) + 1;
  }
  const names = {};
  for (const c of data.clusters) {
    if (c.topic) { names[c.id] = c.topic; continue; }
    const ranked = Object.entries(counts[c.id]).map(([w, k]) => [w, k * Math.log(1 + data.clusters.length / spread[w])])
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    names[c.id] = ranked.slice(0, 3).map(([w]) => w).join(" · ") || `${c.member_count} related memories`;
  }
  return names;
}

async function pageMap(main, clusterId) {
  const data = await api(`/api/dashboard/map?per_tier=300${state.mapStale ? "&fresh=true" : ""}`);
  if (!main.isConnected) return;  // the user moved on; state.mapClusters belongs to the page shown
  state.mapStale = false;
  const W = 900, C = W / 2, rings = { hot: [36, 140], warm: [152, 280], cold: [292, 400] };
  const svg = s("svg", { id: "map-svg", viewBox: `-90 -10 ${W + 180} ${W + 20}`, "data-testid": "map-svg" });
  for (const t of [...TIERS].reverse()) {
    svg.append(s("circle", { cx: C, cy: C, r: rings[t][1] + 6, fill: tierColor(t), "fill-opacity": 0.035, stroke: tierColor(t), "stroke-opacity": 0.3, "stroke-dasharray": "3 5" }));
  }
  for (const t of TIERS) svg.append(s("text", { x: C + 6, y: C - rings[t][1] + 8, "font-size": 12, fill: tierColor(t) }, t.toUpperCase()));
  const sector = (2 * Math.PI) / TYPES.length;
  TYPES.forEach((t, i) => {
    const a = i * sector - Math.PI / 2;
    svg.append(s("line", { x1: C, y1: C, x2: C + Math.cos(a) * 410, y2: C + Math.sin(a) * 410, stroke: "#1f2946" }));
    const mid = a + sector / 2;
    svg.append(s("text", { x: C + Math.cos(mid) * 420, y: C + Math.sin(mid) * 420 + 4, "text-anchor": Math.cos(mid) > 0.2 ? "start" : Math.cos(mid) < -0.2 ? "end" : "middle", fill: typeColor(t), "font-size": 12 }, t));
  });
  const maxHits = Math.max(1, ...data.nodes.map((n) => n.hit_count));
  const tip = h("div", { class: "map-tip", hidden: true });
  const wrap = h("div", { class: "card map-card" }, svg, tip);
  const showTip = (ev, ...content) => {
    tip.hidden = false;
    tip.replaceChildren(...content);
    const box = wrap.getBoundingClientRect();
    tip.style.left = `${Math.min(ev.clientX - box.left + 12, box.width - 310)}px`; tip.style.top = `${ev.clientY - box.top + 12}px`;
  };
  const spokes = s("g", { class: "cluster-layer" });  // under the dots
  svg.append(spokes);
  // Radial by tier (hot in the middle), one sector per type; radius and angle jittered by the id so
  // the picture is stable between loads; size grows with the square root of hits.
  const pos = {};
  const sorted = [...data.nodes].sort((a, b) => a.hit_count - b.hit_count);
  for (const n of sorted) {
    const [r0, r1] = rings[n.tier];
    const u = hashOf(n.id), v = hashOf(n.id + "v");
    const rank = Math.sqrt(n.hit_count / maxHits);
    const r = r0 + (r1 - r0) * (0.15 + 0.8 * ((1 - rank) * 0.6 + v * 0.4));
    const a = TYPES.indexOf(n.memory_type) * sector - Math.PI / 2 + sector * (0.06 + 0.88 * u);
    const size = 3 + 11 * rank;
    pos[n.id] = [C + Math.cos(a) * r, C + Math.sin(a) * r];
    const dot = s("circle", { class: `node${n.pinned ? " pin" : ""}`, cx: pos[n.id][0], cy: pos[n.id][1], r: size,
      fill: typeColor(n.memory_type), "fill-opacity": 0.85, "data-id": n.id, "data-cluster": n.cluster_id || "" });
    dot.addEventListener("mouseenter", (ev) => showTip(ev, h("div", {}, typeChip(n.memory_type), " ", tierChip(n.tier), n.pinned ? " ★" : ""),
      h("div", { style: "margin-top:6px" }, n.label), h("div", { class: "muted" }, `${fmt(n.hit_count)} hits`)));
    dot.addEventListener("mouseleave", () => { tip.hidden = true; });
    dot.addEventListener("click", () => openMemory(n.id));
    svg.append(dot);
  }
  const markers = s("g", { class: "cluster-layer" });  // over the dots
  svg.append(markers);
  const drawn = drawClusters(data, pos, spokes, markers, tip, showTip);
  const islandLayer = s("g", { class: "island-layer", "data-testid": "map-islands" });
  svg.insertBefore(islandLayer, spokes);
  const islandToggle = h("input", { type: "checkbox", "data-testid": "map-islands-toggle" });
  const islandCard = h("div", { class: "card", "data-testid": "map-islands-card" },
    h("div", { class: "card-title" }, h("h2", {}, "Entity islands"), h("label", { class: "fine switch" }, islandToggle, " show")),
    h("div", { class: "muted" }, "People, places and projects named by two or more memories shown: switch on to gather their memories around them."));
  islandToggle.addEventListener("change", async () => {
    if (islandToggle.checked) await showIslands(svg, islandLayer, islandCard, pos, C, tip, showTip);
    else hideIslands(svg, islandLayer, pos);
  });
  const total = data.totals.reduce((x, c) => x + c.memories, 0);
  const per = (key, val) => data.totals.filter((c) => c[key] === val).reduce((x, c) => x + c.memories, 0);
  const toggle = h("input", { type: "checkbox", checked: true, "data-testid": "map-clusters-toggle" });
  toggle.addEventListener("change", () => svg.classList.toggle("no-clusters", !toggle.checked));
  main.replaceChildren(head("Map", "memories by tier (hot at the centre) and type; size = hits; ◇ = a knowledge cluster; click for details"),
    h("div", { class: "map-wrap" }, wrap,
      h("div", { class: "grid", style: "align-content:start" },
        h("div", { class: "card", "data-testid": "map-summary" }, h("h2", {}, "Shown"),
          h("div", { class: "kpi" }, h("div", { class: "value" }, fmt(data.nodes.length)), h("div", { class: "sub" },
            data.sampled ? `the most used of ${fmt(total)} active memories (up to 300 per tier)` : `all ${fmt(total)} active memories`))),
        clusterCard(data, drawn, toggle),
        islandCard,
        h("div", { class: "card" }, h("h2", {}, "Types"), barList(TYPES.map((t) => [t, per("memory_type", t)]), typeColor)),
        h("div", { class: "card" }, h("h2", {}, "Tiers"), barList(TIERS.map((t) => [t, per("tier", t)]), tierColor)))));
  if (clusterId) openClusterById(clusterId);
}

const ISLAND_COLORS = { person: "#f472b6", place: "#34d399", project: "#fbbf24" };

async function showIslands(svg, layer, card, pos, C, tip, showTip) {
  // Each entity becomes an island on a ring between the tiers' rings, in its members' mean direction; its
  // memories move most of the way towards it (a memory naming several goes to its largest island).
  let data;
  try { data = await api("/api/dashboard/map/entities?per_tier=300"); }
  catch (e) { toast(e.message); return; }
  layer.replaceChildren();
  svg.classList.add("islands-on");
  const list = h("div", { class: "cluster-list", "data-testid": "map-island-list" });
  card.replaceChildren(card.firstChild, h("div", { class: "fine", style: "margin-bottom:8px" },
    data.islands.length ? `${fmt(data.islands.length)} drawn · ${fmt(data.total)} entities named by 2+ memories shown`
      : "No person, place or project is named by two of the memories shown."), list);
  const home = {};
  const placed = [];
  data.islands.forEach((isl) => {
    const members = isl.memory_ids.filter((id) => pos[id]);
    if (members.length < 2) return;
    const mx = members.reduce((x, id) => x + pos[id][0], 0) / members.length - C;
    const my = members.reduce((y, id) => y + pos[id][1], 0) / members.length - C;
    let a = Math.atan2(my, mx);
    let radius = Math.min(380, Math.max(90, Math.hypot(mx, my)));
    // Keep islands apart: step around the ring until this one overlaps none placed before.
    const r = 10 + 4 * Math.sqrt(members.length);
    for (let i = 0; i < 24 && placed.some(([x, y, rr]) => Math.hypot(x - (C + Math.cos(a) * radius), y - (C + Math.sin(a) * radius)) < rr + r + 14); i++) {
      a += 0.16; if (i % 8 === 7) radius = Math.max(90, radius - 40);
    }
    const cx = C + Math.cos(a) * radius, cy = C + Math.sin(a) * radius;
    placed.push([cx, cy, r]);
    const color = ISLAND_COLORS[isl.kind];
    for (const id of members) if (!home[id]) home[id] = { cx, cy, r, color };
    for (const id of members) layer.append(s("line", { x1: cx, y1: cy, x2: pos[id][0], y2: pos[id][1], stroke: color, "stroke-opacity": 0.35, class: "island-spoke" }));
    const g = s("g", { class: "island", "data-testid": "map-island", "data-name": isl.name, "data-kind": isl.kind });
    g.append(s("circle", { cx, cy, r, fill: color, "fill-opacity": 0.18, stroke: color, "stroke-width": 1.5 }),
      s("text", { x: cx, y: cy + r + 13, "text-anchor": "middle", fill: color, class: "island-label" }, clip(isl.name, 24)));
    g.addEventListener("mouseenter", (ev) => showTip(ev, h("b", {}, isl.name), h("div", { class: "muted" }, `${isl.kind} · ${members.length} memories on the map`)));
    g.addEventListener("mouseleave", () => { tip.hidden = true; });
    layer.append(g);
    list.append(h("div", { class: "cluster-row" }, h("i", { class: "swatch", style: `background:${color}` }),
      h("span", { class: "name" }, isl.name), h("span", { class: "fine" }, isl.kind), h("span", { class: "num" }, fmt(members.length))));
  });
  // Gather: each member dot moves 70 % of the way to its island (its spoke follows it).
  for (const dot of svg.querySelectorAll("circle.node")) {
    const hm = home[dot.dataset.id];
    if (!hm) continue;
    const [x, y] = pos[dot.dataset.id];
    const gx = hm.cx + (x - hm.cx) * 0.3, gy = hm.cy + (y - hm.cy) * 0.3;
    dot.setAttribute("cx", gx); dot.setAttribute("cy", gy);
    dot.classList.add("gathered");
  }
  for (const line of layer.querySelectorAll("line.island-spoke")) line.remove();
  for (const [id, hm] of Object.entries(home)) {
    const dot = svg.querySelector(`circle.node[data-id="${id}"]`);
    if (dot) layer.insertBefore(s("line", { x1: hm.cx, y1: hm.cy, x2: dot.getAttribute("cx"), y2: dot.getAttribute("cy"), stroke: hm.color, "stroke-opacity": 0.45, class: "island-spoke" }), layer.firstChild);
  }
}

function hideIslands(svg, layer, pos) {
  layer.replaceChildren();
  svg.classList.remove("islands-on");
  for (const dot of svg.querySelectorAll("circle.node.gathered")) {
    const [x, y] = pos[dot.dataset.id];
    dot.setAttribute("cx", x); dot.setAttribute("cy", y);
    dot.classList.remove("gathered");
  }
}

function drawClusters(data, pos, spokes, markers, tip, showTip) {
  // Each cluster with two or more memories on the map: a diamond at its members' mean position, a spoke
  // to each of them, its topic as the label (where it fits). Returns how many were drawn.
  state.mapClusters = {};
  const names = clusterNames(data);
  const shapes = [];
  data.clusters.forEach((c, i) => {
    const color = CLUSTER_COLORS[i % CLUSTER_COLORS.length];
    const shown = data.nodes.filter((n) => n.cluster_id === c.id && pos[n.id]);
    state.mapClusters[c.id] = { cluster: c, members: shown, color, name: names[c.id] };
    if (shown.length < 2) return;
    const cx = shown.reduce((x, n) => x + pos[n.id][0], 0) / shown.length;
    const cy = shown.reduce((y, n) => y + pos[n.id][1], 0) / shown.length;
    const r = (c.topic ? 5 : 3.5) + 1.6 * Math.log2(c.member_count);
    shapes.push({ c, color, shown, cx, cy, r });
  });
  // Markers keep apart: two clusters whose members' means fall close drew one diamond over the other, which
  // then took every click (found in stop 28, a browser test clicking the covered one). A few passes push
  // each overlapping pair apart along the line between them; the spokes follow.
  for (let pass = 0; pass < 30; pass++) {
    let moved = false;
    for (let a = 0; a < shapes.length; a++) {
      for (let b = a + 1; b < shapes.length; b++) {
        const p = shapes[a], q = shapes[b];
        let dx = q.cx - p.cx, dy = q.cy - p.cy, d = Math.hypot(dx, dy);
        const need = p.r + q.r + 2;
        if (d >= need) continue;
        if (d < 1e-6) { dx = 1; dy = 0; d = 1; }  // on one spot: apart along x
        const push = (need - d) / 2 + 0.01;
        p.cx -= (dx / d) * push; p.cy -= (dy / d) * push;
        q.cx += (dx / d) * push; q.cy += (dy / d) * push;
        moved = true;
      }
    }
    if (!moved) break;
  }
  const placed = shapes.map(({ cx, cy, r }) => [cx - r, cy - r, 2 * r, 2 * r]);  // labels keep off every marker
  let labelled = 0;
  for (const { c, color, shown, cx, cy, r } of shapes) {
    // A cluster is named when it first crystallizes; the unnamed ones are drawn fainter, labelled in italics
    // with their members' distinguishing words.
    const line = c.topic ? { "stroke-opacity": 0.5, "stroke-width": 1.2 } : { "stroke-opacity": 0.3, "stroke-width": 1, "stroke-dasharray": "2 3" };
    for (const n of shown) spokes.append(s("line", { x1: cx, y1: cy, x2: pos[n.id][0], y2: pos[n.id][1], stroke: color, ...line }));
    const marker = s("path", { class: "cluster-node", d: `M${cx} ${cy - r}L${cx + r} ${cy}L${cx} ${cy + r}L${cx - r} ${cy}Z`, fill: color,
      "data-cluster": c.id, "data-testid": "map-cluster" });
    marker.addEventListener("mouseenter", (ev) => showTip(ev, h("b", {}, names[c.id]), c.topic ? null : h("div", { class: "fine" }, "not yet named: its members' words"),
      h("div", { class: "muted" }, `${fmt(c.member_count)} memories · ${shown.length} on the map`),
      c.skill_slug ? h("div", {}, `◆ ${c.skill_name} v${c.skill_version}`) : null));
    marker.addEventListener("mouseleave", () => { tip.hidden = true; });
    marker.addEventListener("click", () => { tip.hidden = true; openCluster(c.id); });
    markers.append(marker);
    if (labelled >= CLUSTER_LABELS) continue;
    const text = `${c.skill_slug ? "◆ " : ""}${clip(names[c.id], 30)}`;
    const spot = freeSpot(placed, cx, cy, r, text.length * 6.6);
    if (!spot) continue;
    labelled++;
    markers.append(s("text", { class: c.topic ? "cluster-label" : "cluster-label unnamed", x: spot.x, y: spot.y, "text-anchor": spot.anchor, fill: color, "data-testid": "map-cluster-label" }, text));
  }
  return shapes.length;
}

function freeSpot(placed, cx, cy, r, width) {
  // Right of the marker, left, above, below: the first place where the label overlaps no other.
  const tries = [
    { x: cx + r + 5, y: cy + 4, anchor: "start", box: [cx + r + 5, cy - 8, width, 15] },
    { x: cx - r - 5, y: cy + 4, anchor: "end", box: [cx - r - 5 - width, cy - 8, width, 15] },
    { x: cx, y: cy - r - 6, anchor: "middle", box: [cx - width / 2, cy - r - 18, width, 15] },
    { x: cx, y: cy + r + 14, anchor: "middle", box: [cx - width / 2, cy + r + 2, width, 15] },
  ];
  const overlaps = ([x, y, w, hh]) => placed.some(([a, b, c, d]) => x < a + c && a < x + w && y < b + d && b < y + hh);
  const spot = tries.find((t) => !overlaps(t.box));
  if (spot) placed.push(spot.box);
  return spot;
}

const clip = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}…` : text);

function clusterCard(data, drawn, toggle) {
  const card = h("div", { class: "card", "data-testid": "map-clusters" },
    h("div", { class: "card-title" }, h("h2", {}, "Knowledge clusters"), h("label", { class: "fine switch" }, toggle, " show")));
  if (!data.clusters.length) {
    card.append(h("div", { class: "muted" }, data.clusters_total
      ? "None of the memories shown belongs to a cluster of two or more."
      : "No cluster has two members yet: memories join the nearest cluster as they are uploaded."));
    return card;
  }
  card.append(h("div", { class: "fine", style: "margin-bottom:8px" },
    `${fmt(drawn)} drawn · ${fmt(data.clusters_total)} clusters of 2+ memories in all`));
  card.append(h("div", { class: "cluster-list" }, data.clusters.slice(0, 10).map((c) => {
    const { color, name } = state.mapClusters[c.id];
    return h("div", { class: "cluster-row", "data-cluster": c.id, onclick: () => openCluster(c.id) },
      h("i", { class: "swatch", style: `background:${color}` }),
      h("span", { class: c.topic ? "name" : "name unnamed", title: name, "data-testid": "cluster-name" }, name),
      c.skill_slug ? h("span", { class: "skill-mark", title: `skill ${c.skill_name}` }, "◆") : null,
      h("span", { class: "num" }, fmt(c.member_count)));
  })));
  return card;
}

function openClusterById(id) {
  if (state.page !== "map" || !state.mapClusters) return;
  if (state.mapClusters[id]) openCluster(id);
  else toast("None of this cluster's memories is among the most used ones this map shows.");
}

function openCluster(id) {
  const { cluster: c, members, color, name } = state.mapClusters[id];
  const d = document.getElementById("drawer");
  d.hidden = false;
  history.replaceState(null, "", `#/map/${c.id}`);
  const skill = c.skill_slug
    ? h("a", { href: `#/skills/${encodeURIComponent(c.skill_slug)}`, "data-testid": "cluster-skill" }, `◆ ${c.skill_name} · v${c.skill_version}`)
    : h("span", { class: "muted" }, "none yet: a cluster is crystallized into a skill once it has enough members");
  d.replaceChildren(h("button", { class: "btn small close", onclick: () => closeDrawer(), "aria-label": "Close" }, "✕"),
    h("div", { class: "chips" }, h("span", { class: "chip" }, h("span", { class: "dot", style: `background:${color}` }), "knowledge cluster")),
    h("div", { class: "title", "data-testid": "cluster-topic" }, name),
    c.topic ? null : h("div", { class: "fine" }, "Not named yet (a cluster is named when it first crystallizes): these are the words that set its members apart."),
    h("dl", { class: "meta", "data-testid": "cluster-panel" },
      h("dt", {}, "Memories"), h("dd", { "data-testid": "cluster-size" }, fmt(c.member_count)),
      h("dt", {}, "On this map"), h("dd", {}, `${fmt(members.length)} of them (the map shows the most used memories)`),
      h("dt", {}, "Skill"), h("dd", {}, skill),
      h("dt", {}, "Id"), h("dd", {}, h("code", {}, c.id))),
    h("h3", {}, `Members on the map · ${members.length}`),
    h("table", { class: "events clickable", "data-testid": "cluster-members" }, h("tbody", {}, members.map((n) =>
      h("tr", { "data-id": n.id, onclick: () => openMemory(n.id) }, h("td", {}, typeChip(n.memory_type)), h("td", {}, tierChip(n.tier)),
        h("td", {}, n.label), h("td", { class: "num muted nowrap" }, `${fmt(n.hit_count)} hits`))))));
}

// --- Skills -------------------------------------------------------------------------------------------

const OUTCOME_CLASS = { published: "ok", reverted: "warn", quality_failed: "bad", verify_failed: "bad", running: "info" };
const statusChip = (status) => h("span", { class: `chip status-${status}` }, status);
const scoreText = (v) => (v === null || v === undefined ? "—" : Number(v).toFixed(2));
const skillHref = (slug) => `#/skills/${encodeURIComponent(slug)}`;

function scoreBar(score) {
  if (score === null || score === undefined) return h("span", { class: "muted" }, "—");
  return h("div", { class: "score-cell" }, h("div", { class: "track" }, h("div", { class: "fill", style: `width:${Math.round(100 * score)}%;background:#34d399` })),
    h("span", { class: "num" }, scoreText(score)));
}

async function pageSkills(main, slug) {
  if (slug) return skillDetail(main, slug);
  const data = await api("/api/dashboard/skills");
  const n = data.crystallization_threshold;
  if (!data.items.length) {
    const progress = data.clusters
      ? `The largest cluster without a skill has ${fmt(data.largest_cluster_without_skill)} of the ${fmt(n)} members it needs (${fmt(data.clusters)} clusters in all).`
      : "There is no knowledge cluster yet: memories join the nearest cluster as they are uploaded.";
    main.replaceChildren(head("Skills"), emptyState("◆", "No skills yet",
      `Skills appear when a knowledge cluster reaches ${fmt(n)} members: the worker's evolution step then crystallizes it into a versioned SKILL.md. ${progress}`,
      ["each skill with its current version, score and the cluster it came from",
        "its versions and evolution history (what changed, and why)", "the rendered SKILL.md, and a download"], "skills-empty"));
    return;
  }
  const active = data.items.filter((x) => x.status === "active").length;
  const filter = h("input", { type: "search", placeholder: "Filter skills by name, slug or description…", "data-testid": "skills-filter" });
  filter.addEventListener("input", () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const tr of main.querySelectorAll("tr[data-slug]")) tr.hidden = !words.every((w) => tr.textContent.toLowerCase().includes(w));
  });
  main.replaceChildren(...[
    head("Skills", `${fmt(active)} active of ${fmt(data.items.length)} · crystallized from clusters of ${fmt(n)}+ memories, revised after ${fmt(data.recrystallization_delta)} more`),
    data.items.length > 10 ? h("div", { class: "toolbar" }, filter) : null,
    h("div", { class: "card table-card" },
      h("table", { "data-testid": "skills-table" },
        h("thead", {}, h("tr", {}, ["Skill", "Version", "Status", "Score", "Members", "Updated"].map((c, i) =>
          h("th", { style: i === 4 ? "text-align:right" : null }, c)))),
        h("tbody", {}, data.items.map((x) => h("tr", { "data-slug": x.slug, onclick: () => { location.hash = skillHref(x.slug); } },
          h("td", { class: "summary" }, h("div", { class: "s" }, h("b", {}, x.name)),
            h("div", { class: "s fine" }, x.description), h("div", { class: "tags" }, h("span", { class: "tag" }, x.slug))),
          h("td", {}, h("span", { class: "chip" }, `v${x.version}`), x.versions > 1 ? h("div", { class: "fine" }, `${x.versions} versions`) : null),
          h("td", {}, statusChip(x.status)),
          h("td", {}, scoreBar(x.score)),
          h("td", { class: "num", title: x.cluster_topic ? `cluster: ${x.cluster_topic}` : "its cluster is gone" }, x.cluster_size === null ? "—" : fmt(x.cluster_size)),
          h("td", { class: "muted" }, ago(x.updated_at)))))))].filter(Boolean));  // replaceChildren writes null as text
}

async function skillDetail(main, slug, version) {
  const query = version ? `?version=${encodeURIComponent(version)}` : "";
  const d = await api(`/api/dashboard/skills/${encodeURIComponent(slug)}${query}`);
  const show = (v) => skillDetail(main, slug, v).catch((e) => toast(e.message));
  const picker = h("select", { "aria-label": "Version", "data-testid": "skill-version" }, d.versions.map((v) =>
    h("option", { value: v.version }, `v${v.version}${v.version === d.latest_version ? " · latest" : ""}${v.status === "superseded" ? " · superseded" : ""}`)));
  picker.value = d.version;
  picker.addEventListener("change", () => show(picker.value));
  const about = h("div", { class: "card" }, h("h2", {}, "About"), h("dl", { class: "meta" },
    h("dt", {}, "Slug"), h("dd", {}, h("code", {}, d.slug)),
    h("dt", {}, "Score"), h("dd", {}, scoreBar(d.score)),
    h("dt", {}, "Published"), h("dd", {}, when(d.created_at)),
    h("dt", {}, "Categories"), h("dd", {}, d.categories.length ? d.categories.map((c) => h("span", { class: "tag", style: "margin-right:4px" }, c)) : "—"),
    h("dt", {}, "Cluster"), h("dd", {}, d.cluster
      ? [h("a", { href: `#/map/${d.cluster.id}`, title: "show it on the map" }, d.cluster.topic || "unnamed"),
        h("div", { class: "fine" }, `${fmt(d.cluster.member_count)} memories now · ${fmt(d.cluster.members_at_last_version)} at the last version`),
        d.cluster.next_attempt_at ? h("div", { class: "fine" }, `backing off until ${when(d.cluster.next_attempt_at)}`) : null]
      : h("span", { class: "muted" }, "none (saved directly, or its cluster is gone)"))));
  const versions = h("div", { class: "card" }, h("h2", {}, `Versions · ${d.versions.length}`),
    h("div", { class: "version-list", "data-testid": "skill-versions" }, d.versions.map((v) =>
      h("button", { class: `version-row${v.version === d.version ? " active" : ""}`, "data-version": v.version, onclick: () => show(v.version) },
        h("b", {}, `v${v.version}`), h("span", { class: "muted" }, `score ${scoreText(v.score)}`),
        v.status !== "active" ? statusChip(v.status) : null, h("span", { class: "muted" }, ago(v.created_at))))));
  main.replaceChildren(...[
    h("div", { class: "crumbs" }, h("a", { href: "#/skills", "data-testid": "skills-back" }, "← Skills")),
    h("div", { class: "page-head" }, h("h1", { "data-testid": "skill-name" }, d.name), statusChip(d.status),
      h("span", { class: "muted" }, d.version === d.latest_version ? `v${d.version}, the latest` : `v${d.version} · latest is v${d.latest_version}`)),
    d.description ? h("p", { class: "lead" }, d.description) : null,
    h("div", { class: "toolbar" }, picker,
      h("button", { class: "btn primary", "data-testid": "skill-download", onclick: () => downloadText("SKILL.md", d.skill_md) }, "⇩ Download SKILL.md"),
      h("span", { class: "fine" }, `${d.slug}/SKILL.md · ${fmt(d.skill_md.length)} characters`)),
    h("div", { class: "skill-wrap" },
      h("div", { class: "card skill-md", "data-testid": "skill-md", "data-version": d.version }, renderMarkdown(d.skill_md)),
      h("div", { class: "grid", style: "align-content:start" }, about, versions)),
    historyCard(d.history)].filter(Boolean));
}

function historyCard(history) {
  const card = h("div", { class: "card table-card", style: "margin-top:16px" }, h("h2", { style: "margin:10px 8px" }, "Evolution history"));
  if (!history.length) {
    card.append(h("div", { class: "muted", style: "padding:0 8px 8px" }, "No evolution record: this skill was not crystallized from a cluster by the worker."));
    return card;
  }
  const arrow = (a, b) => (a ? `${a} → ${b || "—"}` : b || "—");
  card.append(h("table", { "data-testid": "skill-history" },
    h("thead", {}, h("tr", {}, ["When", "Trigger", "Outcome", "Version", "Score", "Detail"].map((c) => h("th", {}, c)))),
    h("tbody", {}, history.map((r) => h("tr", { "data-record": r.id, "data-status": r.status },
      h("td", { class: "muted", title: when(r.started_at) }, ago(r.started_at)),
      h("td", {}, r.trigger),
      h("td", {}, h("span", { class: `chip outcome-${OUTCOME_CLASS[r.status] || "info"}` }, r.status.replace("_", " "))),
      h("td", {}, arrow(r.old_version, r.new_version)),
      h("td", { class: "nowrap" }, r.old_score !== null ? `${scoreText(r.old_score)} → ${scoreText(r.new_score)}` : scoreText(r.new_score)),
      h("td", { class: "muted" }, r.detail || `from ${fmt(r.memory_ids.length)} memories`))))));
  return card;
}

function downloadText(name, text) {
  // A Blob on this page: nothing is fetched again, so the file is exactly the text shown.
  const url = URL.createObjectURL(new Blob([text], { type: "text/markdown;charset=utf-8" }));
  const a = h("a", { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 30000);
}

// --- a small, safe Markdown renderer (SKILL.md) -------------------------------------------------------
// It builds DOM nodes and text nodes only: nothing from a skill is ever parsed as HTML, so markup in it
// shows as the text it is. Headings, paragraphs, lists (nested by indent), fenced code, quotes, rules;
// inline code, bold, italic, links (http, https, mailto and same-page only) and [m:xxxxxxxx] citations.

const SAFE_HREF = /^(https?:\/\/|mailto:|#|\/(?!\/))/i;
const INLINE = new RegExp([
  /(`+)([\s\S]+?)\1(?!`)/.source,                     // 1, 2: code
  /\[m:([0-9a-f]{8})\]/.source,                        // 3: a memory citation
  /\[([^\]]+)\]\(([^()\s]+)\)/.source,                 // 4, 5: link
  /\*\*(?=\S)([\s\S]*?\S)\*\*/.source,                 // 6: bold
  /(?<!\w)__(?=\S)([\s\S]*?\S)__(?!\w)/.source,        // 7: bold
  /(?<![\w*])\*(?=[^\s*])([^*]*?[^\s*])\*(?![\w*])/.source,  // 8: italic
  /(?<![\w_])_(?=[^\s_])([^_]*?[^\s_])_(?![\w_])/.source,    // 9: italic
].join("|"));

function inline(text) {
  const out = [];
  let rest = text;
  while (rest) {
    const m = INLINE.exec(rest);
    if (!m) { out.push(rest); break; }
    if (m.index) out.push(rest.slice(0, m.index));
    if (m[1]) out.push(h("code", {}, m[2].trim() || m[2]));
    else if (m[3]) out.push(h("span", { class: "cite", title: `cites memory ${m[3]}…` }, `m:${m[3]}`));
    else if (m[4] !== undefined) out.push(SAFE_HREF.test(m[5]) ? h("a", { href: m[5], target: "_blank", rel: "noopener noreferrer" }, inline(m[4])) : `${m[4]} (${m[5]})`);
    else if (m[6] !== undefined || m[7] !== undefined) out.push(h("strong", {}, inline(m[6] ?? m[7])));
    else out.push(h("em", {}, inline(m[8] ?? m[9])));
    rest = rest.slice(m.index + m[0].length);
  }
  return out;
}

function yamlScalar(value) {
  const v = value.trim();
  if (v.length > 1 && v.startsWith("'") && v.endsWith("'")) return v.slice(1, -1).replaceAll("''", "'");
  if (v.length > 1 && v.startsWith('"') && v.endsWith('"')) { try { return JSON.parse(v); } catch { return v.slice(1, -1); } }
  return v;
}

function frontMatter(block) {
  // SKILL.md's front matter: `key: value` lines; metadata is one line of JSON.
  const dl = h("dl", { class: "meta front-matter", "data-testid": "skill-front-matter" });
  for (const line of block.split("\n")) {
    const m = /^([\w-]+):\s*(.*)$/.exec(line);
    if (!m) continue;
    let value = yamlScalar(m[2]);
    if (m[1] === "metadata") {
      try {
        const meta = JSON.parse(m[2]);
        value = Object.entries(meta).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") || "—" : v ?? "—"}`).join(" · ");
      } catch { /* shown as written */ }
    }
    dl.append(h("dt", {}, m[1]), h("dd", {}, value));
  }
  return dl;
}

function renderMarkdown(source) {
  const root = h("div", { class: "md" });
  let text = source.replace(/\r\n?/g, "\n");
  const fm = /^---\n([\s\S]*?)\n---\n/.exec(text);
  if (fm) { root.append(frontMatter(fm[1])); text = text.slice(fm[0].length); }
  const lines = text.split("\n");
  let para = [];
  let lists = [];  // open lists, outermost first: {el, indent, ordered}
  const top = () => lists[lists.length - 1];
  const flush = () => { if (para.length) root.append(h("p", {}, inline(para.join(" ")))); para = []; };
  const block = (el) => { flush(); lists = []; root.append(el); };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/.exec(line);
    if (fence) {
      const body = [];
      while (++i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i]);
      block(h("pre", {}, h("code", { "data-lang": fence[2] || null }, body.join("\n"))));
      continue;
    }
    if (!line.trim()) { flush(); lists = []; continue; }
    const heading = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) { block(h(`h${heading[1].length}`, {}, inline(heading[2]))); continue; }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { block(h("hr")); continue; }
    const quote = /^\s*>\s?(.*)$/.exec(line);
    if (quote) { block(h("blockquote", {}, inline(quote[1]))); continue; }
    const item = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    if (item) {
      flush();
      const indent = item[1].length, ordered = /\d/.test(item[2]);
      while (lists.length && (indent < top().indent || (indent === top().indent && top().ordered !== ordered))) lists.pop();
      if (!lists.length || indent > top().indent) {
        const start = ordered ? parseInt(item[2], 10) : 1;
        const el = h(ordered ? "ol" : "ul", { start: start !== 1 ? start : null });
        (lists.length ? top().el.lastElementChild || top().el : root).append(el);
        lists.push({ el, indent, ordered });
      }
      top().el.append(h("li", {}, inline(item[3])));
      continue;
    }
    if (lists.length && /^\s+\S/.test(line)) { top().el.lastElementChild.append(" ", ...inline(line.trim())); continue; }
    lists = [];
    para.push(line.trim());
  }
  flush();
  return root;
}

// --- Trajectories & import (filled in as those parts of the hub land) ----------------------------------

function emptyState(icon, title, text, items, testid) {
  return h("div", { class: "card empty", "data-testid": testid }, h("div", { class: "big" }, icon), h("h2", {}, title),
    h("p", { class: "muted" }, text), h("ul", {}, items.map((i) => h("li", {}, i))));
}

async function pageTrajectories(main) {
  const parts = [head("Trajectories & import", "sessions agents handed in, their task segments and metrics; chat-export imports")];
  if (state.features.imports) parts.push(importCard());
  else parts.push(emptyState("⇪", "Import is not available yet",
    "When the import endpoints land you will upload chat exports and session logs here:",
    ["a progress bar per file, with pause and resume", "a review of the memories each import produced"], "import-empty"));
  parts.push(h("div", { style: "height:16px" }));
  if (state.features.trajectories) parts.push(await sessionsCard());
  else parts.push(emptyState("⇅", "No trajectories yet",
    "Once session ingestion lands in this hub, this page shows:",
    ["sessions, their task segments and each segment's metric values", "which segments produced memories"], "trajectories-empty"));
  main.replaceChildren(...parts);
}

const IMPORT_KINDS = ["chatgpt", "claude", "deepseek", "markdown", "text"];
const FINISHED = ["done", "failed"];

function progressBar(job) {
  const pct = Math.round(100 * (job.progress || 0));
  const color = job.status === "failed" ? "#f87171" : job.status === "paused" ? "#fbbf24" : job.status === "done" ? "#34d399" : "#38bdf8";
  return h("div", { class: "progress", "data-testid": "import-progress", "data-status": job.status, "data-progress": pct },
    h("div", { class: "track big" }, h("div", { class: "fill", style: `width:${pct}%;background:${color}` })),
    h("span", { class: "num" }, `${pct}% · ${fmt(job.done)} of ${fmt(job.total)} conversations${job.failed ? ` · ${fmt(job.failed)} failed` : ""} · ${job.status}`));
}

function importCard() {
  const kind = h("select", { name: "kind", "aria-label": "Export format", "data-testid": "import-kind" }, IMPORT_KINDS.map((k) => h("option", { value: k }, k)));
  const file = h("input", { type: "file", name: "file", required: true, "data-testid": "import-file" });
  const jobs = h("div", { "data-testid": "import-jobs" });
  const form = h("form", { class: "toolbar" }, kind, file, h("button", { class: "btn primary", type: "submit", "data-testid": "import-go" }, "Import"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!file.files.length) return;
    const fd = new FormData();
    fd.append("kind", kind.value); fd.append("name", file.files[0].name); fd.append("file", file.files[0]);
    try { const job = await api("/imports", { method: "POST", body: fd }); toast(`Import of ${job.name} started`); file.value = ""; await drawJobs(jobs); }
    catch (e) { toast(e.message); }
  });
  drawJobs(jobs);
  return h("div", { class: "card" }, h("h2", {}, "Import chat exports"),
    h("p", { class: "fine" }, "ChatGPT, Claude or DeepSeek exports, Markdown or plain text. Each conversation becomes a session; the worker segments and scores it and extracts memories. Redaction runs before anything is stored."),
    form, jobs);
}

async function drawJobs(box) {
  const list = await api("/imports?limit=20");
  clearTimeout(drawJobs.timer);
  if (!list.length) { box.replaceChildren(h("div", { class: "muted" }, "No import yet.")); return; }
  box.replaceChildren(h("table", { class: "events" }, h("tbody", {}, list.map((job) => h("tr", { "data-job": job.id },
    h("td", { style: "width:26%" }, h("b", {}, job.name), h("div", { class: "muted" }, `${job.kind} · ${ago(job.created_at)}`)),
    h("td", {}, progressBar(job), job.last_error ? h("div", { class: "error" }, job.last_error) : null),
    h("td", { style: "width:180px;text-align:right" },
      job.status === "running" ? h("button", { class: "btn small", "data-testid": "import-pause", onclick: () => jobAction(box, job, "pause") }, "Pause") : null,
      job.status === "paused" || job.status === "failed" ? h("button", { class: "btn small", "data-testid": "import-resume", onclick: () => jobAction(box, job, "resume") }, "Resume") : null,
      " ", h("button", { class: "btn small", "data-testid": "import-review", onclick: () => reviewJob(job) }, "Review")))))));
  if (list.some((j) => !FINISHED.includes(j.status) && j.status !== "paused")) drawJobs.timer = setTimeout(() => { if (box.isConnected) drawJobs(box); }, 700);
}

async function jobAction(box, job, action) {
  try { await api(`/imports/${job.id}/${action}`, { method: "POST" }); await drawJobs(box); } catch (e) { toast(e.message); }
}

async function reviewJob(job) {
  const d = document.getElementById("drawer");
  d.hidden = false;
  const items = await api(`/imports/${job.id}/review?limit=200`);
  const decide = async (item, approve) => {
    try {
      const out = await api(`/imports/${job.id}/review`, { method: "POST", body: approve ? { approve: [item.item_id] } : { discard: [item.item_id] } });
      toast(approve ? "Approved" : `Discarded; ${out.memories_archived} memories archived`); await reviewJob(job);
    } catch (e) { toast(e.message); }
  };
  d.replaceChildren(h("button", { class: "btn small close", onclick: () => closeDrawer() }, "✕"),
    h("div", { class: "title" }, `Review · ${job.name}`),
    h("p", { class: "fine" }, "Each imported conversation, what it produced, and your decision: discarding archives its memories."),
    h("table", { class: "events", "data-testid": "import-review-items" }, h("tbody", {}, items.map((it) => h("tr", {},
      h("td", {}, h("b", {}, it.title || "untitled"), h("div", { class: "muted" }, `${it.status} · ${fmt(it.messages)} messages · ${fmt(it.segments)} segments · ${fmt(it.memory_ids.length)} memories`)),
      h("td", { class: "muted" }, it.review_status || "—"),
      h("td", { style: "text-align:right;white-space:nowrap" },
        h("button", { class: "btn small", onclick: () => decide(it, true) }, "Approve"), " ",
        h("button", { class: "btn small danger", onclick: () => decide(it, false) }, "Discard")))))));
}

async function sessionsCard() {
  const sessions = await api("/sessions?limit=50");
  const card = h("div", { class: "card table-card", "data-testid": "sessions" }, h("h2", { style: "margin:10px 8px" }, "Sessions"));
  if (!sessions.length) { card.append(h("div", { class: "muted", style: "padding:0 8px 8px" }, "No session has been handed in yet: agents send them with `ultron ingest` or POST /ingest.")); return card; }
  card.append(h("table", {}, h("thead", {}, h("tr", {}, ["Session", "Agent", "Messages", "Segments", "Memories", "Review", "Updated"].map((c) => h("th", {}, c)))),
    h("tbody", {}, sessions.map((x) => h("tr", { "data-session": x.id, onclick: () => openSession(x.id) },
      h("td", {}, h("div", {}, x.source || x.id.slice(0, 8)), h("div", { class: "muted", style: "font-size:12px" }, x.format)),
      h("td", { class: "muted" }, x.agent), h("td", { class: "num" }, fmt(x.message_count)), h("td", { class: "num" }, fmt(x.segments)),
      h("td", { class: "num" }, fmt(x.memories)), h("td", { class: "muted" }, x.review_status), h("td", { class: "muted" }, ago(x.updated_at)))))));
  return card;
}

async function openSession(id) {
  const d = document.getElementById("drawer");
  d.hidden = false;
  d.replaceChildren(h("div", { class: "loading" }, "Loading session…"));
  const detail = await api(`/sessions/${id}`);
  const metricValue = (v) => (v && typeof v === "object" ? v.value : v);
  d.replaceChildren(h("button", { class: "btn small close", onclick: () => closeDrawer() }, "✕"),
    h("div", { class: "title" }, detail.session.source || "Session"),
    h("div", { class: "chips" }, h("span", { class: "chip" }, detail.session.format), h("span", { class: "chip" }, `${fmt(detail.session.message_count)} messages`),
      h("span", { class: "chip" }, detail.session.agent)),
    h("h3", {}, `Segments · ${detail.segments.length}`),
    h("div", { "data-testid": "segments" }, detail.segments.map((sg) => h("div", { class: "card", style: "margin-bottom:10px" },
      h("div", { style: "margin-bottom:10px" }, h("b", {}, `#${sg.segment_index + 1} ${sg.topic || ""}`), " ", h("span", { class: "chip" }, sg.stage),
        sg.score !== null ? h("span", { class: "chip", style: "margin-left:6px" }, `score ${sg.score.toFixed(2)}`) : null),
      barList(Object.entries(sg.metrics || {}).map(([k, v]) => [k, Number(metricValue(v) || 0)]).filter(([, v]) => !Number.isNaN(v)), () => "#8b9cff"),
      sg.memory_ids.length ? h("div", { class: "fine" }, `${sg.memory_ids.length} memories extracted`) : null))));
}

// --- Settings -----------------------------------------------------------------------------------------

async function pageSettings(main) {
  const [cfg, runtime] = await Promise.all([api("/api/dashboard/settings"), api("/api/dashboard/settings/runtime")]);
  const filter = h("input", { type: "search", placeholder: "Filter settings…" });
  const rows = Object.entries(cfg).sort(([a], [b]) => a.localeCompare(b));
  const tbody = h("tbody");
  const draw = () => tbody.replaceChildren(...rows.filter(([k]) => k.includes(filter.value.toLowerCase())).map(([k, v]) =>
    h("tr", {}, h("td", { class: "k" }, k), h("td", { class: `v${v === "********" ? " secret" : ""}` },
      v === "********" ? "•••••••• (set, masked)" : v === null ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v)))));
  filter.addEventListener("input", draw);
  draw();
  main.replaceChildren(head("Settings", "runtime settings an admin may change; the running configuration, secrets masked"),
    runtimeCard(runtime),
    h("h2", { style: "margin-top:22px" }, "Configuration"),
    h("div", { class: "toolbar" }, filter),
    h("div", { class: "card table-card" }, h("table", { class: "settings-table", "data-testid": "settings-table" }, tbody)),
    h("p", { class: "fine" }, "Change these with ULTRON_* environment variables or command-line options and restart the hub; see docs/configuration.md. The runtime settings above override them for this tenant without a restart."));
}

// One line of plain words per runtime setting, above its formula (the setting's own description).
const PLAIN_SETTINGS = {
  time_decay_weight: "How much recent use counts in search: 0 ignores it, 1 ranks by it most.",
  decay_alpha: "How fast an unused memory cools down; higher forgets faster.",
  tier_boost_hot: "Extra weight for the most used memories in search.",
  tier_boost_warm: "Weight for memories in ordinary use.",
  tier_boost_cold: "Weight for rarely used memories (below 1 pushes them down).",
  fulltext_weight: "How much exact words count against meaning when ranking search results.",
  resonance_weight: "When a search gives a mood, how much memories of a similar mood rise.",
  urgency_weight: "How much intense (high-arousal) memories rise in search.",
  arousal_decay_slowdown: "Intense memories cool down more slowly by this much.",
  freshness_weight: "Bonus for memories stored very recently.",
  freshness_hours: "How long a new memory keeps its freshness bonus.",
  entity_weight: "Bonus for memories that name the same people, places or things as the search.",
  resolved_factor: "How far down a resolved memory sinks in search.",
  serendipity_enabled: "Let a search that finds little show an old, forgotten memory or two.",
  serendipity_min_results: "Show such a surprise when a search returns fewer results than this.",
  serendipity_relevance: "…or when its best result is weaker than this.",
  serendipity_min_age_days: "Only memories unused for at least this many days can surface by surprise.",
  brief_max_tokens: "How long the session-start brief may be, in tokens.",
  brief_personal_limit: "Most facts about the person (life, preferences) a brief includes.",
  brief_hot_limit: "Most of the busiest memories a brief includes.",
  hot_percentile: "Share of memories, by use, that count as HOT.",
  warm_percentile: "The next share counts as WARM; the rest is COLD.",
  cold_ttl_days: "Days a COLD memory may go unused before it is archived.",
  personal_ttl_days: "The same for personal memories, which are kept much longer.",
  arousal_tier_weight: "Intense memories stay in a warmer tier by this much.",
  arousal_ttl_factor: "Intense memories are kept longer before archiving by this much.",
};

const settingText = (v) => (v === null || v === undefined ? "" : String(v));

function runtimeCard(view) {
  // The tunables an admin may change while the hub runs: one input per setting, checked here (type and
  // range) and again by the hub, which stores all of them or none.
  const ro = !view.editable;
  const error = h("div", { class: "error", "data-testid": "runtime-error", hidden: true });
  const inputs = {};
  const rows = view.settings.map((st) => {
    let input;
    if (st.kind === "boolean") {
      input = h("input", { type: "checkbox", name: st.name, checked: st.value === true, disabled: ro });
    } else {
      input = h("input", { type: "number", name: st.name, value: settingText(st.value), step: st.kind === "integer" ? 1 : "any",
        min: st.minimum ?? null, max: st.maximum ?? null, disabled: ro, placeholder: st.nullable ? "unset (per model)" : null,
        style: "width:9em" });
    }
    inputs[st.name] = { input, st };
    const reset = st.changed && !ro ? h("button", { class: "btn small", type: "button", "data-testid": `reset-${st.name}`,
      onclick: () => save({ reset: [st.name] }) }, "Reset") : null;
    return h("tr", { "data-setting": st.name, class: st.changed ? "changed" : null },
      h("td", { class: "k" }, st.name, h("div", { class: "plain", "data-testid": "setting-plain" }, PLAIN_SETTINGS[st.name] || ""),
        h("div", { class: "fine" }, st.description)),
      h("td", {}, h("span", { class: "chip" }, st.part)),
      h("td", {}, input),
      h("td", { class: "muted" }, settingText(st.default) || "unset"),
      h("td", { class: "muted" }, st.changed ? `${st.updated_by || "an agent"} · ${ago(st.updated_at)}` : "configured"),
      h("td", {}, reset));
  });
  const read = () => {
    const values = {};
    const problems = [];
    for (const [name, { input, st }] of Object.entries(inputs)) {
      let v;
      if (st.kind === "boolean") v = input.checked;
      else if (input.value.trim() === "") {
        if (!st.nullable) { problems.push(`${name}: a value is required`); continue; }
        v = null;
      } else {
        v = Number(input.value);
        if (!Number.isFinite(v)) { problems.push(`${name}: not a number`); continue; }
        if (st.kind === "integer" && !Number.isInteger(v)) { problems.push(`${name}: must be a whole number`); continue; }
        if (st.minimum !== null && v < st.minimum) { problems.push(`${name}: at least ${st.minimum}`); continue; }
        if (st.maximum !== null && v > st.maximum) { problems.push(`${name}: at most ${st.maximum}`); continue; }
      }
      if (v !== st.value) values[name] = v;
    }
    return { values, problems };
  };
  async function save(change) {
    error.hidden = true;
    try {
      const next = await api("/api/dashboard/settings/runtime", { method: "PATCH", body: change });
      card.replaceWith(runtimeCard(next));
      toast("Settings saved: they apply within a few seconds everywhere");
    } catch (e) { error.textContent = e.message; error.hidden = false; }
  }
  const submit = (ev) => {
    ev.preventDefault();
    const { values, problems } = read();
    // The hub checks too (a 422 with its reason); this only spares a round trip for the obvious ones.
    if (problems.length) { error.textContent = problems.join("; "); error.hidden = false; return; }
    if (!Object.keys(values).length) { error.textContent = "Nothing changed."; error.hidden = false; return; }
    save({ values });
  };
  const form = h("form", { "data-testid": "runtime-form", onsubmit: submit, novalidate: true },
    h("div", { class: "card table-card" }, h("table", { class: "settings-table runtime", "data-testid": "runtime-table" },
      h("thead", {}, h("tr", {}, ["setting", "part", "value", "default", "changed", ""].map((x) => h("th", {}, x)))),
      h("tbody", {}, rows))),
    error,
    ro ? h("p", { class: "fine", "data-testid": "runtime-readonly" }, "Read-only: only an admin agent may change these.")
      : h("div", { class: "actions" }, h("button", { class: "btn primary", type: "submit", "data-testid": "runtime-save" }, "Save changes")));
  const card = h("div", { "data-testid": "runtime-settings" },
    h("h2", {}, "Runtime settings"),
    h("p", { class: "fine" }, `Stored in the database for this tenant; every process of the hub (the API, the worker) applies a change within ${view.ttl_seconds} s, without a restart. Each change is logged with who made it.`),
    form);
  return card;
}

// --- Similarity network -------------------------------------------------------------------------------

const NETWORK_LABELS = 30;  // the most used memories are labelled; the others on hover

async function pageNetwork(main) {
  const data = await api("/api/dashboard/network?limit=80&k=4");
  if (!main.isConnected) return;
  const W = 900, H = 620;
  const n = data.nodes.length;
  const index = Object.fromEntries(data.nodes.map((d, i) => [d.id, i]));
  // Fruchterman-Reingold: a deterministic start on a circle, repulsion k²/d between all nodes, attraction
  // d²/k along edges (weighted by similarity), a little gravity, and a cooling step; n is at most 200.
  const pos = data.nodes.map((d, i) => [W / 2 + 200 * Math.cos((2 * Math.PI * i) / Math.max(n, 1)), H / 2 + 200 * Math.sin((2 * Math.PI * i) / Math.max(n, 1))]);
  const links = data.edges.map((e) => [index[e.source], index[e.target], e.similarity]).filter(([a, b]) => a !== undefined && b !== undefined);
  const k = 0.3 * Math.sqrt((W * H) / Math.max(n, 1));
  let temp = W / 8;
  for (let step = 0; step < 300; step++) {
    const disp = pos.map(() => [0, 0]);
    for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) {
      const dx = pos[i][0] - pos[j][0], dy = pos[i][1] - pos[j][1], d = Math.max(Math.hypot(dx, dy), 0.01);
      const rep = (k * k) / d;
      disp[i][0] += (dx / d) * rep; disp[i][1] += (dy / d) * rep; disp[j][0] -= (dx / d) * rep; disp[j][1] -= (dy / d) * rep;
    }
    for (const [a, b, sim] of links) {
      const dx = pos[a][0] - pos[b][0], dy = pos[a][1] - pos[b][1], d = Math.max(Math.hypot(dx, dy), 0.01);
      const att = ((d * d) / k) * (0.5 + sim);
      disp[a][0] -= (dx / d) * att; disp[a][1] -= (dy / d) * att; disp[b][0] += (dx / d) * att; disp[b][1] += (dy / d) * att;
    }
    for (let i = 0; i < n; i++) {
      disp[i][0] += 0.5 * (W / 2 - pos[i][0]); disp[i][1] += 0.5 * (H / 2 - pos[i][1]);
      const len = Math.max(Math.hypot(disp[i][0], disp[i][1]), 0.01), move = Math.min(len, temp);
      pos[i][0] = Math.min(W - 20, Math.max(20, pos[i][0] + (disp[i][0] / len) * move));
      pos[i][1] = Math.min(H - 20, Math.max(20, pos[i][1] + (disp[i][1] / len) * move));
    }
    temp = Math.max(1, temp * 0.98);
  }
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", "data-testid": "network-svg" });
  for (const [a, b, sim] of links) {
    svg.append(s("line", { x1: pos[a][0], y1: pos[a][1], x2: pos[b][0], y2: pos[b][1], stroke: "#8b9cff", "stroke-opacity": Math.min(1, 0.25 + sim / 2), "stroke-width": 1 + 2 * sim, class: "net-edge" },
      s("title", {}, `similarity ${sim.toFixed(3)}`)));
  }
  const maxHits = Math.max(1, ...data.nodes.map((d) => d.hit_count));
  const radius = (d) => 5 + 7 * Math.sqrt(d.hit_count / maxHits);
  data.nodes.forEach((d, i) => {
    const dot = s("circle", { cx: pos[i][0], cy: pos[i][1], r: radius(d), fill: typeColor(d.memory_type), class: "net-node", "data-id": d.id },
      s("title", {}, `${d.summary} · ${d.memory_type} · ${d.tier} · ${d.hit_count} hits`));
    dot.addEventListener("click", () => openMemory(d.id));
    svg.append(dot);
  });
  // Readable without hovering: the most used memories get a short label where it overlaps no dot and no
  // other label (the rest keep their hover title).
  const placed = data.nodes.map((d, i) => [pos[i][0] - radius(d), pos[i][1] - radius(d), 2 * radius(d), 2 * radius(d)]);
  const labels = s("g", { class: "net-labels" });
  data.nodes.map((d, i) => [d, i]).sort(([a], [b]) => b.hit_count - a.hit_count).slice(0, NETWORK_LABELS).forEach(([d, i]) => {
    const text = clip(d.summary || "", 28);
    const spot = text && freeSpot(placed, pos[i][0], pos[i][1], radius(d), text.length * 6.6);
    if (spot) labels.append(s("text", { class: "net-label", x: spot.x, y: spot.y, "text-anchor": spot.anchor, "data-testid": "network-label" }, text));
  });
  svg.append(labels);
  main.replaceChildren(head("Similarity network", `${n} most used memories, ${links.length} links at similarity ≥ ${data.min_similarity.toFixed(3)} (calibrated for this embedding model)`),
    h("div", { class: "card map-card" }, n ? svg : h("div", { class: "muted" }, "No memories yet.")),
    h("div", { class: "legend" }, TYPES.map((t) => h("span", {}, h("i", { style: `background:${typeColor(t)}` }), t))));
}

// --- Brief simulation ---------------------------------------------------------------------------------

async function pageBrief(main) {
  const task = h("input", { type: "search", placeholder: "Task hint (optional), e.g. the cron job cannot import pandas", "data-testid": "brief-task", style: "flex:1" });
  const budget = h("input", { type: "number", min: 50, max: 100000, value: 800, "data-testid": "brief-budget", style: "width:7em" });
  const out = h("div", { "data-testid": "brief-result" });
  const run = async () => {
    const params = new URLSearchParams({ max_tokens: budget.value || "800" });
    if (task.value.trim()) params.set("task", task.value.trim());
    const b = await api(`/brief?${params}`);
    const colors = { pinned: "#f59e0b", relevant: "#38bdf8", personal: "#ec4899", hot: "#ef4444", skill: "#22c55e" };
    const rows = b.items.map((it, i) => h("div", { class: "card brief-item", style: "margin-bottom:8px", "data-testid": "brief-item" },
      h("div", {}, h("span", { class: "chip", style: `background:${colors[it.section] || "#64748b"};color:#0b1020` }, it.section), " ",
        h("b", {}, `#${i + 1}`), " ", it.confidence ? confidenceChip(it.confidence) : null, " ", h("span", { class: "muted" }, it.reason)),
      h("div", { style: "margin:6px 0" }, it.text),
      h("div", { class: "bars" }, [["tokens", it.tokens, it.tokens / b.max_tokens, "#8b9cff", `${it.tokens} of ${b.max_tokens}`],
        ...(it.relevance !== null && it.relevance !== undefined ? [["relevance", it.relevance, it.relevance, "#38bdf8", it.relevance.toFixed(2)]] : []),
        ...(it.similarity !== null && it.similarity !== undefined ? [["similarity", it.similarity, Math.max(0, it.similarity), "#22c55e", Math.max(0, it.similarity).toFixed(2)]] : [])]
        .map(([k, , share, color, label]) => h("div", { class: "bar-row", "data-key": k }, h("span", { class: "name" }, k),
          h("div", { class: "track" }, h("div", { class: "fill", style: `width:${Math.min(100, 100 * share)}%;background:${color}` })),
          h("span", { class: "num" }, label))))));
    const used = h("div", { class: "card" }, h("b", {}, `${b.tokens} of ${b.max_tokens} tokens`), ` · ${b.items.length} items, ${b.omitted} left out by the budget`,
      h("div", { class: "track", style: "margin-top:8px" }, h("div", { class: "fill", "data-testid": "brief-budget-bar", style: `width:${Math.min(100, (100 * b.tokens) / b.max_tokens)}%;background:#8b9cff` })));
    const tips = (b.suggestions || []).map((sg) => h("div", { class: "card", "data-testid": "pin-suggestion" }, h("b", {}, "Pin suggestion: "), sg.summary, h("div", { class: "fine" }, sg.reason)));
    out.replaceChildren(used, ...tips, ...rows);
  };
  const go = h("button", { class: "btn", onclick: () => run().catch((e) => out.replaceChildren(h("div", { class: "card error" }, e.message))), "data-testid": "brief-run" }, "Simulate");
  // Enter in the task (or budget) field runs it, as the Simulate button does.
  for (const field of [task, budget]) field.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); go.click(); } });
  main.replaceChildren(head("Brief simulation", "what this agent would receive at session start, in order, and why"),
    h("div", { class: "toolbar" }, task, budget, go), out);
  await run();
}

// --- boot ---------------------------------------------------------------------------------------------

document.getElementById("signin-form").addEventListener("submit", signIn);
document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") closeDrawer(); });
start();

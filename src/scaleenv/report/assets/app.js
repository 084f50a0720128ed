/* scaleenv report viewer: loads data scripts on demand (works from file://), no dependencies. */
"use strict";

const ROOT = document.body.dataset.root || "";
const PAGE_SIZE = 50;

/* Data files call SE.put(name, data); SE.load(name) injects the script once and resolves with the data. */
const SE = {
  data: {}, waiting: {},
  put(name, value) {
    this.data[name] = value;
    (this.waiting[name] || []).forEach((w) => w.resolve(value));
    delete this.waiting[name];
  },
  load(name) {
    if (name in this.data) return Promise.resolve(this.data[name]);
    return new Promise((resolve, reject) => {
      const first = !this.waiting[name];
      (this.waiting[name] = this.waiting[name] || []).push({ resolve, reject });
      if (!first) return;
      const s = document.createElement("script");
      s.src = ROOT + "data/" + name + ".js";
      s.onerror = () => {
        (this.waiting[name] || []).forEach((w) => w.reject(new Error("missing data file " + s.src)));
        delete this.waiting[name];
      };
      document.head.appendChild(s);
    });
  },
};
window.SE = SE;

const $ = (sel, el = document) => el.querySelector(sel);
const $$ = (sel, el = document) => Array.from(el.querySelectorAll(sel));
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const pad = (n, w) => String(n).padStart(w, "0");
const hashParams = () => new URLSearchParams(location.hash.slice(1));
function setHash(obj) {
  const p = new URLSearchParams();
  Object.entries(obj).forEach(([k, v]) => { if (v !== undefined && v !== null && v !== "") p.set(k, v); });
  const h = "#" + p.toString();
  if (location.hash !== h) history.replaceState(null, "", h);
}
function option(sel, value, label) {
  const o = document.createElement("option");
  o.value = value; o.textContent = label; sel.appendChild(o);
}

/* Colour JSON in a <pre class="hl"> the first time it is shown (episode files carry plain text). */
function highlightJSON(pre) {
  if (pre.dataset.done) return;
  pre.dataset.done = "1";
  const re = /("(?:\\.|[^"\\])*")(\s*:)?|\b(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\b|\b(true|false|null)\b/g;
  let text = pre.textContent;
  try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* clipped or not JSON: as it is */ }
  let out = "", last = 0, m;
  while ((m = re.exec(text))) {
    out += esc(text.slice(last, m.index));
    if (m[1]) out += `<span class="${m[2] ? "t-key" : "t-str"}">${esc(m[1])}</span>${m[2] || ""}`;
    else if (m[3]) out += `<span class="t-num">${m[3]}</span>`;
    else out += `<span class="t-kw">${m[4]}</span>`;
    last = re.lastIndex;
  }
  pre.innerHTML = out + esc(text.slice(last));
}
document.addEventListener("toggle", (ev) => {
  if (ev.target.matches && ev.target.matches("details") && ev.target.open) $$("pre.hl", ev.target).forEach(highlightJSON);
}, true);

/* Click-to-sort for server-rendered tables marked .sortable. */
function sortable(root = document) {
  $$("table.sortable", root).forEach((t) => {
    $$("thead th", t).forEach((th, i) => {
      th.classList.add("sort");
      th.addEventListener("click", () => {
        const body = t.tBodies[0];
        const dir = th.dataset.dir === "asc" ? -1 : 1;
        th.dataset.dir = dir === 1 ? "asc" : "desc";
        const key = (r) => { const s = r.cells[i] ? r.cells[i].textContent.trim() : ""; const n = parseFloat(s); return isNaN(n) ? s.toLowerCase() : n; };
        Array.from(body.rows).sort((a, b) => { const x = key(a), y = key(b); return (x > y ? 1 : x < y ? -1 : 0) * dir; })
          .forEach((r) => body.appendChild(r));
      });
    });
  });
}

/* A paginated list: render(rows) draws one page of already-filtered rows. */
function pager(el, onPage) {
  let page = 0, total = 0;
  const draw = () => {
    const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
    page = Math.min(page, pages - 1);
    el.innerHTML = `<button class="btn small" data-p="prev" ${page === 0 ? "disabled" : ""}>‹ prev</button>
      <span class="muted">page ${page + 1} of ${pages}</span>
      <button class="btn small" data-p="next" ${page >= pages - 1 ? "disabled" : ""}>next ›</button>`;
    onPage(page * PAGE_SIZE, Math.min(total, (page + 1) * PAGE_SIZE));
  };
  el.addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-p]");
    if (!b) return;
    page += b.dataset.p === "next" ? 1 : -1;
    draw();
  });
  return { reset(n) { total = n; page = 0; draw(); }, redraw() { draw(); } };
}

/* ------------------------------------------------------------------ domains */

function graphView(box, data, tip) {
  box.innerHTML = data.svg;
  const svg = $("svg", box);
  const vb0 = svg.viewBox.baseVal;
  const home = [vb0.x, vb0.y, vb0.width, vb0.height];
  let vb = home.slice();
  const apply = () => svg.setAttribute("viewBox", vb.join(" "));
  const toSvg = (cx, cy) => { const p = svg.createSVGPoint(); p.x = cx; p.y = cy; return p.matrixTransform(svg.getScreenCTM().inverse()); };
  const zoom = (f, cx, cy) => {
    const r = box.getBoundingClientRect();
    const c = cx === undefined ? toSvg(r.left + r.width / 2, r.top + r.height / 2) : toSvg(cx, cy);
    vb = [c.x - (c.x - vb[0]) * f, c.y - (c.y - vb[1]) * f, vb[2] * f, vb[3] * f];
    apply();
  };
  box.addEventListener("wheel", (ev) => { ev.preventDefault(); zoom(ev.deltaY > 0 ? 1.15 : 1 / 1.15, ev.clientX, ev.clientY); }, { passive: false });
  let drag = null;
  box.addEventListener("pointerdown", (ev) => { if (ev.target.closest("g.n")) return; drag = { x: ev.clientX, y: ev.clientY }; box.classList.add("drag"); box.setPointerCapture(ev.pointerId); });
  box.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const k = 1 / svg.getScreenCTM().a;
    vb[0] -= (ev.clientX - drag.x) * k; vb[1] -= (ev.clientY - drag.y) * k;
    drag = { x: ev.clientX, y: ev.clientY }; apply();
  });
  const end = () => { drag = null; box.classList.remove("drag"); };
  box.addEventListener("pointerup", end); box.addEventListener("pointercancel", end);

  const nodes = $$("g.n", svg), edges = $$("path.e", svg);
  const inc = nodes.map(() => []);
  edges.forEach((p) => { inc[+p.dataset.s].push(p); inc[+p.dataset.t].push(p); });
  let pinned = null;
  const focus = (i) => {
    svg.classList.add("focus");
    nodes.forEach((n) => n.classList.remove("hot", "me"));
    edges.forEach((p) => p.classList.remove("hot"));
    nodes[i].classList.add("hot", "me");
    inc[i].forEach((p) => { p.classList.add("hot"); nodes[+p.dataset.s].classList.add("hot"); nodes[+p.dataset.t].classList.add("hot"); });
  };
  const unfocus = () => { svg.classList.remove("focus"); };
  const showTip = (i, ev) => {
    const t = data.tools[nodes[i].dataset.tool];
    if (!t) return;
    const outN = inc[i].filter((p) => +p.dataset.s === i && p.getClientRects().length).length;
    const inN = inc[i].filter((p) => +p.dataset.t === i && p.getClientRects().length).length;
    const list = (xs, f) => xs.length ? "<ul>" + xs.map(f).join("") + "</ul>" : "<div class='muted'>none</div>";
    tip.innerHTML = `<h4>${esc(t.name)}</h4><div><span class="badge ${t.kind === "write" ? "warn" : "dom"}">${esc(t.kind)}</span>
      <span class="badge soft">${esc(t.family || t.impl)}</span><span class="muted">${inN} in · ${outN} out (shown kinds)</span></div>
      <div>${esc(t.description)}</div>
      <div class="sec">parameters</div>${list(t.params, (p) => `<li><code>${esc(p[0])}</code>: ${esc(p[1])}${p[2] ? " <b>required</b>" : ""} <span class="muted">${esc(p[3])}</span></li>`)}
      <div class="sec">preconditions</div>${t.pre.length ? t.pre.map((c) => `<pre>${esc(c[1])}  → ${esc(c[0])}</pre>`).join("") : "<div class='muted'>none</div>"}
      <div class="sec">effects</div>${t.effects.length ? t.effects.map((s) => `<pre>${esc(s)}</pre>`).join("") : "<div class='muted'>none (read-only)</div>"}
      ${t.post.length ? `<div class="sec">postconditions</div>` + t.post.map((c) => `<pre>${esc(c[1])}  → ${esc(c[0])}</pre>`).join("") : ""}`;
    tip.hidden = false;
    const card = tip.parentElement.getBoundingClientRect();
    let x = ev.clientX - card.left + 16, y = ev.clientY - card.top + 16;
    if (x + 470 > card.width) x = Math.max(8, ev.clientX - card.left - 476);
    // keep the card inside the window: open it upwards near the bottom edge
    const room = window.innerHeight - (ev.clientY + 16);
    if (tip.offsetHeight > room) y = Math.max(8 - card.top, ev.clientY - card.top - 16 - tip.offsetHeight);
    tip.style.left = x + "px"; tip.style.top = y + "px";
  };
  nodes.forEach((n, i) => {
    n.addEventListener("mouseenter", (ev) => { if (pinned === null) focus(i); showTip(i, ev); });
    n.addEventListener("mouseleave", () => { tip.hidden = true; if (pinned === null) unfocus(); });
    n.addEventListener("click", () => { if (pinned === i) { pinned = null; unfocus(); } else { pinned = i; focus(i); } });
  });
  return {
    svg,
    zoom(which) { if (which === "reset") { vb = home.slice(); apply(); } else zoom(which === "in" ? 1 / 1.3 : 1.3); },
    select(name) {
      const i = nodes.findIndex((n) => n.dataset.tool === name);
      if (i >= 0) { pinned = i; focus(i); }
    },
    search(q) {
      q = q.trim().toLowerCase();
      nodes.forEach((n) => n.classList.toggle("match", !!q && n.dataset.tool.toLowerCase().includes(q)));
    },
    visibleEdges() { return edges.filter((p) => p.getClientRects().length).length; },
  };
}

async function domainsPage() {
  const links = $$(".dlink");
  const tip = $("#tip");
  let view = null;
  const hidden = new Set();
  const stats = () => {
    if (!view) return;
    $("#graph-stats").textContent = `${view.svg.dataset.tools} tools · ${view.visibleEdges()} of ${view.svg.dataset.edges} edges shown · scroll to zoom, drag to pan, hover a tool for its contract, click to pin`;
  };
  const show = async (i) => {
    links.forEach((a) => a.classList.toggle("on", a.dataset.d === String(i)));
    const d = await SE.load("domains/d" + pad(i, 3));
    const kinds = Object.entries(d.kinds).map(([k, n]) => `<span class="badge soft">${esc(k.replace("_", " "))}: ${n}</span>`).join("");
    const tc = d.test_counts || {};
    $("#domain-head").innerHTML = `<h1>${esc(d.name)}</h1><p class="muted">${esc(d.description)}</p>
      <div class="stats"><div class="stat"><b id="tool-count">${d.order.length}</b><span>tools</span></div>
      <div class="stat"><b>${Object.values(d.kinds).reduce((a, b) => a + b, 0)}</b><span>edges</span></div>
      <div class="stat"><b>${tc.success || 0}</b><span>positive tests passed</span></div>
      <div class="stat"><b>${tc.anticipated_rejection || 0}</b><span>anticipated rejections</span></div>
      <div class="stat"><b>${tc.unexpected_failure || 0}</b><span>unexpected failures</span></div>
      <div class="stat"><b>${d.accepted ?? "-"}/${d.attempts ?? "-"}</b><span>tasks accepted/attempts</span></div></div><div>${kinds}</div>`;
    view = graphView($("#graph"), d, tip);
    hidden.forEach((k) => view.svg.classList.add("hide-" + k));
    view.search($("#tool-search").value);
    $("#tables").innerHTML = d.tables;
    $("#tests").innerHTML = d.tests;
    $("#rejections").innerHTML = d.rejections;
    sortable($("#tests"));
    stats();
  };
  const current = () => hashParams().get("d") || (links[0] && links[0].dataset.d);
  $$(".kinds input").forEach((cb) => cb.addEventListener("change", () => {
    const k = cb.dataset.kind;
    if (cb.checked) hidden.delete(k); else hidden.add(k);
    if (view) view.svg.classList.toggle("hide-" + k, !cb.checked);
    stats();
  }));
  $("#tool-search").addEventListener("input", (ev) => view && view.search(ev.target.value));
  $$("[data-zoom]").forEach((b) => b.addEventListener("click", () => view && view.zoom(b.dataset.zoom)));
  $("#tests").addEventListener("click", (ev) => {
    const a = ev.target.closest("a.toollink");
    if (a && view) { view.select(a.dataset.tool); $("#graph").scrollIntoView({ behavior: "smooth", block: "center" }); }
  });
  window.addEventListener("hashchange", () => show(current()));
  if (current() !== undefined) await show(current());
}

/* ------------------------------------------------------------------ tasks */

async function tasksPage() {
  const idx = await SE.load("tasks/index");
  const rows = idx.rows; // [id, domain, family, tier, chain_length, tools, instruction, chunk, request start, end]
  const snippet = (r) => { const s = r[6].slice(r[8], r[9]).trim(); return s.length > 150 ? s.slice(0, 150) + "…" : s; };
  const lower = rows.map((r) => (r[0] + " " + r[6]).toLowerCase());
  const fD = $("#f-domain"), fF = $("#f-family"), fT = $("#f-tier"), fTool = $("#f-tool"), q = $("#q");
  idx.domains.forEach((d, i) => option(fD, i, d));
  const fams = idx.familys.map((f, i) => [f, i]).filter(([f]) => f);
  if (fams.length) fams.forEach(([f, i]) => option(fF, i, f));
  else { fF.innerHTML = ""; option(fF, "", "no families recorded"); fF.disabled = true; }
  idx.tiers.forEach((t, i) => option(fT, i, t || "?"));
  const toolOptions = () => {
    const keep = fTool.value;
    const d = fD.value === "" ? null : +fD.value;
    const used = new Set();
    rows.forEach((r) => { if (d === null || r[1] === d) r[5].forEach((t) => used.add(t)); });
    fTool.innerHTML = "";
    option(fTool, "", `any tool (${used.size})`);
    Array.from(used).sort((a, b) => idx.tools[a].localeCompare(idx.tools[b])).forEach((t) => option(fTool, t, idx.tools[t]));
    fTool.value = used.has(+keep) ? keep : "";
  };
  toolOptions();
  let shown = [];
  const body = $("#list tbody");
  const detail = $("#detail");
  let selected = null;
  const pg = pager($("#pager"), (a, b) => {
    body.innerHTML = shown.slice(a, b).map((i) => {
      const r = rows[i];
      const tier = idx.tiers[r[3]] || "?";
      const fam = idx.familys[r[2]];
      return `<tr data-i="${i}" class="${r[0] === selected ? "sel" : ""}"><td class="id">${esc(r[0])}</td>
        <td><span class="badge lvl-${esc(tier)}">${esc(tier)}</span>${fam ? `<span class="badge fam">${esc(fam)}</span>` : ""}</td>
        <td>${r[4]}</td><td class="ins">${esc(snippet(r))}</td></tr>`;
    }).join("");
  });
  const filter = () => {
    const d = fD.value === "" ? null : +fD.value, f = fF.value === "" ? null : +fF.value;
    const t = fT.value === "" ? null : +fT.value, tool = fTool.value === "" ? null : +fTool.value;
    const s = q.value.trim().toLowerCase();
    shown = [];
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i];
      if ((d !== null && r[1] !== d) || (f !== null && r[2] !== f) || (t !== null && r[3] !== t)) continue;
      if (tool !== null && !r[5].includes(tool)) continue;
      if (s && !lower[i].includes(s)) continue;
      shown.push(i);
    }
    $("#count").textContent = `${shown.length.toLocaleString()} of ${rows.length.toLocaleString()} tasks`;
    pg.reset(shown.length);
  };
  const open = async (id) => {
    const i = rows.findIndex((r) => r[0] === id);
    if (i < 0) { detail.innerHTML = `<p class="bad-n">No task ${esc(id)} in this universe.</p>`; return; }
    selected = id;
    $$("tr", body).forEach((tr) => tr.classList.toggle("sel", rows[+tr.dataset.i][0] === id));
    const chunk = await SE.load("tasks/c" + pad(rows[i][7], 5));
    detail.innerHTML = chunk[id];
    detail.scrollTop = 0;
  };
  [fD, fF, fT, fTool].forEach((el) => el.addEventListener("change", () => { if (el === fD) toolOptions(); filter(); }));
  q.addEventListener("input", filter);
  body.addEventListener("click", (ev) => {
    const tr = ev.target.closest("tr[data-i]");
    if (tr) { const id = rows[+tr.dataset.i][0]; setHash({ id }); open(id); }
  });
  filter();
  const id = hashParams().get("id");
  if (id) await open(id); else if (shown.length) await open(rows[shown[0]][0]);
  window.addEventListener("hashchange", () => { const h = hashParams().get("id"); if (h) open(h); });
}

/* ------------------------------------------------------------------ trajectories */

async function trajectoriesPage() {
  if (!$("#f-run")) return;
  const runs = await SE.load("runs/list");
  const fRun = $("#f-run"), fD = $("#f-domain"), fO = $("#f-outcome"), fTerm = $("#f-term"), q = $("#q");
  runs.forEach((r) => option(fRun, r.index, r.label));
  const params = hashParams();
  if (params.get("run")) fRun.value = params.get("run");
  if (params.get("task")) q.value = params.get("task");
  const body = $("#list tbody"), detail = $("#detail"), split = $(".split");
  let idx = null, shown = [], selected = null;
  const indexOf = (ri) => SE.load(`runs/r${ri}/index`);
  const pg = pager($("#pager"), (a, b) => {
    body.innerHTML = shown.slice(a, b).map((i) => {
      const r = idx.rows[i];
      return `<tr data-i="${i}" class="${r[0] === selected ? "sel" : ""}"><td class="id"><span class="dot ${r[5] ? "ok" : "bad"}"></span>${esc(r[0])}</td>
        <td>${r[4]}</td><td>${esc(r[6])}</td><td>${r[8]}${r[9] ? ` <span class="muted">(${r[9]} err)</span>` : ""}</td><td>${r[11]}</td></tr>`;
    }).join("");
  });
  const filter = () => {
    const d = fD.value, o = fO.value, t = fTerm.value, s = q.value.trim().toLowerCase();
    shown = [];
    idx.rows.forEach((r, i) => {
      if ((d && r[2] !== d) || (o !== "" && String(r[5]) !== o) || (t && r[6] !== t)) return;
      if (s && !(r[1].toLowerCase() === s || r[0].toLowerCase().includes(s))) return;
      shown.push(i);
    });
    const ok = shown.reduce((a, i) => a + idx.rows[i][5], 0);
    $("#count").textContent = `${shown.length.toLocaleString()} of ${idx.rows.length.toLocaleString()} episodes · ${shown.length ? ((100 * ok) / shown.length).toFixed(1) : 0}% passed`;
    pg.reset(shown.length);
  };
  const loadRun = async () => {
    idx = await indexOf(fRun.value);
    const doms = Array.from(new Set(idx.rows.map((r) => r[2]))).sort();
    const terms = Array.from(new Set(idx.rows.map((r) => r[6]))).sort();
    fD.innerHTML = ""; option(fD, "", "all domains"); doms.forEach((d) => option(fD, d, d));
    fTerm.innerHTML = ""; option(fTerm, "", "any termination"); terms.forEach((t) => option(fTerm, t, t));
    filter();
  };
  const episode = async (ri, id) => {
    const ix = await indexOf(ri);
    const row = ix.rows.find((r) => r[0] === id);
    if (!row) return `<p class="bad-n">No episode ${esc(id)} in ${esc(ix.label)}.</p>`;
    const chunk = await SE.load(`runs/r${ri}/c${pad(row[12], 5)}`);
    const note = ix.has_messages ? "" : `<p class="muted">This run's trajectories file was not found: summary only, no conversation.</p>`;
    return note + (chunk[id] || "");
  };
  const siblings = async (taskId, ri, id) => {
    const out = [];
    for (const r of runs) {
      const ix = await indexOf(r.index);
      ix.rows.forEach((x) => { if (x[1] === taskId && !(String(r.index) === String(ri) && x[0] === id)) out.push([r.index, x[0], r.label, x[5]]); });
    }
    return out;
  };
  const open = async (ri, id) => {
    split.classList.remove("cmp"); detail.classList.remove("wide");
    selected = id;
    $$("tr", body).forEach((tr) => tr.classList.toggle("sel", idx && idx.rows[+tr.dataset.i][0] === id));
    const ix = await indexOf(ri);
    const row = ix.rows.find((r) => r[0] === id);
    const html = await episode(ri, id);
    let bar = "";
    if (row) {
      const sib = await siblings(row[1], ri, id);
      bar = `<div class="cmpbar"><a class="btn small" href="tasks.html#id=${encodeURIComponent(row[1])}">task ${esc(row[1])} →</a>` +
        (sib.length ? `<select class="cmp-with"><option value="">compare side by side with…</option>${sib.map((s) => `<option value="${s[0]}|${esc(s[1])}">${esc(s[2])}: ${esc(s[1])} (${s[3] ? "pass" : "fail"})</option>`).join("")}</select>`
          : `<span class="muted small">no other run of this task to compare with</span>`) + "</div>";
    }
    detail.innerHTML = bar + html;
    detail.scrollTop = 0;
  };
  const compare = async (a, b) => {
    split.classList.add("cmp"); detail.classList.add("wide");
    const [ha, hb] = await Promise.all([episode(a[0], a[1]), episode(b[0], b[1])]);
    detail.innerHTML = `<div class="cmpbar"><button class="btn small back">‹ back to the list</button><b>side by side</b></div>
      <div class="compare"><div>${ha}</div><div>${hb}</div></div>`;
  };
  detail.addEventListener("change", (ev) => {
    if (!ev.target.matches("select.cmp-with") || !ev.target.value) return;
    const [rj, idj] = ev.target.value.split(/\|(.*)/s);
    const cur = [fRun.value, selected];
    setHash({ run: fRun.value, cmp: `${cur[0]}|${cur[1]}||${rj}|${idj}` });
    compare(cur, [rj, idj]);
  });
  detail.addEventListener("click", (ev) => {
    if (ev.target.closest("button.back")) { setHash({ run: fRun.value, ep: selected }); open(fRun.value, selected); }
    const ex = ev.target.closest("button.expand-all");
    if (ex) {
      const box = ex.closest(".compare > div") || detail;
      const calls = $$("details.call", box);
      const openAll = calls.some((d) => !d.open);
      calls.forEach((d) => { d.open = openAll; });
      ex.textContent = openAll ? "fold all calls" : "expand all calls";
    }
  });
  body.addEventListener("click", (ev) => {
    const tr = ev.target.closest("tr[data-i]");
    if (tr) { const id = idx.rows[+tr.dataset.i][0]; setHash({ run: fRun.value, ep: id }); open(fRun.value, id); }
  });
  fRun.addEventListener("change", async () => { await loadRun(); setHash({ run: fRun.value }); });
  [fD, fO, fTerm].forEach((el) => el.addEventListener("change", filter));
  q.addEventListener("input", filter);
  await loadRun();
  if (params.get("cmp")) {
    const [a, b] = params.get("cmp").split("||").map((s) => s.split(/\|(.*)/s));
    selected = a[1];
    await compare(a, b);
  } else if (params.get("ep")) await open(fRun.value, params.get("ep"));
  else if (shown.length) await open(fRun.value, idx.rows[shown[0]][0]);
}

/* ------------------------------------------------------------------ boot */

const pages = { domains: domainsPage, tasks: tasksPage, trajectories: trajectoriesPage };
document.addEventListener("DOMContentLoaded", () => {
  sortable();
  const page = pages[document.body.dataset.page];
  if (page) {
    page().then(() => { document.body.dataset.ready = "1"; }, (err) => { console.error(err); document.body.dataset.ready = "error"; });
  } else document.body.dataset.ready = "1";
});

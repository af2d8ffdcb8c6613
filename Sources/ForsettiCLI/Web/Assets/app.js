// The Forsetti debug screen. Every string a module or a manifest supplies is untrusted: it is
// put on the page with textContent only, never parsed as HTML, and with the characters of the
// module-text rule (Sources/ForsettiCore/Text/ModuleText.swift) shown as escapes, as the CLI
// shows them: `el` applies it to every text it writes.
"use strict";

(function () {
  const MAX_EVENTS = 300;
  const MAX_MODULE_LOG = 50;

  const state = {
    modules: [], // from `list --json`
    explains: {}, // moduleID -> `explain --json` object
    overrides: null, // `override --json -- list`
    selected: null, // the module whose trace is shown
    logs: {}, // moduleID -> recent log lines
    refreshTimer: null,
    refreshing: false,
    refreshAgain: false,
  };

  function $(id) {
    return document.getElementById(id);
  }

  // The module-text rule's classes (ModuleText.isEscaped): C0, DEL, C1, U+2028-U+202E (the
  // separators, embeddings and overrides) and the isolates U+2066-U+2069.
  const ESCAPED = /[\u0000-\u001f\u007f-\u009f\u2028-\u202e\u2066-\u2069]/g;

  // Text with those characters as visible escapes (`\n`, `\u{9b}`), as ModuleText.visible.
  function visible(text) {
    return String(text).replace(ESCAPED, function (c) {
      if (c === "\n") return "\\n";
      if (c === "\r") return "\\r";
      if (c === "\t") return "\\t";
      return "\\u{" + c.charCodeAt(0).toString(16) + "}";
    });
  }

  // A command's answer: its lines kept as lines, each shown by the rule.
  function visibleLines(text) {
    return String(text).split("\n").map(visible).join("\n");
  }

  function el(tag, text, className) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = visible(text);
    if (className) e.className = className;
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  // The token came in the URL once; the host has set the cookie, so drop it from the address bar
  // (and from the history) where it could be copied or shoulder-surfed.
  function forgetTokenInURL() {
    const url = new URL(window.location.href);
    if (url.searchParams.has("token")) {
      url.searchParams.delete("token");
      window.history.replaceState(null, "", url.pathname + url.search + url.hash);
    }
  }

  async function api(verb, args) {
    const response = await fetch("/api", {
      method: "POST",
      credentials: "same-origin",
      cache: "no-store",
      headers: { "Content-Type": "application/json", "X-Forsetti-Request": "1" },
      body: JSON.stringify({ verb: verb, arguments: args }),
    });
    const text = await response.text();
    if (!response.ok) {
      throw new Error("HTTP " + response.status + ": " + text);
    }
    const answer = JSON.parse(text);
    if (answer.host) showHost(answer.host);
    return answer;
  }

  function parseStdout(answer) {
    try {
      return JSON.parse(answer.stdout);
    } catch (e) {
      return null;
    }
  }

  function showHost(host) {
    $("host-info").textContent = "host pid " + host.pid + " on " + host.state;
  }

  function showStatus(title, answer, error) {
    const out = $("status");
    clear(out);
    out.className = "status " + (error || (answer && answer.status !== 0) ? "failed" : "ok");
    out.appendChild(el("div", title, "status-title"));
    if (error) {
      const d = el("div", null, "stderr");
      d.textContent = visibleLines(String(error));
      out.appendChild(d);
      return;
    }
    out.appendChild(el("div", "exit status " + answer.status, "status-code"));
    for (const [key, text] of [["stdout", answer.stdout], ["stderr", answer.stderr]]) {
      if (!text) continue;
      const d = el("div", null, key);
      d.textContent = visibleLines(text);
      out.appendChild(d);
    }
  }

  // Runs an action the user asked for, shows its answer, and refreshes what it may have changed.
  async function act(verb, args) {
    const title = "$ forsetti-host " + verb + " " + args.join(" ");
    $("status").textContent = visible(title + " …");
    try {
      const answer = await api(verb, args);
      showStatus(title, answer, null);
    } catch (e) {
      showStatus(title, null, e);
    }
    await refreshAll();
  }

  function overrideArgs(channel, id, what) {
    const mode = document.querySelector("input[name=channel]:checked");
    const args = [];
    if (mode && mode.value === "in-memory") args.push("--in-memory");
    if (mode && mode.value === "window") {
      const from = $("window-from").value.trim();
      const until = $("window-until").value.trim();
      if (from) args.push("--from", from);
      if (until) args.push("--until", until);
    }
    args.push("--", channel, id, what);
    return args;
  }

  function button(label, action, handler) {
    const b = el("button", label);
    b.type = "button";
    b.dataset.action = action;
    b.addEventListener("click", function (ev) {
      ev.stopPropagation();
      handler();
    });
    return b;
  }

  // The overrides of one ID ("module" or "product"), as `override --json -- list` gives them:
  // { modules: { ID: { persisted, inMemory, windows: [...], now: { state, provider } } }, products: … }.
  function overrideEntry(channel, id) {
    const o = state.overrides;
    if (!o || typeof o !== "object") return null;
    const table = o[channel === "module" ? "modules" : "products"];
    if (!table || typeof table !== "object" || !Object.prototype.hasOwnProperty.call(table, id)) return null;
    return table[id];
  }

  // The overrides of one ID as short text ("persisted off; 1 window; now off by persisted").
  function overrideSummary(channel, id) {
    const entry = overrideEntry(channel, id);
    if (!entry || typeof entry !== "object") return "";
    const parts = [];
    if (entry.persisted) parts.push("persisted " + entry.persisted);
    if (entry.inMemory) parts.push("in memory " + entry.inMemory);
    for (const w of Array.isArray(entry.windows) ? entry.windows : []) {
      parts.push(
        "window " + (w.state || "?") + " " + (w.from || "…") + " → " + (w.until || "…") + (w.status ? " (" + w.status + ")" : "")
      );
    }
    if (entry.now && entry.now.state) parts.push("now " + entry.now.state + " by " + (entry.now.provider || "?"));
    return parts.join("; ");
  }

  function renderModules() {
    const body = document.querySelector("#modules tbody");
    clear(body);
    for (const m of state.modules) {
      const id = m.moduleID || m.file;
      const tr = document.createElement("tr");
      tr.dataset.module = id;
      if (id === state.selected) tr.className = "selected";
      const idCell = el("td", id, "module-id");
      idCell.title = visible(m.file || "");
      tr.appendChild(idCell);
      tr.appendChild(el("td", m.version || "-"));
      tr.appendChild(el("td", m.type || "-"));
      const verdict = el("td", m.verdict + (m.reason ? " (" + m.reason + ")" : ""), "verdict " + m.verdict);
      tr.appendChild(verdict);
      const run = el("td", (m.runState || "-") + (m.runReason ? " (" + m.runReason + ")" : ""), "run-state");
      run.dataset.state = m.runState || "";
      const health = healthBadge(m.health);
      if (health) run.appendChild(health);
      tr.appendChild(run);
      tr.appendChild(el("td", m.moduleID ? overrideSummary("module", m.moduleID) : "", "override-summary"));
      const actions = el("td", null, "actions");
      if (m.moduleID) {
        const mid = m.moduleID;
        actions.appendChild(button("trace", "trace", () => selectModule(mid)));
        const ov = el("span", null, "group");
        ov.appendChild(el("span", "force: ", "label"));
        ov.appendChild(button("on", "override-on", () => act("override", overrideArgs("module", mid, "on"))));
        ov.appendChild(button("off", "override-off", () => act("override", overrideArgs("module", mid, "off"))));
        ov.appendChild(button("clear", "override-clear", () => act("override", overrideArgs("module", mid, "clear"))));
        actions.appendChild(ov);
        for (const verb of ["approve", "revoke", "enable", "disable", "select", "reload"]) {
          actions.appendChild(button(verb, verb, () => act(verb, ["--", mid])));
        }
      }
      tr.appendChild(actions);
      tr.addEventListener("click", function () {
        if (m.moduleID) selectModule(m.moduleID);
      });
      body.appendChild(tr);
    }
  }

  // What a module said about its own health (diagnostics), marked as its words; null if nothing.
  function healthBadge(h) {
    if (!h || typeof h !== "object") return null;
    const status = h.status || "counters only";
    const badge = el("span", "module says: " + status, "health");
    badge.dataset.health = h.status || "";
    badge.title = "reported by the module" + (h.summary ? ": " + visible(h.summary) : "");
    return badge;
  }

  function selectModule(id) {
    state.selected = id;
    for (const tr of document.querySelectorAll("#modules tbody tr")) {
      tr.className = tr.dataset.module === id ? "selected" : "";
    }
    refreshTrace();
  }

  function kv(dl, key, value) {
    dl.appendChild(el("dt", key));
    const dd = el("dd", value);
    dl.appendChild(dd);
    return dd;
  }

  function list(values) {
    if (values === null || values === undefined) return "never";
    if (!Array.isArray(values) || values.length === 0) return "none";
    return values.join(", ");
  }

  function renderTrace() {
    const box = $("trace");
    clear(box);
    const id = state.selected;
    $("trace-title").textContent = id ? visible(id) : "(click a module)";
    if (!id) return;
    box.dataset.module = id;
    const x = state.explains[id];
    if (!x) {
      box.appendChild(el("p", "no trace for " + id));
      return;
    }
    const head = el("p", null, "trace-head");
    head.appendChild(el("strong", x.verdict === "pass" ? "passes every gate evaluated" : "BLOCKED by " + (x.reason || "?")));
    head.appendChild(el("span", "  running: " + (x.runState || "-") + (x.runReason ? " (" + x.runReason + ")" : "")));
    head.appendChild(el("span", "  isolation available: " + (x.isolation || "-")));
    box.appendChild(head);

    box.appendChild(el("h3", "Gates"));
    const table = el("table", null, "gates");
    table.id = "gates";
    const hr = document.createElement("tr");
    for (const h of ["Verdict", "Step", "Reason", "Detail"]) hr.appendChild(el("th", h));
    table.appendChild(hr);
    for (const s of Array.isArray(x.trace) ? x.trace : []) {
      const tr = document.createElement("tr");
      tr.className = "gate " + s.verdict;
      tr.appendChild(el("td", s.verdict, "gate-verdict"));
      tr.appendChild(el("td", s.step));
      tr.appendChild(el("td", s.reason || ""));
      tr.appendChild(el("td", s.detail || ""));
      table.appendChild(tr);
    }
    box.appendChild(table);

    const e = x.entitlement;
    box.appendChild(el("h3", "Entitlement"));
    if (e && typeof e === "object") {
      const dl = el("dl", null, "entitlement");
      dl.id = "entitlement";
      kv(dl, "decision", e.unlocked ? "UNLOCKED" : "LOCKED");
      const decided = kv(dl, "decided by", e.decidedBy);
      decided.id = "decided-by";
      kv(dl, "required product", e.requiredProduct || "none (free)");
      kv(dl, "active products", list(e.activeProducts));
      box.appendChild(dl);
      const steps = el("ol", null, "providers");
      steps.id = "providers";
      for (const s of Array.isArray(e.steps) ? e.steps : []) {
        const li = el("li", s.channel + " override, " + s.provider + ": " + s.state);
        // The provider that decided is the first that said on or off; mark it as the trace says.
        if (
          typeof e.decidedBy === "string" &&
          e.decidedBy === s.channel + "Override:" + s.provider
        ) {
          li.className = "decided";
          li.appendChild(el("span", "  ← decided", "decided-mark"));
        }
        steps.appendChild(li);
      }
      box.appendChild(steps);
    } else {
      box.appendChild(el("p", "no entitlement data (the manifest did not decode)"));
    }

    const a = x.approval;
    box.appendChild(el("h3", "Approval"));
    if (a && typeof a === "object") {
      const dl = el("dl", null, "approval");
      dl.id = "approval";
      kv(dl, "requested", list(a.requested));
      kv(dl, "approved", list(a.approved));
      const pending = kv(dl, "pending", list(a.pending));
      if (Array.isArray(a.pending) && a.pending.length > 0) pending.className = "pending";
      if (a.approveAll) kv(dl, "note", "--approve-all in force");
      box.appendChild(dl);
    }
    if (Array.isArray(x.licences) && x.licences.length > 0) {
      box.appendChild(el("h3", "Licences"));
      const ul = el("ul");
      for (const l of x.licences) ul.appendChild(el("li", l));
      box.appendChild(ul);
    }

    box.appendChild(el("h3", "Health (reported by the module)"));
    const health = el("dl", null, "health-report");
    health.id = "health";
    if (x.healthKnown === false) {
      kv(health, "health", x.healthNote || "no running host: health unknown");
    } else if (x.health && typeof x.health === "object") {
      const st = kv(health, "status", x.health.status || "none (counters only)");
      st.className = "health";
      st.dataset.health = x.health.status || "";
      kv(health, "summary", x.health.summary || "none");
      const counters = x.health.counters && typeof x.health.counters === "object" ? x.health.counters : {};
      for (const name of Object.keys(counters)) kv(health, "counter " + name, String(counters[name]));
      kv(health, "reported at", x.health.updated || "-");
    } else {
      kv(health, "status", "nothing reported");
    }
    box.appendChild(health);

    box.appendChild(el("h3", "Recent log lines"));
    const logs = el("ol", null, "module-log");
    logs.id = "module-log";
    for (const entry of state.logs[id] || []) logs.appendChild(logLine(entry));
    if (!state.logs[id] || state.logs[id].length === 0) logs.appendChild(el("li", "(none since the page opened)", "muted"));
    box.appendChild(logs);
  }

  // One of a module's recent log lines, marked as the module's own or as the host's about it.
  function logLine(entry) {
    const li = el("li", entry.text, "from-" + entry.origin);
    li.dataset.origin = entry.origin;
    return li;
  }

  function renderProducts() {
    const products = {}; // product -> { requiredBy: [], active: bool }
    function entry(p) {
      if (!products[p]) products[p] = { requiredBy: [], active: false };
      return products[p];
    }
    for (const id of Object.keys(state.explains)) {
      const e = state.explains[id] && state.explains[id].entitlement;
      if (!e || typeof e !== "object") continue;
      if (e.requiredProduct) entry(e.requiredProduct).requiredBy.push(id);
      for (const p of Array.isArray(e.activeProducts) ? e.activeProducts : []) entry(p).active = true;
    }
    const o = state.overrides;
    if (o && typeof o === "object" && o.products && typeof o.products === "object") {
      for (const p of Object.keys(o.products)) {
        const e = entry(p);
        const now = o.products[p] && o.products[p].now;
        e.forced = now && now.state ? now.state + " by " + now.provider : null;
      }
    }
    const body = document.querySelector("#products tbody");
    clear(body);
    const names = Object.keys(products).sort();
    if (names.length === 0) {
      const tr = document.createElement("tr");
      const td = el("td", "No module requires a product and no product override is set.", "muted");
      td.colSpan = 5;
      tr.appendChild(td);
      body.appendChild(tr);
    }
    for (const p of names) {
      const tr = document.createElement("tr");
      tr.dataset.product = p;
      tr.appendChild(el("td", p));
      tr.appendChild(el("td", products[p].requiredBy.join(", ") || "-"));
      tr.appendChild(
        el("td", (products[p].active ? "active" : "not active") + (products[p].forced ? "; forced " + products[p].forced : ""))
      );
      tr.appendChild(el("td", overrideSummary("product", p)));
      const actions = el("td", null, "actions");
      for (const what of ["on", "off", "clear"]) {
        actions.appendChild(button(what, "product-" + what, () => act("override", overrideArgs("product", p, what))));
      }
      tr.appendChild(actions);
      body.appendChild(tr);
    }
  }

  // Draws what a shell would show: the toolbar, each slot with its views in the host's order,
  // the overlay routes. `surface --json`: toolbarItems[], viewInjections[], overlay{routes,pointers}.
  function renderSurface(answer) {
    const box = $("surface");
    clear(box);
    const s = parseStdout(answer);
    if (!s || typeof s !== "object") {
      box.appendChild(el("p", answer.stderr || "no surface", "muted"));
      return;
    }
    if (s.surface === null) {
      box.appendChild(el("p", "No surface: the host has not written one.", "muted"));
      return;
    }
    const from = Array.isArray(s.modules) && s.modules.length > 0 ? "published by " + s.modules.join(", ") : "no UI module published anything";
    box.appendChild(el("p", from, "muted"));
    const shell = el("div", null, "shell");
    const toolbar = el("div", null, "toolbar");
    toolbar.appendChild(el("span", "toolbar", "caption"));
    const items = Array.isArray(s.toolbarItems) ? s.toolbarItems : [];
    if (items.length === 0) toolbar.appendChild(el("span", "(empty)", "muted"));
    for (const t of items) {
      const item = el("span", t.title || t.itemID || "?", "toolbar-item");
      item.title = visible((t.itemID || "") + " from " + (t.moduleID || "?") + (t.actionRouteID ? " → " + t.actionRouteID : ""));
      toolbar.appendChild(item);
    }
    shell.appendChild(toolbar);

    const slots = {};
    const order = [];
    for (const v of Array.isArray(s.viewInjections) ? s.viewInjections : []) {
      const slot = String(v.slotID || "?");
      if (!Object.prototype.hasOwnProperty.call(slots, slot)) {
        slots[slot] = [];
        order.push(slot);
      }
      slots[slot].push(v);
    }
    const area = el("div", null, "slots");
    if (order.length === 0) area.appendChild(el("p", "(no views injected)", "muted"));
    for (const k of order) {
      const slot = el("div", null, "slot");
      slot.dataset.slot = k;
      slot.appendChild(el("div", k, "caption"));
      for (const v of slots[k]) {
        const view = el("div", null, "view");
        view.appendChild(el("strong", v.viewID || "?"));
        view.appendChild(el("span", " priority " + (v.priority !== undefined ? v.priority : 0) + " · " + (v.moduleID || "?"), "muted"));
        slot.appendChild(view);
      }
      area.appendChild(slot);
    }
    shell.appendChild(area);

    const overlay = s.overlay && typeof s.overlay === "object" ? s.overlay : {};
    const r = el("div", null, "routes");
    r.appendChild(el("span", "overlay routes", "caption"));
    const routes = Array.isArray(overlay.routes) ? overlay.routes : [];
    if (routes.length === 0) r.appendChild(el("span", "(none)", "muted"));
    for (const route of routes) r.appendChild(el("span", route, "route"));
    const pointers = Array.isArray(overlay.pointers) ? overlay.pointers : [];
    for (const ptr of pointers) r.appendChild(el("span", "pointer " + ptr, "route"));
    shell.appendChild(r);
    box.appendChild(shell);
    if (s.strippedThemeID) box.appendChild(el("p", "theme mask " + s.strippedThemeID + " validated and stripped", "muted"));
  }

  async function refreshModules() {
    const answer = await api("list", ["--json"]);
    const doc = parseStdout(answer);
    if (!doc || !Array.isArray(doc.modules)) throw new Error("list --json: " + (answer.stderr || "no modules"));
    state.modules = doc.modules;
  }

  async function refreshExplains() {
    const explains = {};
    await Promise.all(
      state.modules
        .filter((m) => m.moduleID)
        .map(async function (m) {
          try {
            const x = parseStdout(await api("explain", ["--json", "--", m.moduleID]));
            if (x) explains[m.moduleID] = x;
          } catch (e) {
            // One module's explain failing leaves its trace empty; the others still show.
          }
        })
    );
    state.explains = explains;
  }

  async function refreshOverrides() {
    try {
      state.overrides = parseStdout(await api("override", ["--json", "--", "list"]));
    } catch (e) {
      state.overrides = null;
    }
  }

  async function refreshTrace() {
    const id = state.selected;
    if (id) {
      try {
        const x = parseStdout(await api("explain", ["--json", "--", id]));
        if (x) state.explains[id] = x;
      } catch (e) {
        // Keep the last trace shown; the status area tells about failing requests.
      }
    }
    renderTrace();
  }

  // Refreshes every view; calls that arrive while one runs fold into a single rerun after it.
  async function refreshAll() {
    if (state.refreshing) {
      state.refreshAgain = true;
      return;
    }
    state.refreshing = true;
    try {
      do {
        state.refreshAgain = false;
        try {
          await refreshModules();
          await Promise.all([refreshExplains(), refreshOverrides()]);
          renderModules();
          renderTrace();
          renderProducts();
          renderSurface(await api("surface", ["--json"]));
          document.body.dataset.refreshed = String(Date.now());
        } catch (e) {
          showStatus("refresh failed", null, e);
        }
      } while (state.refreshAgain);
    } finally {
      state.refreshing = false;
    }
  }

  function scheduleRefresh() {
    if (state.refreshTimer) return;
    state.refreshTimer = setTimeout(function () {
      state.refreshTimer = null;
      refreshAll();
    }, 200);
  }

  // One event line. A module's own text (origin "module") is marked as that module's, as the
  // host's log does (`[module=ID]`), so that nothing a module writes can pass for a host line.
  function addEvent(kind, text, moduleID, origin) {
    const ol = $("events");
    const fromModule = origin === "module";
    const li = el("li", null, "event " + kind + (fromModule ? " from-module" : " from-host"));
    li.dataset.origin = fromModule ? "module" : "host";
    if (moduleID) li.dataset.module = moduleID;
    li.appendChild(el("span", new Date().toLocaleTimeString() + " ", "time"));
    li.appendChild(el("span", (fromModule ? "module" : kind) + " ", "kind"));
    if (fromModule) li.appendChild(el("span", "[module=" + (moduleID || "?") + "] ", "module says"));
    else if (moduleID) li.appendChild(el("span", "[" + moduleID + "] ", "module"));
    li.appendChild(el("span", text, fromModule ? "module-text" : "host-text"));
    ol.insertBefore(li, ol.firstChild);
    while (ol.childNodes.length > MAX_EVENTS) ol.removeChild(ol.lastChild);
  }

  function parseEvent(ev) {
    try {
      return JSON.parse(ev.data);
    } catch (e) {
      return null;
    }
  }

  function connectEvents() {
    if (!window.EventSource) return;
    const source = new EventSource("/api/events", { withCredentials: false });
    source.addEventListener("open", function () {
      $("live").textContent = "live";
      $("live").className = "badge on";
      // Something may have changed while the stream was down.
      scheduleRefresh();
    });
    source.addEventListener("error", function () {
      $("live").textContent = "not live (reconnecting)";
      $("live").className = "badge off";
    });
    source.addEventListener("state", function (ev) {
      const d = parseEvent(ev);
      if (!d) return;
      addEvent("state", d.state + (d.reason ? " (" + d.reason + ")" : ""), d.moduleID, "host");
      // Show the new state at once; the refresh that follows brings the rest.
      for (const m of state.modules) {
        if (m.moduleID === d.moduleID) {
          m.runState = d.state;
          m.runReason = d.reason || null;
        }
      }
      renderModules();
      scheduleRefresh();
    });
    source.addEventListener("log", function (ev) {
      const d = parseEvent(ev);
      if (!d) return;
      const line = (d.level ? d.level + ": " : "") + d.message;
      // Only a line the server marks as the host's is shown as the host's.
      const origin = d.origin === "host" ? "host" : "module";
      addEvent("log", line, d.moduleID, origin);
      if (d.moduleID) {
        const entry = { origin: origin, text: (origin === "module" ? "[module=" + d.moduleID + "] " : "[host] ") + line };
        const lines = (state.logs[d.moduleID] = state.logs[d.moduleID] || []);
        lines.push(entry);
        while (lines.length > MAX_MODULE_LOG) lines.shift();
        if (d.moduleID === state.selected) {
          const ol = $("module-log");
          if (ol) {
            const muted = ol.querySelector(".muted");
            if (muted) ol.removeChild(muted);
            ol.appendChild(logLine(entry));
            while (ol.childNodes.length > MAX_MODULE_LOG) ol.removeChild(ol.firstChild);
          }
        }
      }
    });
    source.addEventListener("reload", function (ev) {
      const d = parseEvent(ev);
      if (!d) return;
      addEvent("reload", d.line, null, "host");
      scheduleRefresh();
    });
  }

  function start() {
    forgetTokenInURL();
    $("refresh").addEventListener("click", () => refreshAll());
    $("select-none").addEventListener("click", () => act("select", ["--none"]));
    for (const what of ["on", "off", "clear"]) {
      $("product-" + what).addEventListener("click", function () {
        const p = $("product-id").value.trim();
        if (p) act("override", overrideArgs("product", p, what));
      });
    }
    refreshAll();
    connectEvents();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

// The Forsetti debug screen. Every string a module or a manifest supplies is untrusted: it is
// put on the page with textContent only, never parsed as HTML, and with the characters of the
// module-text rule (Sources/ForsettiCore/Text/ModuleText.swift) shown as escapes, as the CLI
// shows them: `el` applies it to every text it writes.
//
// The host's token never goes into a cookie (a browser sends cookies to every port of
// 127.0.0.1): the page takes it from the address the host printed, keeps it in this tab's
// sessionStorage (per origin, so per port: pages of several hosts live side by side) and sends it
// in the header X-Forsetti-Token, on the API and on the event stream (read with fetch, since an
// EventSource cannot set a header).
"use strict";

(function () {
  const MAX_EVENTS = 300; // event lines shown
  const MAX_EVENTS_PER_SOURCE = 300; // kept per module (and for the host), so one cannot flush the others
  const MAX_MODULE_LOG = 50;
  const ARMED_MS = 8000; // how long a destructive action's button waits for its confirming click
  const TOKEN_KEY = "forsetti-token";
  const RESTARTED = "This host restarted: open the address it printed (its ui: line; the token this page has is not the running host's).";
  const NO_TOKEN = "No token: open the address the host printed (its ui: line, ending in ?token=…).";

  // What asks for a confirming click, and what it does.
  const CONFIRM = {
    approve: "grants the capabilities it requests and starts it",
    revoke: "takes back its approved capabilities: it stops",
    disable: "stops it and keeps it off",
    "override-off": "forces it off: it stops",
    "override-clear": "removes its overrides: it may stop",
    reload: "stops it and loads its file again",
    select: "makes it the UI module: the one selected now stops",
    "select-none": "stops every UI module",
    "product-off": "forces the product off: modules needing it stop",
    "product-clear": "removes the product's overrides: modules may stop",
  };

  // A manifest the host could not read: the only action is to look at why.
  const MANIFEST_REASONS = [
    "validationFailed",
    "invalidJSON",
    "duplicateModuleID",
    "invalidSchemaVersion",
    "invalidManifestTemplateVersion",
  ];

  const state = {
    modules: [], // the list answer's modules
    explains: {}, // moduleID -> its explain answer
    overrides: null, // the override list answer
    selected: null, // the module whose trace is shown
    logs: {}, // moduleID -> recent log lines
    refreshTimer: null,
    refreshing: false,
    refreshAgain: false,
    token: null,
    expired: false, // the host refused the token: nothing more is asked
    armed: {}, // confirm key -> time it disarms
    events: [], // {seq, kind, text, moduleID, origin, time}, oldest first
    eventSeq: 0,
    eventFilter: "", // "" every source, "(host)" the host's own lines, else a module ID
    paused: false,
    missed: 0, // events that arrived while paused
    eventsTimer: null,
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

  // The token came in the URL once: keep it in this tab's sessionStorage and drop it from the
  // address bar (and the history), where it could be copied or shoulder-surfed.
  function takeToken() {
    const url = new URL(window.location.href);
    let token = url.searchParams.get("token");
    if (token) {
      url.searchParams.delete("token");
      window.history.replaceState(null, "", url.pathname + url.search + url.hash);
      try {
        window.sessionStorage.setItem(TOKEN_KEY, token);
      } catch (e) {
        // No storage (a locked-down browser): the token lives in memory until the tab reloads.
      }
      return token;
    }
    try {
      token = window.sessionStorage.getItem(TOKEN_KEY);
    } catch (e) {
      token = null;
    }
    return token;
  }

  function notice(text, kind) {
    const n = $("notice");
    n.textContent = text;
    n.className = "notice " + kind;
    n.hidden = false;
  }

  // The host answered 401: it is not the host that printed this page's token (it restarted).
  function expire() {
    if (state.expired) return;
    state.expired = true;
    document.body.dataset.expired = "1";
    notice(RESTARTED, "error");
    $("host-info").textContent = "token not accepted";
    setLive(false, "not live");
  }

  // A refusal as text: the server's `{"error": …}` or plain text, never the raw JSON.
  function refusalText(status, text) {
    let why = text;
    try {
      const o = JSON.parse(text);
      if (o && typeof o.error === "string") why = o.error;
    } catch (e) {
      // plain text
    }
    return "HTTP " + status + ": " + why;
  }

  function headers(extra) {
    const h = { "X-Forsetti-Token": state.token || "" };
    for (const k of Object.keys(extra || {})) h[k] = extra[k];
    return h;
  }

  // One typed control request (docs/control.md: {"verb":"explain","module":"com.x"}); resolves
  // to the host's whole answer ({ok, answer, changes} or {ok:false, error:{code, message}}).
  async function api(request) {
    if (state.expired) throw new Error(RESTARTED);
    let response;
    try {
      response = await fetch("/api", {
        method: "POST",
        credentials: "omit",
        cache: "no-store",
        headers: headers({ "Content-Type": "application/json", "X-Forsetti-Request": "1" }),
        body: JSON.stringify(request),
      });
    } catch (e) {
      throw new Error("cannot reach the host (stopped, or refusing connections at its limit): " + e.message);
    }
    const text = await response.text();
    if (response.status === 401) {
      expire();
      throw new Error(RESTARTED);
    }
    if (!response.ok) throw new Error(refusalText(response.status, text));
    let answer;
    try {
      answer = JSON.parse(text);
    } catch (e) {
      throw new Error("the host's answer is not JSON");
    }
    if (answer.host) showHost(answer.host);
    return answer;
  }

  // The answer document of a request, or an error carrying the host's refusal.
  async function ask(request) {
    const response = await api(request);
    if (!response.ok) {
      const e = response.error && typeof response.error === "object" ? response.error : {};
      const about = fieldText(e);
      throw new Error((e.code || "failed") + ": " + (e.message || "refused") + (about ? " (" + about + ")" : ""));
    }
    return response.answer;
  }

  // What a refusal is about, as the request (or the host's configuration) names it: the
  // message names fields the same way, never by the command line's options.
  function fieldText(e) {
    if (typeof e.field !== "string") return "";
    return "field " + e.field + (typeof e.value === "string" ? " = '" + e.value + "'" : "");
  }

  // A request as the command line would spell it, for the status area's title.
  function spelled(request) {
    const parts = [request.verb];
    if (request.verb === "override") {
      if (request.action === "list") parts.push("list");
      else parts.push(request.channel, request.id, request.action);
      if (request.inMemory) parts.push("--in-memory");
      if (request.from) parts.push("--from", request.from);
      if (request.until) parts.push("--until", request.until);
    } else if (request.verb === "select" && request.none) {
      parts.push("--none");
    } else if (request.module) {
      parts.push(request.module);
    }
    return "$ forsetti-host " + parts.join(" ");
  }

  // What an answer says was done, in one line: the sentence the command line prints.
  function doneText(request, answer) {
    if (!answer || typeof answer !== "object") return "done";
    if (typeof answer.done === "string") return answer.done;
    if (Array.isArray(answer.approved)) {
      return "approved for " + answer.moduleID + (request.verb === "revoke" ? " now" : "") + ": " + (answer.approved.length ? answer.approved.join(", ") : "nothing");
    }
    if (Array.isArray(answer.reports)) return answer.reports.map((r) => r.line).join("\n");
    return "done";
  }

  function showHost(host) {
    $("host-info").textContent = "host pid " + host.pid + " on " + host.state;
  }

  // The status area: the request, then what the host did (and the modules it changed), or
  // its refusal.
  function showStatus(title, response, error) {
    const out = $("status");
    clear(out);
    const failed = error || !response || !response.ok;
    out.className = "status " + (failed ? "failed" : "ok");
    out.appendChild(el("div", title, "status-title"));
    if (error) {
      const d = el("div", null, "error");
      d.textContent = visibleLines(String(error));
      out.appendChild(d);
      return;
    }
    if (!response.ok) {
      const e = response.error || {};
      out.appendChild(el("div", "refused: " + (e.code || "failed"), "status-code"));
      out.appendChild(el("div", e.message || "", "error"));
      const about = fieldText(e);
      if (about) out.appendChild(el("div", about, "status-field"));
      return;
    }
    out.appendChild(el("div", "done", "status-code"));
    const d = el("div", null, "answer");
    d.textContent = visibleLines(doneText(response.request, response.answer));
    out.appendChild(d);
    for (const c of Array.isArray(response.changes) ? response.changes : []) {
      out.appendChild(el("div", "host: " + c.moduleID + " is now " + c.state, "change"));
    }
  }

  // Runs an action the user asked for, shows its answer, and refreshes what it may have changed.
  async function act(request) {
    const title = spelled(request);
    $("status").textContent = visible(title + " …");
    try {
      const response = await api(request);
      response.request = request;
      showStatus(title, response, null);
    } catch (e) {
      showStatus(title, null, e);
    }
    await refreshAll();
  }

  // An override request of the channel chosen on the page: persisted, in memory, or a window.
  function overrideRequest(channel, id, what) {
    const mode = document.querySelector("input[name=channel]:checked");
    const request = { verb: "override", action: what, channel: channel, id: id };
    if (mode && mode.value === "in-memory") request.inMemory = true;
    if (mode && mode.value === "window") {
      const from = $("window-from").value.trim();
      const until = $("window-until").value.trim();
      if (from) request.from = from;
      if (until) request.until = until;
    }
    return request;
  }

  // A button; one of CONFIRM's actions asks for a second click within ARMED_MS ("confirm …?")
  // before it acts. `key` names it across redraws (the table is redrawn as events arrive).
  function button(label, action, handler, key) {
    const b = el("button", label);
    b.type = "button";
    b.dataset.action = action;
    const why = CONFIRM[action];
    if (why) {
      const k = key || action;
      b.dataset.confirmKey = k;
      b.dataset.label = label;
      if (isArmed(k)) showArmed(b);
    }
    b.addEventListener("click", function (ev) {
      ev.stopPropagation();
      if (why) {
        const k = b.dataset.confirmKey;
        if (!isArmed(k)) {
          arm(k);
          return;
        }
        disarm(k);
      }
      handler();
    });
    return b;
  }

  function isArmed(key) {
    return Object.prototype.hasOwnProperty.call(state.armed, key) && state.armed[key] > Date.now();
  }

  function buttonsOf(key) {
    return [...document.querySelectorAll("button[data-confirm-key]")].filter((b) => b.dataset.confirmKey === key);
  }

  function showArmed(b) {
    b.textContent = visible("confirm " + b.dataset.label + "?");
    b.title = visible(b.dataset.label + ": " + CONFIRM[b.dataset.action] + ". Click again to go ahead.");
    b.classList.add("armed");
    b.dataset.armed = "1";
  }

  function showDisarmed(b) {
    b.textContent = visible(b.dataset.label);
    b.title = "";
    b.classList.remove("armed");
    delete b.dataset.armed;
  }

  function arm(key) {
    state.armed[key] = Date.now() + ARMED_MS;
    for (const b of buttonsOf(key)) showArmed(b);
    setTimeout(function () {
      if (!isArmed(key)) disarm(key);
    }, ARMED_MS + 50);
  }

  function disarm(key) {
    delete state.armed[key];
    for (const b of buttonsOf(key)) showDisarmed(b);
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

  // The actions that apply to a module as it is now: an unreadable manifest only explains
  // itself; approve only while capabilities wait, revoke only once some are approved; enable or
  // disable, whichever it is not; select only a UI module another one displaces; reload only
  // what runs or failed; force on or off unless it is already, clear only what is forced.
  function applicable(m) {
    const id = m.moduleID;
    if (!id) return [];
    const out = ["trace"];
    if (MANIFEST_REASONS.indexOf(m.reason) >= 0 || !m.version || !m.type) return out;
    const x = state.explains[id];
    const a = x && typeof x.approval === "object" ? x.approval : null;
    const pending =
      (a && Array.isArray(a.pending) && a.pending.length > 0) || m.reason === "approvalPending" || m.runReason === "approvalPending";
    const approved = a && !a.approveAll && Array.isArray(a.approved) && a.approved.length > 0;
    const entry = overrideEntry("module", id);
    const forced = entry && entry.now && entry.now.state;
    const stored = entry && (entry.persisted || entry.inMemory || (Array.isArray(entry.windows) && entry.windows.length > 0));
    if (forced !== "on") out.push("override-on");
    if (forced !== "off") out.push("override-off");
    if (stored) out.push("override-clear");
    if (pending) out.push("approve");
    if (approved) out.push("revoke");
    out.push(m.runReason === "moduleDisabled" || m.reason === "moduleDisabled" ? "enable" : "disable");
    if ((m.type === "ui" || m.type === "app") && m.runReason === "uiNotSelected") out.push("select");
    if (m.runState === "started" || m.runState === "failed") out.push("reload");
    return out;
  }

  function renderModules() {
    const body = document.querySelector("#modules tbody");
    clear(body);
    for (const m of state.modules) {
      const id = m.moduleID || m.file;
      const tr = document.createElement("tr");
      tr.dataset.module = id;
      if (id === state.selected) tr.className = "selected";
      const idCell = el("td", null, "module");
      idCell.appendChild(el("span", m.displayName || "(no name)", "display-name" + (m.displayName ? "" : " muted")));
      idCell.appendChild(el("span", id, "module-id"));
      idCell.title = visible(m.file || "");
      tr.appendChild(idCell);
      tr.appendChild(el("td", m.version || "-"));
      tr.appendChild(el("td", m.type || "-"));
      const verdict = el("td", m.verdict + (m.reason ? " (" + m.reason + ")" : ""), "verdict " + m.verdict);
      // The override that decided its entitlement (the host's in-memory one included).
      if (m.override && typeof m.override === "object") {
        const decided = el("span", " — " + (m.override.summary || "override"), "decided");
        decided.dataset.provider = m.override.provider || "";
        verdict.appendChild(decided);
      }
      tr.appendChild(verdict);
      const run = el("td", (m.runState || "-") + (m.runReason ? " (" + m.runReason + ")" : ""), "run-state");
      run.dataset.state = m.runState || "";
      const health = healthBadge(m.health);
      if (health) run.appendChild(health);
      // Where its last crash happened (the host's report, kept under the state directory).
      if (typeof m.lastCrash === "string" && m.lastCrash) {
        const crash = el("span", "last crash: " + m.lastCrash, "last-crash");
        if (typeof m.lastCrashTime === "number") crash.title = new Date(m.lastCrashTime * 1000).toISOString();
        run.appendChild(crash);
      }
      tr.appendChild(run);
      tr.appendChild(el("td", m.moduleID ? overrideSummary("module", m.moduleID) : "", "override-summary"));
      const actions = el("td", null, "actions");
      if (m.moduleID) {
        const mid = m.moduleID;
        const can = applicable(m);
        actions.dataset.actions = can.join(" ");
        const key = (action) => action + " " + mid;
        actions.appendChild(button(m.verdict === "pass" ? "trace" : "explain", "trace", () => selectModule(mid)));
        const forces = ["on", "off", "clear"].filter((w) => can.indexOf("override-" + w) >= 0);
        if (forces.length > 0) {
          const ov = el("span", null, "group");
          ov.appendChild(el("span", "force: ", "label"));
          for (const w of forces) {
            ov.appendChild(
              button(w, "override-" + w, () => act(overrideRequest("module", mid, w)), key("override-" + w))
            );
          }
          actions.appendChild(ov);
        }
        for (const verb of ["approve", "revoke", "enable", "disable", "select", "reload"]) {
          if (can.indexOf(verb) >= 0) actions.appendChild(button(verb, verb, () => act({ verb: verb, module: mid }), key(verb)));
        }
      }
      tr.appendChild(actions);
      tr.addEventListener("click", function () {
        if (m.moduleID) selectModule(m.moduleID);
      });
      body.appendChild(tr);
    }
    renderEventFilter();
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
    if (x.serving && typeof x.serving === "object") {
      const s = x.serving;
      const serving = el("span", "  serves " + visible(String(s.role)) + " (" + visible(String(s.where)) + "): " +
        s.concurrency + " at once; " + s.inFlight + " running, " + s.queued + " queued; " +
        s.busyTotal + " busy, " + s.timeoutsTotal + " timed out", "serving");
      serving.id = "serving";
      head.appendChild(serving);
    }
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
        actions.appendChild(
          button(what, "product-" + what, () => act(overrideRequest("product", p, what)), "product-" + what + " " + p)
        );
      }
      tr.appendChild(actions);
      body.appendChild(tr);
    }
  }

  // Draws what a shell would show: the toolbar, each slot with its views in the host's order,
  // the overlay routes. `surface --json`: toolbarItems[], viewInjections[], overlay{routes,pointers}.
  function renderSurface(s) {
    const box = $("surface");
    clear(box);
    if (!s || typeof s !== "object") {
      box.appendChild(el("p", "no surface", "muted"));
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
    const doc = await ask({ verb: "list" });
    if (!doc || !Array.isArray(doc.modules)) throw new Error("list: the answer has no modules");
    state.modules = doc.modules;
    state.problems = Array.isArray(doc.problems) ? doc.problems.map(String) : [];
  }

  // What the host judged with that is not its files as they are (a policy file that does not
  // read: the last valid one stays in force), above the table it applies to.
  function renderProblems() {
    const box = $("problems");
    const problems = state.problems || [];
    box.hidden = problems.length === 0;
    box.textContent = problems.length ? visibleLines(problems.join("\n")) : "";
  }

  async function refreshExplains() {
    const explains = {};
    await Promise.all(
      state.modules
        .filter((m) => m.moduleID)
        .map(async function (m) {
          try {
            const x = await ask({ verb: "explain", module: m.moduleID });
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
      state.overrides = await ask({ verb: "override", action: "list" });
    } catch (e) {
      state.overrides = null;
    }
  }

  async function refreshTrace() {
    const id = state.selected;
    if (id) {
      try {
        const x = await ask({ verb: "explain", module: id });
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
          renderProblems();
          renderTrace();
          renderProducts();
          renderSurface(await ask({ verb: "surface" }));
          document.body.dataset.refreshed = String(Date.now());
        } catch (e) {
          if (!state.expired) showStatus("refresh failed", null, e);
        }
      } while (state.refreshAgain && !state.expired);
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

  // ---- Live events: kept per source (so a chatty module cannot push the others out), shown
  // newest first, filtered by module, and held while paused (what arrives meanwhile is kept and
  // counted, and shown on resume).

  function sourceOf(e) {
    return e.moduleID || "(host)";
  }

  function keepEvent(kind, text, moduleID, origin) {
    const e = { seq: ++state.eventSeq, kind: kind, text: text, moduleID: moduleID || null, origin: origin, time: new Date() };
    state.events.push(e);
    const source = sourceOf(e);
    let same = 0;
    for (const x of state.events) if (sourceOf(x) === source) same++;
    if (same > MAX_EVENTS_PER_SOURCE) {
      const i = state.events.findIndex((x) => sourceOf(x) === source);
      if (i >= 0) state.events.splice(i, 1);
    }
    if (state.paused) {
      if (shown(e)) state.missed++;
      renderPause();
      return;
    }
    scheduleEvents();
  }

  function shown(e) {
    return state.eventFilter === "" || sourceOf(e) === state.eventFilter;
  }

  // Redraws at most every 150 ms, however fast events come.
  function scheduleEvents() {
    if (state.eventsTimer) return;
    state.eventsTimer = setTimeout(function () {
      state.eventsTimer = null;
      if (!state.paused) renderEvents();
    }, 150);
  }

  // One event line. A module's own text (origin "module") is marked as that module's, as the
  // host's log does (`[module=ID]`), so that nothing a module writes can pass for a host line.
  function eventLine(e) {
    const fromModule = e.origin === "module";
    const li = el("li", null, "event " + e.kind + (fromModule ? " from-module" : " from-host"));
    li.dataset.origin = fromModule ? "module" : "host";
    li.dataset.seq = String(e.seq);
    if (e.moduleID) li.dataset.module = e.moduleID;
    li.appendChild(el("span", e.time.toLocaleTimeString() + " ", "time"));
    li.appendChild(el("span", (fromModule ? "module" : e.kind) + " ", "kind"));
    if (fromModule) li.appendChild(el("span", "[module=" + (e.moduleID || "?") + "] ", "module says"));
    else if (e.moduleID) li.appendChild(el("span", "[" + e.moduleID + "] ", "module"));
    li.appendChild(el("span", e.text, fromModule ? "module-text" : "host-text"));
    return li;
  }

  function renderEvents() {
    const ol = $("events");
    clear(ol);
    let n = 0;
    for (let i = state.events.length - 1; i >= 0 && n < MAX_EVENTS; i--) {
      const e = state.events[i];
      if (!shown(e)) continue;
      ol.appendChild(eventLine(e));
      n++;
    }
    if (n === 0) ol.appendChild(el("li", state.eventFilter ? "(nothing from " + state.eventFilter + " yet)" : "(no events yet)", "muted"));
    renderPause();
  }

  function renderPause() {
    const b = $("events-pause");
    b.textContent = state.paused ? "Resume (" + state.missed + " new)" : "Pause";
    b.dataset.paused = state.paused ? "1" : "";
    b.dataset.missed = String(state.missed);
    $("events-section").classList.toggle("paused", state.paused);
  }

  function togglePause() {
    state.paused = !state.paused;
    state.missed = 0;
    if (!state.paused) renderEvents();
    else renderPause();
  }

  // The filter's choices: every module listed or heard from, and the host's own lines.
  function renderEventFilter() {
    const select = $("event-filter");
    const ids = new Set();
    for (const m of state.modules) if (m.moduleID) ids.add(m.moduleID);
    for (const e of state.events) if (e.moduleID) ids.add(e.moduleID);
    const wanted = ["", "(host)"].concat([...ids].sort());
    const have = [...select.options].map((o) => o.value);
    if (have.length === wanted.length && have.every((v, i) => v === wanted[i])) return;
    clear(select);
    for (const v of wanted) {
      const o = el("option", v === "" ? "every module and the host" : v === "(host)" ? "the host's own lines" : v);
      o.value = v;
      select.appendChild(o);
    }
    select.value = state.eventFilter;
    if (select.value !== state.eventFilter) select.value = "";
  }

  function parseData(text) {
    try {
      return JSON.parse(text);
    } catch (e) {
      return null;
    }
  }

  // One server-sent event (`event: NAME`, `data: JSON`); comments (keep-alives) do nothing.
  function dispatch(block) {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) name = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (data.length === 0) return;
    const d = parseData(data.join("\n"));
    if (!d || typeof d !== "object") return;
    if (name === "state") onState(d);
    else if (name === "log") onLog(d);
    else if (name === "reload") {
      keepEvent("reload", d.line, null, "host");
      scheduleRefresh();
    }
  }

  function onState(d) {
    keepEvent("state", d.state + (d.reason ? " (" + d.reason + ")" : ""), d.moduleID, "host");
    // Show the new state at once; the refresh that follows brings the rest.
    for (const m of state.modules) {
      if (m.moduleID === d.moduleID) {
        m.runState = d.state;
        m.runReason = d.reason || null;
      }
    }
    renderModules();
    scheduleRefresh();
  }

  function onLog(d) {
    const line = (d.level ? d.level + ": " : "") + d.message;
    // Only a line the server marks as the host's is shown as the host's.
    const origin = d.origin === "host" ? "host" : "module";
    keepEvent("log", line, d.moduleID, origin);
    if (!d.moduleID) return;
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

  function setLive(on, text) {
    const b = $("live");
    b.textContent = on ? "live" : text;
    b.className = "badge " + (on ? "on" : "off");
    if (on) $("stream-note").hidden = true;
  }

  function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  // The event stream, read with fetch (the token goes in a header); reconnects after a pause,
  // longer when the host refused it (503: its streams are all taken, said in the page).
  async function streamEvents() {
    while (!state.expired) {
      let wait = 2000;
      try {
        const response = await fetch("/api/events", { credentials: "omit", cache: "no-store", headers: headers() });
        if (response.status === 401) {
          expire();
          return;
        }
        if (!response.ok || !response.body) {
          const text = await response.text();
          setLive(false, "not live: refused (" + response.status + ")");
          const note = $("stream-note");
          note.textContent = visible(refusalText(response.status, text));
          note.hidden = false;
          wait = 10000;
        } else {
          setLive(true);
          // Something may have changed while the stream was down.
          scheduleRefresh();
          const reader = response.body.getReader();
          const decoder = new TextDecoder();
          let buffer = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffer += decoder.decode(value, { stream: true });
            let end;
            while ((end = buffer.indexOf("\n\n")) >= 0) {
              const block = buffer.slice(0, end);
              buffer = buffer.slice(end + 2);
              dispatch(block);
            }
          }
          setLive(false, "not live (reconnecting)");
        }
      } catch (e) {
        setLive(false, "not live (reconnecting)");
      }
      await sleep(wait);
    }
  }

  function start() {
    state.token = takeToken();
    $("refresh").addEventListener("click", () => refreshAll());
    $("select-none").dataset.action = "select-none";
    $("select-none").dataset.confirmKey = "select-none";
    $("select-none").dataset.label = $("select-none").textContent;
    $("select-none").addEventListener("click", function () {
      if (!isArmed("select-none")) return arm("select-none");
      disarm("select-none");
      act({ verb: "select", none: true });
    });
    for (const what of ["on", "off", "clear"]) {
      const b = $("product-" + what);
      const action = "product-" + what;
      if (CONFIRM[action]) {
        b.dataset.action = action;
        b.dataset.confirmKey = action;
        b.dataset.label = what;
      }
      b.addEventListener("click", function () {
        const p = $("product-id").value.trim();
        if (!p) return;
        if (CONFIRM[action]) {
          if (!isArmed(action)) return arm(action);
          disarm(action);
        }
        act(overrideRequest("product", p, what));
      });
    }
    $("event-filter").addEventListener("change", function () {
      state.eventFilter = $("event-filter").value;
      state.missed = 0;
      if (!state.paused) renderEvents();
      else renderPause();
    });
    $("events-pause").addEventListener("click", togglePause);
    renderEventFilter();
    renderEvents();
    if (!state.token) {
      notice(NO_TOKEN, "error");
      $("host-info").textContent = "no token";
      setLive(false, "not live");
      return;
    }
    refreshAll();
    streamEvents();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

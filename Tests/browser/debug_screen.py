#!/usr/bin/env python3
"""Drives the debug screen of a real `forsetti-host run --ui` in headless Chromium.

It starts the host on the example modules (without --approve-all, so they wait for approval),
opens the URL the host prints, and checks what a user would: the modules are listed; approving a
pending one starts it (in the page and in the host, asked through the CLI); forcing it off
(persisted) stops it; its trace names the deciding override; live events arrive. Then, without
the browser, it checks the guards: no token (or one in a cookie) -> 401 on the API, a foreign
Host header -> 421, a POST without the CSRF header -> 403, no cookie set and no CORS header in any
answer. It saves a screenshot, stops the host with
SIGTERM and expects exit status 0. Exits 0 when every check passes, 1 on a failed check, 3 when
a prerequisite (chromium, chromedriver, selenium) is missing.

With --hostile MODULE_ID it checks instead that a hostile module's text is escaped and marked on
the page: the host runs with --approve-all (as --run-as UID if given), the module logs
`hostile #N TEXT` repeatedly, and each such line must be one event line, marked as the module's,
showing --expect (TEXT escaped by the module-text rule) and no raw character of the rule; its
health summary likewise.

Run by Tests/ForsettiCLITests/DebugScreenBrowserTests.swift; by hand:
  python3 Tests/browser/debug_screen.py --host .build/debug/forsetti-host \
    --manifests manifests --plugins .build/plugins --state /tmp/ds --screenshot docs/debug-screen.png
"""

import argparse
import http.client
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

WAIT = 30  # seconds: a bound for things that should happen, not a speed requirement
EXPECTED_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class CheckFailed(Exception):
    pass


def step(text):
    print(f"\n== {text}", flush=True)


def ok(text):
    print(f"   ok: {text}", flush=True)


def check(condition, text):
    if not condition:
        raise CheckFailed(text)
    ok(text)


def missing_prerequisites(chromium, chromedriver):
    missing = []
    if not (os.path.isfile(chromium) and os.access(chromium, os.X_OK)):
        missing.append(f"{chromium} (Debian package `chromium`: apt-get install chromium)")
    if not (os.path.isfile(chromedriver) and os.access(chromedriver, os.X_OK)):
        missing.append(f"{chromedriver} (Debian package `chromium-driver`: apt-get install chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the Python module selenium (PyPI: pip install selenium)")
    return missing


class Host:
    """The real host process; its output is collected line by line as it comes."""

    def __init__(self, argv):
        self.argv = argv
        self.lines = []  # (stream, line)
        self.queue = queue.Queue()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        for name, stream in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            threading.Thread(target=self._pump, args=(name, stream), daemon=True).start()

    def _pump(self, name, stream):
        for line in stream:
            line = line.rstrip("\n")
            self.lines.append((name, line))
            self.queue.put((name, line))

    def wait_for_line(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        for name, line in list(self.lines):
            m = re.search(pattern, line)
            if m:
                return m
        while time.monotonic() < deadline:
            try:
                name, line = self.queue.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self.queue.empty():
                    return None
                continue
            m = re.search(pattern, line)
            if m:
                return m
        return None

    def output_tail(self, n=60):
        return "\n".join(f"  {name}: {line}" for name, line in self.lines[-n:])


def cli(host_binary, args):
    r = subprocess.run([host_binary] + args, capture_output=True, text=True, timeout=90)
    return r.returncode, r.stdout, r.stderr


def cli_json(host_binary, args):
    status, out, err = cli(host_binary, args)
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        raise CheckFailed(f"forsetti-host {' '.join(args)} did not print JSON ({e}); status {status}\n{out}\n{err}")


def cli_run_state(host_binary, state_dir, module_id):
    doc = cli_json(host_binary, ["list", "--json", "--state", state_dir])
    for m in doc.get("modules", []):
        if m.get("moduleID") == module_id:
            return m.get("runState"), m.get("runReason")
    raise CheckFailed(f"`forsetti-host list --json` does not list {module_id}: {doc}")


def eventually(what, probe, timeout=WAIT):
    """Calls probe() until it returns a true value; returns it, or fails saying what it saw."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = probe()
        if last and last[0]:
            return last
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what}: not within {timeout} s; last seen: {last[1] if last else None}")
        time.sleep(0.25)


def manifest_ids(manifests):
    ids = []
    for name in sorted(os.listdir(manifests)):
        if name.endswith(".json"):
            with open(os.path.join(manifests, name)) as f:
                ids.append(json.load(f)["moduleID"])
    return ids


def module_capabilities(manifests, module_id):
    for name in os.listdir(manifests):
        if name.endswith(".json"):
            with open(os.path.join(manifests, name)) as f:
                m = json.load(f)
            if m.get("moduleID") == module_id:
                return m.get("capabilitiesRequested", [])
    return []


# ---------------------------------------------------------------------------------------------
# The page, through the browser


def start_browser(chromium, chromedriver):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for a in (
        "--headless=new",
        "--no-sandbox",  # the tests run as root, where Chromium's sandbox refuses to start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1500,1100",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--proxy-server=direct://",
        "--proxy-bypass-list=*",
    ):
        options.add_argument(a)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=chromedriver)
    return webdriver.Chrome(service=service, options=options)


def row_state(driver, module_id):
    from selenium.common.exceptions import WebDriverException

    try:
        return driver.execute_script(
            """
            const tr = [...document.querySelectorAll('#modules tbody tr')].find(r => r.dataset.module === arguments[0]);
            if (!tr) return null;
            const c = tr.querySelector('.run-state');
            return [c.dataset.state, c.textContent];
            """,
            module_id,
        )
    except WebDriverException as e:
        return ["error", str(e)]


def click(driver, module_id, action):
    """Clicks a row's button; a destructive action's twice (the first arms it: "confirm …?")."""
    driver.execute_script(
        """
        const find = () => {
          const tr = [...document.querySelectorAll('#modules tbody tr')].find(r => r.dataset.module === arguments[0]);
          if (!tr) throw new Error('no row for ' + arguments[0]);
          const b = tr.querySelector('button[data-action="' + arguments[1] + '"]');
          if (!b) throw new Error('no ' + arguments[1] + ' button for ' + arguments[0]);
          return b;
        };
        const b = find();
        b.scrollIntoView();
        b.click();
        if (b.dataset.confirmKey) find().click();
        """,
        module_id,
        action,
    )


def status_text(driver):
    return driver.execute_script("return document.getElementById('status').textContent")


def browser_console(driver):
    try:
        return "\n".join(f"  console {e.get('level')}: {e.get('message')}" for e in driver.get_log("browser"))
    except Exception:  # noqa: BLE001 - the log is a diagnostic only
        return "  (browser console not available)"


def drive_page(driver, url, args, ids):
    host_binary, state_dir = args.host, args.state
    step(f"open the page: {url.split('?')[0]}?token=…")
    driver.get(url)
    check(driver.title == "Forsetti debug screen", f"the page loads (title {driver.title!r})")

    listed = eventually(
        "the modules table lists every example module",
        lambda: (
            lambda rows: (sorted(rows or []) == sorted(ids), rows)
        )(driver.execute_script("return [...document.querySelectorAll('#modules tbody tr')].map(r => r.dataset.module)")),
    )
    check(True, f"the table lists {', '.join(listed[1])}")
    check("token" not in driver.current_url, "the token is gone from the address bar (the tab keeps it)")

    eventually(
        "the live-event stream connects",
        lambda: (lambda t: (t == "live", t))(driver.execute_script("return document.getElementById('live').textContent")),
    )
    ok("the page is live (server-sent events connected)")

    # The module to approve: one that requests capabilities, so it waits approvalPending.
    target = next((i for i in ids if module_capabilities(args.manifests, i)), None)
    check(target is not None, f"an example module requests capabilities: {target}")

    step(f"{target} waits for approval")
    state, reason = cli_run_state(host_binary, state_dir, target)
    check(state == "blocked" and reason == "approvalPending", f"the host says {target} is {state} ({reason})")
    eventually(
        "the page shows it blocked approvalPending",
        lambda: (lambda s: (s and s[0] == "blocked" and "approvalPending" in s[1], s))(row_state(driver, target)),
    )
    ok(f"the page shows {target} blocked (approvalPending)")
    driver.execute_script(
        """const tr=[...document.querySelectorAll('#modules tbody tr')].find(r=>r.dataset.module===arguments[0]);
           tr.querySelector('button[data-action=trace]').click();""",
        target,
    )
    eventually(
        "its trace shows the pending capabilities",
        lambda: (
            lambda t: (t is not None and all(c in t for c in module_capabilities(args.manifests, target)), t)
        )(driver.execute_script("const p=document.querySelector('#approval .pending'); return p && p.textContent")),
    )
    ok(f"the trace lists pending: {', '.join(module_capabilities(args.manifests, target))}")
    health = eventually(
        "its trace has a health section, marked as the module's own report",
        lambda: (
            lambda t: (t is not None and ("nothing reported" in t or "status" in t), t)
        )(driver.execute_script("const h=document.getElementById('health'); return h && h.textContent")),
    )[1]
    ok(f"the trace shows health (reported by the module): {health}")

    step(f"approve {target} in the page")
    click(driver, target, "approve")
    eventually(
        "the page shows it started",
        lambda: (lambda s: (s and s[0] == "started", s))(row_state(driver, target)),
    )
    ok(f"the page shows {target} started")
    check("approved" in status_text(driver), "the status area shows the host's answer (approved …)")
    state, reason = eventually(
        "the host says it started",
        lambda: (lambda s: (s[0] == "started", s))(cli_run_state(host_binary, state_dir, target)),
    )[1]
    ok(f"`forsetti-host list --json --state …` says {target} is {state}")

    step(f"force {target} off (persisted override) in the page")
    check(
        driver.execute_script("return document.getElementById('channel-persisted').checked"),
        "the override channel is 'persisted'",
    )
    click(driver, target, "override-off")
    eventually(
        "the page shows it no longer started",
        lambda: (lambda s: (s and s[0] not in ("started", "", None), s))(row_state(driver, target)),
    )
    ok(f"the page shows {target} {row_state(driver, target)[1]}")
    state, reason = eventually(
        "the host says it stopped",
        lambda: (lambda s: (s[0] != "started", s))(cli_run_state(host_binary, state_dir, target)),
    )[1]
    ok(f"`forsetti-host list --json` says {target} is {state} ({reason})")
    overrides = cli_json(host_binary, ["override", "--json", "--state", state_dir, "--", "list"])
    entry = overrides.get("modules", {}).get(target, {})
    check(entry.get("persisted") == "off", f"`override --json -- list` stores it: persisted {entry.get('persisted')}")

    step(f"open the trace of {target}: the deciding override")
    driver.execute_script(
        """const tr=[...document.querySelectorAll('#modules tbody tr')].find(r=>r.dataset.module===arguments[0]);
           tr.querySelector('button[data-action=trace]').click();""",
        target,
    )
    decided = eventually(
        "the trace names the deciding override",
        lambda: (
            lambda t: (t == "moduleOverride:persisted", t)
        )(driver.execute_script("const d=document.getElementById('decided-by'); return d && d.textContent")),
    )[1]
    ok(f"decided by: {decided}")
    mark = driver.execute_script("const d=document.querySelector('#providers li.decided'); return d && d.textContent")
    check(mark is not None and "persisted" in mark and "off" in mark, f"the provider list marks it: {mark!r}")
    gates = driver.execute_script("return [...document.querySelectorAll('#gates tr.gate')].map(r => r.textContent)")
    check(len(gates) > 0 and any("entitlement" in g for g in gates), f"the gate table shows {len(gates)} steps")

    step(f"clear {target}'s persisted override, then force it on in the host's memory")
    click(driver, target, "override-clear")
    eventually(
        "the page shows it started again",
        lambda: (lambda s: (s and s[0] == "started", s))(row_state(driver, target)),
    )
    driver.execute_script("document.getElementById('channel-in-memory').click()")
    click(driver, target, "override-on")
    shown = eventually(
        "the row names the in-memory override as the deciding input, beside started",
        lambda: (
            lambda r: (r is not None and "module override on from in-memory" in r["verdict"] and r["run"].startswith("started"), r)
        )(
            driver.execute_script(
                """const tr=[...document.querySelectorAll('#modules tbody tr')].find(r=>r.dataset.module===arguments[0]);
                   return tr && {verdict: tr.querySelector('td.verdict').textContent, run: tr.querySelector('td.run-state').textContent};""",
                target,
            )
        ),
    )[1]
    check("blocked" not in shown["verdict"], f"no 'blocked' beside started: {shown}")
    ok(f"the row: {shown['verdict']} / {shown['run']}")
    driver.execute_script(
        """const tr=[...document.querySelectorAll('#modules tbody tr')].find(r=>r.dataset.module===arguments[0]);
           tr.querySelector('button[data-action=trace]').click();""",
        target,
    )
    decided = eventually(
        "the trace names the in-memory override as deciding",
        lambda: (
            lambda t: (t == "moduleOverride:in-memory", t)
        )(driver.execute_script("const d=document.getElementById('decided-by'); return d && d.textContent")),
    )[1]
    ok(f"decided by: {decided}")
    driver.execute_script("document.getElementById('channel-persisted').click()")

    events = driver.execute_script(
        "return [...document.querySelectorAll('#events li.state')].map(l => l.textContent)"
    )
    check(any(target in e for e in events), f"live state events arrived ({len(events)} so far, {target} among them)")

    # The screenshot for the README: something in every panel.
    other_ui = [i for i in ids if i != target and "dashboard" in i]
    if other_ui:
        step(f"approve {other_ui[0]} so the surface preview has content")
        click(driver, other_ui[0], "approve")
        eventually(
            "the surface preview shows its view in a slot",
            lambda: (
                lambda n: (n > 0, n)
            )(driver.execute_script("return document.querySelectorAll('#surface .slot .view').length")),
        )
        ok("the surface preview shows a slot with its view")
        eventually(
            "log lines of the module arrive",
            lambda: (
                lambda n: (n > 0, n)
            )(driver.execute_script("return document.querySelectorAll('#events li.log').length")),
        )
        ok("live log lines are shown")
    # Back to the forced-off module's trace for the picture.
    driver.execute_script(
        """const tr=[...document.querySelectorAll('#modules tbody tr')].find(r=>r.dataset.module===arguments[0]);
           tr.querySelector('button[data-action=trace]').click();""",
        target,
    )
    time.sleep(1)

    if args.policy:
        policy_problem_shown(driver, args.policy, ids)

    if args.screenshot:
        step(f"screenshot to {args.screenshot}")
        # The whole page, not only the window: size the viewport to the content first.
        height = driver.execute_script(
            "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)"
        )
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1500, "height": min(max(int(height), 900), 6000), "deviceScaleFactor": 1, "mobile": False},
        )
        driver.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.5)
        os.makedirs(os.path.dirname(os.path.abspath(args.screenshot)), exist_ok=True)
        check(driver.save_screenshot(args.screenshot), f"saved {args.screenshot}")


# ---------------------------------------------------------------------------------------------
# A hostile module's text (--hostile)

# The module-text rule's classes (Sources/ForsettiCore/Text/ModuleText.swift), written again here
# so the page is checked against the rule, not against itself.
RAW = re.compile("[\u0000-\u001f\u007f-\u009f\u2028-\u202e\u2066-\u2069]")
FORGED = "is now started"


def policy_problem_shown(driver, policy, ids):
    step("a policy file that no longer reads: the table stays, the problem is shown above it")
    with open(policy, encoding="utf-8") as f:
        valid = f.read()
    try:
        with open(policy, "w", encoding="utf-8") as f:
            f.write('{"default": "allow", "rules": [')
        driver.execute_script("document.getElementById('refresh').click()")
        shown = eventually(
            "the page shows the policy problem naming the file",
            lambda: (lambda t: (t is not None and policy in t, t))(
                driver.execute_script("const n = document.getElementById('problems'); return n.hidden ? null : n.textContent")
            ),
        )[1]
        ok(f"the page says: {shown}")
        check("last valid policy" in shown, "and that the last valid policy is in force")
        rows = driver.execute_script("return [...document.querySelectorAll('#modules tbody tr')].map(r => r.dataset.module)")
        check(sorted(rows or []) == sorted(ids), f"the table still lists every module: {rows}")
    finally:
        with open(policy, "w", encoding="utf-8") as f:
            f.write(valid)
    driver.execute_script("document.getElementById('refresh').click()")
    eventually(
        "with the file mended, the problem is gone",
        lambda: (lambda h: (h, h))(driver.execute_script("return document.getElementById('problems').hidden")),
    )
    ok("the file mended, the page shows no problem")


def raw_in(text):
    return sorted({f"U+{ord(c):04x}" for c in RAW.findall(text or "")})


def check_hostile(driver, url, module_id, expected):
    step(f"open the page: {url.split('?')[0]}?token=…")
    driver.get(url)
    check(driver.title == "Forsetti debug screen", f"the page loads (title {driver.title!r})")
    eventually(
        "the live-event stream connects",
        lambda: (lambda t: (t == "live", t))(driver.execute_script("return document.getElementById('live').textContent")),
    )
    ok("the page is live")

    step(f"the hostile module's log lines ({module_id})")
    events_js = """
        return [...document.querySelectorAll('#events li')].map(l => ({
          text: l.textContent, origin: l.dataset.origin || '', module: l.dataset.module || '',
          cls: l.className }))"""

    def numbered():
        lines = driver.execute_script(events_js)
        numbers = sorted({int(m.group(1)) for l in lines for m in [re.search(r"hostile #(\d+) ", l["text"])] if m})
        return (len(numbers) >= 2, lines, numbers)

    _, lines, numbers = eventually("two numbered hostile lines arrive", numbered)
    n = numbers[0]
    mine = [l for l in lines if f"hostile #{n} " in l["text"]]
    check(len(mine) == 1, f"`hostile #{n}` (one log call holding LF, CR, U+2028 …) is one event line, not {len(mine)}")
    line = mine[0]
    check(line["origin"] == "module" and "from-module" in line["cls"], f"it is marked as the module's: {line['cls']}")
    check(f"[module={module_id}]" in line["text"], f"it carries the module's ID: {line['text'][:80]}…")
    check(expected in line["text"], "it shows every character escaped, as the CLI does")
    check(not raw_in(line["text"]), f"no raw character of the rule in it: {raw_in(line['text'])}")
    forged = [l for l in lines if FORGED in l["text"]]
    check(
        forged and all(l["origin"] == "module" and l["module"] == module_id for l in forged),
        f"every event line holding `{FORGED}` ({len(forged)}) is marked as {module_id}'s",
    )
    all_events = driver.execute_script("return document.getElementById('events').textContent")
    check(not raw_in(all_events), f"no raw character of the rule in the event list: {raw_in(all_events)}")

    step("its health, as the module reported it")
    driver.execute_script(
        """const tr=[...document.querySelectorAll('#modules tbody tr')].find(r=>r.dataset.module===arguments[0]);
           if (!tr) throw new Error('no row for ' + arguments[0]);
           tr.querySelector('button[data-action=trace]').click();""",
        module_id,
    )
    health = eventually(
        "the trace shows the module's health summary",
        lambda: (
            lambda t: (bool(t) and expected.split("\\r\\n")[0] in t, t)
        )(driver.execute_script("const h=document.getElementById('health'); return h ? h.textContent : ''")),
    )[1]
    check(expected in health, "the summary shows every character escaped")
    check(not raw_in(health), f"no raw character of the rule in the health section: {raw_in(health)}")
    badge = driver.execute_script(
        """const tr=[...document.querySelectorAll('#modules tbody tr')].find(r=>r.dataset.module===arguments[0]);
           const b = tr && tr.querySelector('.health'); return b ? [b.textContent, b.title] : null;""",
        module_id,
    )
    check(badge is not None and "degraded" in badge[0], f"the row's badge says what the module claims: {badge and badge[0]}")
    check(not raw_in(badge[1]) and "\\u{9b}" in badge[1], "its tooltip shows the summary escaped")
    page = driver.execute_script(
        "return ['modules','trace','events','status'].map(i => document.getElementById(i).textContent).join('\\n')"
    )
    check(not raw_in(page.replace("\n", "")), f"no raw character of the rule anywhere module text is shown: {raw_in(page.replace(chr(10), ''))}")


# ---------------------------------------------------------------------------------------------
# The guards, without the browser


def request(port, method, path, headers, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        # skip_host: the test sets Host itself, to check the host refuses a foreign one.
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def check_guards(url):
    parsed = urllib.parse.urlsplit(url)
    port = parsed.port
    token = urllib.parse.parse_qs(parsed.query)["token"][0]
    good_host = f"127.0.0.1:{port}"
    auth = {"X-Forsetti-Token": token}
    body = json.dumps({"verb": "status"}).encode()
    answers = []

    def expect(label, status_wanted, method, path, headers, body=None):
        status, h, data = request(port, method, path, headers, body)
        answers.append((label, h))
        check(status == status_wanted, f"{label}: {status}")
        return status, h, data

    step("the guards, with plain HTTP requests (no browser)")
    _, h, _ = expect("GET /?token=T", 200, "GET", f"/?token={token}", {"Host": good_host})
    check("set-cookie" not in h, "it sets no cookie (a browser sends cookies to every port)")
    check(h.get("content-security-policy") == EXPECTED_CSP, "it sends the strict Content-Security-Policy")
    check(h.get("x-content-type-options") == "nosniff", "X-Content-Type-Options: nosniff")
    check(h.get("referrer-policy") == "no-referrer", "Referrer-Policy: no-referrer")
    expect("GET / without the token (the page holds nothing of the host)", 200, "GET", "/", {"Host": good_host})
    expect(
        "POST /api without the token",
        401,
        "POST",
        "/api",
        {"Host": good_host, "X-Forsetti-Request": "1", "Content-Type": "application/json"},
        body,
    )
    expect(
        "POST /api with a wrong token",
        401,
        "POST",
        "/api",
        {"Host": good_host, "X-Forsetti-Request": "1", "X-Forsetti-Token": "0" * len(token)},
        body,
    )
    expect(
        "POST /api with the token in a cookie",
        401,
        "POST",
        "/api",
        {"Host": good_host, "X-Forsetti-Request": "1", "Cookie": f"forsetti_token={token}"},
        body,
    )
    expect("GET /api/events without the token", 401, "GET", "/api/events", {"Host": good_host})
    expect("GET / with Host: localhost:PORT", 200, "GET", "/", {"Host": f"localhost:{port}"})
    expect(
        "POST /api with a foreign Host header (DNS rebinding)",
        421,
        "POST",
        "/api",
        {"Host": f"evil.example:{port}", "X-Forsetti-Request": "1", **auth},
        body,
    )
    expect("GET / with the wrong port in Host", 421, "GET", "/", {"Host": f"127.0.0.1:{port + 1 if port < 65535 else 1}"})
    expect(
        "POST /api without X-Forsetti-Request",
        403,
        "POST",
        "/api",
        {"Host": good_host, "Content-Type": "application/json", **auth},
        body,
    )
    _, _, data = expect(
        "POST /api with the token and X-Forsetti-Request",
        200,
        "POST",
        "/api",
        {"Host": good_host, "X-Forsetti-Request": "1", "Content-Type": "application/json", **auth},
        body,
    )
    answer = json.loads(data)
    check(
        answer.get("ok") is True and (answer.get("answer") or {}).get("running") is True,
        "it answers a typed status request",
    )
    status, h, _ = request(
        port,
        "OPTIONS",
        "/api",
        {"Host": good_host, "Origin": "http://evil.example", "Access-Control-Request-Method": "POST", **auth},
    )
    answers.append(("OPTIONS /api (CORS preflight)", h))
    ok(f"a CORS preflight from a foreign origin is answered {status}")
    status, h, _ = request(
        port,
        "POST",
        "/api",
        {"Host": good_host, "Origin": "http://evil.example", "X-Forsetti-Request": "1", **auth},
        body,
    )
    answers.append(("POST /api with Origin: http://evil.example", h))
    for label, h in answers:
        if any(k.startswith("access-control-") for k in h):
            raise CheckFailed(f"{label}: the answer carries CORS headers: {[k for k in h if k.startswith('access-control-')]}")
    ok(f"no Access-Control-* header in any of {len(answers)} answers")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", required=True, help="the forsetti-host executable")
    p.add_argument("--manifests", required=True)
    p.add_argument("--plugins", required=True)
    p.add_argument("--state", required=True, help="a fresh state directory")
    p.add_argument("--screenshot", help="where to save the screenshot (PNG)")
    p.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    p.add_argument("--chromedriver", default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    p.add_argument("--hostile", metavar="MODULE_ID", help="check that module's text instead (see above)")
    p.add_argument("--expect", help="with --hostile: the module's text as the page must show it")
    p.add_argument("--run-as", type=int, metavar="UID", help="run the host as UID (and its group) via setpriv")
    p.add_argument("--policy", help="a valid policy file for the host: the page is shown it broken, then mended")
    args = p.parse_args()

    missing = missing_prerequisites(args.chromium, args.chromedriver)
    if missing:
        print("MISSING PREREQUISITES for the browser test:\n  " + "\n  ".join(missing), flush=True)
        print("install them: apt-get install chromium chromium-driver && pip install selenium", flush=True)
        return 3

    ids = manifest_ids(args.manifests)
    argv = [
        args.host, "run", "--ui", "--state", args.state, "--manifests", args.manifests, "--plugins", args.plugins,
    ]
    if args.hostile:
        argv.append("--approve-all")
    if args.policy:
        argv += ["--policy", args.policy]
    if args.run_as is not None:
        argv = ["setpriv", f"--reuid={args.run_as}", f"--regid={args.run_as}", "--clear-groups", "--"] + argv
    step("start the host: " + " ".join(argv))
    host = Host(argv)
    driver = None
    failed = None
    try:
        m = host.wait_for_line(r"ui: (http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_\-]+))", WAIT)
        if m is None:
            raise CheckFailed("the host did not print `ui: http://127.0.0.1:PORT/?token=TOKEN`")
        url = m.group(1)
        ok(f"the host serves the page on 127.0.0.1:{m.group(2)} (token of {len(m.group(3))} characters)")

        step("start headless Chromium")
        driver = start_browser(args.chromium, args.chromedriver)
        ok(f"{driver.capabilities.get('browserName')} {driver.capabilities.get('browserVersion')}")
        if args.hostile:
            check_hostile(driver, url, args.hostile, args.expect or "")
        else:
            drive_page(driver, url, args, ids)
            check_guards(url)
    except CheckFailed as e:
        failed = str(e)
    except Exception as e:  # noqa: BLE001 - any error is a failed run, reported with its context
        failed = f"{type(e).__name__}: {e}"
    finally:
        if driver is not None:
            if failed:
                print("\nbrowser console:\n" + browser_console(driver), flush=True)
                try:
                    print("page status area:\n  " + status_text(driver), flush=True)
                except Exception:  # noqa: BLE001
                    pass
            driver.quit()

    step("stop the host with SIGTERM")
    if host.proc.poll() is None:
        host.proc.send_signal(signal.SIGTERM)
    try:
        code = host.proc.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        host.proc.kill()
        code = host.proc.wait()
        failed = failed or f"the host did not stop within {WAIT} s of SIGTERM"
    if failed is None:
        if code == 0:
            ok("the host exited 0")
        else:
            failed = f"the host exited {code} after SIGTERM"

    if failed:
        print(f"\nFAIL: {failed}\n\nhost output (last lines):\n{host.output_tail()}", flush=True)
        return 1
    if args.hostile:
        print("\nPASS: module text is escaped and marked as the module's on the debug page", flush=True)
    else:
        print("\nPASS: the debug screen works in a real browser and refuses what it must", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

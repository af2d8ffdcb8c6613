#!/usr/bin/env python3
"""The debug screen against the browser and the network, in headless Chromium (issue 26).

Starts two real hosts with `run --ui` (A on --manifests-a, B on --manifests-b) and checks what an
operator would:

  1. both pages open side by side in one browser, each working after the other opened and after
     a reload (the token is kept per tab and per port, never in a cookie: the browser holds none);
  2. no credential goes to another port: a plain listener on another 127.0.0.1 port, visited by
     the same browser, receives no token and no cookie of the page (positive controls: the
     listener sees its own cookie come back, and finds a token put in a URL on purpose);
  3. the rows: display names shown, only the actions that apply (an invalid manifest: explain
     only), a destructive action waits for a confirming click, approving moves the row from
     "approve" to "revoke";
  4. live events filtered by module, paused (the list holds still, what arrives is counted) and
     resumed (what arrived meanwhile is shown);
  5. the page reachable while 40 half-open connections trickle a request they never finish (and
     are still open afterwards, checked);
  6. the page reachable with 1,000 event-stream clients open: 64 streams at most, every other
     one refused 503 with text, which the page itself shows when its own stream is refused;
     after they close, the page's stream comes back by itself;
  7. a restarted host (B stopped, started again on the same port): B's page says "This host
     restarted: open the address it printed", never raw JSON; the new address works.

Waits are on what the page or the host shows, bounded by generous safety timeouts. The script
raises its own RLIMIT_NOFILE (soft to hard) for the 1,000 sockets. Exits 0 when every check
passes, 1 on a failed check, 3 when a prerequisite is missing.
"""

import argparse
import http.server
import os
import resource
import signal
import socket
import socketserver
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debug_screen as ds  # noqa: E402 - the shared helpers: Host, eventually, check, the browser
from debug_screen import CheckFailed, check, eventually, ok, step  # noqa: E402

WAIT = 60  # seconds: a safety bound for things that should happen, not a speed requirement
STREAM_CAP = 64  # WebLimits.streams
RESTARTED = "This host restarted: open the address it printed"


def ui_line(host):
    m = host.wait_for_line(r"ui: (http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]+))", WAIT)
    if m is None:
        raise CheckFailed(f"the host did not print its ui: line\n{host.output_tail()}")
    return m.group(1), int(m.group(2)), m.group(3)


def rows(driver):
    return driver.execute_script("return [...document.querySelectorAll('#modules tbody tr')].map(r => r.dataset.module)")


def page_lists(driver, ids, what):
    eventually(f"{what} lists {sorted(ids)}", lambda: (lambda r: (sorted(r or []) == sorted(ids), r))(rows(driver)))


def refreshed(driver):
    return driver.execute_script("return document.body.dataset.refreshed || ''")


def page_works(driver, ids, pid, what):
    """Refresh clicked: the rows are the host's, its pid is shown, nothing is refused."""
    before = refreshed(driver)
    driver.execute_script("document.getElementById('refresh').click()")
    eventually(f"{what}: a refresh completes", lambda: (lambda r: (r != before and r != "", r))(refreshed(driver)))
    page_lists(driver, ids, what)
    info = driver.execute_script("return document.getElementById('host-info').textContent")
    check(f"host pid {pid} " in info, f"{what}: the page shows its host ({info})")
    notice = driver.execute_script("const n = document.getElementById('notice'); return n.hidden ? '' : n.textContent")
    check(notice == "", f"{what}: no notice ({notice!r})")


def host_pid(host):
    return host.proc.pid


# ---------------------------------------------------------------------------------------------
# A plain listener on another port: what would a browser send it?


class Recorder(http.server.BaseHTTPRequestHandler):
    seen = []  # (path, raw head)

    def do_GET(self):  # noqa: N802 - the http.server API
        Recorder.seen.append((self.path, self.requestline + "\r\n" + str(self.headers)))
        if self.path.startswith("/visit"):
            body = b"<!doctype html><title>listener</title><img src='/img'><script src='/script.js'></script>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Set-Cookie", "probe=1; Path=/")
        else:
            body = b"" if self.path.startswith("/script.js") else b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/javascript" if self.path.startswith("/script.js") else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def credential_stays_home(driver, token_a, token_b, url_a):
    step("a plain listener on another 127.0.0.1 port, visited by the same browser")
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Recorder)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        Recorder.seen.clear()
        driver.get(f"http://127.0.0.1:{port}/visit")
        eventually("the listener's page loads its image", lambda: (any(p == "/img" for p, _ in Recorder.seen), Recorder.seen))
        driver.get(f"http://127.0.0.1:{port}/again")
        eventually("the listener sees a second visit", lambda: (any(p == "/again" for p, _ in Recorder.seen), Recorder.seen))
        # Positive control 1: a cookie the browser holds for 127.0.0.1 does come back here.
        again = [h for p, h in Recorder.seen if p == "/again"][0]
        check("probe=1" in again, "positive control: the listener's own cookie comes back to it (cookies ignore ports)")
        received = [h for _, h in Recorder.seen]
        leaked = [h.split("\r\n")[0] for h in received if token_a in h or token_b in h or "forsetti" in h.lower()]
        check(not leaked, f"no token and no forsetti cookie in the {len(received)} requests the listener got: {leaked}")
        # Positive control 2: a token in what the listener receives is found.
        driver.get(f"http://127.0.0.1:{port}/control?t={token_a}")
        eventually("the control visit arrives", lambda: (any(p.startswith("/control") for p, _ in Recorder.seen), None))
        control = [h for p, h in Recorder.seen if p.startswith("/control")]
        check(any(token_a in h for h in control), "positive control: a token sent on purpose is found")
        cookies = driver.execute_cdp_cmd("Network.getAllCookies", {}).get("cookies", [])
        names = sorted(c["name"] for c in cookies)
        check(names == ["probe"], f"the browser holds no cookie but the listener's: {names}")
    finally:
        server.shutdown()
        server.server_close()
    driver.get(url_a.split("?")[0])  # back to A's page: the tab still holds its token


# ---------------------------------------------------------------------------------------------
# The rows


def row_info(driver, module_id):
    return driver.execute_script(
        """
        const tr = [...document.querySelectorAll('#modules tbody tr')].find(r => r.dataset.module === arguments[0]);
        if (!tr) return null;
        return {
          name: (tr.querySelector('.display-name') || {}).textContent,
          actions: [...tr.querySelectorAll('button')].map(b => b.dataset.action),
          state: tr.querySelector('.run-state').dataset.state,
        };
        """,
        module_id,
    )


def rows_and_confirmation(driver, args):
    step("rows: display names, only the actions that apply")
    names = {
        "com.test.chatty": "Chatty Logger",
        "com.test.quiet": "Quiet One",
        "com.test.pending": "Needs Approval",
        "com.test.broken": "(no name)",
    }
    for mid, name in names.items():
        info = eventually(f"the row of {mid}", lambda mid=mid: (lambda i: (i is not None, i))(row_info(driver, mid)))[1]
        check(info["name"] == name, f"{mid} shows its display name: {info['name']!r}")
    broken = row_info(driver, "com.test.broken")
    check(broken["actions"] == ["trace"], f"the invalid manifest offers only explain: {broken['actions']}")
    chatty = eventually(
        "chatty runs", lambda: (lambda i: (i and i["state"] == "started", i))(row_info(driver, "com.test.chatty"))
    )[1]
    check(
        "approve" not in chatty["actions"] and "revoke" not in chatty["actions"] and "enable" not in chatty["actions"],
        f"a running module needing no approval offers no approve, revoke or enable: {chatty['actions']}",
    )
    check("disable" in chatty["actions"] and "reload" in chatty["actions"], "it offers disable and reload")
    pending = eventually(
        "the pending module offers approve",
        lambda: (lambda i: (i and "approve" in i["actions"], i))(row_info(driver, "com.test.pending")),
    )[1]
    check("revoke" not in pending["actions"] and "reload" not in pending["actions"], f"and not revoke or reload: {pending['actions']}")

    step("approve asks for a confirming click")
    state, reason = ds.cli_run_state(args.host, args.state_a, "com.test.pending")
    check((state, reason) == ("blocked", "approvalPending"), f"the host says it waits: {state} ({reason})")
    clicks = driver.execute_script(
        """
        const find = () => [...document.querySelectorAll('#modules tbody tr')]
          .find(r => r.dataset.module === 'com.test.pending').querySelector('button[data-action=approve]');
        const status = () => document.getElementById('status').textContent;
        const before = status();
        find().click();
        const first = { status: status(), armed: find().dataset.armed || '', label: find().textContent };
        find().click();
        return { before: before, first: first, second: status() };
        """
    )
    check(clicks["first"]["status"] == clicks["before"], "one click does nothing (the status area is as it was)")
    check(clicks["first"]["armed"] == "1" and "confirm" in clicks["first"]["label"], f"the button asks: {clicks['first']['label']!r}")
    check(clicks["second"].startswith("$ forsetti-host approve com.test.pending"), f"the second click acts: {clicks['second']!r}")
    eventually(
        "the host starts it",
        lambda: (lambda s: (s[0] == "started", s))(ds.cli_run_state(args.host, args.state_a, "com.test.pending")),
    )
    ok("the host says com.test.pending is started")
    after = eventually(
        "its row now offers revoke, not approve",
        lambda: (lambda i: (i and "revoke" in i["actions"] and "approve" not in i["actions"], i))(
            row_info(driver, "com.test.pending")
        ),
    )[1]
    ok(f"its row offers {after['actions']}")


# ---------------------------------------------------------------------------------------------
# Live events


def events(driver):
    return driver.execute_script(
        "return [...document.querySelectorAll('#events li[data-seq]')].map(l => [Number(l.dataset.seq), l.dataset.module || ''])"
    )


def set_filter(driver, value):
    driver.execute_script(
        "const s = document.getElementById('event-filter'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
        value,
    )


def filter_and_pause(driver):
    step("live events: filtered by module")
    set_filter(driver, "")
    both = eventually(
        "lines of chatty and of quiet arrive",
        lambda: (lambda e: ({"com.test.chatty", "com.test.quiet"} <= {m for _, m in e}, len(e)))(events(driver)),
    )
    ok(f"unfiltered, the list holds both ({both[1]} lines)")
    set_filter(driver, "com.test.quiet")
    quiet = eventually(
        "filtered on quiet: only its lines, at least two",
        lambda: (lambda e: (len(e) >= 2 and all(m == "com.test.quiet" for _, m in e), e[:3]))(events(driver)),
    )
    ok(f"only com.test.quiet's lines shown ({quiet[1]} …), though chatty logs ten a second")
    set_filter(driver, "com.test.chatty")
    eventually(
        "filtered on chatty: only its lines",
        lambda: (lambda e: (len(e) >= 2 and all(m == "com.test.chatty" for _, m in e), len(e)))(events(driver)),
    )
    ok("only com.test.chatty's lines shown")

    step("live events: paused and resumed")
    driver.execute_script("document.getElementById('events-pause').click()")
    held = events(driver)
    top = held[0][0]
    missed = eventually(
        "while paused, new lines are counted",
        lambda: (lambda n: (n >= 5, n))(
            int(driver.execute_script("return document.getElementById('events-pause').dataset.missed"))
        ),
    )[1]
    label = driver.execute_script("return document.getElementById('events-pause').textContent")
    check(label.startswith("Resume (") and label.endswith(" new)"), f"the button says what waits: {label!r}")
    check(events(driver) == held, f"the list held still while {missed}+ lines arrived")
    counted = int(driver.execute_script("return document.getElementById('events-pause').dataset.missed"))
    driver.execute_script("document.getElementById('events-pause').click()")
    resumed = events(driver)
    newer = [s for s, _ in resumed if s > top]
    check(len(newer) >= counted, f"resumed: the {counted} lines that arrived meanwhile are shown ({len(newer)} newer)")
    check(driver.execute_script("return document.getElementById('events-pause').textContent") == "Pause", "and it is live again")
    set_filter(driver, "")


# ---------------------------------------------------------------------------------------------
# The network


OTHER_UID = 65534  # the attacking clients' user, where this runs as root
HEADER_SECONDS = 5  # WebLimits.headerSeconds


def connect(port):
    """A connection of another user (uid 65534) where this runs as root: the page's server counts
    connections per uid (WebLimits.perClient), and the browser is root's. The socket's owner is
    the effective uid at socket(), so it is switched around that call alone."""
    if os.geteuid() != 0:
        return socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    os.seteuid(OTHER_UID)
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    finally:
        os.seteuid(0)
    s.settimeout(WAIT)
    s.connect(("127.0.0.1", port))
    return s


def still_open(s):
    """Whether the server still holds the connection (nothing to read, no end of stream)."""
    s.setblocking(False)
    try:
        data = s.recv(1)
        return False if data == b"" else None  # None: it answered something, unexpected
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def slowloris(driver, port, ids, pid):
    step("40 half-open connections trickling a request they never finish")
    socks = []
    for _ in range(40):
        s = connect(port)
        s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
        socks.append(s)
    stop = threading.Event()

    def trickle():
        n = 0
        while not stop.wait(2):
            n += 1
            for s in socks:
                try:
                    s.sendall(f"X-Slow-{n}: x\r\n".encode())
                except OSError:
                    pass

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    try:
        driver.refresh()
        page_works(driver, ids, pid, "the page (reloaded) with 40 half-open connections")
        # A header line every 2 s keeps a connection from being idle, not from its header
        # deadline: the server closes each once its headers took HEADER_SECONDS.
        eventually(
            f"the server closes all 40 once their headers took {HEADER_SECONDS} s",
            lambda: (lambda held: (held == 0, f"{held} still open"))(sum(1 for s in socks if still_open(s) is True)),
            timeout=WAIT,
        )
        page_works(driver, ids, pid, "the page, after the 40 were closed")
    finally:
        stop.set()
        t.join()
        for s in socks:
            s.close()


def read_head(s):
    """The answer's head; b"" when the server closed without one (past its connection limit)."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = s.recv(4096)
        except OSError:
            return data
        if not chunk:
            break
        data += chunk
    return data


def raise_open_files():
    """Soft RLIMIT_NOFILE to 8192 (or the hard limit): the 1,000 sockets need it, and the hosts,
    started after, inherit it (the page's server takes half of it as its connection limit).
    Returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        ok(f"raised RLIMIT_NOFILE from {soft} to {wanted} (this script's sockets; the hosts inherit it)")
        return wanted
    return soft


def thousand_streams(driver, url, port, token, ids, pid, open_files):
    step("1,000 event-stream clients")
    # WebLimits.connections: half the host's open-file limit, at most 2048; WebLimits.perClient:
    # a quarter of that for one user (these clients are uid 65534's, the browser root's).
    connections = min(max(open_files // 2, 64), 2048)
    per_client = max(16, connections // 4) if os.geteuid() == 0 else connections
    request = f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Forsetti-Token: {token}\r\n\r\n".encode()
    socks = []
    try:
        for _ in range(1000):
            s = connect(port)
            s.sendall(request)
            socks.append(s)
        answers = {}
        bodies = []
        for s in socks:
            head = read_head(s)
            status = head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else "closed"
            answers[status] = answers.get(status, 0) + 1
            if status == "503":
                bodies.append(head)
        ok(f"answers: {answers}")
        streams = answers.get("200", 0)
        # The page's own stream counts, and so may those of the page's earlier loads until the
        # keep-alive finds them gone (within 30 s): a few under the cap, never over it.
        check(STREAM_CAP - 10 <= streams <= STREAM_CAP, f"{streams} got streams: the cap ({STREAM_CAP}) less the page's own")
        if min(connections, per_client) > 1000 + 64:
            check(answers.get("503", 0) == 1000 - streams, "every other one is refused 503, none left hanging or dropped")
        else:
            # Past the connection limit, or one user's share of it, a client is closed without
            # an answer; the others are 503.
            check(
                answers.get("503", 0) + answers.get("closed", 0) == 1000 - streams,
                f"every other one is refused: 503, or closed past the {connections}-connection limit "
                f"or one user's {per_client}",
            )
        rest = bodies[0]
        socks[0].settimeout(WAIT)
        check(b"Content-Type: text/plain" in rest and b"Connection: close" in rest, "the refusal is text, and closes")

        driver.refresh()
        page_works(driver, ids, pid, "the page (reloaded) with the 1,000 clients open")

        # The page's own stream refused, shown in the page: fill every slot (the reload may have
        # freed one), then open the page in a new tab. A stream closed earlier counts until the
        # keep-alive finds it gone, so a slot may free itself between the two: then the new tab
        # got it, and the next round fills again. No round closes a stream, so the rounds end.
        note = None
        for attempt in range(1, 16):
            while True:
                s = connect(port)
                s.sendall(request)
                head = read_head(s)
                socks.append(s)
                if not head.startswith(b"HTTP/1.1 200"):
                    break
            driver.switch_to.new_window("tab")
            driver.get(url)
            page_lists(driver, ids, f"a new tab of the page with every stream taken (round {attempt})")
            seen = eventually(
                "the new tab's stream is refused or live",
                lambda: (
                    lambda t: (t[0] is not None or t[1] == "live", t)
                )(
                    driver.execute_script(
                        "const n = document.getElementById('stream-note');"
                        "return [n.hidden ? null : n.textContent, document.getElementById('live').textContent]"
                    )
                ),
            )[1]
            if seen[0] is not None:
                note = seen
                break
            ok(f"round {attempt}: a slot had freed itself (an earlier page's stream noticed gone); again")
        check(note is not None and "live events refused" in note[0], f"the page shows why its stream is refused: {note}")
        ok(f"the page says: {note[0]}")
        check("refused" in note[1], f"its badge says: {note[1]!r}")
        page_works(driver, ids, pid, "that page, without live events")
    finally:
        for s in socks:
            s.close()
    eventually(
        "with the clients gone, the page's stream comes back by itself",
        lambda: (lambda t: (t == "live", t))(driver.execute_script("return document.getElementById('live').textContent")),
        timeout=3 * WAIT,
    )
    ok("the page is live again")


# ---------------------------------------------------------------------------------------------


def stop(host, failed):
    if host.proc.poll() is None:
        host.proc.send_signal(signal.SIGTERM)
    try:
        code = host.proc.wait(timeout=WAIT)
    except Exception:  # noqa: BLE001
        host.proc.kill()
        host.proc.wait()
        return failed or "a host did not stop within its bound after SIGTERM"
    if code != 0:
        return failed or f"a host exited {code} after SIGTERM"
    return failed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", required=True)
    p.add_argument("--plugins", required=True)
    p.add_argument("--manifests-a", required=True)
    p.add_argument("--state-a", required=True)
    p.add_argument("--manifests-b", required=True)
    p.add_argument("--state-b", required=True)
    p.add_argument("--chromium", default="/usr/bin/chromium")
    p.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = p.parse_args()

    missing = ds.missing_prerequisites(args.chromium, args.chromedriver)
    if missing:
        print("MISSING PREREQUISITES for the browser test:\n  " + "\n  ".join(missing), flush=True)
        return 3

    def start(manifests, state, extra=()):
        argv = [args.host, "run", "--ui", "--state", state, "--manifests", manifests, "--plugins", args.plugins]
        return ds.Host(argv + list(extra))

    open_files = raise_open_files()
    ids_a = ["com.test.broken", "com.test.chatty", "com.test.pending", "com.test.quiet"]
    ids_b = ["com.test.quiet"]
    step("start hosts A and B")
    a = start(args.manifests_a, args.state_a)
    b = start(args.manifests_b, args.state_b)
    hosts = [a, b]
    driver = None
    failed = None
    try:
        url_a, port_a, token_a = ui_line(a)
        url_b, port_b, token_b = ui_line(b)
        ok(f"A on port {port_a}, B on port {port_b}")
        driver = ds.start_browser(args.chromium, args.chromedriver)

        step("two hosts' pages side by side in one browser")
        driver.get(url_a)
        page_lists(driver, ids_a, "A's page")
        tab_a = driver.current_window_handle
        driver.switch_to.new_window("tab")
        driver.get(url_b)
        page_lists(driver, ids_b, "B's page")
        tab_b = driver.current_window_handle
        page_works(driver, ids_b, host_pid(b), "B's page")
        driver.switch_to.window(tab_a)
        page_works(driver, ids_a, host_pid(a), "A's page, after B's opened")
        driver.refresh()
        page_works(driver, ids_a, host_pid(a), "A's page reloaded (the tab keeps its token)")
        check("token" not in driver.current_url, "the token is out of the address bar")
        cookies = driver.execute_cdp_cmd("Network.getAllCookies", {}).get("cookies", [])
        check(cookies == [], f"the browser holds no cookie: {[c['name'] for c in cookies]}")

        credential_stays_home(driver, token_a, token_b, url_a)
        page_works(driver, ids_a, host_pid(a), "A's page, back from the listener")

        rows_and_confirmation(driver, argparse.Namespace(host=args.host, state_a=args.state_a))
        filter_and_pause(driver)
        slowloris(driver, port_a, ids_a, host_pid(a))
        thousand_streams(driver, url_a, port_a, token_a, ids_a, host_pid(a), open_files)

        step("B restarts on the same port: its page says so")
        driver.switch_to.window(tab_b)
        failed = stop(b, failed)
        check(failed is None, "B stopped with status 0")
        b = start(args.manifests_b, args.state_b, ["--ui-port", str(port_b)])
        hosts.append(b)
        url_b2, port_b2, _ = ui_line(b)
        check(port_b2 == port_b, f"B is back on port {port_b}")
        text = eventually(
            "B's old page says the host restarted",
            lambda: (lambda t: (t is not None and RESTARTED in t, t))(
                driver.execute_script("const n = document.getElementById('notice'); return n.hidden ? null : n.textContent")
            ),
            timeout=WAIT,
        )[1]
        ok(f"the page says: {text}")
        body = driver.execute_script("return document.body.innerText")
        check('{"error"' not in body and '"error":' not in body, "no raw JSON anywhere on the page")
        driver.get(url_b2)
        page_works(driver, ids_b, host_pid(b), "B's new address")
    except CheckFailed as e:
        failed = str(e)
    except Exception as e:  # noqa: BLE001 - any error is a failed run, reported with its context
        failed = f"{type(e).__name__}: {e}"
    finally:
        if driver is not None:
            if failed:
                print("\nbrowser console:\n" + ds.browser_console(driver), flush=True)
            driver.quit()
    step("stop the hosts with SIGTERM")
    for h in hosts:
        if h.proc.poll() is None or h.proc.returncode not in (0,):
            failed = stop(h, failed)
    if failed:
        print(f"\nFAIL: {failed}\n\nhost A output (last lines):\n{a.output_tail()}\n\nhost B:\n{b.output_tail()}", flush=True)
        return 1
    print("\nPASS: the page survives the browser and the network", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Drive the dashboard in headless Chromium (Selenium + chromedriver).

Usage: browser_test.py <disque-server binary> [--no-screenshots]

Starts a node with the HTTP endpoint and a password, and two peers it
meets over RESP (a three-node cluster), creates queues, then checks in the
browser: every page loads without console errors, the queue list shows the
test's queue, pausing it from the UI (with the confirmation dialog) makes
ADDJOB answer -PAUSED and resuming makes it work again, a job's details
open, the cluster view shows each peer's queued jobs and "unknown" for a
peer that was killed, the history charts draw lines with points after
some traffic (overview and a queue's page, also phone-sized), the
schedules view lists a schedule and pauses / resumes it through the
dialog, the batches view shows a batch's progress and cancels it through
the dialog, a queue's page shows a job held by ADDJOB ... AFTER as
waiting, and requests without credentials are refused. Screenshots go to docs/. Exits non-zero on the first failure.
"""

import base64
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.support.ui import WebDriverWait

PASSWORD = "dash-secret"
QUEUE = "browser:orders"
SCHEDULE = "browser:nightly"
BATCH = "browser:import"
BATCH_QUEUE = "browser:rows"
WAIT = 15
TRAFFIC_QUEUE = "browser:traffic"
# Two history samples (5 s apart) are needed before a line is drawn.
HISTORY_WAIT = 25


def fail(msg):
    print(f"browser-test: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


class Resp:
    """A minimal RESP client, enough for AUTH / ADDJOB / PAUSE."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self._reply()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode()

    def _reply(self):
        line = self._line()
        kind, rest = line[0], line[1:]
        if kind in "+-":
            return line
        if kind == ":":
            return int(rest)
        if kind == "$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode(errors="replace")
        if kind == "*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValueError(f"unexpected reply {line!r}")


def start_server(binary, workdir, http=True):
    """(process, RESP port, HTTP port or None); output goes to workdir/out."""
    args = [binary, "--port", "0", "--dir", workdir, "--cluster-node-timeout", "2000"]
    if http:
        args += ["--http-port", "auto", "--http-bind", "127.0.0.1", "--requirepass", PASSWORD]
    out = open(os.path.join(workdir, "out"), "w+")
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        out.seek(0)
        m = re.search(r"^disque-server ready port=(\d+) .*?(?:http=(\d+))?$", out.read(), re.M)
        if m:
            return proc, int(m.group(1)), int(m.group(2)) if m.group(2) else None
        if proc.poll() is not None:
            fail("server exited during startup")
        time.sleep(0.05)
    proc.kill()
    fail("server not ready in time")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def http_status(url, auth=None):
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def check_console(driver, where):
    errs = console_errors(driver)
    if errs:
        fail(f"console errors on {where}: {errs}")


def traffic(port, stop_event):
    """Steady producer/consumer traffic on a queue of its own, so the
    history charts have rates to draw."""
    try:
        r = Resp(port)
        r.cmd("AUTH", "default", PASSWORD)
        i = 0
        while not stop_event.is_set():
            for _ in range(3 + i % 4):
                # One copy: a replica on a peer would be queued there after
                # its RETRY and change the peers' totals the test checks.
                r.cmd("ADDJOB", TRAFFIC_QUEUE, f"tick {i}", "0", "REPLICATE", "1")
            got = r.cmd("GETJOB", "NOHANG", "COUNT", "2", "FROM", TRAFFIC_QUEUE)
            for job in got or []:
                r.cmd("ACKJOB", job[1])
            i += 1
            stop_event.wait(0.1)
    except (OSError, ValueError) as e:
        if not stop_event.is_set():
            print(f"browser-test: traffic stopped: {e}", file=sys.stderr)



def click(wait, by, selector):
    """Click an element, finding it again if a poll re-rendered it between
    the lookup and the click (a stale reference)."""
    def go(d):
        try:
            d.find_element(by, selector).click()
            return True
        except StaleElementReferenceException:
            return False
    wait.until(go)

def text_of(driver, selector):
    """An element's text, or "" when a poll re-rendered it between the
    lookup and the read (a stale reference): callers wait for it again."""
    try:
        return driver.find_element(By.CSS_SELECTOR, selector).text
    except StaleElementReferenceException:
        return ""

def chart_points(driver, container):
    """Points of each series path drawn in a chart container."""
    paths = driver.find_elements(By.CSS_SELECTOR, f"#{container} path.series")
    return [len(re.findall(r"[ML]", p.get_attribute("d") or "")) for p in paths]


def main():
    if len(sys.argv) < 2:
        fail("usage: browser_test.py <disque-server> [--no-screenshots]")
    binary = os.path.abspath(sys.argv[1])
    shots = "--no-screenshots" not in sys.argv
    docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs")
    workdir = tempfile.mkdtemp(prefix="disque-browser-")
    procs = []
    for sub in ["main", "peer1", "peer2"]:
        os.makedirs(os.path.join(workdir, sub))
    proc, port, http_port = start_server(binary, os.path.join(workdir, "main"))
    procs.append(proc)
    peers = []
    for sub in ["peer1", "peer2"]:
        p, pport, _ = start_server(binary, os.path.join(workdir, sub), http=False)
        procs.append(p)
        peers.append((p, pport))
    base = f"http://127.0.0.1:{http_port}"
    auth = "Basic " + base64.b64encode(f"default:{PASSWORD}".encode()).decode()
    driver = None
    stop_traffic = threading.Event()
    traffic_thread = threading.Thread(target=traffic, args=(port, stop_traffic), daemon=True)
    try:
        r = Resp(port)
        assert r.cmd("AUTH", "default", PASSWORD) == "+OK"
        # A three-node cluster; each peer holds some queued jobs of its own.
        peer_ids = []
        for n, (_, pport) in enumerate(peers):
            if r.cmd("CLUSTER", "MEET", "127.0.0.1", str(pport)) != "+OK":
                fail("CLUSTER MEET failed")
            pr = Resp(pport)
            peer_ids.append(pr.cmd("CLUSTER", "MYID"))
            for i in range(5 + 6 * n):
                pr.cmd("ADDJOB", f"browser:peer{n + 1}", f"job {i}", "0", "REPLICATE", "1")
        deadline = time.time() + 30
        while "cluster_reachable_nodes:2" not in r.cmd("CLUSTER", "INFO"):
            if time.time() > deadline:
                fail("the three nodes did not form a cluster")
            time.sleep(0.1)
        ids = [r.cmd("ADDJOB", QUEUE, f'{{"order": {i}, "sku": "A-{i:03}"}}', "0")
               for i in range(42)]
        for i in range(7):
            r.cmd("ADDJOB", "browser:emails", f"mail {i}", "0")
        r.cmd("ADDJOB", "browser:reports", "weekly", "0")
        # A job held by ADDJOB ... AFTER: the queue page shows it waiting.
        first = r.cmd("ADDJOB", "browser:after", "first", "0")
        held = r.cmd("ADDJOB", "browser:after", "then", "0", "AFTER", first[1:])
        if not (first.startswith("+D-") and held.startswith("+D-")):
            fail(f"ADDJOB ... AFTER failed: {first!r} {held!r}")
        r.cmd("GETJOB", "NOHANG", "COUNT", "5", "FROM", "browser:emails")
        if not all(isinstance(i, str) and i.startswith("+D-") for i in ids):
            fail(f"ADDJOB failed: {ids[:3]}")

        traffic_thread.start()

        # Auth: everything but the probes needs the password.
        for path in ["/", "/metrics", "/api/queues"]:
            if http_status(base + path) != 401:
                fail(f"{path} served without credentials")
            if http_status(base + path, auth) != 200:
                fail(f"{path} refused with credentials")
        if http_status(base + "/healthz") != 200:
            fail("/healthz not open")

        opts = webdriver.ChromeOptions()
        opts.binary_location = shutil.which("chromium")
        for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                  "--disable-gpu", "--window-size=1280,860", "--hide-scrollbars"]:
            opts.add_argument(a)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
        # The dashboard re-renders its tables on every poll: an element a
        # condition found can be replaced before its text is read. That is
        # a retry, not a failure.
        wait = WebDriverWait(
            driver, WAIT, ignored_exceptions=(StaleElementReferenceException,)
        )

        # Without credentials the browser gets the 401 page, not the dashboard.
        driver.execute_cdp_cmd("Network.enable", {})
        driver.get(base + "/")
        if driver.find_elements(By.ID, "queues"):
            fail("dashboard rendered without credentials")
        driver.get_log("browser")  # the 401 itself is logged; start clean

        driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": auth}})
        driver.get(base + "/#/")
        wait.until(lambda d: "queued jobs" in d.find_element(By.ID, "cards").text.lower())
        wait.until(lambda d: QUEUE in d.find_element(By.ID, "top-queues").text)
        # A second poll gives rates.
        time.sleep(2.5)
        check_console(driver, "overview")
        if shots:
            driver.save_screenshot(os.path.join(docs, "dashboard.png"))

        # The history charts: lines with points once a few samples exist.
        hist_wait = WebDriverWait(
            driver, HISTORY_WAIT, ignored_exceptions=(StaleElementReferenceException,)
        )
        hist_wait.until(lambda d: len(chart_points(d, "charts-node")) >= 6
                        and min(chart_points(d, "charts-node")) >= 3)
        titles = driver.find_element(By.ID, "charts-node").text
        for t in ["Jobs per second", "Queued jobs", "Memory"]:
            if t not in titles:
                fail(f"overview chart {t!r} missing: {titles!r}")
        if "Spilled" in titles:
            fail("a spilled-bytes chart without spill figures")
        # The "added" line is not flat at zero: the traffic shows.
        d_added = driver.find_element(
            By.CSS_SELECTOR, '#charts-node [data-chart="node-rates"] path.series').get_attribute("d")
        ys = {round(float(y)) for y in re.findall(r"[ML][\d.]+ ([\d.]+)", d_added)}
        if len(ys) < 2:
            fail(f"the added-jobs line is flat: {d_added}")
        check_console(driver, "overview charts")
        if shots:
            charts = driver.find_element(By.ID, "charts-node")
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", charts)
            time.sleep(0.3)
            driver.save_screenshot(os.path.join(docs, "dashboard-history.png"))
            driver.execute_script("window.scrollTo(0, 0)")

        driver.get(base + "/#/queues")
        row = wait.until(EC.presence_of_element_located(
            (By.CSS_SELECTOR, f'#queues tr[data-queue="{QUEUE}"]')))
        if "42" not in row.text:
            fail(f"queue row does not show 42 jobs: {row.text!r}")
        # Sorting by name puts the rows in order.
        click(wait, By.CSS_SELECTOR, '#queues th[data-key="name"]')
        names = [e.get_attribute("data-queue") for e in
                 driver.find_elements(By.CSS_SELECTOR, "#queues tbody tr")]
        if names != sorted(names):
            fail(f"sort by name: {names}")
        check_console(driver, "queues")
        if shots:
            driver.save_screenshot(os.path.join(docs, "dashboard-queues.png"))

        driver.get(base + "/#/queue/browser:after")
        wait.until(lambda d: d.find_element(By.ID, "queue-title").text == "browser:after")
        wait.until(lambda d: "held by after" in d.find_element(By.ID, "queue-cards").text.lower())
        cards = driver.find_element(By.ID, "queue-cards").text
        if "waiting\n1" not in cards.lower():
            fail(f"the queue page does not show the one waiting job: {cards!r}")
        check_console(driver, "queue with a waiting job")

        # Pause input from the queue page, through the confirmation dialog.
        driver.get(base + "/#/queue/" + QUEUE)
        wait.until(lambda d: d.find_element(By.ID, "queue-title").text == QUEUE)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#jobs tbody tr a")) > 0)
        click(wait, By.ID, "pause-in")
        wait.until(EC.visibility_of_element_located((By.ID, "confirm")))
        click(wait, By.ID, "confirm-ok")
        wait.until(lambda d: "Queue paused" in d.find_element(By.ID, "toast").text)
        reply = r.cmd("ADDJOB", QUEUE, "after pause", "0")
        if not (isinstance(reply, str) and reply.startswith("-PAUSED")):
            fail(f"ADDJOB after pausing from the UI: {reply!r}")
        wait.until(lambda d: "input paused" in d.find_element(By.ID, "queue-paused").text)
        if shots:
            driver.save_screenshot(os.path.join(docs, "dashboard-queue.png"))
        # The queue's charts (it is among the busiest, so it has a history).
        hist_wait.until(lambda d: len(chart_points(d, "charts-queue")) >= 3
                        and min(chart_points(d, "charts-queue")) >= 2)
        qtitles = driver.find_element(By.ID, "charts-queue").text
        if "Jobs per second" not in qtitles or "Queue length" not in qtitles:
            fail(f"queue charts missing: {qtitles!r}")
        # Cancel leaves it paused; confirm resumes.
        click(wait, By.ID, "resume")
        wait.until(EC.visibility_of_element_located((By.ID, "confirm")))
        click(wait, By.ID, "confirm-cancel")
        if not r.cmd("ADDJOB", QUEUE, "still paused", "0").startswith("-PAUSED"):
            fail("cancelling the dialog resumed the queue")
        click(wait, By.ID, "resume")
        wait.until(EC.visibility_of_element_located((By.ID, "confirm")))
        click(wait, By.ID, "confirm-ok")
        wait.until(lambda d: "Queue resumed" in d.find_element(By.ID, "toast").text)
        if not r.cmd("ADDJOB", QUEUE, "after resume", "0").startswith("+D-"):
            fail("ADDJOB still refused after resuming from the UI")
        check_console(driver, "queue")

        # Schedules: listed with their next tick; pause and resume behind
        # the confirmation dialog, checked over RESP.
        def sched_paused():
            show = r.cmd("SCHEDULE", "SHOW", SCHEDULE)
            return dict(zip(show[::2], show[1::2]))["paused"]

        if r.cmd("SCHEDULE", "ADD", SCHEDULE, QUEUE, "nightly", "CRON", "0 3 * * *",
                 "TZ", "Europe/Paris") != "+OK":
            fail("SCHEDULE ADD failed")
        driver.get(base + "/#/schedules")
        row = f'#schedules tr[data-schedule="{SCHEDULE}"]'
        def next_run_shown(d):
            t = text_of(d, row)
            return t if "in " in t else False
        shown = wait.until(next_run_shown)
        if "0 3 * * * (Europe/Paris)" not in shown:
            fail("schedule row does not show the cron expression and zone")
        click(wait, By.CSS_SELECTOR, row + ' button[data-action="pause"]')
        wait.until(EC.visibility_of_element_located((By.ID, "confirm")))
        click(wait, By.ID, "confirm-ok")
        wait.until(lambda d: "Schedule paused" in d.find_element(By.ID, "toast").text)
        if sched_paused() != 1:
            fail("pausing the schedule from the UI did not pause it")
        wait.until(lambda d: "paused" in text_of(d, row))
        if shots:
            driver.save_screenshot(os.path.join(docs, "dashboard-schedules.png"))
        click(wait, By.CSS_SELECTOR, row + ' button[data-action="resume"]')
        wait.until(EC.visibility_of_element_located((By.ID, "confirm")))
        click(wait, By.ID, "confirm-cancel")
        if sched_paused() != 1:
            fail("cancelling the dialog resumed the schedule")
        click(wait, By.CSS_SELECTOR, row + ' button[data-action="resume"]')
        wait.until(EC.visibility_of_element_located((By.ID, "confirm")))
        click(wait, By.ID, "confirm-ok")
        wait.until(lambda d: "Schedule resumed" in d.find_element(By.ID, "toast").text)
        if sched_paused() != 0:
            fail("resuming the schedule from the UI did not resume it")
        check_console(driver, "schedules")

        # Batches: each with its progress; cancel behind the confirmation
        # dialog (cancelling the dialog leaves the batch alone), checked
        # over RESP.
        def batch_state(bid):
            st = r.cmd("BATCH", "STATUS", bid)
            return dict(zip(st[::2], st[1::2]))["state"]

        if r.cmd("BATCH", "CREATE", BATCH, "ONSUCCESS", "browser:reports", "import ok",
                 "ONCOMPLETE", "browser:reports", "import done") != BATCH:
            fail("BATCH CREATE failed")
        members = [r.cmd("ADDJOB", BATCH_QUEUE, f"row {i}", "0", "BATCH", BATCH) for i in range(4)]
        if not all(isinstance(m, str) and m.startswith("+D-") for m in members):
            fail(f"ADDJOB ... BATCH failed: {members}")
        if r.cmd("BATCH", "COMMIT", BATCH) != "+OK":
            fail("BATCH COMMIT failed")
        r.cmd("ACKJOB", members[0][1:])
        r.cmd("BATCH", "CREATE", "browser:open")
        r.cmd("ADDJOB", BATCH_QUEUE, "open row", "0", "BATCH", "browser:open")
        driver.get(base + "/#/batches")
        row = f'#batches tr[data-batch="{BATCH}"]'
        wait.until(lambda d: "1 / 4" in d.find_element(By.CSS_SELECTOR, row).text)
        text = driver.find_element(By.CSS_SELECTOR, row).text
        if "committed" not in text or "browser:reports" not in text:
            fail(f"batch row does not show its state and callbacks: {text!r}")
        width = driver.execute_script(
            "return document.querySelector(arguments[0] + ' .bar-acked').style.width", row)
        if width != "25%":
            fail(f"progress bar of 1 acked out of 4: {width!r}")
        check_console(driver, "batches")
        if shots:
            wait.until(lambda d: "show" not in (d.find_element(By.ID, "toast").get_attribute("class") or ""))
            driver.save_screenshot(os.path.join(docs, "dashboard-batches.png"))
        click(wait, By.CSS_SELECTOR, row + ' button[data-action="cancel"]')
        wait.until(EC.visibility_of_element_located((By.ID, "confirm")))
        click(wait, By.ID, "confirm-cancel")
        if batch_state(BATCH) != "committed":
            fail("cancelling the dialog cancelled the batch")
        click(wait, By.CSS_SELECTOR, row + ' button[data-action="cancel"]')
        wait.until(EC.visibility_of_element_located((By.ID, "confirm")))
        click(wait, By.ID, "confirm-ok")
        wait.until(lambda d: "Batch cancelled" in d.find_element(By.ID, "toast").text)
        if batch_state(BATCH) != "cancelled":
            fail("cancelling the batch from the UI did not cancel it")
        wait.until(lambda d: "cancelled" in d.find_element(By.CSS_SELECTOR, row).text)
        if driver.find_elements(By.CSS_SELECTOR, row + ' button[data-action="cancel"]'):
            fail("a cancelled batch still offers Cancel")
        check_console(driver, "batches after cancel")
        driver.get(base + "/#/queue/" + QUEUE)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#jobs tbody tr a")) > 0)

        # A job's details.
        job_id = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#jobs tbody tr a").text)
        click(wait, By.LINK_TEXT, job_id)
        wait.until(lambda d: "queue" in d.find_element(By.ID, "job-fields").text)
        if driver.find_element(By.ID, "job-title").text != job_id:
            fail("job page shows another job")
        if "order" not in driver.find_element(By.ID, "job-body").text:
            fail("job body not shown")
        check_console(driver, "job")
        if shots:
            driver.save_screenshot(os.path.join(docs, "dashboard-job.png"))

        # The cluster view: every node's queue totals, then "unknown" for
        # a peer that is gone.
        def node_row(d, node_id):
            rows = d.find_elements(By.CSS_SELECTOR, f'#nodes tr[data-node="{node_id}"]')
            return [c.text for c in rows[0].find_elements(By.TAG_NAME, "td")] if rows else []

        driver.get(base + "/#/cluster")
        wait.until(lambda d: "this node" in d.find_element(By.ID, "nodes").text)
        wait.until(lambda d: node_row(d, peer_ids[0])[4:5] == ["5"]
                   and node_row(d, peer_ids[1])[4:5] == ["11"])
        wait.until(lambda d: "all nodes" in d.find_element(By.ID, "cluster-cards").text)
        check_console(driver, "cluster")
        if shots:
            # Not with the previous action's toast over the table.
            wait.until(lambda d: "show" not in (d.find_element(By.ID, "toast").get_attribute("class") or ""))
            driver.save_screenshot(os.path.join(docs, "dashboard-cluster.png"))
        stop(peers[1][0])
        # The view refreshes every poll; the dead peer turns "unknown".
        wait.until(lambda d: node_row(d, peer_ids[1])[4:5] == ["unknown"])
        if node_row(driver, peer_ids[0])[4:5] != ["5"]:
            fail(f"live peer's totals lost: {node_row(driver, peer_ids[0])}")
        if "1 unknown" not in driver.find_element(By.ID, "cluster-cards").text:
            fail("cluster card does not say a node is unknown")
        check_console(driver, "cluster with a dead peer")

        # A phone-sized window.
        driver.set_window_size(390, 844)
        driver.get(base + "/#/queues")
        wait.until(EC.presence_of_element_located(
            (By.CSS_SELECTOR, f'#queues tr[data-queue="{QUEUE}"]')))
        check_console(driver, "phone")
        if shots:
            driver.save_screenshot(os.path.join(docs, "dashboard-phone.png"))
        # The charts fit the phone's width, with their points.
        driver.get(base + "/#/queue/" + TRAFFIC_QUEUE)
        hist_wait.until(lambda d: len(chart_points(d, "charts-queue")) >= 3
                        and min(chart_points(d, "charts-queue")) >= 2)
        widths = driver.execute_script(
            "return [...document.querySelectorAll('#charts-queue svg')]"
            ".map((s) => s.getBoundingClientRect().right)")
        if not widths or max(widths) > 390:
            fail(f"queue charts overflow a phone's width: {widths}")
        check_console(driver, "phone charts")
        if shots:
            charts = driver.find_element(By.ID, "charts-queue")
            driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", charts)
            time.sleep(0.3)
            driver.save_screenshot(os.path.join(docs, "dashboard-queue-history.png"))
        print("browser-test: OK (overview, history charts, queues, pause/resume "
              "with PAUSED, queue charts, schedules pause/resume, batch progress and "
              "cancel, a waiting job, job, cluster totals "
              "and unknown, phone, auth)")
    except Exception:
        if driver is not None:
            print("browser-test: page at failure:", driver.current_url, file=sys.stderr)
            print(driver.find_element(By.TAG_NAME, "body").text[:2000], file=sys.stderr)
            print("browser-test: console:", driver.get_log("browser"), file=sys.stderr)
        raise
    finally:
        stop_traffic.set()
        if traffic_thread.is_alive():
            traffic_thread.join(timeout=10)
        if driver is not None:
            driver.quit()
        for p in procs:
            stop(p)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

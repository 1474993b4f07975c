"""Unit tests of the soak harness's pure parts (scripts/soak.py): the fault
schedule, percentiles, the table and the chart. The run itself needs root
and network namespaces (scripts/soak.sh)."""

import argparse
import os
import tempfile
import unittest
import xml.etree.ElementTree as ET

import soak


def prof(duration, fault_every, rolling_at=0.5):
    return soak.Prof(argparse.Namespace(rate=20.0, duration=duration, sample=60,
                                        fault_every=fault_every, rolling_at=rolling_at))


def row(t, rss=(10.0, 11.0, None), final=False, faults=()):
    return {"t_min": t, "rss_mb": list(rss), "add_p50": 0.5, "add_p99": 9.0, "add_max": 40.0,
            "ack_p50": 0.1, "ack_p99": 2.0, "e2e_p50": 0.2, "e2e_p99": 30.0, "added": 1200,
            "add_errors": 3, "delivered": 1199, "dups": 1, "added_per_s": 20.0,
            "delivered_per_s": 19.98, "total_added": 1200, "outstanding": 1,
            "faults": list(faults), "final": final}


class ScheduleTest(unittest.TestCase):
    def test_hour(self):
        plan = soak.schedule(prof(3600, 120), 1)
        kinds = [k for _, k, _, _ in plan]
        self.assertEqual(kinds.count("rolling"), 1)
        self.assertGreaterEqual(kinds.count("kill"), 10)
        self.assertGreaterEqual(kinds.count("partition"), 10)
        # Every node is killed and cut off; nothing starts in the last slot.
        self.assertEqual({n for _, k, n, _ in plan if k == "kill"}, {1, 2, 3})
        self.assertEqual({n for _, k, n, _ in plan if k == "partition"}, {1, 2, 3})
        self.assertTrue(all(t + 120 <= 3600 for t, _, _, _ in plan))
        rolling_t = [t for t, k, _, _ in plan if k == "rolling"][0]
        self.assertLessEqual(abs(rolling_t - 1800), 120)
        # Faults alternate kill / partition around the rolling restart.
        others = [k for k in kinds if k != "rolling"]
        self.assertEqual(others[::2], ["kill"] * len(others[::2]))
        self.assertEqual(others[1::2], ["partition"] * len(others[1::2]))

    def test_quick_has_every_kind(self):
        plan = soak.schedule(prof(300, 45), 1)
        self.assertEqual({k for _, k, _, _ in plan}, {"kill", "partition", "rolling"})

    def test_seeded(self):
        self.assertEqual(soak.schedule(prof(600, 60), 3), soak.schedule(prof(600, 60), 3))
        self.assertNotEqual(soak.schedule(prof(600, 60), 3), soak.schedule(prof(600, 60), 4))


class ReportTest(unittest.TestCase):
    def test_pct(self):
        self.assertIsNone(soak.pct([], 50))
        vals = list(range(1, 101))
        self.assertEqual(soak.pct(vals, 50), 50)
        self.assertEqual(soak.pct(vals, 99), 99)
        self.assertEqual(soak.pct(vals, 100), 100)
        self.assertEqual(soak.pct([7], 99), 7)

    def test_table_and_chart(self):
        samples = [row(1.0, faults=["kill"]), row(2.0), row(2.5, final=True)]
        t = soak.table(samples)
        lines = t.strip().splitlines()
        self.assertEqual(len(lines), 2 + 3)
        self.assertIn("| 1.0 | 10 / 11 / – |", lines[2])
        self.assertIn("kill", lines[2])
        self.assertIn("(end)", lines[4])
        res = {"rate_per_node": 20.0, "duration_s": 120, "seed": 1, "added": 3600,
               "lost": 0, "faults": [{"t": 30.0, "kind": "kill"},
                                     {"t": 70.0, "kind": "partition"}]}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "chart.svg")
            soak.chart(samples, res, path)
            root = ET.parse(path).getroot()
            self.assertTrue(root.tag.endswith("svg"))
            self.assertGreaterEqual(len(root.findall("{http://www.w3.org/2000/svg}polyline")), 7)


class TicksTest(unittest.TestCase):
    def test_lost_and_duplicated_ticks(self):
        t = soak.Ticks()
        t.first_ms, t.last_ms = 5000, 8000
        key = lambda ms: "sched:%s:%d" % (soak.SCHEDULE, ms)
        t.seen = {key(5000): {"a"}, key(6000): {"b", "c"}, key(8000): {"d"},
                  key(9000): {"e", "f"}}
        self.assertEqual(t.expected(), [key(ms) for ms in (5000, 6000, 7000, 8000)])
        self.assertEqual(t.missing(), [key(7000)])
        # A duplicate outside the window is not the run's.
        self.assertEqual(t.duplicated(), [key(6000)])


if __name__ == "__main__":
    unittest.main()

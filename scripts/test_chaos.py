"""Unit tests of the fault-injection harness's bookkeeping (no root, no
network): the router's per-packet rules, the delivery ledger's duplicate
and loss accounting, and the seeded fault schedule.

Run: python3 -m unittest discover -s scripts -p 'test_*.py'
"""

import socket
import unittest

import chaos
from chaos_net import Rules
from disque_client import Ledger

A, B, C = "10.77.0.11", "10.77.0.12", "10.77.0.13"


def ip(s):
    return socket.inet_aton(s)


class RulesTest(unittest.TestCase):
    def test_no_rules_pass_everything(self):
        r = Rules(1)
        self.assertTrue(all(r.verdict(ip(A), ip(B)) == "pass" for _ in range(1000)))

    def test_partition_drops_one_direction_only(self):
        r = Rules(1)
        r.set({"drop": [[A, B, 1.0]]})
        self.assertTrue(all(r.verdict(ip(A), ip(B)) == "fault" for _ in range(100)))
        self.assertTrue(all(r.verdict(ip(B), ip(A)) == "pass" for _ in range(100)))
        self.assertTrue(all(r.verdict(ip(A), ip(C)) == "pass" for _ in range(100)))

    def test_loss_rate_and_seeded(self):
        def sample(seed):
            r = Rules(seed)
            r.set({"loss": 0.3, "delay_ms": 50})
            return [r.verdict(ip(A), ip(B)) for _ in range(20000)]
        s = sample(7)
        self.assertEqual(s, sample(7))
        rate = s.count("drop") / len(s)
        self.assertAlmostEqual(rate, 0.3, delta=0.02)

    def test_set_replaces_rules(self):
        r = Rules(1)
        r.set({"loss": 1.0, "drop": [[A, B, 1.0]]})
        r.set({})
        self.assertEqual(r.verdict(ip(A), ip(B)), "pass")
        self.assertEqual(r.delay, 0.0)


class LedgerTest(unittest.TestCase):
    def test_duplicates_lost_and_orphans(self):
        L = Ledger()
        for jid in ("a", "b", "c"):
            L.add(jid, 0.0)
        L.delivered("a", 1.0, 1)
        L.delivered("a", 2.0, 2)
        L.delivered("a", 3.0, 3)
        L.delivered("b", 1.0, 1)
        L.delivered("x", 1.0, 1)  # ADDJOB failed for it, yet it exists
        self.assertEqual(L.missing(), {"c"})
        self.assertEqual(L.duplicates(), 2)
        self.assertEqual(L.orphans(), {"x"})
        dups = sorted(L.duplicate_deliveries())
        self.assertEqual(dups, [("a", 1.0, 2.0, 2), ("a", 1.0, 3.0, 3)])

    def test_a_body_other_than_the_one_sent_is_reported(self):
        L = Ledger()
        L.add("a", 0.0, body="hello")
        L.add("b", 0.0)
        L.delivered("a", 1.0, 1, "hello")
        L.delivered("a", 2.0, 2, "hellO")
        L.delivered("b", 1.0, 1, "anything")
        self.assertEqual(L.wrong_bodies, [("a", 2)])

    def test_ack_time_is_the_first(self):
        L = Ledger()
        L.acked("a", 5.0)
        L.acked("a", 9.0)
        self.assertEqual(L.ack_time["a"], 5.0)

    def test_add_errors_by_kind(self):
        L = Ledger()
        L.add_error("NOREPL")
        L.add_error("NOREPL")
        L.add_error("unreachable")
        self.assertEqual(L.add_errors, 3)
        self.assertEqual(L.error_kinds, {"NOREPL": 2, "unreachable": 1})


class ScheduleTest(unittest.TestCase):
    def test_every_fault_is_described(self):
        self.assertEqual(set(chaos.FAULTS), set(chaos.DESCRIPTIONS))

    def test_retry_outlasts_prompt_acks_and_grace_covers_detection(self):
        for quick in (True, False):
            p = chaos.Profile(quick)
            # A consumer acks within milliseconds; RETRY is seconds.
            self.assertGreaterEqual(p.retry_s, 5)
            self.assertGreater(p.grace_s(), p.retry_s)
            # Pauses are longer than the node timeout (2..3x).
            self.assertGreater(p.fault_s, p.node_timeout_ms / 1000.0)

    def test_whole_spill_runs_keep_copies_on_the_whole_path(self):
        # A RETRY under 6 s keeps replicas' copies out of the whole tier.
        for quick in (True, False):
            self.assertGreaterEqual(chaos.Profile(quick, "whole").retry_s, 6)
            p = chaos.Profile(quick, "whole")
            self.assertGreater(p.grace_s(), p.retry_s)

    def test_plan_is_a_function_of_fault_and_seed(self):
        p = chaos.Profile(False)
        for f in chaos.FAULTS:
            self.assertEqual(chaos.plan(f, 5, p, 3), chaos.plan(f, 5, p, 3))
        self.assertNotEqual(chaos.plan("kill", 5, p, 3), chaos.plan("kill", 6, p, 3))

    def test_plan_respects_the_fault_bounds(self):
        p = chaos.Profile(False)
        for seed in range(200):
            for r in (2, 3):
                kills = set()
                for step in chaos.plan("kill", seed, p, r):
                    self.assertTrue(1 <= len(step["nodes"]) <= r - 1)
                    kills.update(step["nodes"])
                # one fixed set of R-1 nodes: no job can lose R copies
                self.assertLessEqual(len(kills), r - 1)
                for step in chaos.plan("pause", seed, p, r):
                    self.assertTrue(1 <= len(step["nodes"]) <= r - 1)
                    self.assertGreater(step["dur"], 2 * p.node_timeout_ms / 1000.0 - 1e-9)
            for step in chaos.plan("partition", seed, p, 3):
                self.assertEqual(len(step["nodes"]), 2)
            for step in chaos.plan("oneway", seed, p, 3):
                self.assertNotIn(step["src"], step["nodes"])
                self.assertEqual(len(step["nodes"]), 2)
            self.assertEqual(len(chaos.plan("loss", seed, p, 3)), p.cycles)
            mix = chaos.plan("mix", seed, p, 3)
            self.assertEqual(len(mix), 2 * p.cycles)
            killed = set()
            for step in mix:
                self.assertIn(step["kind"], chaos.MIX_KINDS)
                if step["kind"] == "kill":
                    killed.update(step["nodes"])
            self.assertLessEqual(len(killed), 2)


if __name__ == "__main__":
    unittest.main()

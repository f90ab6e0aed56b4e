"""`import braid` (python/, docs/python.md): each function against the `braid` executable run as a
subprocess on the same options. ctest runs this file from the source root with PYTHONPATH set to
build/python and BRAID_EXE naming the executable (CMakeLists.txt, test python_module)."""

import json
import os
import subprocess
import sys
import unittest
from unittest import mock

import braid

BRAID_EXE = os.environ["BRAID_EXE"]
STUDY = "configs/studies/default.yaml"


def cli(*args):
    """`braid ARGS...` as a separate process: (exit code, stdout, stderr)."""
    done = subprocess.run([BRAID_EXE, *args], capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


class DoneWhen(unittest.TestCase):
    def test_the_issue_one_liner_prints_a_dict(self):
        code = ("import braid; print(braid.simulate(study='configs/studies/default.yaml', "
                "schedule='stp'))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True)
        self.assertTrue(done.stdout.startswith("{'study': 'default', 'schedule': 'stp'"))
        self.assertEqual(done.stderr, "")


class SameAsTheCommandLine(unittest.TestCase):
    def test_simulate_equals_the_cli_json(self):
        code, out, err = cli("simulate", "--study", STUDY, "--schedule", "stp", "--json")
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(braid.simulate(study=STUDY, schedule="stp"), json.loads(out))

    def test_the_json_text_is_byte_identical(self):
        args = ["simulate", "--study", STUDY, "--schedule", "stp", "--json"]
        self.assertEqual(braid.run(*args), cli(*args)[1])

    def test_keyword_overrides_act_as_the_options(self):
        base = braid.simulate(study=STUDY, schedule="stp")
        tp4 = braid.simulate(study=STUDY, schedule="stp", tp=4)
        tp4_sp = braid.simulate(study=STUDY, schedule="stp", tp=4, sp=True)
        self.assertEqual((base["tp"], tp4["tp"], tp4_sp["tp"]), (8, 4, 4))
        self.assertEqual(tp4, json.loads(cli("simulate", "--study", STUDY, "--schedule", "stp",
                                             "--tp", "4", "--json")[1]))
        self.assertEqual(tp4_sp, json.loads(cli("simulate", "--study", STUDY, "--schedule",
                                                "stp", "--tp", "4", "--sp", "on", "--json")[1]))
        self.assertNotEqual(tp4["iteration_time_s"], base["iteration_time_s"])
        self.assertNotEqual(tp4_sp["ops"], tp4["ops"])  # SP adds its gathers and scatters

    def test_keywords_become_the_cli_words(self):
        self.assertEqual(
            braid.command_line("search", gpus=16, global_batch=64, sp=[True, False],
                               schedules=["stp", "1f1b-i"], tp_across_nodes=True, force=None,
                               mem_cap=60.5, json_out=None),
            ["search", "--gpus", "16", "--global-batch", "64", "--sp", "on,off", "--schedules",
             "stp,1f1b-i", "--tp-across-nodes", "--mem-cap", "60.5"])
        self.assertEqual(braid.command_line("compare", no_contention=False), ["compare"])
        with self.assertRaises(TypeError):
            braid.command_line("compare", force="yes")


class Errors(unittest.TestCase):
    def test_a_bad_value_raises_the_cli_line(self):
        args = ["--study", STUDY, "--schedule", "stp", "--tp", "3"]
        code, _, err = cli("simulate", *args, "--json")
        self.assertEqual(code, 2)
        with self.assertRaises(braid.Error) as raised:
            braid.simulate(study=STUDY, schedule="stp", tp=3)
        self.assertEqual(str(raised.exception) + "\n", err)
        self.assertTrue(str(raised.exception).startswith("braid: --tp: parallel.tp: tp 3 does "
                                                         "not divide the heads (64)"))
        self.assertEqual((raised.exception.exit_code, raised.exception.internal), (2, False))

    def test_an_unknown_keyword_gets_the_cli_suggestion(self):
        with self.assertRaises(braid.Error) as raised:
            braid.simulate(study=STUDY, schedule="stp", tpp=4)
        self.assertEqual(str(raised.exception),
                         "braid: unknown option --tpp; did you mean --tp? "
                         "(see braid simulate --help)")

    def test_an_unknown_schedule_is_an_input_error(self):
        code, _, err = cli("compare", "--study", STUDY, "--schedules", "stq", "--json")
        with self.assertRaises(braid.Error) as raised:
            braid.compare(study=STUDY, schedules="stq")
        self.assertEqual((code, str(raised.exception) + "\n"), (2, err))

    def test_an_internal_error_is_marked(self):
        line = "braid: internal error (a bug in braid): boom"
        with mock.patch.object(braid._braid, "run", return_value=(1, "", line + "\n")):
            with self.assertRaises(braid.Error) as raised:
                braid.info(study=STUDY)
        self.assertEqual((str(raised.exception), raised.exception.exit_code,
                          raised.exception.internal), (line, 1, True))

    def test_json_is_not_a_keyword(self):
        with self.assertRaises(TypeError):
            braid.simulate(study=STUDY, schedule="stp", csv=True)


class Commands(unittest.TestCase):
    def test_compare_gives_one_report_per_schedule(self):
        result = braid.compare(study=STUDY, schedules=["1f1b-i", "stp"])
        self.assertEqual(list(result), ["reports"])
        self.assertEqual([r["schedule"] for r in result["reports"]], ["1f1b-i", "stp"])
        self.assertEqual(result["reports"][1], braid.simulate(study=STUDY, schedule="stp"))

    def test_sweep_rows_cover_the_grid(self):
        result = braid.sweep(study=STUDY, tp=[4, 8], schedules=["1f1b-i", "stp"], jobs=1)
        for key in ("cap_gib", "configurations", "valid", "oom", "invalid", "rows"):
            self.assertIn(key, result)
        self.assertEqual(result["configurations"], 4)  # 2 tp x 2 schedules
        self.assertEqual(sorted({(r["tp"], r["schedule"]) for r in result["rows"]}),
                         [(4, "1f1b-i"), (4, "stp"), (8, "1f1b-i"), (8, "stp")])

    def test_search_ranks_layouts(self):
        result = braid.search(gpus=16, global_batch=64, seq=2048, schedules=["1f1b-i", "stp"],
                              jobs=1)
        for key in ("setting", "gpus", "global_batch", "candidates", "best", "invalid_rows"):
            self.assertIn(key, result)
        self.assertEqual((result["gpus"], result["global_batch"]), (16, 64))
        self.assertTrue(1 <= len(result["best"]) <= 5)

    def test_info_counts_the_model(self):
        result = braid.info(study=STUDY, tp=4)
        self.assertEqual((result["model"], result["tp"]), ("qwen2-12.1b", 4))
        self.assertEqual(result, json.loads(cli("info", "--study", STUDY, "--tp", "4",
                                                "--json")[1]))

    def test_other_commands_run_as_text(self):
        self.assertEqual(braid.run("--version"), "braid 0.1.0\n")


class NoStateBetweenCalls(unittest.TestCase):
    def test_repeated_calls_agree_around_errors(self):
        first = braid.simulate(study=STUDY, schedule="stp")
        for _ in range(3):
            with self.assertRaises(braid.Error):
                braid.simulate(study=STUDY, schedule="stp", tp=3)
            self.assertEqual(braid.simulate(study=STUDY, schedule="stp"), first)

    def test_nothing_reaches_the_process_streams(self):
        # In a child process: braid's output comes back in the results, none of it on the
        # process's own stdout/stderr, also after an error; print() still works afterwards.
        code = ("import braid\n"
                "try:\n    braid.simulate(study='%s', schedule='stp', tp=3)\n"
                "except braid.Error:\n    pass\n"
                "r = braid.simulate(study='%s', schedule='stp')\n"
                "print('ok', r['schedule'])\n" % (STUDY, STUDY))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True)
        self.assertEqual((done.stdout, done.stderr), ("ok stp\n", ""))


class DataFrames(unittest.TestCase):
    def test_to_dataframe_or_a_clear_import_error(self):
        result = braid.sweep(study=STUDY, tp=[4, 8], schedules=["stp"], jobs=1)
        try:
            import pandas  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        except ImportError:
            with self.assertRaisesRegex(ImportError, "needs pandas"):
                braid.to_dataframe(result)
            return
        frame = braid.to_dataframe(result)
        self.assertEqual(len(frame), len(result["rows"]))
        self.assertIn("tp", frame.columns)
        ranks = braid.to_dataframe(braid.simulate(study=STUDY, schedule="stp"))
        self.assertEqual(list(ranks["rank"]), [0, 1])


if __name__ == "__main__":
    unittest.main()

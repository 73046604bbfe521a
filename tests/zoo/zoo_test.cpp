// onnxforge zoo run / zoo report (issue 15), driven through the CLI on exported zoo models plus
// three models that must fail (random bytes, an operator the runtime lacks, a timeout).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "../common/models.h"
#include "../common/proto_builder.h"
#include "zoo/zoo.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace onnxforge;

namespace {

const std::string kExe = std::string(ONNXFORGE_BINARY_DIR) + "/onnxforge";

// Exit code of a shell command (its stdout/stderr go to `log`).
int sh(const std::string& cmd, const fs::path& log) {
  int st = std::system((cmd + " >" + log.string() + " 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json load(const fs::path& p) { return json::parse(slurp(p)); }

// A handful of small models from different families (seconds each), as a text manifest.
const std::vector<std::string> kModels = {
    "bert_small", "vit_small", "distilbert_small", "mobilenet_v3_small_bn", "whisper_small_enc", "wav2vec2_mini"};

fs::path manifest(const fs::path& dir) {
  fs::path m = dir / "small.txt";
  std::ofstream out(m);
  out << "# the zoo test's models\n";
  for (const auto& n : kModels) out << test::zoo_model(n).string() << "\n";
  return m;
}

// Run options every test shares: short benches keep the suite fast; the gate's latency check
// is exercised with synthetic summaries below rather than with these noisy figures.
const std::string kRunOpts = " --jobs 2 --bench-time 0.3";

// One normal run of the small manifest (~15 s on 2 cores), shared by the tests. ctest runs every
// test in its own process, so the run is cached in the build folder under a key of the binary
// (size and mtime) and made once, under a file lock, by whichever test gets there first.
struct Runs {
  fs::path dir, single;
  int single_rc = -1;
  double single_seconds = 0;
};
Runs& runs() {
  static Runs r = [] {
    Runs x;
    auto st = fs::last_write_time(kExe).time_since_epoch().count();
    std::string what = kRunOpts;
    for (const auto& n : kModels) what += " " + n;
    x.dir = fs::path(ONNXFORGE_BINARY_DIR) / "zoo-test" /
            (std::to_string(fs::file_size(kExe)) + "-" + std::to_string(st) + "-" +
             zoo::hex64(zoo::hash_bytes(what.data(), what.size())).substr(0, 8));
    x.single = x.dir / "single";
    fs::create_directories(x.dir);
    int fd = ::open((x.dir / "lock").c_str(), O_CREAT | O_RDWR, 0644);
    ::flock(fd, LOCK_EX);
    if (!fs::exists(x.dir / "done.json")) {
      fs::remove_all(x.single);
      auto t0 = std::chrono::steady_clock::now();
      int rc = sh(kExe + " zoo run " + manifest(x.dir).string() + " -o " + x.single.string() + kRunOpts,
                  x.dir / "single.log");
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::ofstream(x.dir / "done.json") << json{{"rc", rc}, {"seconds", sec}}.dump();
    }
    json done = load(x.dir / "done.json");
    x.single_rc = done["rc"];
    x.single_seconds = done["seconds"];
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return x;
  }();
  return r;
}

std::map<std::string, json> by_id(const json& summary) {
  std::map<std::string, json> m;
  for (const auto& x : summary["models"]) m[x["id"]] = x;
  return m;
}

TEST(ZooRun, EveryModelSucceedsWithResultsAndMachine) {
  Runs& r = runs();
  ASSERT_EQ(r.single_rc, 0) << slurp(r.dir / "single.log");
  for (const auto& n : kModels) {
    json res = load(r.single / "results" / (n + ".json"));
    EXPECT_EQ(res["status"], "ok") << n;
    for (const char* step : {"inspect", "audit", "optimize", "attribute", "bench"})
      EXPECT_TRUE(res["steps"].contains(step)) << n << " " << step;
    const json& s = res["summary"];
    EXPECT_LT(s["nodes_after"].get<int>(), s["nodes_before"].get<int>()) << n;
    EXPECT_TRUE(s["verified"].get<bool>()) << n;
    EXPECT_GT(s["latency_before_ms"].get<double>(), 0) << n;
    EXPECT_GT(s["latency_after_ms"].get<double>(), 0) << n;
    EXPECT_FALSE(res["machine"]["cpu"].get<std::string>().empty());
    EXPECT_TRUE(res["machine"]["isa"] == "sse" || res["machine"]["isa"] == "avx2" || res["machine"]["isa"] == "avx512");
    EXPECT_EQ(res["machine"]["threads"],
              std::max(1u, std::thread::hardware_concurrency() / 2));  // 2 jobs split the cores
    EXPECT_EQ(res["input"]["size"].get<int64_t>(), static_cast<int64_t>(fs::file_size(test::zoo_model(n))));
  }
  // Non-TTY output: one line per model.
  std::string log = slurp(r.dir / "single.log");
  for (const auto& n : kModels) EXPECT_NE(log.find("] " + n + ": ok"), std::string::npos) << log;
}

TEST(ZooRun, BrokenUnknownOpAndTimeoutFailAloneWhileTheRestFinish) {
  fs::path dir = test::temp_dir("zoo_fail");
  test::write_bytes(dir / "broken.onnx", [] {
    std::string b(4096, '\0');
    uint64_t x = 88172645463325252ull;  // xorshift: random bytes, the same every run
    for (char& c : b) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      c = static_cast<char>(x);
    }
    return b;
  }());
  onnx::ModelProto m = test::tiny_model();
  m.mutable_graph()->mutable_node(0)->set_op_type("Frobnicate");
  m.mutable_graph()->mutable_node(0)->set_domain("com.example");
  auto* os = m.add_opset_import();
  os->set_domain("com.example");
  os->set_version(1);
  test::write_model(m, dir / "unknown_op.onnx");
  json man = {{"models",
               {{{"path", "broken.onnx"}},
                {{"path", "unknown_op.onnx"}},
                // optimize + verify of this 40 MB CNN takes well over 0.1 s (0.5 s measured alone)
                {{"path", test::zoo_model("resnet_small").string()}, {"name", "slow"}, {"timeout", 0.1}},
                {{"path", test::zoo_model("bert_small").string()}, {"dims", {{"batch", 1}, {"sequence", 8}}}},
                {{"path", test::zoo_model("vit_small").string()}}}}};
  std::ofstream(dir / "zoo.json") << man.dump();
  fs::path out = dir / "out";
  int rc = sh(kExe + " zoo run " + (dir / "zoo.json").string() + " -o " + out.string() + " --jobs 2 --bench-iters 3",
              dir / "log");
  EXPECT_EQ(rc, 1) << slurp(dir / "log");
  json broken = load(out / "results/broken.json"), unknown = load(out / "results/unknown_op.json"),
       slow = load(out / "results/resnet_small.json"), bert = load(out / "results/bert_small.json"),
       vit = load(out / "results/vit_small.json");
  EXPECT_EQ(broken["status"], "failed");
  EXPECT_EQ(broken["failed_step"], "inspect");
  EXPECT_NE(broken["error"].get<std::string>().find("malformed"), std::string::npos) << broken["error"];
  EXPECT_EQ(unknown["status"], "failed");
  EXPECT_NE(unknown["error"].get<std::string>().find("Frobnicate"), std::string::npos) << unknown["error"];
  EXPECT_EQ(slow["status"], "failed");
  EXPECT_EQ(slow["failure"], "timeout");
  EXPECT_EQ(slow["name"], "slow");
  EXPECT_EQ(bert["status"], "ok") << bert.value("error", "");
  EXPECT_EQ(bert["dims"]["sequence"], 8);
  EXPECT_EQ(vit["status"], "ok") << vit.value("error", "");
  // No scratch files left behind (the optimized models live only with --keep-models).
  EXPECT_FALSE(fs::exists(out / "tmp"));

  // The report lists the failures and still draws the rest.
  EXPECT_EQ(sh(kExe + " zoo report " + out.string(), dir / "report.log"), 0) << slurp(dir / "report.log");
  json s = load(out / "summary.json");
  EXPECT_EQ(s["counts"]["failed"], 3);
  EXPECT_EQ(s["counts"]["ok"], 2);
  std::string md = slurp(out / "summary.md");
  auto row = md.find("| slow | ");  // whichever step the deadline hit
  ASSERT_NE(row, std::string::npos) << md;
  EXPECT_NE(md.substr(row, md.find('\n', row) - row).find(" | timeout | "), std::string::npos) << md;
}

TEST(ZooRun, MaxRssKillsTheStepAndFailsTheModel) {
  fs::path dir = test::temp_dir("zoo_rss");
  // 4 MB: below what any step of onnxforge touches (the binary and its libraries alone take more).
  EXPECT_EQ(
      sh(kExe + " zoo run " + test::zoo_model("bert_small").string() + " -o " + (dir / "o").string() + " --max-rss 4",
         dir / "log"),
      1)
      << slurp(dir / "log");
  json r = load(dir / "o/results/bert_small.json");
  EXPECT_EQ(r["failure"], "memory") << r.dump(1);
  EXPECT_EQ(r["failed_step"], "inspect");
  EXPECT_GT(r["peak_rss_kb"]["inspect"].get<int64_t>(), 4 * 1024);
}

TEST(ZooRun, BadUsageExitsTwo) {
  fs::path dir = test::temp_dir("zoo_usage");
  EXPECT_EQ(sh(kExe + " zoo run " + test::zoo_model("bert_small").string(), dir / "a"), 2);  // no -o
  EXPECT_EQ(sh(kExe + " zoo run /nonexistent.onnx -o " + (dir / "o").string(), dir / "b"), 2);
  EXPECT_EQ(
      sh(kExe + " zoo run " + test::zoo_model("bert_small").string() + " -o " + (dir / "o").string() + " --shard 3/3",
         dir / "c"),
      2);
  EXPECT_NE(slurp(dir / "c").find("out of range"), std::string::npos) << slurp(dir / "c");
  EXPECT_EQ(sh("env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX " + kExe + " zoo run " +
                   test::zoo_model("bert_small").string() + " -o " + (dir / "o").string() + " --shard auto",
               dir / "d"),
            2);
  EXPECT_EQ(sh(kExe + " zoo report " + (dir / "nothing").string(), dir / "e"), 2);
}

TEST(ZooRun, ShardsMergeToTheSingleRunSummary) {
  Runs& r = runs();
  ASSERT_EQ(r.single_rc, 0);
  fs::path out = test::temp_dir("zoo_shards") / "out", man = r.dir / "small.txt";
  // Shards 0 and 1 by I/N, shard 2 as a Slurm array task would see it (--shard auto).
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(sh(kExe + " zoo run " + man.string() + " -o " + out.string() + kRunOpts + " --shard " +
                     std::to_string(i) + "/3",
                 r.dir / ("shard" + std::to_string(i))),
              0);
  ASSERT_EQ(sh("SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=3 " + kExe + " zoo run " +
                   man.string() + " -o " + out.string() + kRunOpts + " --shard auto",
               r.dir / "shard2"),
            0)
      << slurp(r.dir / "shard2");
  size_t per_shard = 0;
  for (int i = 0; i < 3; ++i) {
    std::string log = slurp(r.dir / ("shard" + std::to_string(i)));
    EXPECT_NE(log.find("of 6)"), std::string::npos) << log;
    per_shard += log.find("zoo: 2 models") != std::string::npos;  // 6 models dealt out evenly
  }
  EXPECT_EQ(per_shard, 3u);
  ASSERT_EQ(sh(kExe + " zoo report " + r.single.string(), r.dir / "rs"), 0);
  ASSERT_EQ(sh(kExe + " zoo report " + out.string(), r.dir / "rsh"), 0);
  auto a = by_id(load(r.single / "summary.json")), b = by_id(load(out / "summary.json"));
  ASSERT_EQ(a.size(), kModels.size());
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [id, m] : a) {
    ASSERT_TRUE(b.count(id)) << id;
    for (const char* k : {"status", "family", "nodes_before", "nodes_after", "max_diff", "max_diff_class", "verified",
                          "worst_accuracy_class", "passes"}) {
      json x = m.value(k, json()), y = b[id].value(k, json());
      if (std::string(k) == "passes")  // attribution: Δnodes/bytes are exact, times are not
        for (auto* p : {&x, &y})
          for (auto& [pn, v] : p->items()) v.erase("seconds");
      EXPECT_EQ(x, y) << id << " " << k;
    }
  }
  // An unchanged rerun passes the gate: nodes, failures and max_diff classes, which are exact.
  // Latency is not asserted between two runs here (a timing in a unit test): with other tests
  // and builds on the 2 cores, 0.3 s benches of one binary moved by 7x (medians) and 1.87x
  // (minima). The gate's latency check is tested on synthetic
  // summaries (ZooReport.*), and CI gates latency on its own quiet run (.ci/run).
  EXPECT_EQ(sh(kExe + " zoo report " + out.string() + " --baseline " + r.single.string() +
                   " --latency-stat min --max-slowdown 1000",
               r.dir / "gate_ok"),
            0)
      << slurp(r.dir / "gate_ok") << slurp(r.dir / "rs") << slurp(r.dir / "rsh");
}

// Shards share OUTDIR but not their scratch folders. Shards 1 and 2 sit between their two models
// (ONNXFORGE_ZOO_TEST_PAUSE_MS) while shard 0 runs all of its models and cleans up: a shared
// OUTDIR/tmp "removed when empty" vanished under them, and their next step failed with a bare
// "exit code 127".
TEST(ZooRun, ThreeConcurrentShardsNeverDisturbEachOther) {
  fs::path dir = test::temp_dir("zoo_concurrent"), out = dir / "out";
  {
    std::ofstream man(dir / "tiny.txt");
    for (int i = 0; i < 6; ++i) {
      test::write_model(test::tiny_model(), dir / ("t" + std::to_string(i) + ".onnx"));
      man << "t" << i << ".onnx\n";
    }
  }
  const std::string run = kExe + " zoo run " + (dir / "tiny.txt").string() + " -o " + out.string() +
                          " --jobs 1 --bench-iters 2 --no-attribute --shard ";
  const int pause_ms = 8000;
  for (int i : {1, 2})
    std::system(("(ONNXFORGE_ZOO_TEST_PAUSE_MS=" + std::to_string(pause_ms) + " " + run + std::to_string(i) + "/3 >" +
                 (dir / ("log" + std::to_string(i))).string() + " 2>&1; echo $? >" +
                 (dir / ("rc" + std::to_string(i))).string() + ") &")
                    .c_str());
  // Both sit in their pause once their first model's line is printed.
  auto printed_first = [&](int i) {
    return slurp(dir / ("log" + std::to_string(i))).find("[1/2]") != std::string::npos;
  };
  for (int t = 0; t < 1200 && !(printed_first(1) && printed_first(2)); ++t)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(printed_first(1) && printed_first(2)) << slurp(dir / "log1") << slurp(dir / "log2");
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(sh(run + "0/3", dir / "log0"), 0) << slurp(dir / "log0");
  double shard0_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int t = 0; t < 1200 && !(fs::exists(dir / "rc1") && fs::exists(dir / "rc2")); ++t)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Shard 0 finished (and cleaned up) while the others were still between their models.
  EXPECT_LT(shard0_s, pause_ms / 1000.0) << "the machine is too busy for the forced timing";
  EXPECT_EQ(slurp(dir / "rc1"), "0\n") << slurp(dir / "log1");
  EXPECT_EQ(slurp(dir / "rc2"), "0\n") << slurp(dir / "log2");
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(load(out / "results" / ("t" + std::to_string(i) + ".json"))["status"], "ok") << i;
  EXPECT_FALSE(fs::exists(out / "tmp"));  // every owner removed its folder, the last one tmp/
}

// A step whose program cannot be started says why (which file, errno), not "exit code 127".
TEST(ZooRun, AChildThatCannotStartIsReportedWithTheReason) {
  fs::path dir = test::temp_dir("zoo_nostart"), junk = dir / "not-a-program";
  std::ofstream(junk) << "junk without a #! line\n";
  fs::permissions(junk, fs::perms::owner_all);
  EXPECT_EQ(sh("ONNXFORGE_EXE=" + junk.string() + " " + kExe + " zoo run " + test::zoo_model("bert_small").string() +
                   " -o " + (dir / "o").string(),
               dir / "log"),
            1)
      << slurp(dir / "log");
  json r = load(dir / "o/results/bert_small.json");
  EXPECT_EQ(r["failed_step"], "inspect");
  EXPECT_NE(r["error"].get<std::string>().find("did not start: cannot run '" + junk.string() + "': Exec format error"),
            std::string::npos)
      << r["error"];
  EXPECT_EQ(sh("ONNXFORGE_EXE=relative/onnxforge " + kExe + " zoo run " + test::zoo_model("bert_small").string() +
                   " -o " + (dir / "o2").string(),
               dir / "log2"),
            2)
      << slurp(dir / "log2");
}

// `python3 -m onnxforge zoo run` runs its steps with the real onnxforge program, never the
// interpreter and never a file of the current folder (PATH's "." included).
TEST(ZooRun, PythonModuleRunsTheRealProgramNeverTheCurrentFolder) {
  const fs::path py = fs::path(ONNXFORGE_BINARY_DIR) / "python";
  if (!fs::exists(py / "onnxforge/__init__.py"))
    GTEST_SKIP() << "the Python module is not built (target onnxforge_python)";
  fs::path dir = test::temp_dir("zoo_python"), marker = dir / "EXECUTED";
  // What the interpreter would run as `python3 inspect ...`, and a program PATH's "." would find.
  for (const char* name : {"inspect", "audit", "optimize"})
    std::ofstream(dir / name) << "open('" << marker.string() << "', 'w')\n";
  std::ofstream(dir / "onnxforge") << "#!/bin/sh\ntouch " << marker.string() << "\n";
  fs::permissions(dir / "onnxforge", fs::perms::owner_all);
  EXPECT_EQ(sh("cd " + dir.string() + " && PATH=.:/usr/bin:/bin PYTHONPATH=" + py.string() +
                   " /usr/bin/python3 -m onnxforge zoo run " + test::zoo_model("bert_small").string() +
                   " -o out --no-attribute --bench-iters 2",
               dir / "log"),
            0)
      << slurp(dir / "log");
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_EQ(load(dir / "out/results/bert_small.json")["status"], "ok");
}

// A results file of the wrong shape is bad input naming the file (exit 2), with a JSON error for --json.
TEST(ZooReport, AResultOfTheWrongShapeIsAOneLineErrorNamingIt) {
  for (const char* text :
       {"[]", "null", "{\"status\": 3}", "{\"status\": \"ok\", \"summary\": {\"nodes_before\": \"x\"}, \"id\": 1}"}) {
    fs::path dir = test::temp_dir("zoo_shape");
    fs::create_directories(dir / "results");
    fs::path f = dir / "results/m.json";
    std::ofstream(f) << text;
    EXPECT_EQ(sh(kExe + " zoo report " + dir.string(), dir / "log"), 2) << text;
    std::string log = slurp(dir / "log");
    EXPECT_NE(log.find("'" + f.string() + "' is not a zoo result"), std::string::npos) << text << ": " << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
    ASSERT_EQ(
        std::system(
            (kExe + " zoo report " + dir.string() + " --json >" + (dir / "out").string() + " 2>/dev/null").c_str()) >>
            8,
        2);
    json e = load(dir / "out");
    EXPECT_EQ(e["error"]["file"], f.string()) << e.dump();
    EXPECT_EQ(e["error"]["kind"], "input");
  }
}

// optimize --passes none: load, verify and write with no rewrite, as `zoo run --passes none`.
TEST(ZooRun, OptimizePassesNoneWritesTheVerifiedModelUnrewritten) {
  fs::path dir = test::temp_dir("zoo_passes_none");
  ASSERT_EQ(std::system((kExe + " optimize " + test::zoo_model("bert_small").string() + " -o " +
                         (dir / "o.onnx").string() + " --passes none --json >" + (dir / "j").string())
                            .c_str()),
            0);
  json j = load(dir / "j");
  EXPECT_EQ(j["before"]["nodes"], j["after"]["nodes"]);
  EXPECT_TRUE(j["verification"]["ok"].get<bool>());
  EXPECT_EQ(j["verification"]["max_diff"], 0.0);
  EXPECT_TRUE(fs::exists(dir / "o.onnx"));
  EXPECT_EQ(sh(kExe + " optimize " + test::zoo_model("bert_small").string() + " -o " + (dir / "p.onnx").string() +
                   " --passes none,fold_constants",
               dir / "log2"),
            2);
  EXPECT_NE(slurp(dir / "log2").find("--passes none cannot be combined"), std::string::npos) << slurp(dir / "log2");
}

TEST(ZooRun, ResumeRedoesNothingButNoticesAChangedFile) {
  Runs& r = runs();
  ASSERT_EQ(r.single_rc, 0);
  std::map<std::string, fs::file_time_type> before;
  for (const auto& e : fs::directory_iterator(r.single / "results")) before[e.path().filename()] = e.last_write_time();
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(
      sh(kExe + " zoo run " + (r.dir / "small.txt").string() + " -o " + r.single.string() + kRunOpts + " --resume",
         r.dir / "resume"),
      0);
  double resume_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& e : fs::directory_iterator(r.single / "results"))
    EXPECT_EQ(before[e.path().filename()], e.last_write_time()) << e.path() << " was rewritten";
  EXPECT_NE(slurp(r.dir / "resume").find("6 up to date"), std::string::npos) << slurp(r.dir / "resume");
  EXPECT_LT(resume_s, r.single_seconds * 0.25) << "resume " << resume_s << " s, first run " << r.single_seconds << " s";

  // Other options: everything is redone (one model here, to stay quick).
  fs::path dir = test::temp_dir("zoo_resume");
  fs::copy_file(test::zoo_model("vit_small"), dir / "m.onnx");
  fs::path out = dir / "out", res = out / "results/m.json";
  std::string base =
      kExe + " zoo run " + (dir / "m.onnx").string() + " -o " + out.string() + " --bench-iters 2 --no-attribute";
  ASSERT_EQ(sh(base, dir / "1"), 0);
  std::string hash = load(res)["input"]["hash"];
  auto t1 = fs::last_write_time(res);
  // A touched file with the same bytes: still up to date (the content hash matches).
  fs::last_write_time(dir / "m.onnx", fs::file_time_type::clock::now() + std::chrono::seconds(5));
  ASSERT_EQ(sh(base + " --resume", dir / "2"), 0);
  EXPECT_EQ(fs::last_write_time(res), t1);
  // Other options: redone.
  ASSERT_EQ(sh(base + " --resume --verify-seeds 2", dir / "3"), 0);
  EXPECT_NE(fs::last_write_time(res), t1);
  EXPECT_EQ(load(res)["options"]["seeds"], 2);
  // Other contents, same size: redone (and the hash differs).
  {
    std::string bytes = test::read_bytes(dir / "m.onnx");
    bytes[bytes.size() - 1] ^= 1;  // the last byte of a weight
    test::write_bytes(dir / "m.onnx", bytes);
  }
  auto t3 = fs::last_write_time(res);
  ASSERT_EQ(sh(base + " --resume --verify-seeds 2", dir / "4"), 0) << slurp(dir / "4");
  EXPECT_NE(fs::last_write_time(res), t3);
  EXPECT_NE(load(res)["input"]["hash"], hash);
}

TEST(ZooReport, GateCatchesARunThatDoesLess) {
  Runs& r = runs();
  ASSERT_EQ(r.single_rc, 0);
  fs::path less = test::temp_dir("zoo_none") / "out";
  ASSERT_EQ(sh(kExe + " zoo run " + (r.dir / "small.txt").string() + " -o " + less.string() +
                   " --jobs 2 --bench-time 0.3 --no-attribute --passes none",
               r.dir / "none.log"),
            0)
      << slurp(r.dir / "none.log");
  EXPECT_EQ(sh(kExe + " zoo report " + less.string() + " --baseline " + r.single.string(), r.dir / "gate"), 1)
      << slurp(r.dir / "gate");
  json s = load(less / "summary.json");
  std::set<std::string> flagged;
  for (const auto& g : s["regressions"])
    if (g["check"] == "more nodes") flagged.insert(g["id"]);
  EXPECT_EQ(flagged.size(), kModels.size()) << s["regressions"].dump(1);
  EXPECT_NE(slurp(r.dir / "gate").find("Regressions against the baseline"), std::string::npos);
  // The baseline may also be a summary.json (what CI commits).
  ASSERT_EQ(sh(kExe + " zoo report " + r.single.string(), r.dir / "rs2"), 0);
  EXPECT_EQ(sh(kExe + " zoo report " + less.string() + " --baseline " + (r.single / "summary.json").string(),
               r.dir / "gate2"),
            1);
}

TEST(ZooReport, GateChecksEachKindOfRegression) {
  auto model = [](const std::string& id, json extra) {
    json m = {{"id", id},
              {"name", id},
              {"status", "ok"},
              {"nodes_after", 100},
              {"verified", true},
              {"max_diff", 1e-6},
              {"max_diff_class", zoo::max_diff_class(1e-6)},
              {"latency_ratio", 0.8}};
    if (extra.is_object()) m.update(extra);
    return m;
  };
  json base = {{"models",
                {model("a", {}), model("b", {}), model("c", {}), model("d", {}), model("e", {}), model("f", {}),
                 model("g", {{"status", "failed"}, {"failure", "timeout"}})}}};
  json now = {{"models",
               {model("a", {}),                      // unchanged
                model("b", {{"nodes_after", 101}}),  // more nodes
                model("c", {{"max_diff", 2e-5}, {"max_diff_class", zoo::max_diff_class(2e-5)}}),
                model("d", {{"latency_ratio", 0.8 * 1.15}}),  // 15% slower than allowed 10%
                model("e", {{"status", "failed"}, {"failure", "verification"}, {"error", "x"}}),
                model("g", {{"status", "failed"}, {"failure", "timeout"}})}}};  // f missing; g fails as before
  json regs = zoo::regressions(now, base, 0.10);
  std::map<std::string, std::string> got;
  for (const auto& r : regs) got[r["id"]] = r["check"];
  EXPECT_EQ(got.size(), 5u) << regs.dump(1);
  EXPECT_EQ(got["b"], "more nodes");
  EXPECT_EQ(got["c"], "larger max_diff class");
  EXPECT_EQ(got["d"], "slower (after/before latency)");
  EXPECT_EQ(got["e"], "verification fails");
  EXPECT_EQ(got["f"], "missing");
  EXPECT_TRUE(zoo::regressions(now, base, 0.2).size() == 4u);  // 15% is within 20%
  // --latency-stat min reads the ratio of the fastest runs instead.
  now["models"][0]["latency_min_ratio"] = 2.0;
  base["models"][0]["latency_min_ratio"] = 1.0;
  json by_min = zoo::regressions(now, base, 0.10, "min");
  ASSERT_EQ(by_min.size(), 5u);  // a (min ratio doubled) instead of d (only its median moved)
  std::set<std::string> ids;
  for (const auto& r : by_min) ids.insert(r["id"]);
  EXPECT_TRUE(ids.count("a"));
  EXPECT_FALSE(ids.count("d"));
  EXPECT_EQ(zoo::max_diff_class(0), -99);
  EXPECT_EQ(zoo::max_diff_class(1e-6), -6);
  EXPECT_EQ(zoo::max_diff_class(3e-6), -5);
}

// The paired-ratio gate: the threshold comes from the recorded run-to-run spread, a model inside
// the noise band passes, one beyond it fails, an explicit --max-slowdown also needs the 95%
// interval above 1, and a baseline without a spread falls back to the fixed threshold.
TEST(ZooReport, LatencyGateDerivesItsThresholdFromTheRecordedSpread) {
  // Spread: models whose runs differ by 0.04 in log ratio -> sigma = 0.04 / (0.6745 * sqrt 2);
  // one model with a disturbed run (10x off) does not change it.
  json models = json::array();
  for (int i = 0; i < 5; ++i) models.push_back({{"latency_log_ratios", {-0.3 + 0.02, -0.3 - 0.02}}});
  const double sigma = zoo::run_spread(models);
  EXPECT_NEAR(sigma, 0.04 / (0.6745 * std::sqrt(2.0)), 1e-9);
  models.push_back({{"latency_log_ratios", {-0.3, -0.3 + 0.04, -2.6}}});
  EXPECT_NEAR(zoo::run_spread(models), sigma, 1e-9);
  EXPECT_EQ(zoo::run_spread(json::array({models[0], models[1]})), 0);  // fewer than 3 models: none
  // Default threshold: exp(3 * sigma * sqrt(1/2 + 1/2)) - 1 = 13.2% here.
  zoo::LatencyVerdict same = zoo::latency_gate({-0.29, -0.31}, {-0.3, -0.3}, sigma, std::nullopt);
  EXPECT_FALSE(same.regressed);
  EXPECT_NEAR(same.threshold, std::exp(3 * sigma) - 1, 1e-12);
  EXPECT_NEAR(same.ratio, 1.0, 1e-12);
  EXPECT_LT(same.ci_low, 1.0);
  EXPECT_GT(same.ci_high, 1.0);
  zoo::LatencyVerdict slow =
      zoo::latency_gate({-0.3 + std::log(1.3), -0.3 + std::log(1.3)}, {-0.3, -0.3}, sigma, std::nullopt);
  EXPECT_TRUE(slow.regressed);
  EXPECT_NEAR(slow.ratio, 1.3, 1e-9);
  EXPECT_GT(slow.ci_low, 1.0);
  EXPECT_FALSE(
      zoo::latency_gate({-0.3 + std::log(1.10)}, {-0.3, -0.3}, sigma, std::nullopt).regressed);  // inside the band
  // A quiet baseline: never below the 5% floor.
  EXPECT_NEAR(zoo::latency_gate({0.0}, {0.0}, 1e-4, std::nullopt).threshold, zoo::kMinSlowdown, 1e-12);
  // --max-slowdown 0.02: 10% slower is beyond it, but one noisy run each side is not significant.
  EXPECT_FALSE(zoo::latency_gate({std::log(1.10)}, {0.0}, 0.1, 0.02).regressed);
  EXPECT_TRUE(zoo::latency_gate({std::log(1.10), std::log(1.10)}, {0.0, 0.0}, 0.01, 0.02).regressed);

  // Through regressions(): the spread recorded in the baseline summary is used.
  auto model = [](const std::string& id, double log_ratio) {
    return json{{"id", id},
                {"name", id},
                {"status", "ok"},
                {"latency_ratio", std::exp(log_ratio)},
                {"latency_log_ratios", {log_ratio + 0.01, log_ratio - 0.01}}};
  };
  json base = {{"models", {model("a", -0.2), model("b", -0.2), model("c", -0.2)}},
               {"latency_spread", {{"sigma", 0.03}}}};
  json now = {{"models", {model("a", -0.2 + std::log(1.08)), model("b", -0.2 + std::log(1.3)), model("c", -0.2)}}};
  json regs = zoo::regressions(now, base, std::nullopt);
  ASSERT_EQ(regs.size(), 1u) << regs.dump(1);  // threshold exp(3 * 0.03) - 1 = 9.4%: a passes, b fails
  EXPECT_EQ(regs[0]["id"], "b");
  EXPECT_EQ(regs[0]["check"], "slower (paired after/before latency)");
  EXPECT_NE(regs[0]["now"].get<std::string>().find("95% CI"), std::string::npos) << regs[0].dump();
  base.erase("latency_spread");  // an older baseline: the fixed 10% on latency_ratio
  EXPECT_EQ(zoo::regressions(now, base, std::nullopt).size(), 1u);
  EXPECT_EQ(zoo::regressions(now, base, 0.05).size(), 2u);
}

TEST(ZooReport, LeastSquaresAndPassKinds) {
  zoo::Fit f = zoo::least_squares({0, 1, 2, 3}, {1, 3, 5, 7});
  EXPECT_DOUBLE_EQ(f.slope, 2);
  EXPECT_DOUBLE_EQ(f.intercept, 1);
  EXPECT_NEAR(f.r, 1.0, 1e-12);
  zoo::Fit g = zoo::least_squares({0, 1, 2, 3}, {3, 2, 1, 0});
  EXPECT_NEAR(g.r, -1.0, 1e-12);
  EXPECT_EQ(zoo::least_squares({1}, {1}).n, 1u);
  EXPECT_EQ(zoo::pass_kind("fuse_attention"), "fusion");
  EXPECT_EQ(zoo::pass_kind("eliminate_dead_nodes"), "elimination");
  EXPECT_EQ(zoo::pass_kind("fold_constants"), "elimination");
}

TEST(ZooRun, ShardsPartitionTheModels) {
  std::vector<zoo::ModelEntry> all;
  for (int i = 0; i < 50; ++i) {
    zoo::ModelEntry e;
    e.rel = "dir/m" + std::to_string(i) + ".onnx";
    all.push_back(e);
  }
  std::multiset<std::string> seen;
  for (int s = 0; s < 4; ++s) {
    auto part = zoo::select_shard(all, {s, 4});
    EXPECT_GE(part.size(), 12u);
    EXPECT_LE(part.size(), 13u);
    for (const auto& e : part) seen.insert(e.rel);
  }
  EXPECT_EQ(seen.size(), 50u);
  for (const auto& e : all) EXPECT_EQ(seen.count(e.rel), 1u);
  // The same shard whatever order the inputs came in.
  auto rev = all;
  std::reverse(rev.begin(), rev.end());
  auto p1 = zoo::select_shard(all, {1, 4}), p2 = zoo::select_shard(rev, {1, 4});
  ASSERT_EQ(p1.size(), p2.size());
  for (size_t i = 0; i < p1.size(); ++i) EXPECT_EQ(p1[i].rel, p2[i].rel);
  setenv("JOB_COMPLETION_INDEX", "2", 1);
  unsetenv("SLURM_ARRAY_TASK_ID");
  zoo::Shard k = zoo::parse_shard("auto", 5);
  EXPECT_EQ(k.index, 2);
  EXPECT_EQ(k.count, 5);
  unsetenv("JOB_COMPLETION_INDEX");
}

// report.html rendered by headless Chromium (--dump-dom after the page's script ran): the DOM
// as the browser left it, or "" when there is no Chromium (the caller skips).
std::string render(const fs::path& page, const std::string& tag) {
  std::string chromium;
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (fs::exists(c)) chromium = c;
  if (chromium.empty()) return "";
  fs::path tmp = test::temp_dir(tag), dom = tmp / "dom.html", err = tmp / "chromium.err";
  std::string cmd =
      chromium +
      " --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run --user-data-dir=" +
      (tmp / "chrome-profile").string() +
      " --virtual-time-budget=10000 --enable-logging=stderr --v=0 --dump-dom file://" + page.string() + " >" +
      dom.string() + " 2>" + err.string();
  EXPECT_EQ(std::system(("timeout 120 " + cmd).c_str()), 0) << slurp(err);
  // Every console message (an error, an uncaught exception) is a failure: the page logs nothing.
  std::istringstream lines(slurp(err));
  for (std::string line; std::getline(lines, line);) EXPECT_EQ(line.find(":CONSOLE"), std::string::npos) << line;
  return slurp(dom);
}

std::string unescape_html(std::string s) {
  for (auto [from, to] :
       {std::pair<std::string, std::string>{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}})
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

// The text between the element with this id's opening tag and `close`.
std::string element_text(const std::string& dom, const std::string& id, const std::string& close) {
  auto p = dom.find("id=\"" + id + "\"");
  if (p == std::string::npos) return "";
  p = dom.find('>', p) + 1;
  return dom.substr(p, dom.find(close, p) - p);
}

// The rows of a table as the browser filled it (header row included), cell texts unescaped.
std::vector<std::vector<std::string>> table_rows(const std::string& dom, const std::string& id) {
  std::string t = element_text(dom, id, "</table>");
  std::vector<std::vector<std::string>> rows;
  for (size_t p = 0; (p = t.find("<tr", p)) != std::string::npos;) {
    size_t end = t.find("</tr>", p);
    std::vector<std::string> cells;
    for (size_t c = p; (c = t.find("<t", c + 1)) != std::string::npos && c < end;) {
      if (t.compare(c, 3, "<td") && t.compare(c, 3, "<th")) continue;
      size_t b = t.find('>', c) + 1;
      cells.push_back(unescape_html(t.substr(b, t.find("</t", b) - b)));
    }
    rows.push_back(cells);
    p = end;
  }
  return rows;
}

// What the page drew, read back: each chart's axis labels and dataset labels (<pre id="drawn">).
json drawn(const std::string& dom) { return json::parse(unescape_html(element_text(dom, "drawn", "</pre>"))); }

TEST(ZooReport, PageLoadsInHeadlessChromiumWithEveryChartDrawn) {
  Runs& r = runs();
  ASSERT_EQ(r.single_rc, 0);
  ASSERT_EQ(sh(kExe + " zoo report " + r.single.string(), r.dir / "rep"), 0);
  fs::path page = r.single / "report.html";
  ASSERT_TRUE(fs::exists(page))
      << "this build has no Chart.js: apt-get install libjs-chart.js (tools/setup.sh) and reconfigure";
  // Offline: no external script, stylesheet or fetch.
  std::string text = slurp(page);
  EXPECT_EQ(text.find("src=\"http"), std::string::npos);
  EXPECT_EQ(text.find("<script src"), std::string::npos);
  std::string d = render(page, "zoo_chromium");
  if (d.empty())
    GTEST_SKIP() << "no chromium here (tools/setup.sh installs Debian's chromium): the page was not rendered";
  EXPECT_NE(d.find("data-ready=\"yes\""), std::string::npos) << d.substr(0, 2000);
  EXPECT_EQ(d.find("data-errors"), std::string::npos);
  json s = load(r.single / "summary.json");
  std::vector<std::string> names, inexact;
  for (const auto& m : s["models"]) {
    names.push_back(m["name"]);
    if (m["max_diff"].get<double>() > 0) inexact.push_back(m["name"]);
  }
  const size_t charts = inexact.empty() ? 3 : 4;  // the max_diff chart only for inexact models
  EXPECT_NE(d.find("data-charts=\"" + std::to_string(charts) + "\""), std::string::npos);
  EXPECT_NE(d.find("data-charts-with-data=\"" + std::to_string(charts) + "\""), std::string::npos);
  // The labels as Chart.js laid them out: every pass and every model on the heatmap's axes.
  json got = drawn(d);
  EXPECT_EQ(got["heatmap"]["axes"]["x"], s["passes"]) << got.dump();
  EXPECT_EQ(got["heatmap"]["axes"]["y"], json(names)) << got.dump();
  EXPECT_EQ(got["latency"]["axes"]["y"], json(names)) << got.dump();
  if (!inexact.empty()) { EXPECT_EQ(got["maxdiff"]["axes"]["y"], json(inexact)) << got.dump(); }
  std::string md_summary = element_text(d, "maxdiff-summary", "</p>");
  if (inexact.empty()) {
    EXPECT_EQ(md_summary, "all exact: max_diff 0 on all " + std::to_string(names.size()) + " models");
  } else if (inexact.size() < names.size()) {
    EXPECT_NE(md_summary.find(" exact (max_diff 0): "), std::string::npos) << md_summary;
  }
  // 6 models per family at most: no fit line, n and r in every legend label.
  for (const auto& label : got["nodes-vs-latency"]["datasets"]) {
    std::string l = label;
    EXPECT_FALSE(l.ends_with(" fit")) << l;
    EXPECT_NE(l.find("(n = "), std::string::npos) << l;
    EXPECT_NE(l.find(", r = "), std::string::npos) << l;
  }
  // Numbers as a person reads them: at most 3 significant digits, speed-ups with 2 decimals.
  auto rows = table_rows(d, "latency-table");
  ASSERT_EQ(rows.size(), names.size() + 1);
  EXPECT_EQ(rows[0][4], "speed-up");
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], names[i - 1]);
    for (int c : {2, 3}) {
      std::string digits;
      for (char ch : rows[i][c])
        if (std::isdigit(static_cast<unsigned char>(ch))) digits += ch;
      digits.erase(0, digits.find_first_not_of('0'));
      EXPECT_LE(digits.size(), 3u) << rows[i][c];
    }
    for (int c : {4, 5}) {
      const std::string& v = rows[i][c];
      ASSERT_GE(v.size(), 5u) << v;
      EXPECT_TRUE(v.ends_with("×") && v[v.size() - std::string("×").size() - 3] == '.') << v;
    }
  }
}

// All exact, a family with enough points for a fit, and a model that failed after inspect and
// audit: the page says "all exact" (no empty chart), draws the fit, and shows what succeeded.
TEST(ZooReport, PageSaysAllExactDrawsOnlyFitsWithEnoughPointsAndShowsWhatAFailedModelDid) {
  Runs& r = runs();
  ASSERT_EQ(r.single_rc, 0);
  fs::path out = test::temp_dir("zoo_page_exact");
  fs::create_directories(out / "results");
  json real = load(r.single / "results" / "bert_small.json");
  for (int i = 0; i < 9; ++i) {  // one family, 9 models, node reduction and speed-up spread out
    json x = real;
    x["id"] = x["name"] = "m" + std::to_string(i);
    x["summary"]["max_diff"] = 0.0;
    x["summary"]["max_diff_class"] = -99;
    x["summary"]["nodes_after"] = x["summary"]["nodes_before"].get<int>() - 10 * (i + 1);
    x["summary"]["latency_ratio"] = 1.0 - 0.03 * i;
    std::ofstream(out / "results" / ("m" + std::to_string(i) + ".json")) << x.dump();
  }
  json failed = real;
  failed["id"] = failed["name"] = "tts";
  failed["status"] = "failed";
  failed["failed_step"] = "optimize";
  failed["failure"] = "error";
  failed["error"] = "optimize: no kernel for op 'Frobnicate'";
  failed["steps"] = {{"inspect", real["steps"]["inspect"]}, {"audit", real["steps"]["audit"]}};
  failed["summary"] = {{"family", "speech"}, {"nodes_before", 1234}, {"steps_ok", {"audit", "inspect"}}};
  std::ofstream(out / "results" / "tts.json") << failed.dump();
  ASSERT_EQ(sh(kExe + " zoo report " + out.string(), out / "log"), 0) << slurp(out / "log");
  std::string md = slurp(out / "summary.md");
  EXPECT_NE(md.find("| tts | speech | 1234 | audit, inspect | optimize | error |"), std::string::npos) << md;
  std::string d = render(out / "report.html", "zoo_chromium_exact");
  if (d.empty()) GTEST_SKIP() << "no chromium here: the page was not rendered";
  EXPECT_NE(d.find("data-ready=\"yes\""), std::string::npos);
  EXPECT_EQ(d.find("data-errors"), std::string::npos);
  EXPECT_EQ(element_text(d, "maxdiff-summary", "</p>"), "all exact: max_diff 0 on all 9 models");
  json got = drawn(d);
  EXPECT_FALSE(got.contains("maxdiff")) << got.dump();
  bool fit_line = false;
  for (const auto& label : got["nodes-vs-latency"]["datasets"]) fit_line |= label.get<std::string>().ends_with(" fit");
  EXPECT_TRUE(fit_line) << got.dump();
  auto rows = table_rows(d, "failures");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1][0], "tts");
  EXPECT_EQ(rows[1][2], "1234");
  EXPECT_EQ(rows[1][3], "audit, inspect");
  EXPECT_EQ(rows[1][6], "optimize: no kernel for op 'Frobnicate'");
}

TEST(ZooReport, PageForAHundredModelsStaysUnderOneMegabyte) {
  Runs& r = runs();
  ASSERT_EQ(r.single_rc, 0);
  fs::path out = test::temp_dir("zoo_hundred");
  fs::create_directories(out / "results");
  std::vector<json> real;
  for (const auto& n : kModels) real.push_back(load(r.single / "results" / (n + ".json")));
  for (int i = 0; i < 100; ++i) {
    json x = real[static_cast<size_t>(i) % real.size()];
    x["id"] = "model_" + std::to_string(i);
    x["name"] = x["id"];
    std::ofstream(out / "results" / ("model_" + std::to_string(i) + ".json")) << x.dump();
  }
  ASSERT_EQ(sh(kExe + " zoo report " + out.string(), out / "log"), 0) << slurp(out / "log");
  EXPECT_EQ(load(out / "summary.json")["counts"]["models"], 100);
  EXPECT_LE(fs::file_size(out / "report.html"), 1000000u);
  std::cout << "report.html for 100 models: " << fs::file_size(out / "report.html") << " bytes\n";
}

}  // namespace

// --ort: ONNX Runtime times the original and the optimized model on onnxforge's inputs.
TEST(ZooRun, OrtTimesBothModelsOnTheSameInputs) {
  if (!test::ort_peer_installed()) GTEST_SKIP() << "ONNX Runtime peer not installed (tools/peers/install.sh)";
  fs::path dir = test::temp_dir("zoo_ort");
  ASSERT_EQ(sh(kExe + " zoo run " + test::zoo_model("bert_small").string() + " -o " + (dir / "o").string() +
                   " --ort --bench-iters 5 --no-attribute",
               dir / "log"),
            0)
      << slurp(dir / "log");
  json res = load(dir / "o/results/bert_small.json");
  ASSERT_EQ(res["status"], "ok") << res.dump(1);
  const json& ort = res["ort"];
  ASSERT_TRUE(ort.contains("before_ms")) << ort.dump();
  EXPECT_EQ(ort["before_rounds_ms"].size(), 2u);
  EXPECT_EQ(ort["after_rounds_ms"].size(), 2u);
  const json& s = res["summary"];
  EXPECT_GT(s["ort_before_ms"].get<double>(), 0);
  EXPECT_GT(s["ort_after_ms"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(s["ours_vs_ort"].get<double>(),
                   s["latency_after_ms"].get<double>() / s["ort_after_ms"].get<double>());
  EXPECT_TRUE(res["options"]["ort"].get<bool>());
  ASSERT_EQ(sh(kExe + " zoo report " + (dir / "o").string(), dir / "md"), 0);
  EXPECT_NE(slurp(dir / "md").find("| bert_small | "), std::string::npos);
  EXPECT_NE(slurp(dir / "md").find("## ONNX Runtime"), std::string::npos) << slurp(dir / "md");
}

// A stand-in peer decides what ORT "does": refusing the original is ORT's limit (the model is
// still fine, the reason recorded); refusing only the optimized model fails the model, since
// onnxforge wrote something the runtime cannot load. A missing peer is bad usage.
TEST(ZooRun, OrtRefusingOnlyTheOptimizedModelFailsIt) {
  fs::path dir = test::temp_dir("zoo_fake_ort");
  auto fake = [&](const std::string& name, const std::string& refuse_if) {
    fs::path d = dir / name;
    fs::create_directories(d / "node_modules/onnxruntime-node");
    std::ofstream(d / "node_modules/onnxruntime-node/package.json") << "{}\n";
    std::ofstream(d / "ort.js")
        << "const m = process.argv[3];\n"
           "if ("
        << refuse_if
        << ") { console.log(JSON.stringify({ok: false, error: 'no kernel for Foo'})); process.exit(1); }\n"
           "console.log(JSON.stringify({ok: true, median_ms: m.includes('.opt.') ? 2 : 4}));\n";
    return d / "ort.js";
  };
  const std::string model = test::zoo_model("bert_small").string();
  // A zoo run into dir/OUT with the stand-in peer `peer`: its exit code (the log kept for a failure).
  auto run = [&](const std::string& out, const fs::path& peer) {
    return sh(kExe + " zoo run " + model + " -o " + (dir / out).string() +
                  " --bench-iters 3 --no-attribute --ort=" + peer.string(),
              dir / (out + ".log"));
  };
  ASSERT_EQ(run("a", fake("opt", "m.includes('.opt.')")), 1) << slurp(dir / "a.log");
  json a = load(dir / "a/results/bert_small.json");
  EXPECT_EQ(a["status"], "failed");
  EXPECT_EQ(a["failure"], "ort");
  EXPECT_NE(a["error"].get<std::string>().find("runs the original but not the optimized model: no kernel for Foo"),
            std::string::npos)
      << a["error"];

  ASSERT_EQ(run("b", fake("orig", "!m.includes('.opt.')")), 0) << slurp(dir / "b.log");
  json b = load(dir / "b/results/bert_small.json");
  EXPECT_EQ(b["status"], "ok");
  EXPECT_NE(b["summary"]["ort_error"].get<std::string>().find("on the original: no kernel for Foo"), std::string::npos);

  ASSERT_EQ(run("c", fake("none", "false")), 0) << slurp(dir / "c.log");
  json c = load(dir / "c/results/bert_small.json");
  EXPECT_DOUBLE_EQ(c["summary"]["ort_before_ms"].get<double>(), 4);
  EXPECT_DOUBLE_EQ(c["summary"]["ort_after_ms"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(c["summary"]["ort_ratio"].get<double>(), 0.5);

  EXPECT_EQ(sh(kExe + " zoo run " + model + " -o " + (dir / "d").string() + " --ort=" + (dir / "nothing.js").string(),
               dir / "d.log"),
            2);
  EXPECT_NE(slurp(dir / "d.log").find("no ONNX Runtime peer"), std::string::npos) << slurp(dir / "d.log");
}

// zoo run: discovery, shards, resume keys, one child process per step, one result per model.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "ir/error.h"
#include "zoo/zoo.h"
#ifdef ONNXFORGE_ZOO_HAS_SIMD
#include "simd/isa.h"
#endif

namespace onnxforge::zoo {
namespace {

using Clock = std::chrono::steady_clock;

std::string stem_of(const fs::path& p) { return p.stem().string(); }

std::string sanitize_id(const std::string& rel) {
  std::string id = rel;
  if (id.size() > 5 && id.ends_with(".onnx")) id.resize(id.size() - 5);
  for (char& c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return id;
}

std::string rel_to(const fs::path& p, const fs::path& root) {
  std::error_code ec;
  fs::path r = fs::relative(p, root, ec);
  if (ec || r.empty() || r.native().starts_with("..")) return p.filename().string();
  return r.generic_string();
}

void add_folder(const fs::path& dir, std::vector<ModelEntry>& out) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".onnx") found.push_back(it->path());
  if (ec) fail("zoo: cannot read folder '", dir.string(), "': ", ec.message());
  std::sort(found.begin(), found.end());
  for (const fs::path& p : found) {
    ModelEntry e;
    e.path = fs::absolute(p).lexically_normal();
    e.rel = rel_to(e.path, fs::absolute(dir).lexically_normal());
    e.name = stem_of(p);
    out.push_back(std::move(e));
  }
}

ModelEntry manifest_model(const fs::path& manifest, const std::string& file) {
  fs::path p = file;
  if (p.is_relative()) p = manifest.parent_path() / p;
  p = fs::absolute(p).lexically_normal();
  if (!fs::is_regular_file(p))
    fail("zoo: manifest '", manifest.string(), "' names '", file,
         "', which is not a file (paths are relative to the manifest)");
  ModelEntry e;
  e.path = p;
  e.rel = rel_to(p, fs::absolute(manifest.parent_path()).lexically_normal());
  e.name = stem_of(p);
  return e;
}

void add_json_manifest(const fs::path& m, std::vector<ModelEntry>& out, const std::string& set) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::ifstream(m));
  } catch (const std::exception& e) { fail("zoo: manifest '", m.string(), "' is not valid JSON: ", e.what()); }
  auto wanted = [&](const nlohmann::json& item) {
    if (set.empty() || !item.is_object() || !item.contains("sets")) return true;
    for (const auto& x : item["sets"])
      if (x == set) return true;
    return false;
  };
  auto one = [&](const nlohmann::json& item, const std::string& key_name) {
    if (item.is_string()) return manifest_model(m, item.get<std::string>());
    if (!item.is_object()) fail("zoo: manifest '", m.string(), "': each model is a path or an object");
    std::string file = item.value("path", item.value("file", std::string()));
    if (file.empty()) fail("zoo: manifest '", m.string(), "': model '", key_name, "' has no \"path\"");
    ModelEntry e = manifest_model(m, file);
    e.name = item.value("name", key_name.empty() ? e.name : key_name);
    if (item.contains("dims")) {
      if (!item["dims"].is_object())
        fail("zoo: manifest '", m.string(), "': \"dims\" of '", file, "' must map names to integers");
      for (const auto& [k, v] : item["dims"].items()) {
        if (!v.is_number_integer())
          fail("zoo: manifest '", m.string(), "': dim '", k, "' of '", file, "' is not an integer");
        e.dims[k] = v.get<int64_t>();
      }
    }
    if (item.contains("skip")) e.skip = item["skip"].get<std::vector<std::string>>();
    nlohmann::json specs = item.value("inputs", nlohmann::json::array());
    // export_zoo.py's manifest describes each input ({"name", "dtype", "shape", ...}): a
    // description, not input files.
    if (specs.is_array() && !specs.empty() &&
        std::all_of(specs.begin(), specs.end(), [](const nlohmann::json& x) { return x.is_object(); }))
      specs = nlohmann::json::array();
    for (const auto& spec : specs) {
      if (!spec.is_string()) fail("zoo: manifest '", m.string(), "': \"inputs\" of '", file, "' must list strings");
      // NAME=FILE, FILE.npz or DIR: a relative file is the manifest's
      std::string s = spec.get<std::string>();
      const auto eq = s.find('=');
      std::string name = eq == std::string::npos ? "" : s.substr(0, eq + 1), path = s.substr(name.size());
      if (fs::path(path).is_relative()) path = (m.parent_path() / path).string();
      e.input_args.insert(e.input_args.end(), {"--inputs", name + path});
    }
    const nlohmann::json values = item.value("input_values", nlohmann::json::object());
    for (const auto& [k, v] : values.items()) {
      if (!v.is_number())
        fail("zoo: manifest '", m.string(), "': input value '", k, "' of '", file, "' is not a number");
      e.input_args.insert(e.input_args.end(), {"--input-value", k + "=" + v.dump()});
    }
    e.timeout = item.value("timeout", 0.0);
    return e;
  };
  const nlohmann::json& models = j.is_object() && j.contains("models") ? j["models"] : j;
  if (models.is_array()) {
    for (const auto& item : models)
      if (wanted(item)) out.push_back(one(item, ""));
  } else if (models.is_object()) {
    for (const auto& [k, item] : models.items())
      if (wanted(item)) out.push_back(one(item, k));
  } else {
    fail("zoo: manifest '", m.string(), "' must be a list of models or {\"models\": [...]}");
  }
}

void add_text_manifest(const fs::path& m, std::vector<ModelEntry>& out) {
  std::ifstream in(m);
  if (!in) fail("zoo: cannot read manifest '", m.string(), "'");
  std::string line;
  while (std::getline(in, line)) {
    auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    auto e = line.find_last_not_of(" \t\r");
    out.push_back(manifest_model(m, line.substr(b, e - b + 1)));
  }
}

// True when the file starts like an ONNX protobuf rather than text (a manifest is text).
bool looks_like_manifest(const fs::path& p) {
  if (p.extension() == ".onnx") return false;
  if (p.extension() == ".json" || p.extension() == ".txt" || p.extension() == ".list") return true;
  std::ifstream in(p, std::ios::binary);
  char buf[512];
  in.read(buf, sizeof buf);
  for (std::streamsize i = 0; i < in.gcount(); ++i) {
    unsigned char c = static_cast<unsigned char>(buf[i]);
    if (c < 9 || (c > 13 && c < 32)) return false;
  }
  return true;
}

}  // namespace

std::vector<ModelEntry> discover(const std::vector<std::string>& inputs, const std::string& set) {
  std::vector<ModelEntry> out;
  for (const std::string& in : inputs) {
    fs::path p = in;
    if (fs::is_directory(p))
      add_folder(p, out);
    else if (!fs::exists(p))
      fail("zoo: input '", in, "' does not exist");
    else if (looks_like_manifest(p)) {
      if (p.extension() == ".json")
        add_json_manifest(p, out, set);
      else
        add_text_manifest(p, out);
    } else {
      ModelEntry e;
      e.path = fs::absolute(p).lexically_normal();
      e.rel = p.filename().string();
      e.name = stem_of(p);
      out.push_back(std::move(e));
    }
  }
  // The same file named twice runs once; ids stay unique (a clash gets the path's hash appended).
  std::vector<ModelEntry> unique;
  std::set<fs::path> seen;
  for (auto& e : out)
    if (seen.insert(e.path).second) unique.push_back(std::move(e));
  std::map<std::string, int> uses;
  for (auto& e : unique) ++uses[sanitize_id(e.rel)];
  for (auto& e : unique) {
    e.id = sanitize_id(e.rel);
    if (uses[e.id] > 1) e.id += "-" + hex64(hash_bytes(e.path.native().data(), e.path.native().size())).substr(0, 8);
  }
  return unique;
}

// 64-bit hash, 8 bytes a step (a 40 MB model hashes in ~20 ms, which keeps --resume cheap).
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed ^ (0x9E3779B97F4A7C15ull * (n + 1));
  auto mix = [](uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ mix(w)) * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  return mix(h ^ mix(tail ^ (n - i)));
}

uint64_t hash_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("zoo: cannot read '", p.string(), "'");
  std::vector<char> buf(1 << 22);
  uint64_t h = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = hash_bytes(buf.data(), static_cast<size_t>(in.gcount()), h);
  }
  return h;
}

std::string hex64(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

Shard parse_shard(const std::string& spec, int auto_count) {
  Shard s;
  auto env_int = [](const char* name) -> std::optional<int> {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    try {
      return std::stoi(v);
    } catch (const std::exception&) { fail("zoo: environment variable ", name, "='", v, "' is not an integer"); }
  };
  if (spec == "auto") {
    if (auto id = env_int("SLURM_ARRAY_TASK_ID")) {
      auto count = env_int("SLURM_ARRAY_TASK_COUNT");
      if (!count) fail("zoo: --shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not");
      s.index = *id - env_int("SLURM_ARRAY_TASK_MIN").value_or(0);
      s.count = *count;
    } else if (auto idx = env_int("JOB_COMPLETION_INDEX")) {
      int count = auto_count ? auto_count : env_int("ONNXFORGE_SHARD_COUNT").value_or(0);
      if (count <= 0)
        fail(
            "zoo: --shard auto with JOB_COMPLETION_INDEX needs the count: --shard-count N or ONNXFORGE_SHARD_COUNT "
            "(the Indexed Job's completions)");
      s.index = *idx;
      s.count = count;
    } else {
      fail(
          "zoo: --shard auto needs SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT (a Slurm array job) or "
          "JOB_COMPLETION_INDEX (a Kubernetes Indexed Job); use --shard I/N elsewhere");
    }
  } else {
    auto slash = spec.find('/');
    try {
      if (slash == std::string::npos) throw std::invalid_argument("no slash");
      size_t used = 0;
      s.index = std::stoi(spec.substr(0, slash), &used);
      if (used != slash) throw std::invalid_argument("junk");
      s.count = std::stoi(spec.substr(slash + 1), &used);
      if (used != spec.size() - slash - 1) throw std::invalid_argument("junk");
    } catch (const std::exception&) { fail("zoo: --shard expects I/N (0 <= I < N) or auto, got '", spec, "'"); }
  }
  if (s.count < 1 || s.index < 0 || s.index >= s.count)
    fail("zoo: shard ", s.index, "/", s.count, " is out of range (0 <= I < N)");
  return s;
}

std::vector<ModelEntry> select_shard(std::vector<ModelEntry> models, const Shard& shard) {
  if (shard.count == 1) return models;
  // Sorted by the hash of the relative path, then dealt out: every shard computes the same order
  // from the same inputs, and the shards differ in size by at most one model.
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < models.size(); ++i)
    order.push_back({hash_bytes(models[i].rel.data(), models[i].rel.size()), i});
  std::sort(order.begin(), order.end());
  std::vector<ModelEntry> out;
  for (size_t k = static_cast<size_t>(shard.index); k < order.size(); k += static_cast<size_t>(shard.count))
    out.push_back(models[order[k].second]);
  return out;
}

nlohmann::json machine_info(int threads) {
  std::string cpu = "unknown";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("model name")) {
      auto c = line.find(':');
      if (c != std::string::npos) cpu = line.substr(line.find_first_not_of(' ', c + 1));
      break;
    }
#ifdef ONNXFORGE_ZOO_HAS_SIMD
  std::string isa = simd::active_isa();
#else
  std::string isa = "unknown";
#endif
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return {{"cpu", cpu},
          {"isa", isa},
          {"threads", threads},
          {"cores", static_cast<int>(std::thread::hardware_concurrency())},
          {"host", host}};
}

fs::path find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t b = 0; b <= dirs.size();) {
    size_t e = dirs.find(':', b);
    if (e == std::string::npos) e = dirs.size();
    const fs::path cand = fs::path(dirs.substr(b, e - b)) / name;
    std::error_code ec;
    if (cand.is_absolute() && fs::is_regular_file(cand, ec) && ::access(cand.c_str(), X_OK) == 0) return cand;
    b = e + 1;
  }
  return {};
}

void find_ort_peer(RunOptions& o, const std::string& spec) {
  auto found = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
  };
  std::vector<fs::path> tried;
  if (!spec.empty())
    tried.push_back(spec);
  else {
    if (const char* e = std::getenv("ONNXFORGE_ORT_JS"); e && *e) tried.push_back(e);
    // The build tree (build/onnxforge) and a source checkout run from its root.
    if (!o.exe.empty()) tried.push_back(o.exe.parent_path().parent_path() / "tools/peers/ort.js");
    tried.push_back(fs::current_path() / "tools/peers/ort.js");
  }
  fs::path js;
  for (const fs::path& p : tried)
    if (found(p)) {
      js = fs::absolute(p);
      break;
    }
  if (js.empty()) {
    std::string list;
    for (const fs::path& p : tried) list += (list.empty() ? "" : ", ") + p.string();
    fail_usage("zoo run --ort: no ONNX Runtime peer (ort.js) at ", list,
               "; pass --ort=PATH/ort.js or set ONNXFORGE_ORT_JS");
  }
  if (!found(js.parent_path() / "node_modules/onnxruntime-node/package.json"))
    fail_usage("zoo run --ort: ", js.string(),
               " has no onnxruntime-node beside it; install it with tools/peers/install.sh");
  o.node = find_program("node");
  if (o.node.empty()) fail_usage("zoo run --ort: `node` is not on PATH (Debian: apt install nodejs)");
  o.ort_js = js;
}

namespace {

struct ChildResult {
  int exit_code = -1;  // when exited normally
  int signal = 0;      // when killed by a signal
  bool timed_out = false, over_rss = false;
  // Set when the child never reached the step's program: what failed, on which file, and errno
  // (an output file that cannot be opened, an executable that cannot be run).
  std::string start_error;
  double seconds = 0;
  int64_t peak_rss_kb = 0;  // ru_maxrss, or the polled maximum
  std::string out, err;
};

int64_t vm_rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("VmRSS:")) return std::atoll(line.c_str() + 6);
  return 0;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Runs `args` (args[0] is the executable) in its own process group with stdout and stderr sent
// to files, polling every 20 ms for the deadline and the RSS limit; on either the whole group is
// SIGKILLed. RSS is polled rather than capped with RLIMIT_AS because TBB and mimalloc reserve
// far more address space than they touch (a 1 GB RLIMIT_AS made `bench` of a 600 KB model fail).
ChildResult run_child(const std::vector<std::string>& args, const fs::path& scratch, Clock::time_point deadline,
                      bool has_deadline, int64_t max_rss_kb) {
  ChildResult r;
  const fs::path out_path = scratch.string() + ".out", err_path = scratch.string() + ".err";
  // Everything the child needs is built before fork: after fork in a threaded process only
  // async-signal-safe calls are allowed (no allocation).
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The child reports why it could not start through a close-on-exec pipe: a successful exec
  // closes it empty; otherwise {stage, errno} arrive before the child's _exit(127).
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) fail("zoo: pipe failed: ", std::strerror(errno));
  auto t0 = Clock::now();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(report[0]);
    ::close(report[1]);
    fail("zoo: fork failed: ", std::strerror(e));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::close(report[0]);
    auto die = [&](int stage) {
      int msg[2] = {stage, errno};
      [[maybe_unused]] ssize_t n = ::write(report[1], msg, sizeof msg);
      _exit(127);
    };
    int fo = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fo < 0) die(0);
    int fe = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fe < 0) die(1);
    int fi = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fi < 0) die(2);
    if (::dup2(fi, 0) < 0 || ::dup2(fo, 1) < 0 || ::dup2(fe, 2) < 0) die(3);
    ::execv(argv[0], argv.data());
    die(4);
  }
  ::close(report[1]);
  ::setpgid(pid, pid);  // also here: no race with the child's own call
  int status = 0;
  struct rusage ru {};
  for (;;) {
    pid_t w = ::wait4(pid, &status, WNOHANG, &ru);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) fail("zoo: wait failed: ", std::strerror(errno));
    if (max_rss_kb > 0) {
      int64_t rss = vm_rss_kb(pid);
      r.peak_rss_kb = std::max(r.peak_rss_kb, rss);
      if (rss > max_rss_kb && !r.over_rss) {
        r.over_rss = true;
        ::kill(-pid, SIGKILL);
      }
    }
    if (has_deadline && Clock::now() > deadline && !r.timed_out) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);  // anything the step left behind in its group
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.peak_rss_kb = std::max<int64_t>(r.peak_rss_kb, ru.ru_maxrss);
  // A step quicker than one poll still has its peak checked (ru_maxrss), so the limit holds.
  if (max_rss_kb > 0 && r.peak_rss_kb > max_rss_kb) r.over_rss = true;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  int msg[2];
  ssize_t got;
  while ((got = ::read(report[0], msg, sizeof msg)) < 0 && errno == EINTR) {}
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof msg)) {
    static const char* const what[] = {"cannot create its output file", "cannot create its error file",
                                       "cannot open /dev/null", "cannot redirect its output", "cannot run"};
    const std::string file = msg[0] == 0   ? out_path.string()
                             : msg[0] == 1 ? err_path.string()
                             : msg[0] == 2 ? std::string("/dev/null")
                             : msg[0] == 4 ? args[0]
                                           : std::string();
    r.start_error = std::string(what[std::clamp(msg[0], 0, 4)]) + (file.empty() ? "" : " '" + file + "'") + ": " +
                    std::strerror(msg[1]);
  }
  std::error_code ec;
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  fs::remove(out_path, ec);
  fs::remove(err_path, ec);
  return r;
}

std::string last_lines(const std::string& s, size_t max_chars = 2000) {
  std::string t = s;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  if (t.size() > max_chars) t = "..." + t.substr(t.size() - max_chars);
  return t;
}

void write_atomic(const fs::path& p, const std::string& text) {
  // Unique per process and thread: shards on other machines may write into the same folder.
  fs::path tmp = p.string() + ".tmp." + std::to_string(::getpid()) + "." +
                 std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000);
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) fail("zoo: cannot write '", tmp.string(), "'");
  }
  fs::rename(tmp, p);
}

// A new folder under `parent` that belongs to this process. Another shard may rmdir an empty
// `parent` between our mkdir calls, so a vanished parent is created again (a few tries).
fs::path make_scratch(const fs::path& parent) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path dir = parent / (std::string(host) + "-" + std::to_string(::getpid()) + "-" + hex64(rd()).substr(8));
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != ENOENT && errno != EEXIST)
      fail("zoo run: cannot create the scratch folder '", dir.string(), "': ", std::strerror(errno));
  }
  fail("zoo run: cannot create a scratch folder under '", parent.string(), "'");
}

struct Context {
  const RunOptions& o;
  int threads;
  nlohmann::json options;
  std::string options_key;
  nlohmann::json machine;
  fs::path results, scratch, models;
};

nlohmann::json input_key(const ModelEntry& m, bool with_hash) {
  struct stat st {};
  if (::stat(m.path.c_str(), &st) != 0) fail("zoo: cannot stat '", m.path.string(), "'");
  nlohmann::json k = {{"size", static_cast<int64_t>(st.st_size)},
                      {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec}};
  if (with_hash) k["hash"] = hex64(hash_file(m.path));
  return k;
}

// --resume: the existing result counts when it was made with the same options from the same
// file: same size and either the same mtime or (a touched or copied file) the same content hash.
bool up_to_date(const Context& c, const ModelEntry& m, const fs::path& result) {
  if (!fs::exists(result)) return false;
  nlohmann::json old;
  try {
    old = nlohmann::json::parse(std::ifstream(result));
  } catch (const std::exception&) {
    return false;  // a truncated file from a killed writer cannot exist (rename), but be safe
  }
  if (old.value("options_key", "") != c.options_key) return false;
  if (c.o.retry_failed && old.value("status", "") != "ok") return false;
  const nlohmann::json& ok = old["input"];
  nlohmann::json now = input_key(m, false);
  if (ok.value("size", int64_t(-1)) != now["size"].get<int64_t>()) return false;
  if (ok.value("mtime_ns", int64_t(-1)) == now["mtime_ns"].get<int64_t>()) return true;
  return ok.value("hash", "") == hex64(hash_file(m.path));
}

std::vector<std::string> dim_args(const ModelEntry& m, const RunOptions& o) {
  std::vector<std::string> a;
  std::map<std::string, std::string> dims;
  for (const std::string& d : o.dims) {
    auto eq = d.find('=');
    if (eq == std::string::npos || eq == 0) fail("zoo: --dim expects name=N, got '", d, "'");
    dims[d.substr(0, eq)] = d.substr(eq + 1);
  }
  for (const auto& [k, v] : m.dims) dims[k] = std::to_string(v);  // the manifest's win
  for (const auto& [k, v] : dims) a.insert(a.end(), {"--dim", k + "=" + v});
  return a;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// A result's identity: the model, and the options and machine it was run with.
nlohmann::json result_identity(const Context& c, const ModelEntry& m) {
  return {{"format", 1},
          {"id", m.id},
          {"name", m.name},
          {"path", m.path.string()},
          {"rel", m.rel},
          {"options", c.options},
          {"options_key", c.options_key},
          {"machine", c.machine}};
}

// A result before its steps: its identity, its input file's key, no step yet.
nlohmann::json result_header(const Context& c, const ModelEntry& m) {
  nlohmann::json r = result_identity(c, m);
  r["input"] = input_key(m, true);
  if (!m.dims.empty()) r["dims"] = m.dims;
  if (!m.input_args.empty()) r["inputs"] = m.input_args;
  r["steps"] = nlohmann::json::object();
  r["seconds"] = nlohmann::json::object();
  r["peak_rss_kb"] = nlohmann::json::object();
  r["status"] = "ok";
  return r;
}

// One model's run: its result `r` and what its steps share (the deadline, the scratch files, the
// --dim arguments).
struct ModelRun {
  const Context& c;
  const ModelEntry& m;
  nlohmann::json r;
  double timeout;
  Clock::time_point t0 = Clock::now(), deadline;
  fs::path scratch, optimized;  // c.scratch is this process's own folder
  std::vector<std::string> dims;

  ModelRun(const Context& c_, const ModelEntry& m_)
      : c(c_),
        m(m_),
        r(result_header(c_, m_)),
        timeout(m_.timeout > 0 ? m_.timeout : c_.o.timeout),
        deadline(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout))),
        scratch(c_.scratch / m_.id),
        optimized(scratch.string() + ".opt.onnx"),
        dims(dim_args(m_, c_.o)) {}

  ChildResult child(const std::vector<std::string>& args, const std::string& tag) const {
    return run_child(args, fs::path(scratch.string() + "." + tag), deadline, timeout > 0, c.o.max_rss_mb * 1024);
  }

  // Marks the result failed at `step` (`failure`: the summary's class of failure).
  void failed(const std::string& step, const std::string& failure, const std::string& error) {
    r["status"] = "failed";
    r["failed_step"] = step;
    r["failure"] = failure;
    r["error"] = error;
  }

  // Runs one step of onnxforge; false (with the result marked failed) when it did not succeed.
  // verdict_exit: exit code 1 is optimize's "verification failed" (with --write-unverified the
  // model and the JSON report are still written); the summary marks it as a verification failure.
  bool step(const std::string& name, std::vector<std::string> args, bool parse_json, bool verdict_exit = false) {
    args.insert(args.begin(), c.o.exe.string());
    ChildResult cr = child(args, name);
    r["seconds"][name] = cr.seconds;
    r["peak_rss_kb"][name] = cr.peak_rss_kb;
    std::string why;
    if (cr.timed_out)
      why = "timed out after " + std::to_string(timeout) + " s (--timeout)";
    else if (cr.over_rss)
      why = "killed: resident memory above --max-rss " + std::to_string(c.o.max_rss_mb) + " MB";
    else if (!cr.start_error.empty())
      why = "the step did not start: " + cr.start_error;
    else if (cr.signal)
      why = std::string("crashed: signal ") + std::to_string(cr.signal) + " (" + strsignal(cr.signal) + ")";
    else if (cr.exit_code != 0 && !(verdict_exit && cr.exit_code == 1))
      why = "exit code " + std::to_string(cr.exit_code);
    if (parse_json && why.empty()) {
      try {
        r["steps"][name] = nlohmann::json::parse(cr.out);
      } catch (const std::exception& e) { why = std::string("printed no JSON: ") + e.what(); }
    }
    if (why.empty()) return true;
    failed(name,
           cr.timed_out  ? "timeout"
           : cr.over_rss ? "memory"
           : cr.signal   ? "crash"
                         : "error",
           name + ": " + why + (cr.err.empty() ? "" : ": " + last_lines(cr.err)));
    return false;
  }
};

// --ort: ONNX Runtime times the original and the optimized model on the inputs onnxforge
// generates (`run --save-inputs`, so both runtimes see the same tensors), in rounds alternating
// original / optimized so that a busy minute hits both; the best round median of each is kept.
// ORT refusing the *original* (an op or opset it lacks) is recorded, not a failure of the model;
// ORT refusing the optimized model while it runs the original is: onnxforge wrote something the
// most common runtime cannot load.
bool ort_latency(ModelRun& run) {
  const Context& c = run.c;
  const ModelEntry& m = run.m;
  const RunOptions& o = c.o;
  nlohmann::json& r = run.r;
  constexpr int kRounds = 2;
  const fs::path inputs = run.scratch.string() + ".inputs";
  nlohmann::json ort = {{"rounds", kRounds}, {"threads", c.threads}};
  auto finish = [&](bool ok) {
    std::error_code ec;
    fs::remove_all(inputs, ec);
    r["ort"] = ort;
    return ok;
  };
  auto child = [&](const std::vector<std::string>& args, const std::string& tag) {
    ChildResult cr = run.child(args, tag);
    r["seconds"][tag] = r["seconds"].value(tag, 0.0) + cr.seconds;
    r["peak_rss_kb"][tag] = std::max<int64_t>(r["peak_rss_kb"].value(tag, int64_t(0)), cr.peak_rss_kb);
    return cr;
  };
  std::vector<std::string> save = {o.exe.string(), "run", m.path.string(), "--save-inputs", inputs.string(), "--json"};
  save.insert(save.end(), run.dims.begin(), run.dims.end());
  ChildResult sv = child(save, "ort_inputs");
  if (sv.exit_code != 0) {
    ort["error"] = "could not write the inputs: " + (sv.start_error.empty() ? last_lines(sv.err, 300) : sv.start_error);
    return finish(true);
  }
  std::vector<double> before, after;
  for (int round = 0; round < kRounds; ++round)
    for (bool opt : {false, true}) {
      std::vector<std::string> a = {o.node.string(), o.ort_js.string(),
                                    "bench",         (opt ? run.optimized : m.path).string(),
                                    "--inputs",      inputs.string(),
                                    "--threads",     std::to_string(c.threads),
                                    "--warmup",      "2"};
      if (o.bench_iters > 0)
        a.insert(a.end(), {"--iters", std::to_string(o.bench_iters)});
      else
        a.insert(a.end(), {"--min-time", std::to_string(o.bench_min_time / kRounds)});
      ChildResult cr = child(a, "ort");
      std::string why;
      double median = 0;
      if (cr.timed_out)
        why = "timed out (--timeout)";
      else if (!cr.start_error.empty())
        why = "did not start: " + cr.start_error;
      else if (cr.over_rss)
        why = "killed: resident memory above --max-rss";
      else if (cr.signal)
        why = std::string("crashed: signal ") + std::to_string(cr.signal);
      try {
        nlohmann::json j = nlohmann::json::parse(cr.out);
        if (j.value("ok", true) && j.contains("median_ms"))
          median = j["median_ms"].get<double>();
        else if (why.empty())
          why = j.value("error", "no median_ms");
      } catch (const std::exception&) {
        if (why.empty())
          why = "printed no JSON (exit code " + std::to_string(cr.exit_code) + "): " + last_lines(cr.err, 300);
      }
      if (!why.empty()) {
        if (!opt) {  // ORT cannot run the original: nothing to compare, the model is still fine
          ort["error"] = "ONNX Runtime on the original: " + why;
          return finish(true);
        }
        ort["error"] = "ONNX Runtime runs the original but not the optimized model: " + why;
        run.failed("ort", "ort", "ort: " + ort["error"].get<std::string>());
        return finish(false);
      }
      (opt ? after : before).push_back(median);
    }
  ort["before_ms"] = *std::min_element(before.begin(), before.end());
  ort["after_ms"] = *std::min_element(after.begin(), after.end());
  ort["ratio"] = ort["after_ms"].get<double>() / std::max(1e-9, ort["before_ms"].get<double>());
  ort["before_rounds_ms"] = before;
  ort["after_rounds_ms"] = after;
  return finish(true);
}

std::vector<std::string> optimize_args(const ModelRun& run) {
  const RunOptions& o = run.c.o;
  std::vector<std::string> a = {"optimize",
                                run.m.path.string(),
                                "-o",
                                run.optimized.string(),
                                "--json",
                                "--overwrite",
                                "--write-unverified",
                                "--threads",
                                std::to_string(run.c.threads),
                                "--verify-seeds",
                                std::to_string(o.seeds)};
  std::vector<std::string> skip = o.skip;
  skip.insert(skip.end(), run.m.skip.begin(), run.m.skip.end());
  if (!o.passes.empty()) a.insert(a.end(), {"--passes", join(o.passes)});
  if (!skip.empty()) a.insert(a.end(), {"--skip", join(skip)});
  if (o.target_opset) a.insert(a.end(), {"--target-opset", std::to_string(o.target_opset)});
  a.insert(a.end(), run.dims.begin(), run.dims.end());
  a.insert(a.end(), run.m.input_args.begin(), run.m.input_args.end());
  return a;
}

// With a baseline, whether the gate would flag the bench runs `all` of model `id`.
std::optional<LatencyVerdict> would_flag(const RunOptions& o, const std::string& id, const nlohmann::json& all) {
  if (!o.baseline.is_object()) return std::nullopt;
  double sigma = o.baseline.contains("latency_spread") ? o.baseline["latency_spread"].value("sigma", 0.0) : 0.0;
  for (const auto& bm : o.baseline.value("models", nlohmann::json::array()))
    if (sigma > 0 && bm.is_object() && bm.value("id", "") == id && bm.contains("latency_log_ratios")) {
      std::vector<double> now;
      for (const auto& j : all)
        if (j.contains("paired") && j["paired"].is_object()) now.push_back(j["paired"]["log_ratio"]);
      LatencyVerdict v = latency_gate(now, bm["latency_log_ratios"].get<std::vector<double>>(), sigma, o.max_slowdown);
      if (v.regressed) return v;
    }
  return std::nullopt;
}

// --bench-runs separate processes share the bench time; each alternates the two models run by run
// and reports their paired ratio. The runs' spread is the run-to-run noise of the gate.
bool bench_steps(ModelRun& run) {
  const RunOptions& o = run.c.o;
  nlohmann::json& r = run.r;
  const int runs = std::max(1, o.bench_runs);
  std::vector<std::string> b = {"bench",     run.m.path.string(),          "--vs", run.optimized.string(), "--json",
                                "--threads", std::to_string(run.c.threads)};
  if (o.bench_iters > 0)
    b.insert(b.end(), {"--iters", std::to_string(o.bench_iters)});
  else
    b.insert(b.end(), {"--min-time", std::to_string(o.bench_min_time / runs)});
  b.insert(b.end(), run.dims.begin(), run.dims.end());
  b.insert(b.end(), run.m.input_args.begin(), run.m.input_args.end());
  nlohmann::json all = nlohmann::json::array();
  double bench_s = 0;
  bool ok = true;
  auto bench_runs = [&](int n) {
    for (int k = 0; k < n && ok; ++k) {
      ok = run.step("bench", b, true);
      bench_s += r["seconds"]["bench"].get<double>();
      if (!ok) break;
      nlohmann::json& j = r["steps"]["bench"];
      j.erase("profile");  // the per-kernel profile is not asked for; keep the result small
      j.erase("steps_profile");
      all.push_back(j);
    }
  };
  bench_runs(runs);
  // A model the gate would flag is measured again now, while its optimized model exists: a noisy
  // neighbour rarely hits the same model twice, a real slowdown repeats.
  if (ok)
    if (auto v = would_flag(o, run.m.id, all)) {
      r["remeasured"] = {{"first_ratio", v->ratio}, {"threshold", v->threshold}};
      bench_runs(runs);
    }
  r["seconds"]["bench"] = bench_s;
  if (ok) {
    r["steps"]["bench"] = all[0];
    r["steps"]["bench"]["runs"] = all;
  }
  return ok;
}

// The summary's figures of the optimize step; a model that failed verification is failed here.
void optimize_figures(nlohmann::json& s, ModelRun& run) {
  const nlohmann::json& op = run.r["steps"]["optimize"];
  s["nodes_before"] = op["before"]["nodes"];
  s["nodes_after"] = op["after"]["nodes"];
  s["bytes_before"] = op["before"]["initializer_bytes"];
  s["bytes_after"] = op["after"]["initializer_bytes"];
  s["worst_accuracy_class"] = op.value("worst_accuracy_class", 0);
  s["optimize_seconds"] = op["seconds"].value("total", 0.0);
  if (op.contains("verification")) {
    s["verified"] = op["verification"].value("ok", false);
    s["max_diff"] = op["verification"].value("max_diff", 0.0);
    s["max_diff_class"] = max_diff_class(s["max_diff"].get<double>());
  } else {
    s["verified"] = false;
  }
  if (!s["verified"].get<bool>() && run.r["status"] == "ok")
    run.failed("optimize", "verification", "optimize: the optimized model failed verification");
}

// The summary's latency figures of the bench runs.
void bench_figures(nlohmann::json& s, const nlohmann::json& b) {
  const nlohmann::json runs = b.contains("runs") ? b["runs"] : nlohmann::json::array({b});
  std::vector<double> before, after, min_before, min_after, logs, cpu_before, cpu_after, cpu_logs;
  for (const auto& j : runs) {
    before.push_back(j["median_ms"]);
    after.push_back(j["vs"]["median_ms"]);
    min_before.push_back(j["min_ms"]);
    min_after.push_back(j["vs"]["min_ms"]);
    if (j.contains("paired") && j["paired"].is_object()) logs.push_back(j["paired"]["log_ratio"]);
    if (j.contains("cpu_paired") && j["cpu_paired"].is_object()) {
      cpu_logs.push_back(j["cpu_paired"]["log_ratio"]);
      cpu_before.push_back(j["cpu_median_ms"]);
      cpu_after.push_back(j["vs"]["cpu_median_ms"]);
    }
  }
  // Medians over the bench runs: one disturbed run does not move them.
  s["latency_before_ms"] = median(before);
  s["latency_after_ms"] = median(after);
  // The gated figure: the paired after/before ratio (the median over the runs), and each run's
  // log ratio, whose spread the baseline records.
  s["latency_ratio"] = logs.empty() ? median(after) / std::max(1e-12, median(before)) : std::exp(median(logs));
  if (!logs.empty()) s["latency_log_ratios"] = logs;
  // The ratio of the fastest runs too: on a saturated machine the medians of a short bench moved
  // by up to 7x between identical runs (distilbert_small: median 18.6 vs 2.3 ms, min 2.51 vs
  // 2.20 ms), the minima by under 2%.
  double mb = *std::min_element(min_before.begin(), min_before.end()),
         ma = *std::min_element(min_after.begin(), min_after.end());
  if (mb > 0) s["latency_min_ratio"] = ma / mb;
  // CPU time (all threads) beside wall time: a wall-time change with the same CPU time is the
  // machine (waiting for cores), not the model.
  if (!cpu_logs.empty()) {
    s["cpu_before_ms"] = median(cpu_before);
    s["cpu_after_ms"] = median(cpu_after);
    s["cpu_ratio"] = std::exp(median(cpu_logs));
  }
}

// The figures the report and the gate read, in one place.
nlohmann::json result_summary(ModelRun& run) {
  const nlohmann::json& r = run.r;
  nlohmann::json s = nlohmann::json::object();
  const nlohmann::json& st = r["steps"];
  if (st.contains("audit") && st["audit"].is_array() && !st["audit"].empty())
    s["family"] = st["audit"][0]["fingerprint"].value("family", "unknown");
  if (st.contains("inspect")) s["nodes_before"] = st["inspect"].value("nodes_total", st["inspect"].value("nodes", 0));
  if (st.contains("optimize")) optimize_figures(s, run);
  if (st.contains("bench")) {
    bench_figures(s, st["bench"]);
    if (r.contains("remeasured")) s["remeasured"] = true;
  }
  if (r.contains("ort") && r["ort"].contains("before_ms")) {
    s["ort_before_ms"] = r["ort"]["before_ms"];
    s["ort_after_ms"] = r["ort"]["after_ms"];
    s["ort_ratio"] = r["ort"]["ratio"];
    // Our runtime against ONNX Runtime on the optimized model (both medians, same inputs).
    if (s.contains("latency_after_ms") && r["ort"]["after_ms"].get<double>() > 0)
      s["ours_vs_ort"] = s["latency_after_ms"].get<double>() / r["ort"]["after_ms"].get<double>();
  } else if (r.contains("ort") && r["ort"].contains("error")) {
    s["ort_error"] = r["ort"]["error"];
  }
  s["steps_ok"] = nlohmann::json::array();  // what did succeed, shown for a failed model too
  for (const auto& [k, v] : st.items()) s["steps_ok"].push_back(k);
  s["peak_rss_kb"] = 0;
  for (const auto& [k, v] : r["peak_rss_kb"].items())
    s["peak_rss_kb"] = std::max(s["peak_rss_kb"].get<int64_t>(), v.get<int64_t>());
  return s;
}

nlohmann::json process_model(const Context& c, const ModelEntry& m) {
  ModelRun run(c, m);
  const std::string model = m.path.string();
  bool ok = run.step("inspect", {"inspect", "--json", model}, true) &&
            run.step("audit", {"audit", "--json", model}, true) &&
            run.step("optimize", optimize_args(run), true, /*verdict_exit=*/true);
  if (ok && c.o.attribute) {
    std::vector<std::string> a = {"attribute", "--json", model, "--verify-seeds", "1"};
    a.insert(a.end(), run.dims.begin(), run.dims.end());
    ok = run.step("attribute", a, true);
  }
  if (ok && c.o.bench) ok = bench_steps(run);
  if (ok && !c.o.ort_js.empty()) ok = ort_latency(run);
  run.r["seconds"]["total"] = std::chrono::duration<double>(Clock::now() - run.t0).count();
  run.r["summary"] = result_summary(run);

  if (c.o.keep_models && fs::exists(run.optimized)) fs::rename(run.optimized, c.models / (m.id + ".onnx"));
  std::error_code ec;
  fs::remove(run.optimized, ec);
  return std::move(run.r);
}

// What every model's run shares: the threads, the options that change a result (and their key),
// the machine, the folders.
Context make_context(const RunOptions& o) {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Context c{o, o.threads > 0 ? o.threads : std::max(1, cores / o.jobs), {}, {}, {}, {}, {}, {}};
  // Everything that changes a result; --resume redoes a model when any of it differs.
  c.options = {{"passes", o.passes},
               {"skip", o.skip},
               {"dims", o.dims},
               {"target_opset", o.target_opset},
               {"seeds", o.seeds},
               {"attribute", o.attribute},
               {"bench", o.bench},
               {"bench_min_time", o.bench_min_time},
               {"bench_iters", o.bench_iters},
               {"bench_runs", o.bench_runs},
               {"threads", c.threads},
               {"ort", !o.ort_js.empty()}};
  std::string opt_text = c.options.dump();
  c.options_key = hex64(hash_bytes(opt_text.data(), opt_text.size()));
  c.machine = machine_info(c.threads);
  c.results = o.outdir / "results";
  c.models = o.outdir / "models";
  fs::create_directories(c.results);
  // Scratch files live in a folder of this process alone (OUTDIR/tmp/HOST-PID-RANDOM): shards on
  // one or many machines share OUTDIR, and a shard that finishes must never remove what another
  // one is using (a shared tmp/ "removed when empty" vanished between two models of another shard,
  // whose next step then could not create its output file).
  c.scratch = make_scratch(o.outdir / "tmp");
  if (o.keep_models) fs::create_directories(c.models);
  return c;
}

// A finished model's progress line (r: its result; null when --resume found it up to date).
std::string progress_line(const ModelEntry& m, const nlohmann::json* r, int n, size_t total) {
  std::ostringstream line;
  line << "[" << n << "/" << total << "] " << m.name << ": ";
  if (!r) {
    line << "up to date (--resume)";
  } else if ((*r)["status"] == "ok") {
    const auto& s = (*r)["summary"];
    // The report's conventions: speed-up = before/after latency, 3 significant digits.
    auto sig = [](double v, int digits) {
      std::ostringstream os;
      os << std::setprecision(digits) << v;
      return os.str();
    };
    line << "ok, nodes " << s.value("nodes_before", 0) << " -> " << s.value("nodes_after", 0);
    if (s.contains("max_diff"))
      line << ", max_diff " << (s["max_diff"].get<double>() == 0 ? "0 (exact)" : sig(s["max_diff"].get<double>(), 2));
    if (s.contains("latency_ratio") && s["latency_ratio"].get<double>() > 0)
      line << ", speed-up " << sig(1.0 / s["latency_ratio"].get<double>(), 3) << "x";
    if (s.contains("remeasured")) line << " (re-measured)";
    if (s.contains("ours_vs_ort") && s["ours_vs_ort"].get<double>() > 0)
      line << ", speed-up vs ORT " << sig(1.0 / s["ours_vs_ort"].get<double>(), 3) << "x";
    else if (s.contains("ort_error"))
      line << ", ORT: " << s["ort_error"].get<std::string>().substr(0, 80);
    line << " (" << std::fixed << std::setprecision(1) << (*r)["seconds"]["total"].get<double>() << " s)";
  } else {
    std::string e = (*r).value("error", "");
    if (e.size() > 160) e = e.substr(0, 160) + "...";
    line << "FAILED: " << e;
  }
  return line.str();
}

// A model's result, or the failure of our own trouble (stat, fork) with this model only.
nlohmann::json model_result(const Context& c, const ModelEntry& m) {
  try {
    return process_model(c, m);
  } catch (const std::exception& e) {
    nlohmann::json r = result_identity(c, m);
    r.update({{"status", "failed"}, {"failure", "error"}, {"error", e.what()}, {"summary", nlohmann::json::object()}});
    return r;
  }
}

}  // namespace

int run(const RunOptions& o) {
  if (o.inputs.empty()) fail("zoo run: give at least one INPUT (a folder, a model or a manifest)");
  if (o.outdir.empty()) fail("zoo run: give the output folder with -o OUTDIR");
  if (o.jobs < 1) fail("zoo run: --jobs must be at least 1");
  if (!fs::exists(o.exe)) fail("zoo run: cannot find the onnxforge binary at '", o.exe.string(), "'");
  std::vector<ModelEntry> all = discover(o.inputs, o.set);
  if (all.empty()) fail("zoo run: no .onnx models in ", join(o.inputs));
  Shard shard = o.shard.empty() ? Shard{} : parse_shard(o.shard, o.shard_count);
  std::vector<ModelEntry> models = select_shard(all, shard);
  const Context c = make_context(o);

  const char* pause_env = std::getenv("ONNXFORGE_ZOO_TEST_PAUSE_MS");
  const long pause_ms = pause_env ? std::atol(pause_env) : 0;
  std::atomic<size_t> next{0};
  std::atomic<int> done{0}, failed{0}, skipped{0};
  std::mutex io;
  auto t0 = Clock::now();
  auto progress = [&](const ModelEntry& m, const nlohmann::json* r) {
    std::lock_guard<std::mutex> lock(io);
    int n = ++done;
    double el = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string line = progress_line(m, r, n, models.size());
    if (o.tty) {
      // A finished model's line stays; the progress line under it is redrawn.
      std::cerr << "\r\033[K" << line << "\n"
                << "zoo: " << n << "/" << models.size() << " done, " << failed.load() << " failed, " << std::fixed
                << std::setprecision(0) << el << " s" << std::flush;
    } else {
      std::cerr << line << "\n";
    }
  };

  std::cerr << "zoo: " << models.size() << " models"
            << (shard.count > 1 ? " (shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) +
                                      " of " + std::to_string(all.size()) + ")"
                                : "")
            << ", " << o.jobs << " jobs x " << c.threads << " threads -> " << o.outdir.string() << "\n";
  auto worker = [&] {
    bool first = true;
    for (size_t i; (i = next++) < models.size(); first = false) {
      const ModelEntry& m = models[i];
      // Tests make a shard sit between two models while another one finishes and cleans up.
      if (pause_ms > 0 && !first) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      fs::path result = c.results / (m.id + ".json");
      if (o.resume && up_to_date(c, m, result)) {
        ++skipped;
        nlohmann::json old = nlohmann::json::parse(std::ifstream(result));
        if (old.value("status", "") != "ok") ++failed;
        progress(m, nullptr);
        continue;
      }
      const nlohmann::json r = model_result(c, m);
      if (r["status"] != "ok") ++failed;
      write_atomic(result, r.dump(1) + "\n");
      progress(m, &r);
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < std::min<int>(o.jobs, static_cast<int>(models.size())); ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  std::error_code ec;
  fs::remove_all(c.scratch, ec);        // ours alone
  ::rmdir((o.outdir / "tmp").c_str());  // only when empty: other shards' folders keep it
  double el = std::chrono::duration<double>(Clock::now() - t0).count();
  if (o.tty) std::cerr << "\r\033[K";
  std::cerr << "zoo: " << models.size() << " models, " << failed.load() << " failed, " << skipped.load()
            << " up to date, " << std::fixed << std::setprecision(1) << el << " s\n";
  return failed.load() ? 1 : 0;
}

}  // namespace onnxforge::zoo

#pragma once
// The jobs behind `optimize`, `bench`, `extract` and `hierarchy`, as library functions that the
// command line (app/cli), the Python module (app/python/) and the public C++ API (include/onnxforge,
// implemented in public.cpp) all call. They compute and return; they print nothing (progress goes
// to a callback the caller may set) and report bad input as onnxforge::Error.
//
//   api::OptimizeOutcome o = api::optimize("model.onnx", settings);   // load, passes, verify
//   if (!o.ok()) throw Error(api::verification_failure_text(o));       // what `optimize` prints
//   api::write_optimized(o, "out.onnx", /*strip_hierarchy=*/false);
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hierarchy/extract.h"
#include "io/model_io.h"
#include "passes/driver.h"
#include "passes/upgrade_opset.h"
#include "passes/verification.h"
#include "runtime/inputs.h"

namespace onnxforge::api {

using Progress = std::function<void(const std::string&)>;

// ---- optimize -------------------------------------------------------------------------------

// Every member of the settings structs has an initializer, so a caller names only the fields it
// sets (`{.passes = ..., .seeds = ...}`) without -Wmissing-field-initializers.
struct OptimizeSettings {
  std::vector<std::string> passes = {}, skip = {};  // only these (empty: all) / not these; unknown names are an Error
  std::map<std::string, int64_t> dims = {};         // symbolic dims fixed to a value (--dim)
  std::vector<std::string> input_shapes = {};       // NAME:D0,D1,... whole input shapes (--input-shape)
  // Sizes for verification only (--verify-dim): the inputs verification generates get them, the
  // output keeps these dims symbolic (`dims` fixes them in the output).
  std::map<std::string, int64_t> verify_dims = {};
  // Also verify generation (rt::verify_decode: a prefill of 16 tokens, then this many one-token
  // steps through each model's own KV cache) when > 0; a decoder without a cache is an Error.
  int verify_decode = 0;
  // Verification inputs (rt::UserInputs): --inputs entries (NAME=FILE, FILE.npz, DIR) and
  // --input-value NAME=V; their sets are the first seeds.
  std::vector<std::string> inputs = {}, input_values = {};
  // --strict: verified on degenerate inputs (outcome.verification.degenerate) is not ok().
  bool strict = false;
  std::filesystem::path output = {};  // when set: checked before any work (exists and !overwrite: an Error)
  bool overwrite = false;
  std::optional<uint64_t> fold_size = {};  // default: the passes' own (1 MiB)
  bool verify = true;
  int seeds = 3;
  // Seconds verification may take (0: no limit): fewer seeds to fit, never below 1 (a note in
  // outcome.notes). When even one seed does not fit, outcome.over_budget is set and, unless
  // continue_over_budget, nothing else runs (the caller refuses to write an unverified model).
  double verify_budget = 0;
  bool continue_over_budget = false;
  std::optional<int64_t> target_opset = {};  // upgrade the default-domain opset first (never a downgrade)
  // Deployment target (passes/targets.h): generic (every op, the model's opset), ort, tensorrt,
  // tflite. Fusions into ops the target lacks do not run; ops it lacks are decomposed.
  std::string target = "generic";
  // Expand the calls of model-local functions (passes/inline.h) after any upgrade, before the
  // passes; the output has no FunctionProtos. Off: the passes work inside each function body.
  bool inline_functions = false;
  Progress progress = {};  // short status lines; null = silent
};

struct OptimizeOutcome {
  std::unique_ptr<Model> model;  // the optimized model
  passes::RunResult run;
  bool verified = false;
  passes::VerifyResult verification;
  int seeds = 0;
  std::string breaking_pass;       // when verification failed: the first pass that breaks the model alone
  bool over_budget = false;        // one seed does not fit settings.verify_budget: not verified
  std::vector<std::string> notes;  // what the verification budget did
  std::string decode;              // settings.verify_decode: the generation check in one line
  // Without target_opset: what an upgrade would unlock for the target, one line ("25
  // LayerNormalization and 12 Gelu blocks can be fused with --target-opset 20"), or empty.
  std::string hint;
  // With target_opset: what the upgrade step did (upgraded, adapted, and why it stopped below
  // the opset asked for), as report["upgrade"] says it.
  std::optional<passes::UpgradeReport> upgrade;
  // What `optimize --json` prints: stats_json + "input", "target", "hint", "verification",
  // "breaking_pass" and "seconds" (load, reference, passes, verify; write_optimized adds save, total, "output",
  // "saved").
  nlohmann::json report;
  bool strict = false;  // settings.strict: degenerate verification is not ok
  // Target ort: what ONNX Runtime 1.30 has no kernel for in the result (passes/ort_ops.h), one line
  // per op; such a model is not ok (it would not load where the user runs it).
  std::vector<std::string> target_missing;
  bool ok() const {
    return !over_budget && target_missing.empty() &&
           (!verified || (verification.ok && !(strict && !verification.degenerate.empty())));
  }
};

// Symbolic dims and input shapes are checked against the model (io/input_dims.h: a dim no input
// has is a usage error, as on the command line). Loads `input`, runs the passes to a fixed point and, unless
// settings.verify is off, checks the result against the original on settings.seeds seeded inputs through the runtime
// (on a separate load of the original). A failed check is not an exception: outcome.ok() is false and breaking_pass
// names the first pass that breaks the model on its own.
OptimizeOutcome optimize(const std::filesystem::path& input, const OptimizeSettings& settings);

// The lines `optimize` prints when verification failed (error, failing outputs, breaking pass).
std::string verification_failure_text(const OptimizeOutcome& outcome);

// Writes the optimized model (module tags written back to metadata, or stripped) atomically and
// completes outcome.report ("output", "saved", seconds.save and seconds.total).
SaveStats write_optimized(OptimizeOutcome& outcome, const std::filesystem::path& output, bool strip_hierarchy,
                          const SaveOptions& options = {});

// Pass names as the registry knows them: former names (cleanup_attention, fuse_conv_relu) are
// still accepted by --passes/--skip and the Python module, so that scripts and notes keep
// working; each rename adds a line to `notes`.
std::vector<std::string> current_pass_names(std::vector<std::string> names, std::vector<std::string>* notes = nullptr);

// Every pass in pipeline order: name, accuracy_class, summary (`optimize --list-passes --json`).
nlohmann::json list_passes();

// ---- bench ----------------------------------------------------------------------------------

struct BenchSettings {            // every member initialized, as OptimizeSettings
  std::filesystem::path vs = {};  // a second model, run alternately (empty: none)
  int iters = 0;                  // timed runs per model; 0: until min_time
  double min_time = 3.0;
  int warmup = 3;
  std::map<std::string, int64_t> dims = {};
  std::vector<std::string> input_shapes = {};  // NAME:D0,D1,... (--input-shape)
  std::vector<std::string> input_files = {};   // --inputs entries (rt::UserInputs::specs): the first input set is timed
  std::vector<std::string> input_values = {};  // --input-value NAME=V
  std::vector<rt::GivenInput> inputs = {};     // inputs given in memory instead of generated
  bool profile = false, nchw = false, vs_nchw = false;
  int threads = 0;  // only reported; the caller sets the parallelism
};

// What `bench --json` prints: median_ms, min_ms, iters, steps, channels_last_steps, and with
// settings.vs "vs" and "ratio", with settings.profile "profile" and "steps_profile"; plus
// "notes" (defaulted dims).
nlohmann::json bench(const std::filesystem::path& model, const BenchSettings& settings);

// ---- hierarchy / extract ----------------------------------------------------------------------

// What `hierarchy --json` prints.
nlohmann::json hierarchy(const std::filesystem::path& model, const std::filesystem::path& sidecar, bool use_names,
                         bool consumers);

struct ExtractSettings {
  std::filesystem::path sidecar;      // --hierarchy FILE
  std::filesystem::path expose_cuts;  // also write the source with the cut tensors as outputs
  bool verify = false;
  int seeds = 3;
  std::vector<std::string> dims;          // NAME=N, for verify
  std::vector<std::string> input_shapes;  // NAME:D0,D1,..., for verify
  bool external_data = false;
  bool overwrite = false;  // replace an existing output / expose_cuts file
};

struct ExtractOutcome {
  hier::Extraction cut;
  SaveStats saved;
  double seconds = 0;
  bool verified = false, ok = true;  // ok: every output's max_diff is 0
  nlohmann::json report;             // what `extract --json` prints
};

// Cuts `module` out of `model` and writes it to `output`.
ExtractOutcome extract(const std::filesystem::path& model, const std::string& module,
                       const std::filesystem::path& output, const ExtractSettings& settings);

}  // namespace onnxforge::api

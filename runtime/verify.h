#pragma once
// Verification, the one core every check uses: `verify` (the command), the optimizer's check
// (passes/verification.h) and extraction's (hierarchy/extract_verify.h) are thin adapters over it.
//
// Two models (reference = the original, candidate) run on the project's deterministic inputs
// (inputs.h) for many seeds, both with comparison_options() (runtime.h: no plan choice that
// changes float rounding depends on the graph's structure); per output, statistics of the
// per-seed max abs diff and a pass/fail against |a - b| <= atol + rtol * |a| (a = reference)
// element by element. NaN equals NaN at the same position; a shape or dtype change fails.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "runtime/inputs.h"
#include "runtime/tensor.h"

namespace onnxforge::rt {

// How the candidate's inputs and outputs correspond to the reference's.
enum class Correspondence : uint8_t {
  NameOrPosition,  // by name when every name matches, else by position (same counts)
  SameNames,       // the same names in the same order, else the candidate fails to verify
  ByName,          // the candidate is a piece of the reference: each of its inputs is a reference
                   // input or output of that name (fed the reference's value), each output a
                   // reference output of that name (extraction: the source with its cuts exposed)
};

// Where a verification is, after each seed (VerifyOptions::progress).
struct VerifyProgress {
  const char* phase = "";   // "original" (the reference's own runs) or "check" (candidate, with the
                            // reference alongside unless its runs were kept)
  int done = 0, total = 0;  // seeds finished / to run in this phase
  double elapsed = 0;       // seconds since the phase started
  double eta() const { return done ? elapsed / done * (total - done) : -1; }  // seconds left, -1 unknown
  // "verifying: original model, seed 2/3, 4.1 s per seed, about 4 s left"
  std::string line() const;
};

// Float rounding errors scale with the operands an output was computed from, not with the output
// element itself: a YOLO box corner near 0 is the difference of an anchor and a distance near
// 640 (yolov8n_mini_bn after fuse_conv_batchnorm: 0.016 off at |ref| 4, 2.5e-5 of the output's
// largest |ref| 646, the worst of 3 seeds; the full-size YOLOv8n/s stay under 7.2e-6). So an
// element passes when |a - b| <= atol + rtol * max(|a|, floor * max|a|) over the whole output;
// 1/16 gives that model 2.5x of margin and still catches any element off by more than
// rtol/16 of the output's scale.
inline constexpr double kMagnitudeFloor = 1.0 / 16;
// Bounded classes on a model that computes in float16/bfloat16/float8 allow this many ulps of
// that type relative error instead of rtol when that is larger (Reference::check).
inline constexpr double kLowPrecisionUlps = 8;

struct VerifyOptions {
  int seeds = 20;
  uint64_t first_seed = 0;
  double atol = 1e-4, rtol = 1e-3;
  // The magnitude floor, as a fraction of the output's largest |reference| (see compare()).
  double floor = kMagnitudeFloor;
  std::map<std::string, int64_t> dims;  // symbolic dim values (see inputs.h)
  // Inputs the user gives (inputs.h): their sets are the first seeds (the seed count grows to
  // hold them all), the rest generated; inputs given for every seed are fed to every seed.
  UserInputs inputs{};
  int parallel = 0;  // seeds in flight at once; 0 = TBB decides
  Correspondence names = Correspondence::NameOrPosition;
  // Called after each seed, one call at a time (from whichever thread finished the seed).
  std::function<void(const VerifyProgress&)> progress{};
  // Seconds the verification may take (0: no limit): the first seed is timed and the seed count
  // lowered so that the rest fits (a kept reference counts each seed twice: its own run now and
  // the candidate's in check()), never below 1, with a note saying so. A model whose single seed
  // does not fit is over budget (Reference::over_budget): it runs that one seed and no more.
  double budget_seconds = 0;
  // Both models read their MatMul weights in place on every run (SessionOptions::pack_weights
  // off) instead of packing a copy per session: for models whose weights dominate memory, where a
  // few runs do not repay a packed copy the size of the model (passes/verification.cpp).
  bool stream_weights = false;
  // What an error of either model's run is prefixed with (`verify A B` names the files).
  std::string reference_name = "the reference model", candidate_name = "the candidate model";
};

// Whether a model's weights dominate memory enough that verification reads them in place
// (VerifyOptions::stream_weights): above 512 MiB a packed copy per session costs more than a
// few runs' in-tile packing saves (TinyLlama-1.1B: peak RSS 4.1 GiB -> 0.6 GiB, and faster).
bool weights_dominate(const Model& m);

// One reference tensor against one candidate tensor.
struct TensorDiff {
  double max_abs = 0;     // max |a - b|; infinite for a shape/dtype change or NaN at other positions
  double max_rel = 0;     // max |a - b| / max(|a|, atol)
  double max_ref = 0;     // max finite |a|
  bool all_zero = true;   // a is 0 everywhere
  bool pass = true;       // within atol + rtol * max(|a|, floor * max_ref) everywhere
  bool bit_exact = true;  // same dtype, shape and bytes
  std::string problem;    // shape/dtype change, NaN at different positions
};
TensorDiff compare(const Tensor& reference, const Tensor& candidate, double atol, double rtol, double floor = 0);

struct OutputDiff {
  std::string name;
  std::string dtype;
  Shape shape;
  // Per-seed max abs diff, summarised over seeds.
  double max_abs_min = 0, max_abs_max = 0, max_abs_mean = 0, max_abs_p99 = 0;
  double max_rel = 0;    // max over elements of |a-b| / max(|a|, atol)
  double max_ref = 0;    // max |a|
  bool all_zero = true;  // the reference was 0 everywhere on every seed (the check proves little)
  bool pass = true;
  bool bit_exact = true;  // on every seed
  std::string problem;    // shape/dtype/NaN mismatch
  // Why the reference's values say little about this output, when they do: "is empty on every
  // seed (shape [0])", "has the same values on every seed although the inputs differ", "has a
  // value-dependent axis 1 of size 0..1 on every seed, far below the inputs' dims (up to 128)".
  // Empty when the output is informative.
  std::string degenerate;
};

struct VerifyReport {
  bool pass = true;
  int seeds = 0;             // seeds run (the budget may have lowered VerifyOptions::seeds)
  bool over_budget = false;  // even one seed did not fit VerifyOptions::budget_seconds
  double seconds = 0;
  std::vector<std::string> notes;   // defaulted dims, input kinds
  std::vector<OutputDiff> outputs;  // reference order (ByName: candidate order)
  // Outputs whose reference values are degenerate (OutputDiff::degenerate): a pass on them is
  // "verified on degenerate inputs", never a plain pass.
  bool degenerate() const;
  // "verified on degenerate inputs: output 'wav' is empty on every seed; give real inputs with --inputs"
  std::string degenerate_text() const;
  nlohmann::json to_json() const;
  std::string to_text() const;
};

// The reference side of a comparison, built once: the model's plan and its input plan, and with
// keep_runs its inputs and outputs for every seed, so that many candidates are checked against
// one run of it (the optimizer checks after passes, and after each one when bisecting).
class Reference {
 public:
  Reference(const Model& reference, VerifyOptions options, bool keep_runs = false);
  ~Reference();
  Reference(const Reference&) = delete;
  Reference& operator=(const Reference&) = delete;
  // Runs the candidate on every seed (the first alone: it records the arena layout; the rest in
  // parallel) with options().atol/rtol. Throws onnxforge::Error if the models' inputs or
  // outputs do not correspond or a model fails to run.
  VerifyReport check(const Model& candidate) const;
  VerifyReport check(const Model& candidate, double atol, double rtol, double floor = kMagnitudeFloor) const;
  const VerifyOptions& options() const;  // seeds: the count after the budget lowered it
  // The budget's verdict on the reference's runs (keep_runs): notes on lowered seed counts, and
  // whether even one seed does not fit (then the caller should report the model as unverifiable
  // within the budget instead of running on).
  const std::vector<std::string>& budget_notes() const;
  bool over_budget() const;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Reference(reference, options).check(candidate), timed from the start.
VerifyReport verify(const Model& reference, const Model& candidate, const VerifyOptions& options = {});

}  // namespace onnxforge::rt

// onnxforge verify A B [--seeds 20] [--atol] [--rtol] [--dim name=N] [--inputs ...] [--input-value N=V]
//                  [--verify-budget S] [--strict] [--decode-steps N [--prompt-length L]] [--json]
#include <iostream>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/input_options.h"
#include "io/model_io.h"
#include "runtime/decode.h"
#include "runtime/inputs.h"
#include "runtime/verify.h"

namespace onnxforge::cli {
namespace {

struct Options {
  std::string a, b;
  rt::VerifyOptions v;
  DimOptions dims;
  InputOptions inputs;
  int decode_steps = -1;  // -1: no generation loop
  int64_t prompt = 16;
  bool json = false, strict = false;
};

int run(Options o) {
  auto a = load_model(o.a);
  auto b = load_model(o.b);
  o.v.dims = resolve_dims(o.dims, {a.get(), b.get()});
  o.v.reference_name = "reference '" + o.a + "'";
  o.v.candidate_name = "candidate '" + o.b + "'";
  o.v.inputs = rt::UserInputs{.specs = o.inputs.inputs, .values = o.inputs.values, .arrays = {}};
  const bool tty = stderr_is_tty();
  if (tty) o.v.progress = [](const rt::VerifyProgress& p) { std::cerr << "\r\033[K" << p.line() << std::flush; };
  rt::VerifyReport r = rt::verify(*a, *b, o.v);
  if (tty) std::cerr << "\r\033[K";
  std::vector<std::string> warnings;  // declared outputs that contradict what either model computes
  for (const rt::OutputDiff& d : r.outputs)
    for (const Model* m : {a.get(), b.get()}) {
      std::string w = declared_output_warning(m->main(), d.name, d.dtype, d.shape);
      if (!w.empty()) warnings.push_back((m == a.get() ? o.a : o.b) + ": " + w);
    }
  if (!o.json)
    for (const std::string& w : warnings) std::cerr << "warning: " << w << "\n";
  if (r.over_budget) {
    if (o.json) std::cout << r.to_json().dump(2) << "\n";
    std::cerr << "error: cannot be verified within --verify-budget " << o.v.budget_seconds << " s (one seed checked)\n";
    return 1;
  }
  const bool ok = r.pass && !(o.strict && r.degenerate());
  if (o.decode_steps < 0) {
    if (o.json) {
      nlohmann::json j = r.to_json();
      if (!warnings.empty()) j["warnings"] = warnings;
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << r.to_text();
    }
    return ok ? 0 : 1;
  }
  // Generation as deployed: a prefill, then one token per step through each model's own cache.
  rt::DecodeReport d = rt::verify_decode(*a, *b,
                                         {.steps = o.decode_steps,
                                          .prompt = o.prompt,
                                          .seed = o.v.first_seed,
                                          .atol = o.v.atol,
                                          .rtol = o.v.rtol,
                                          .dims = o.v.dims});
  if (o.json) {
    nlohmann::json j = r.to_json();
    if (!warnings.empty()) j["warnings"] = warnings;
    j["decode"] = d.to_json();
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << r.to_text() << d.to_text() << "\n";
  }
  return ok && d.pass ? 0 : 1;
}

Command reg{
    "verify", "Check that two models compute the same outputs on many seeds", [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("reference", o->a, "Reference model (the original)")->required();
      app.add_option("candidate", o->b, "Model to check (the optimized one)")->required();
      app.add_option("--seeds", o->v.seeds, "Number of input seeds")->capture_default_str()->check(CLI::PositiveNumber);
      app.add_option("--first-seed", o->v.first_seed, "First seed")->capture_default_str();
      app.add_option("--atol", o->v.atol, "Absolute tolerance")->capture_default_str();
      app.add_option("--rtol", o->v.rtol, "Relative tolerance")->capture_default_str();
      app.add_option(
             "--floor", o->v.floor,
             "Magnitude floor: |a-b| <= atol + rtol*max(|a|, floor*max|a| of the output); 0 = element-wise only")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1.0));
      add_dim_options(app, o->dims);
      add_input_options(app, o->inputs, "for the seeds");
      app.add_flag("--strict", o->strict,
                   "Exit 1 when verified on degenerate inputs (an output empty or constant on every seed)");
      app.add_option("--parallel", o->v.parallel, "Seeds in flight (1 = one at a time)")->check(CLI::NonNegativeNumber);
      app.add_option("--verify-budget", o->v.budget_seconds,
                     "Seconds the check may take: fewer seeds to fit (never below 1); exit 1 if one seed does not fit")
          ->check(CLI::NonNegativeNumber);
      app.add_option(
             "--decode-steps", o->decode_steps,
             "Also run generation on a decoder with a KV cache: a prefill, then N one-token steps, each model "
             "feeding its own present.* back as past_key_values.*; logits compared and greedy tokens matched at "
             "every step")
          ->check(CLI::NonNegativeNumber);
      app.add_option("--prompt-length", o->prompt, "Tokens of the prefill for --decode-steps (default 16)")
          ->check(CLI::PositiveNumber);
      app.add_flag("--json", o->json, "Print JSON");
      return [o] { return run(*o); };
    }};

}  // namespace
}  // namespace onnxforge::cli

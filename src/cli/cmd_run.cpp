// onnxforge run MODEL [--inputs name=FILE|FILE.npz|DIR] [--input-value N=V] [--dim name=N] [--seed S] [--out DIR] [--json]
#include <chrono>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/input_options.h"
#include "io/units.h"
#include "io/model_io.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "runtime/tensor_io.h"

namespace onnxforge::cli {
namespace {

struct Options {
  std::string model, out, save_inputs;
  InputOptions inputs;
  DimOptions dims;
  uint64_t seed = 0;
  bool json = false;
};

int run(const Options& o) {
  auto model = load_model(o.model);
  auto dims = resolve_dims(o.dims, {model.get()});
  rt::Session session(*model);
  // --seed S runs input set S when the inputs give one, else generates from S.
  const rt::SeedInputs given(model->main(), session.input_values(), dims,
                             rt::UserInputs{.specs = o.inputs.inputs, .values = o.inputs.values, .arrays = {}});
  const rt::InputPlan& plan = given.plan(o.seed);
  auto inputs = given.make(o.seed, o.seed);
  const std::vector<std::string> notes = given.notes();
  if (!o.json)
    for (const auto& n : notes) std::cerr << "note: " << n << "\n";
  if (!o.save_inputs.empty()) {
    std::filesystem::create_directories(o.save_inputs);
    for (size_t i = 0; i < inputs.size(); ++i)
      rt::write_npy(std::filesystem::path(o.save_inputs) / (rt::escape_file_name(plan.inputs[i].name) + ".npy"), inputs[i]);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto outs = session.run(inputs);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto names = session.output_names();
  if (!o.out.empty()) std::filesystem::create_directories(o.out);
  nlohmann::json j;
  j["model"] = o.model;
  j["seed"] = o.seed;
  j["ms"] = ms;
  j["notes"] = notes;
  for (size_t i = 0; i < outs.size(); ++i) {
    auto cs = rt::checksum(outs[i]);
    if (!o.out.empty()) rt::write_npy(std::filesystem::path(o.out) / (rt::escape_file_name(names[i]) + ".npy"), outs[i]);
    j["outputs"].push_back({{"name", names[i]}, {"dtype", dtype_name(outs[i].dtype)}, {"shape", outs[i].shape},
                            {"sum", cs.sum}, {"abs_sum", cs.abs_sum}});
    if (!o.json)
      std::printf("%-32s %-8s %-20s sum %.9g  abs_sum %.9g\n", names[i].c_str(), std::string(dtype_name(outs[i].dtype)).c_str(),
                  rt::shape_str(outs[i].shape).c_str(), cs.sum, cs.abs_sum);
  }
  if (o.json) std::cout << j.dump(2) << "\n";
  else std::printf("ran in %s (first run: plans the arena)%s\n", human_seconds(ms / 1e3).c_str(),
                   o.out.empty() ? "" : (", outputs in " + o.out).c_str());
  return 0;
}

Command reg{"run", "Run a model on generated or given inputs; write outputs as .npy", [](CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("model", o->model, "Model to run")->required();
  add_input_options(app, o->inputs, "instead of generated ones (--seed S runs input set S)");
  add_dim_options(app, o->dims, " (default batch 1, sequence 128)");
  app.add_option("--seed", o->seed, "Seed of the generated inputs");
  app.add_option("--out", o->out, "Folder for the outputs (<name>.npy)");
  app.add_option("--save-inputs", o->save_inputs, "Folder to write the inputs used (<name>.npy)");
  app.add_flag("--json", o->json, "Print JSON");
  return [o] { return run(*o); };
}};

}  // namespace
}  // namespace onnxforge::cli

// onnxforge run MODEL [--inputs name=FILE|FILE.npz|DIR] [--input-value N=V] [--dim name=N] [--seed S]
//                     [--out DIR] [--json]
#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>

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
  bool json = false, overwrite = false;
};

// One file per tensor in `dir`: escape_file_name of the name, made unique (`a/b` and `a_b` both
// escape to `a_b`; the second becomes `a_b_2`) so that no output silently replaces another.
std::vector<std::filesystem::path> tensor_files(const std::string& dir, const std::vector<std::string>& names) {
  std::vector<std::filesystem::path> files;
  std::set<std::string> used;
  for (const std::string& n : names) {
    std::string base = rt::escape_file_name(n), name = base;
    for (int k = 2; !used.insert(name).second; ++k) name = base + "_" + std::to_string(k);
    files.push_back(std::filesystem::path(dir) / (name + ".npy"));
  }
  return files;
}

// Creates `dir` (a folder, or a link to one) for --out / --save-inputs.
void make_folder(const std::string& dir, const char* option) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir))
    fail_usage(option, " '", dir, "': not a folder", ec ? ": " + ec.message() : "");
}

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
  // The output set (io/safe_file.h) before the model runs: every .npy of --save-inputs and --out,
  // never onto the model or an --inputs file, existing ones only with --overwrite.
  std::vector<std::string> in_files{o.model};
  for (const std::string& spec : o.inputs.inputs)
    in_files.push_back(spec.find('=') == std::string::npos ? spec : spec.substr(spec.find('=') + 1));
  const WriteRules rules = output_rules(o.overwrite, in_files);
  auto names = session.output_names();
  std::vector<std::string> in_names;
  for (const auto& i : plan.inputs) in_names.push_back(i.name);
  std::vector<std::filesystem::path> in_paths, out_paths, set;
  if (!o.save_inputs.empty())
    make_folder(o.save_inputs, "--save-inputs"), in_paths = tensor_files(o.save_inputs, in_names);
  if (!o.out.empty()) make_folder(o.out, "--out"), out_paths = tensor_files(o.out, names);
  set = in_paths;
  set.insert(set.end(), out_paths.begin(), out_paths.end());
  std::vector<std::string> what(in_paths.size(), "--save-inputs file");
  what.resize(set.size(), "--out file");
  check_outputs(set, what, rules);
  for (size_t i = 0; i < in_paths.size(); ++i) rt::write_npy(in_paths[i], inputs[i], rules);
  auto t0 = std::chrono::steady_clock::now();
  auto outs = session.run(inputs);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j;
  j["model"] = o.model;
  j["seed"] = o.seed;
  j["ms"] = ms;
  j["notes"] = notes;
  for (size_t i = 0; i < outs.size(); ++i) {
    auto cs = rt::checksum(outs[i]);
    j["outputs"].push_back({{"name", names[i]},
                            {"dtype", dtype_name(outs[i].dtype)},
                            {"shape", outs[i].shape},
                            {"sum", cs.sum},
                            {"abs_sum", cs.abs_sum}});
    const std::string warning =
        declared_output_warning(model->main(), names[i], dtype_name(outs[i].dtype), outs[i].shape);
    if (!warning.empty()) {
      j["warnings"].push_back(warning);
      if (!o.json) std::cerr << "warning: " << warning << "\n";
    }
    if (!out_paths.empty()) {
      rt::write_npy(out_paths[i], outs[i], rules);
      j["outputs"].back()["file"] = out_paths[i].string();
    }
    if (!o.json)
      std::printf("%-32s %-8s %-20s sum %.9g  abs_sum %.9g\n", names[i].c_str(),
                  std::string(dtype_name(outs[i].dtype)).c_str(), rt::shape_str(outs[i].shape).c_str(), cs.sum,
                  cs.abs_sum);
  }
  if (o.json)
    std::cout << j.dump(2) << "\n";
  else
    std::printf("ran in %s (first run: plans the arena)%s\n", human_seconds(ms / 1e3).c_str(),
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
              app.add_flag("--overwrite", o->overwrite, "Replace existing .npy files in --out / --save-inputs");
              app.add_flag("--json", o->json, "Print JSON");
              return [o] { return on_model(o->model, [&] { return run(*o); }); };
            }};

}  // namespace
}  // namespace onnxforge::cli

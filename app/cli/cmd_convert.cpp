// onnxforge convert IN [-o] OUT [--external-data[=MIN_BYTES]] [--embed] [--external-file NAME] [--overwrite]
//                  [--target-opset N]
// A faithful copy: the nodes keep the file's order (even when it is not topologically sorted,
// which is reported), fields onnxforge does not model are written back byte for byte. With
// --target-opset the model is upgraded (the same step as optimize's, passes/upgrade_opset.h),
// and written in topological order.
#include <chrono>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "io/model_io.h"
#include "io/units.h"
#include "ir/error.h"
#include "passes/upgrade_opset.h"

namespace onnxforge::cli {
namespace {

struct Options {
  std::string input;
  OutputOption output;
  std::optional<uint64_t> external_min;
  bool external = false, embed = false, overwrite = false, force = false, json = false;
  std::string external_file;
  std::optional<int64_t> target_opset;
};

int run(const Options& o) {
  const std::string& out = o.output.required("convert");
  if (o.force) std::cerr << "note: --force is deprecated; use --overwrite\n";
  const WriteRules rules = output_rules(o.overwrite || o.force, {o.input});
  SaveOptions save;
  save.external_file = o.external_file;
  {  // the output set before any work: the model, and its external data when it is asked for
    std::vector<std::filesystem::path> set{out};
    std::vector<std::string> what{"output"};
    if (o.external || !o.external_file.empty())
      set.push_back(external_data_path(out, save)), what.push_back("external-data file");
    check_outputs(set, what, rules);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto model = load_model(o.input);
  const bool sorted = nodes_topologically_sorted(*model);
  const std::optional<passes::UpgradeReport> upgrade = passes::upgrade_step(*model, o.target_opset);
  if (!sorted && !o.json)
    std::cerr << "note: " << o.input << " is not topologically sorted (ONNX requires it); "
              << (upgrade ? "the upgraded copy is written sorted\n"
                          : "the copy keeps its node order (`optimize` sorts it)\n");
  if (upgrade && !o.json) std::cerr << passes::upgrade_text(*upgrade) << "\n";
  save.overwrite = rules.overwrite;
  save.inputs = rules.inputs;
  save.keep_node_order = !upgrade;  // a faithful copy; an upgrade may add nodes
  if (o.embed) save.placement = WeightPlacement::Embed;
  if (o.external) {
    save.placement = WeightPlacement::External;
    if (o.external_min) save.external_min_bytes = *o.external_min;
  }
  SaveStats s = save_model(*model, out, save);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    nlohmann::json j = {{"input", o.input},
                        {"output", out},
                        {"model_bytes", s.model_bytes},
                        {"external_bytes", s.external_bytes},
                        {"tensors_external", s.tensors_external},
                        {"tensors_verbatim", s.tensors_verbatim},
                        {"tensors_reencoded", s.tensors_reencoded},
                        {"topologically_sorted", sorted},
                        {"seconds", sec}};
    if (upgrade) j["upgrade"] = passes::upgrade_json(*upgrade);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cerr << "wrote " << out << " (" << human_bytes(s.model_bytes);
  if (s.used_external)
    std::cerr << " + " << human_bytes(s.external_bytes) << " of external data in " << s.tensors_external << " tensors";
  std::cerr << ") in " << human_seconds(sec) << "\n";
  return 0;
}

Command reg{
    "convert", "Load and save a model: move weights into or out of external data files", [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("input", o->input, "Model to read")->required();
      add_output_options(app, o->output, "Model to write (never the input)");
      auto* ext = app.add_option_function<std::string>(
          "--external-data",
          [o](const std::string& v) {
            o->external = true;
            if (!v.empty()) o->external_min = parse_bytes(v);
          },
          "Store tensors of at least MIN_BYTES (default 1024; K/M/G suffixes) in an external data file");
      ext->expected(0, 1)
          ->type_name("[MIN_BYTES]")
          ->check(CLI::Validator(
              [](std::string& v) -> std::string {
                return v.empty() || parse_bytes(v) ? ""
                                                   : "expects a size in bytes such as 1024 or 64K, got '" + v + "'";
              },
              "MIN_BYTES"));
      app.add_flag("--embed", o->embed, "Store every weight inside the .onnx file (up to 2 GiB)");
      app.add_option("--external-file", o->external_file,
                     "External data file name, relative to the output's folder (default <output>.data)");
      app.add_flag("--overwrite", o->overwrite, "Replace an existing output");
      app.add_flag("--force", o->force, "Deprecated: same as --overwrite");
      app.add_flag("--json", o->json, "Print JSON");
      app.add_option(
             "--target-opset", o->target_opset,
             "Upgrade the default-domain opset to N (never a downgrade), adapting the ops whose signature changes")
          ->check(CLI::Range(passes::kMinTargetOpset, passes::kMaxRuntimeOpset));
      app.callback([o] {
        if (o->embed && o->external) throw CLI::ValidationError("--embed and --external-data exclude each other");
      });
      return [o] { return run(*o); };
    }};

}  // namespace
}  // namespace onnxforge::cli
